#include "workloads/generators/megatron_block.hpp"

#include <string>
#include <vector>

#include "workloads/generators/transformer_ops.hpp"

namespace stepsim::workloads::transformer {
namespace {

using models::CollectiveOp;

// Tags of the backward's async tensor-parallel collectives, clear of async TP's chunk tags.
constexpr int kBackwardTags = 1000;

// Transformer Engine's fused RMSNorm / LayerNorm (the norm half of TELayerNormColumnParallelLinear):
// one kernel reading x and writing the normalized output; backward one kernel for the input's
// gradient and one finishing the weight's partial sums.
ModuleOp fused_norm(const OpFactory& f, const ModelConfig& m, const std::string& name, double tokens) {
  const double e = tokens * m.hidden, a = f.act();
  ModuleOp op;
  op.forward = {f.ew(name, e, a, a, 8)};
  op.backward = {f.ew(name + ".backward_input", e, 2 * a, a, 8), f.ew(name + ".backward_weight", e, 2 * a, 0, 2)};
  op.weight = name;
  op.weight_params = norm_params(m);
  return op;
}

// A column-parallel linear as Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication runs
// it (megatron/core/tensor_parallel/layers.py): forward all-gathers the sequence-parallel input
// (tp > 1 with SP), then the GEMM. Backward all-gathers the input again, asynchronously (SP saves
// only the shard), under the data-gradient GEMM; then reduce-scatters (SP) or all-reduces (no SP)
// the input's gradient, asynchronously, under the weight-gradient GEMM, which accumulates into
// the fp32 main_grad (gradient_accumulation_fusion).
ModuleOp column_parallel(const OpFactory& f, const ModelConfig& m, const std::string& name, double tokens, double in,
                         double out, const TensorParallel& tp, int& tag) {
  ModuleOp gemm = f.linear(name, tokens, in, out);
  ModuleOp op;
  op.matmul = true;
  op.weight = gemm.weight;
  op.weight_params = gemm.weight_params;
  const Bytes activation = tokens * m.hidden * f.act();
  if (tp.tp > 1 && tp.sequence_parallel)
    op.forward.push_back(OpFactory::comm(name + ".all_gather", CollectiveOp::allgather, activation));
  op.forward.push_back(gemm.forward.front());
  const Kernel& dgrad = gemm.backward[0];
  Kernels rest(gemm.backward.begin() + 1, gemm.backward.end());   // wgrad, bias gradient
  if (tp.tp == 1) {
    op.backward = gemm.backward;
    return op;
  }
  auto async = [&](const std::string& suffix, CollectiveOp collective) {
    Kernel k = OpFactory::comm(name + suffix, collective, activation);
    k.comm->tag = tag++;
    return k;
  };
  if (tp.sequence_parallel) {
    op.backward.push_back(async(".backward_all_gather", CollectiveOp::allgather));
    op.backward.push_back(dgrad);
    op.backward.push_back(Kernel::wait_for(op.backward.front().comm->tag));
    op.backward.push_back(async(".dgrad_reduce_scatter", CollectiveOp::reduce_scatter));
  } else {
    op.backward.push_back(dgrad);
    op.backward.push_back(async(".dgrad_all_reduce", CollectiveOp::allreduce));
  }
  const int last = op.backward.back().comm->tag;
  op.backward.insert(op.backward.end(), rest.begin(), rest.end());
  op.backward.push_back(Kernel::wait_for(last));
  return op;
}

}  // namespace

Block megatron_layer_block(const ModelConfig& m, const TrainingConfig& t, Checkpointing checkpointing,
                           const TensorParallel& tp, const ContextParallel& cp) {
  const OpFactory f(m, t);
  const Dims full = dims(m);
  const Dims d{full.h, full.q / tp.tp, full.kv / tp.tp, full.f / tp.tp, full.v};
  const double tokens = t.tokens() / cp.cp, a = f.act();
  const double sp_tokens = tp.sequence_parallel ? tokens / tp.tp : tokens;
  int tag = kBackwardTags;
  std::vector<ModuleOp> ops;
  ops.push_back(fused_norm(f, m, "self_attention.linear_qkv.layer_norm", sp_tokens));
  // One GEMM for the queries, keys and values (Megatron's fused linear_qkv).
  ops.push_back(column_parallel(f, m, "self_attention.linear_qkv", tokens, d.h, d.q + 2 * d.kv, tp, tag));
  if (m.positions == Positions::rope)   // the fused RoPE kernel (apply_rope_fusion), for q and k
    ops.push_back(f.pointwise({f.ew("self_attention.rope_q", tokens * d.q, a, a, 3),
                               f.ew("self_attention.rope_k", tokens * d.kv, a, a, 3)}));
  {
    // TEDotProductAttention: one fused (flash / cuDNN) kernel each way; grouped-query attention
    // reads the kv_heads keys and values as they are (no repeat_kv copy, no transposes: the
    // sbhd layout feeds it directly).
    models::KernelSpec spec;
    spec.kind = "attention";
    spec.dtype = t.param_dtype;
    const double local = double(t.sequence) / cp.cp;
    spec.params = {{"batch", double(t.micro_batch)}, {"heads", double(m.heads) / tp.tp},
                   {"kv_heads", double(m.kv_heads) / tp.tp}, {"seq_q", local}, {"seq_kv", local},
                   {"head_dim", double(m.head_dim())}, {"causal", 1}, {"backward", 0}};
    if (cp.cp > 1) {
      ops.push_back(ring_attention(f, spec, tokens, d.q, d.kv, cp, RingFlavour::transformer_engine));
    } else {
      ModuleOp core;
      core.attention = true;
      core.forward = {{"self_attention.core_attention", spec}};
      spec.params["backward"] = 1;
      core.backward = {{"self_attention.core_attention.backward", spec}};
      ops.push_back(core);
    }
  }
  ops.push_back(f.linear("self_attention.linear_proj", tokens, d.q, d.h));
  if (tp.tp > 1) ops.push_back(f.tp_leave("self_attention.linear_proj.tp_output", tokens, tp));
  // bias_dropout_add, jit-fused: the residual sum (+ bias) in one kernel; backward sums the two
  // gradients where the residual forked.
  auto bias_dropout_add = [&](const std::string& name) {
    ModuleOp add;
    add.forward = {f.ew(name, sp_tokens * d.h, 2 * a, a)};
    add.backward = {f.ew(name + ".backward", sp_tokens * d.h, 2 * a, a)};
    ops.push_back(add);
  };
  bias_dropout_add("self_attn_bda");
  ops.push_back(fused_norm(f, m, "mlp.linear_fc1.layer_norm", sp_tokens));
  const bool gated = m.activation == Activation::swiglu;
  // fc1 holds both of SwiGLU's input projections in one GEMM.
  ops.push_back(column_parallel(f, m, "mlp.linear_fc1", tokens, d.h, gated ? 2 * d.f : d.f, tp, tag));
  {
    // bias_swiglu_impl / bias_gelu_impl (bias_activation_fusion): one kernel each way.
    ModuleOp act;
    const double e = tokens * d.f;
    if (gated) {
      act.forward = {f.ew("mlp.bias_swiglu", e, 2 * a, a, 5)};
      act.backward = {f.ew("mlp.bias_swiglu.backward", e, 3 * a, 2 * a, 8)};
    } else {
      act.forward = {f.ew("mlp.bias_gelu", e, a, a, 8)};
      act.backward = {f.ew("mlp.bias_gelu.backward", e, 2 * a, a, 8)};
    }
    ops.push_back(act);
  }
  ops.push_back(f.linear("mlp.linear_fc2", tokens, d.f, d.h));
  if (tp.tp > 1) ops.push_back(f.tp_leave("mlp.linear_fc2.tp_output", tokens, tp));
  bias_dropout_add("mlp_bda");

  const std::vector<std::string> registration = {"self_attention.linear_qkv.layer_norm", "self_attention.linear_qkv",
                                                 "self_attention.linear_proj", "mlp.linear_fc1.layer_norm",
                                                 "mlp.linear_fc1", "mlp.linear_fc2"};
  // Megatron-LM's recompute: selective reruns the core attention only (recompute_modules'
  // default ["core_attn"]); full (uniform, one layer per checkpoint) the whole block from its input.
  Block block = assemble(ops, registration, [&](std::size_t i) {
    switch (checkpointing) {
      case Checkpointing::none: return true;
      case Checkpointing::selective: return !ops[i].attention;
      case Checkpointing::full: return false;
    }
    return true;
  });
  // --tp-comm-overlap (Transformer Engine's userbuffers): each all-gather feeding a GEMM and each
  // GEMM feeding a reduce-scatter runs as tp chunks, a chunk's transfer under a chunk's GEMM, as
  // torch's micro_pipeline_tp splits them (the backward's own async collectives stay whole).
  if (tp.tp > 1 && tp.async)
    for (Kernels* pass : {&block.forward, &block.recompute, &block.backward})
      *pass = micro_pipeline(*pass, tp.tp, tokens, tokens * m.hidden * a);
  return block;
}

}  // namespace stepsim::workloads::transformer
