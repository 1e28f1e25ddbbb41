/// @file DLRM's dot interaction as one fused kernel (NVIDIA DeepLearningExamples'
/// `dot_based_interact` CUDA kernels, dlrm/cuda_src/): per sample the V x D matrix of the bottom
/// output and the pooled embeddings times its transpose, the lower triangle gathered and the
/// bottom output appended, in one pass. A roofline like attention.cpp's.
///
/// FLOPs: the kernels multiply whole V x V tiles, 2 b V^2 D forward; the backward computes
/// dX = (dZ + dZ^T) X, twice that. Compute runs at the dtype's matrix rate (tensor cores for
/// fp16/bf16/tf32, the CUDA cores for fp32) times the architecture's GEMM fraction; the tiles
/// are tiny, so the kernels are memory-bound in practice.
/// HBM traffic is compulsory traffic only: forward reads X (b V D) and writes the interaction
/// output (b (V(V-1)/2 + D)); backward reads that output's gradient and X and writes dX.
#include "models/compute/roofline.hpp"

namespace stepsim::models {
namespace {

class DotInteraction : public KernelModel {
 public:
  std::vector<KernelParam> params() const override {
    return {{"batch", "samples", std::nullopt, 1},
            {"vectors", "interacting vectors per sample (bottom output + pooled embeddings)", std::nullopt, 1},
            {"dim", "width of every vector", std::nullopt, 1},
            {"backward", "1 = backward pass (dX), 0 = forward pass", 0, 0}};
  }

  KernelCost cost(const KernelSpec& spec, const platforms::GpuModel& gpu) const override {
    const double b = spec.param("batch"), v = spec.param("vectors"), d = spec.param("dim");
    const bool backward = spec.param("backward") != 0;
    const double forward_flops = 2 * b * v * v * d;
    const double flops = backward ? 2 * forward_flops : forward_flops;
    const Bytes e = bytes_of(spec.dtype);
    const Bytes x = b * v * d * e, z = b * (v * (v - 1) / 2 + d) * e;
    const Bytes bytes = backward ? z + 2 * x : x + z;
    return roofline(flops, flops / (peak_flops(gpu, spec.dtype) * gemm_efficiency(gpu, spec.dtype)), bytes, gpu);
  }
};

}  // namespace

STEPSIM_REGISTER_KERNEL_MODEL(DotInteraction, "dot_interaction",
                              "DLRM's fused dot interaction (NVIDIA's dot_based_interact), forward or backward")

}  // namespace stepsim::models
