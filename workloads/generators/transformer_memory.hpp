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
#include "workloads/generators/transformer.hpp"

namespace stepsim::workloads::transformer {

/// @brief How the data-parallel ranks hold the training state.
enum class StateSharding : std::uint8_t {
  fsdp,             ///< FSDP2 (torchtitan): fp32 parameters, gradients and optimizer states sharded
  fsdp_unsharded,   ///< SHARD_GRAD_OP: the same shards, bf16 parameters kept unsharded after forward
  replicated,       ///< NO_SHARD or DDP: every state whole on every rank (fp32 parameters)
  megatron,         ///< Megatron-LM: bf16 parameters, fp32 main gradients, optimizer whole
  megatron_distributed,   ///< Megatron-LM's distributed optimizer: fp32 main parameters and states sharded
};

/// @brief Everything the memory of one layout depends on.
struct MemoryLayout {
  ModelConfig model;
  TrainingConfig training;
  TensorParallel tp;
  ContextParallel cp;
  int ep = 1;
  Checkpointing checkpointing = Checkpointing::none;
  bool megatron = false;              ///< Transformer Engine blocks and Megatron-LM's loss
  StateSharding sharding = StateSharding::fsdp;
  int shard = 1;                      ///< ranks one state is sharded over (FSDP group; Megatron dp)
  int expert_shard = 1;               ///< the experts' FSDP group (MoE)
  bool reshard_after_forward = true;  ///< FSDP blocks but the last (torchtitan's apply_fsdp)
  bool ddp_bucket_copy = false;       ///< DDP without gradient_as_bucket_view: buckets beside .grad
  int pp = 1;
  PipelineConfig pipeline;
  std::vector<int> chunk_first;       ///< first layer of each chunk, then the layer count
};

/// @brief The bytes one block holds for one micro-batch on one rank.
struct BlockMemory {
  Bytes input = 0;          ///< the block's input, what a checkpointed block keeps
  Bytes saved = 0;          ///< kept from forward to backward under the layout's policy (input included)
  Bytes recompute = 0;      ///< rematerialised before its backward (checkpointing) and live through it
  Bytes forward_workspace = 0;    ///< the largest temporary of its forward
  Bytes backward_workspace = 0;   ///< gradients and kernel workspaces live at its backward's peak
};
BlockMemory block_memory(const MemoryLayout& layout);

/// @brief Every rank's peak: ranks of one pipeline stage share one entry. `stage_of_rank[r]` is
/// rank r's stage; `communicators` the NCCL communicators each rank joins.
models::MemoryReport transformer_memory(const MemoryLayout& layout, const std::vector<int>& stage_of_rank,
                                        const platforms::GpuModel& gpu, int communicators);

}  // namespace stepsim::workloads::transformer
