/// @file Memory-bound kernels: elementwise ops, activations, norms, reductions, optimizer steps,
/// copies. Lin et al.'s roofline for non-GEMM ops (papers.md §3.1, ml_perf_model inference.py):
///     time = max(elements * flops / peak, elements * (bytes_read + bytes_written) / hbm),
/// with their per-element FLOP counts as examples (GELU 175, tanh 180, softmax 174, sigmoid 4,
/// binary cross-entropy 7). Bytes are given per element so that mixed-precision kernels are
/// exact: an Adam step over fp32 master weights with bf16 gradients reads 4+2+4+4 and writes
/// 4+4+4 (+2 for the bf16 copy) bytes per parameter. The math runs on the CUDA cores at the fp32
/// rate whatever the spec's dtype: PyTorch computes reduced-precision elementwise ops in float
/// (at::opmath_type), and a dtype alone cannot say how many bytes a fused kernel moves.
/// The HBM roof is the architecture's achievable fraction of datasheet bandwidth (roofline.cpp).
///
/// Strided operands: PyTorch vectorizes an elementwise kernel only when every operand is
/// contiguous; with a transposed or sliced view (`strided: 1`) TensorIterator runs its generic
/// elementwise_kernel, which computes each element's offsets and loads it alone, at 0.56 of the
/// HBM roof. Measured on an H100 SXM with PyTorch 2.11 (validation/measurements/h100-sxm/
/// dlrm-{amp,fp32}.json.gz, dlrm-graph-*.json.gz): the sum of DLRM's two bmm gradients (one
/// transposed) 0.45 (fp16) and 0.59 (fp32) of the roof at 65536 and 8192 samples, the fp16 -> fp32
/// cast of the sliced embedding gradient 0.56, the add into the sliced bottom-MLP gradient 0.55
/// (fp16) and 0.80 (fp32); 0.56 is their geometric mean. A calibration input for other GPUs.
///
/// Multi-tensor kernels (`multi_tensor: 1`): PyTorch's foreach ops, fused optimizers and
/// GradScaler's unscale run multi_tensor_apply, which walks lists of tensors in chunks of 65536
/// elements per CTA, launch after launch; they reach 0.86 of the HBM roof. Measured on an H100
/// SXM with PyTorch 2.11 against the roof: fused AdamW 0.81, clip_grad_norm_'s foreach norm 0.87
/// and foreach scale 0.88 (validation/measurements/h100-sxm/fsdp-llama3-8b-4layers.json.gz),
/// GradScaler's unscale of 26 x 65536 x 128 fp32 values 0.86-0.87 (dlrm-amp.json.gz,
/// dlrm-graph-amp.json.gz); 0.86 is their geometric mean. A calibration input for other GPUs.
#include "models/compute/roofline.hpp"

namespace stepsim::models {
namespace {

constexpr double kStridedEfficiency = 0.56;
constexpr double kMultiTensorEfficiency = 0.86;

class Elementwise : public KernelModel {
 public:
  std::vector<KernelParam> params() const override {
    return {{"elements", "elements processed (e.g. tokens x hidden, or parameters for an optimizer step)",
             std::nullopt},
            {"bytes_read", "bytes read from HBM per element, over all inputs (bf16 x + fp32 w: 6)", std::nullopt},
            {"bytes_written", "bytes written to HBM per element, over all outputs", std::nullopt},
            {"flops", "FLOPs per element (add 1; Lin et al.: GELU 175, softmax 174, sigmoid 4)", 1},
            {"strided", "1 = an operand is a transposed or sliced view (PyTorch's non-vectorized path)", 0, 0},
            {"multi_tensor", "1 = a multi-tensor kernel (foreach op, fused optimizer, GradScaler's unscale)", 0, 0}};
  }

  KernelCost cost(const KernelSpec& spec, const platforms::GpuModel& gpu) const override {
    const double elements = spec.param("elements");
    const double flops = elements * spec.param("flops");
    const Bytes bytes = elements * (spec.param("bytes_read") + spec.param("bytes_written"));
    KernelCost cost = roofline(flops, flops / gpu.fp32_flops, bytes, gpu);
    const double efficiency = spec.param("strided") != 0        ? kStridedEfficiency
                              : spec.param("multi_tensor") != 0 ? kMultiTensorEfficiency
                                                                : 1;
    const Seconds memory = hbm_time(bytes, gpu) / efficiency;
    if (memory > cost.time) {
      cost.time = memory;
      cost.bound = "memory";
    }
    return cost;
  }
};

}  // namespace

STEPSIM_REGISTER_KERNEL_MODEL(Elementwise, "elementwise",
                              "memory-bound op (activation, norm, optimizer step): max of FLOP and HBM time")

}  // namespace stepsim::models
