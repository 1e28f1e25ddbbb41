#pragma once
/// @file The op-level pieces of the transformer generators, shared by the torchtitan blocks
/// (transformer.cpp) and Megatron-LM's (megatron_block.cpp): a block's dimensions, one module
/// call's forward and backward kernels (ModuleOp), the factory of its kernels, and the assembly
/// of a Block from module calls under a checkpointing policy. Internal to workloads/generators/.
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "models/compute/elementwise.hpp"
#include "workloads/generators/transformer.hpp"

namespace stepsim::workloads::transformer {

struct Dims {
  double h, q, kv, f, v;
};
inline Dims dims(const ModelConfig& m) {
  const double hd = m.head_dim();
  return {double(m.hidden), m.heads * hd, m.kv_heads * hd, double(m.ffn_hidden), double(m.vocab)};
}
inline double norm_params(const ModelConfig& m) { return m.norm == Norm::layernorm ? 2.0 * m.hidden : m.hidden; }
inline double linear_params(const ModelConfig& m, double in, double out) { return in * out + (m.bias ? out : 0); }

// The linears of one block as (name, in, out), in torchtitan's registration order.
inline std::vector<std::tuple<std::string, double, double>> block_linears(const ModelConfig& m) {
  const Dims d = dims(m);
  std::vector<std::tuple<std::string, double, double>> out = {{"attention.wq", d.h, d.q},
                                                              {"attention.wk", d.h, d.kv},
                                                              {"attention.wv", d.h, d.kv},
                                                              {"attention.wo", d.q, d.h}};
  if (m.moe.enabled()) {
    out.push_back({"moe.router", d.h, double(m.moe.experts)});   // the experts: expert_params
    if (m.moe.shared_experts > 0) {
      const double width = double(m.moe.shared_experts) * d.f;
      out.insert(out.end(), {{"moe.shared_experts.w1", d.h, width},
                             {"moe.shared_experts.w2", width, d.h},
                             {"moe.shared_experts.w3", d.h, width}});
    }
  } else if (m.activation == Activation::swiglu) {
    out.insert(out.end(), {{"feed_forward.w1", d.h, d.f}, {"feed_forward.w2", d.f, d.h}, {"feed_forward.w3", d.h, d.f}});
  } else {
    out.insert(out.end(), {{"feed_forward.fc1", d.h, d.f}, {"feed_forward.fc2", d.f, d.h}});
  }
  return out;
}

// One module call of the forward and what autograd runs for it, with the selective-policy
// facts torchtitan's op-level SAC needs.
struct ModuleOp {
  Kernels forward;
  Kernels backward;                 ///< in launch order
  bool matmul = false;              ///< an aten.mm (counted by the selective policy)
  bool attention = false;           ///< SDPA: always saved by the selective policy
  bool saved_by_selective = false;  ///< a reduce-scatter or all-to-all: on the selective policy's save list
  std::string weight;               ///< parameter whose gradient is complete after `backward`
  double weight_params = 0;
};

class OpFactory {
 public:
  OpFactory(const ModelConfig& m, const TrainingConfig& t) : m_(m), t_(t), a_(models::bytes_of(t.param_dtype)) {}

  double act() const { return a_; }

  Kernel ew(const std::string& name, double elements, double read_per, double written_per, double flops_per = 1) const {
    return {name, elementwise(t_.param_dtype, elements, read_per, written_per, flops_per)};
  }

  // A weight's gradient summed over the tokens (PyTorch's reduce_kernel, models/compute/column_sum.cpp).
  Kernel token_sum(const std::string& name, double tokens, double width) const {
    return {name, models::KernelSpec{"column_sum", t_.param_dtype, {{"rows", tokens}, {"cols", width}}, {}}};
  }

