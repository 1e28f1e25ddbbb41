#pragma once
/// @file The per-GPU memory of a transformer training iteration (issue 21; docs/memory.md has
/// every term with its formula and source): the states each rank keeps (parameters, gradients,
/// optimizer) as its framework shards them, the tensors each block saves for its backward
/// under each checkpointing policy, the unsharded parameters and gradient buffers in flight,
/// the loss's logits, and the pipeline's micro-batches in flight, walked in the order one rank
/// runs its iteration. Closed forms only: no trace is built, so `stepsim plan` can afford it
/// for thousands of layouts, and the generators report what they emit from the same function.
/// Internal to workloads/generators/.
#include <vector>

#include "models/memory/memory.hpp"
#include "workloads/generators/transformer_layout.hpp"

namespace stepsim::workloads::transformer {

/// @brief The bytes one block holds for one micro-batch on one rank.
struct BlockMemory {
  Bytes input = 0;               ///< the block's input, what a checkpointed block keeps
  Bytes saved = 0;               ///< kept from forward to backward under the layout's policy (input included)
  Bytes recompute = 0;           ///< rematerialised before its backward (checkpointing) and live through it
  Bytes forward_workspace = 0;   ///< the largest temporary of its forward
  Bytes backward_workspace = 0;  ///< gradients and kernel workspaces live at its backward's peak
};
BlockMemory block_memory(const IterationLayout& layout);

/// @brief The peak of every stage some rank is in: ranks of one pipeline stage share one entry.
/// `stage_of_rank[r]` is rank r's stage; `communicators` the NCCL communicators each rank joins.
models::MemoryReport transformer_memory(const IterationLayout& layout, const std::vector<int>& stage_of_rank,
                                        const platforms::GpuModel& gpu, int communicators);

}  // namespace stepsim::workloads::transformer
