#pragma once
/// @file The layout of a transformer training iteration as the memory model and the closed-form
/// estimator see it: the model, the training settings, each parallel degree and how the
/// data-parallel ranks hold the state. Internal to workloads/generators/.
#include <vector>

#include "workloads/generators/transformer.hpp"

namespace stepsim::workloads::transformer {

/// @brief How the data-parallel ranks hold the training state.
enum class StateSharding : std::uint8_t {
  fsdp,                  ///< FSDP2 (torchtitan): fp32 parameters, gradients and optimizer states sharded
  fsdp_unsharded,        ///< SHARD_GRAD_OP: the same shards, bf16 parameters kept unsharded after forward
  replicated,            ///< NO_SHARD or DDP: every state whole on every rank (fp32 parameters)
  megatron,              ///< Megatron-LM: bf16 parameters, fp32 main gradients, optimizer whole
  megatron_distributed,  ///< Megatron-LM's distributed optimizer: fp32 main parameters and states sharded
};

/// @brief One layout of a transformer iteration: what its memory (transformer_memory.hpp) and
/// its closed-form time (transformer_estimate.hpp) depend on. The generators fill it from what
/// they emit; `stepsim plan` from the layouts it enumerates.
struct IterationLayout {
  ModelConfig model;
  TrainingConfig training;
  TensorParallel tp;
  ContextParallel cp;
  int ep = 1;
  Checkpointing checkpointing = Checkpointing::none;
  bool megatron = false;  ///< Transformer Engine blocks and Megatron-LM's loss
  StateSharding sharding = StateSharding::fsdp;
  int shard = 1;                      ///< ranks one state is sharded over (FSDP group; Megatron dp)
  int replicate = 1;                  ///< HSDP's replicas (dp_replicate), each all-reducing its shards
  int expert_shard = 1;               ///< the experts' FSDP group (MoE)
  bool reshard_after_forward = true;  ///< FSDP blocks but the last (torchtitan's apply_fsdp)
  bool ddp_bucket_copy = false;       ///< DDP without gradient_as_bucket_view: buckets beside .grad
  int pp = 1;
  PipelineConfig pipeline;
  std::vector<int> chunk_first;  ///< first layer of each chunk, then the layer count
};

}  // namespace stepsim::workloads::transformer