  // A kernel PyTorch runs through its non-vectorized elementwise path (models/compute/
  // elementwise.cpp `strided`): a widening cast (bf16 -> fp32 goes through the unrolled copy,
  // narrowing casts are vectorized), a binary op with a broadcast operand, a copy from an
  // expanded view. Measured on an H100 in the FSDP2 trace (validation/measurements/h100-sxm/
  // fsdp-llama3-8b-4layers.json.gz): RMSNorm's and RoPE's .float() 0.61 of the roof, x * rsqrt
  // 0.76, * weight 0.48, repeat_kv's copy 0.37, the logits' .float() 0.60; geomean 0.56.
  static Kernel strided(Kernel k) {
    k.spec = models::strided(std::move(k.spec));
    return k;
  }
  // A cast to fp32 from the narrower parameter dtype: strided (above) when there is one.
  Kernel widening(Kernel k) const { return a_ < 4 ? strided(std::move(k)) : k; }

  // An elementwise op whose backward kernels each read the saved input and the incoming
  // gradient and write the input gradient: twice the forward kernel's traffic. Of those only a
  // narrowing cast's backward (a widening cast of the gradient) is known to be non-vectorized.
  ModuleOp pointwise(Kernels forward) const {
    ModuleOp op;
    for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
      Kernel k = *it;
      k.name += ".backward";
      const bool narrowing = k.spec.params["bytes_read"] > k.spec.params["bytes_written"] &&
                             k.spec.params["bytes_written"] > 0 && k.spec.params["flops"] <= 1;
      k.spec.params["bytes_read"] *= 2;
      k.spec.params["bytes_written"] *= 2;
      k.spec.params["strided"] = narrowing && a_ < 4 ? 1 : 0;
      op.backward.push_back(std::move(k));
    }
    op.forward = std::move(forward);
    return op;
  }

  // torchtitan's RMSNorm in eager: x.float(), pow(2), mean, + eps, rsqrt, x * rsqrt, type_as(x),
  // * weight (torchtitan/models/norms.py); nn.LayerNorm is one fused kernel each way.
  ModuleOp norm(const std::string& name, double tokens) const {
    const double e = tokens * m_.hidden;
    ModuleOp op;
    if (m_.norm == Norm::rmsnorm) {
      op = pointwise({widening(ew(name + ".float", e, a_, 4)), ew(name + ".pow", e, 4, 4), ew(name + ".mean", e, 4, 0),
                      ew(name + ".add_eps", tokens, 4, 4), ew(name + ".rsqrt", tokens, 4, 4),
                      strided(ew(name + ".mul_rsqrt", e, 4, 4)), ew(name + ".type_as", e, 4, a_),
                      strided(ew(name + ".mul_weight", e, a_, a_))});
      // The broadcast weight's gradient: the product with the normalized input summed over tokens.
      op.backward.insert(op.backward.begin() + 1, token_sum(name + ".weight_grad", tokens, m_.hidden));
    } else {
      op.forward = {ew(name, e, a_, a_, 8)};
      op.backward = {ew(name + ".backward_input", e, 2 * a_, a_, 8), ew(name + ".backward_weight", e, 2 * a_, 0, 2)};
    }
    op.weight = name;
    op.weight_params = norm_params(m_);
    return op;
  }

  // x @ W^T over T tokens: forward GEMM (m=T, n=out, k=in); backward dgrad (m=T, n=in, k=out)
  // and wgrad (m=out, n=in, k=T), the same FLOPs each; a bias adds a column-sum kernel.
  ModuleOp linear(const std::string& name, double tokens, double in, double out) const {
    ModuleOp op;
    op.matmul = true;
    op.forward = {{name, gemm(tokens, out, in)}};
    op.backward = {{name + ".dgrad", gemm(tokens, in, out)}, {name + ".wgrad", gemm(out, in, tokens)}};
    if (m_.bias) op.backward.push_back(token_sum(name + ".bias_grad", tokens, out));
    op.weight = name;
    op.weight_params = linear_params(m_, in, out);
    return op;
  }

