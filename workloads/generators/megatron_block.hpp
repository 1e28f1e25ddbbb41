#pragma once
/// @file A transformer block as Megatron-LM runs it with Transformer Engine (megatron/core/models/
/// gpt/gpt_layer_specs.py, the TE spec, with the training script's default fusions): the norm
/// fused into the linear after it, one GEMM for q, k and v and one for fc1, fused RoPE, one fused
/// attention kernel with native grouped-query attention, jit-fused bias-dropout-add and
/// bias-SwiGLU / bias-GeLU. Tensor and sequence parallelism follow Megatron's own linears:
/// backward re-gathers the sequence-parallel input and overlaps the input gradient's
/// reduce-scatter (or all-reduce) with the weight-gradient GEMM. docs/parallelism.md lists every
/// kernel. Internal to workloads/generators/.
#include "workloads/generators/transformer.hpp"

namespace stepsim::workloads::transformer {

/// @brief One block's kernels under Megatron-LM's recompute: selective reruns the core
/// attention, full the whole block. With context parallelism the rank holds sequence / cp
/// tokens and the core attention is Transformer Engine's p2p ring (ring_attention).
Block megatron_layer_block(const ModelConfig& model, const TrainingConfig& training, Checkpointing checkpointing,
                           const TensorParallel& tp, const ContextParallel& cp = {});

}  // namespace stepsim::workloads::transformer
