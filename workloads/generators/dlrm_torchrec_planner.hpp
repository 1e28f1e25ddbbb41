#pragma once
/// @file `sharding.plan: torchrec`: a per-table plan chosen the way TorchRec's
/// EmbeddingShardingPlanner chooses one (torchrec/distributed/planner at commit a48cef79), in
/// outline: every table's sharding options priced by EmbeddingPerfEstimator's formulas, proposals
/// from its GridSearch, Greedy (by depth and by sum) and Uniform proposers, each partitioned by
/// GreedyPerfPartitioner under the memory limit and rated by its busiest rank's summed
/// estimate; the lowest rating wins (docs/dlrm.md, "The torchrec planner", lists what differs).
///
/// Contract: pure and deterministic. The result has one TableSharding per table with its ranks
/// listed; throws ConfigError naming `request.where` when no proposal fits in memory.
#include <vector>

#include "platforms/units.hpp"
#include "workloads/generators/dlrm_sharding.hpp"

namespace stepsim::workloads {

/// @brief What the estimator needs besides the tables: TorchRec's Topology and batch size.
struct TorchrecPlannerInputs {
  double batch_per_rank = 1;      ///< B: samples each rank feeds per iteration
  Bytes output_bytes = 4;         ///< bytes per pooled value the exchanges move
  BytesPerSecond hbm = 0;         ///< the fused kernels' device bandwidth
  BytesPerSecond intra_node = 0;  ///< a GPU's collective bandwidth within its node
  BytesPerSecond inter_node = 0;  ///< a GPU's collective bandwidth across nodes (unused on one node)
  int ranks_per_node = 1;         ///< local world size; nodes are contiguous blocks of ranks
  Bytes hbm_cap = 0;              ///< the planner's idea of a GPU's memory (0: the request's gpu_memory)
};

/// @brief TorchRec's Topology defaults (constants.py): HBM_CAP 32 GiB, HBM_MEM_BW 897 GiB/s,
/// INTRA_NODE_BANDWIDTH 600 GiB/s, CROSS_NODE_BANDWIDTH 12.5 GiB/s; batch, output and local world
/// size left for the caller.
TorchrecPlannerInputs torchrec_default_topology();

/// @brief The per-table plan (see the file contract).
std::vector<TableSharding> torchrec_plan(const ShardingRequest& request, const TorchrecPlannerInputs& inputs);

}  // namespace stepsim::workloads