  // The tensor-parallel collectives around a column-parallel group (enter) and after a
  // row-parallel linear (leave), over the `tokens` x hidden activations: Megatron's f and g,
  // or sequence parallelism's all-gather / reduce-scatter pair.
  ModuleOp tp_enter(const std::string& name, double tokens, const TensorParallel& tp) const {
    const Bytes bytes = tokens * m_.hidden * a_;
    ModuleOp op;
    if (tp.sequence_parallel) {
      op.forward = {comm(name + ".all_gather", models::CollectiveOp::allgather, bytes)};
      op.backward = {comm(name + ".reduce_scatter", models::CollectiveOp::reduce_scatter, bytes)};
    } else {
      op.backward = {comm(name + ".all_reduce", models::CollectiveOp::allreduce, bytes)};
    }
    return op;
  }
  ModuleOp tp_leave(const std::string& name, double tokens, const TensorParallel& tp) const {
    const Bytes bytes = tokens * m_.hidden * a_;
    ModuleOp op;
    if (tp.sequence_parallel) {
      op.forward = {comm(name + ".reduce_scatter", models::CollectiveOp::reduce_scatter, bytes)};
      op.backward = {comm(name + ".all_gather", models::CollectiveOp::allgather, bytes)};
      op.saved_by_selective = true;
    } else {
      op.forward = {comm(name + ".all_reduce", models::CollectiveOp::allreduce, bytes)};
    }
    return op;
  }
  static Kernel comm(const std::string& name, models::CollectiveOp op, Bytes bytes, Comm::Group group = Comm::Group::tp) {
    return {name, Comm{op, bytes, group}};
  }

  // torch.autocast's cast of `linear`'s fp32 weight to param_dtype, and of its gradient back:
  // the fp32 gradient, hence the parameter's, is complete only after that cast.
  ModuleOp weight_cast(const std::string& name, ModuleOp& linear, double params) const {
    ModuleOp op;
    op.forward = {ew(name + ".cast", params, 4, a_)};
    op.backward = {ew(name + ".cast.backward", params, a_, 4)};
    op.weight = std::move(linear.weight);
    op.weight_params = linear.weight_params;
    linear.weight.clear();
    return op;
  }

  models::KernelSpec gemm(double m, double n, double k) const {
    models::KernelSpec spec;
    spec.kind = "gemm";
    spec.dtype = t_.param_dtype;
    spec.params = {{"m", m}, {"n", n}, {"k", k}, {"batch", 1}};
    return spec;
  }

 private:
  const ModelConfig& m_;
  const TrainingConfig& t_;
  double a_;   ///< bytes of one activation element
};

// Assembles a Block from ops in forward order; `saved(i)` says whether op i's outputs are kept
// (not recomputed) under the block's checkpointing.
template <class Saved>
Block assemble(const std::vector<ModuleOp>& ops, const std::vector<std::string>& registration, Saved saved) {
  Block block;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    block.forward.insert(block.forward.end(), ops[i].forward.begin(), ops[i].forward.end());
    if (!saved(i)) {
      for (Kernel k : ops[i].forward) {
        k.name += ".recompute";
        block.recompute.push_back(std::move(k));
      }
    }
  }
  std::map<std::string, GradReady> ready;
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    block.backward.insert(block.backward.end(), it->backward.begin(), it->backward.end());
    if (!it->weight.empty())
      ready[it->weight] = {it->weight, it->weight_params, static_cast<int>(block.backward.size()) - 1};
  }
  for (const std::string& name : registration) {
    auto found = ready.find(name);
    if (found == ready.end()) throw std::logic_error("transformer: no gradient for " + name);
    block.grads.push_back(found->second);
  }
  return block;
}

/// @brief Whose ring attention: torch's context_parallel or Transformer Engine's p2p ring.
enum class RingFlavour : std::uint8_t { torch, transformer_engine };
/// @brief Context parallelism's ring attention over a rank's `tokens` (transformer.cpp has the
/// steps, their exchanges and kernels); `local` is the attention of the local chunks.
ModuleOp ring_attention(const OpFactory& f, const models::KernelSpec& local, double tokens, double q_width,
                        double kv_width, const ContextParallel& cp, RingFlavour flavour);

}  // namespace stepsim::workloads::transformer
