/// @file Fused attention (FlashAttention-style: softmax(Q K^T) V never leaves the SM), forward
/// or backward, with grouped-query heads. A roofline like gemm.cpp's.
///
/// FLOPs (the count of FlashAttention-2's benchmarks, Dao, arXiv 2307.08691, §4.1): forward does
/// two matmuls per head, Q K^T and P V, 4 b h sq skv d FLOPs, halved when causal (the masked
/// upper triangle is skipped; exact for sq = skv in the large-sequence limit). The backward
/// pass recomputes S = Q K^T and does dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q: five
/// matmuls, 2.5x the forward FLOPs.
///
/// Efficiency: the architecture's fused-attention fraction of peak (roofline.cpp: FA2 on A100
/// ~70 % forward, FA2 on H100 ~35 %) times wave quantisation of the grid. FA2 runs one CTA per
/// (batch, head, 128-row block): of queries in the forward pass, of keys/values in the backward
/// pass (which parallelises over key blocks), so
///     q = b h s / (ceil(b h ceil(s/128) / sm_count) * sm_count * 128),  s = sq (fwd) or skv (bwd).
///
/// HBM traffic is compulsory traffic only (K and V blocks re-read by later query blocks come
/// from L2): forward reads Q, K, V and writes O and the fp32 log-sum-exp; backward reads Q, K,
/// V, O, dO and the log-sum-exp and writes dQ, dK, dV.
#include <cmath>

#include "models/compute/roofline.hpp"

namespace stepsim::models {
namespace {

constexpr double kBlockRows = 128;  // FA2/FA3 block of query (fwd) or key (bwd) rows, head_dim <= 128

class Attention : public KernelModel {
 public:
  std::vector<KernelParam> params() const override {
    return {{"batch", "sequences", std::nullopt, 1},
            {"heads", "query heads", std::nullopt, 1},
            {"kv_heads", "key/value heads (grouped-query attention); 0 = heads", 0, 0},
            {"seq_q", "query length", std::nullopt, 1},
            {"seq_kv", "key/value length; 0 = seq_q", 0, 0},
            {"head_dim", "dimension of one head", std::nullopt, 1},
            {"causal", "1 = causal mask (FLOPs halved), 0 = none", 0, 0},
            {"backward", "1 = backward pass (dQ, dK, dV), 0 = forward pass", 0, 0}};
  }

  KernelCost cost(const KernelSpec& spec, const platforms::GpuModel& gpu) const override {
    const double b = spec.param("batch"), h = spec.param("heads"), d = spec.param("head_dim");
    const double kv_heads = spec.param("kv_heads") > 0 ? spec.param("kv_heads") : h;
    const double sq = spec.param("seq_q");
    const double skv = spec.param("seq_kv") > 0 ? spec.param("seq_kv") : sq;
    const bool causal = spec.param("causal") != 0, backward = spec.param("backward") != 0;

    const double forward_flops = 4 * b * h * sq * skv * d * (causal ? 0.5 : 1);
    const double flops = backward ? 2.5 * forward_flops : forward_flops;
    const Bytes e = bytes_of(spec.dtype);
    const Bytes q_tensor = b * sq * h * d * e, kv_tensor = b * skv * kv_heads * d * e;
    const Bytes log_sum_exp = b * h * sq * 4;
    const Bytes bytes = backward ? 4 * q_tensor + 4 * kv_tensor + log_sum_exp   // Q,O,dO,dQ; K,V,dK,dV
                                 : 2 * q_tensor + 2 * kv_tensor + log_sum_exp;  // Q,O; K,V

    const ArchEfficiency& arch = arch_efficiency(gpu.arch);
    const double rows = backward ? skv : sq;
    const double blocks = std::ceil(rows / kBlockRows);
    const double q = (rows / (blocks * kBlockRows)) * wave_utilisation(b * h * blocks, gpu.sm_count);
    const double efficiency = (backward ? arch.attention_backward : arch.attention_forward) * q;
    return roofline(flops, flops / (peak_flops(gpu, spec.dtype) * efficiency), bytes, gpu);
  }
};

}  // namespace

STEPSIM_REGISTER_KERNEL_MODEL(Attention, "attention",
                              "fused (FlashAttention-style) attention, forward or backward, causal or not")

}  // namespace stepsim::models
