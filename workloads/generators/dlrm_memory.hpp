#pragma once
/// @file The per-GPU memory of a DLRM iteration (issue 21; docs/memory.md): the rank's embedding
/// tables and dense MLP weights, their gradients (DDP's buckets beside the dense ones, a sparse
/// or a whole-table embedding gradient), their optimizers' fp32 state, and the activations one
/// iteration keeps from its forward to its backward. Internal to workloads/generators/.
#include <vector>

#include "models/memory/memory.hpp"
#include "workloads/generators/dlrm_config.hpp"

namespace stepsim::workloads {

/// @brief What one rank of the hybrid-parallel DLRM holds besides the config's shapes.
struct DlrmRankShape {
  Bytes table_bytes = 0;        ///< its embedding shards as stored
  Bytes table_state = 0;        ///< their optimizer's fp32 state (EmbeddingTable::stored less the values)
  double lookup_values = 0;     ///< pooled values it looks up per iteration (samples x its columns)
  double lookups = 0;           ///< rows it gathers per iteration (samples x pooling over its tables)
  double exchanged_values = 0;  ///< values the exchange hands it (local samples x every table's columns)
  bool bottom = true;           ///< it runs the bottom MLP
  Bytes replicated_bytes = 0;   ///< the values of its data-parallel tables, whose gradient is dense
};

/// @brief Every rank's peak, ranks with equal shapes in one group.
models::MemoryReport dlrm_memory(const DlrmConfig& config, const std::vector<DlrmRankShape>& ranks, double local_batch,
                                 double bottom_batch, int top_input, const platforms::GpuModel& gpu);

}  // namespace stepsim::workloads
