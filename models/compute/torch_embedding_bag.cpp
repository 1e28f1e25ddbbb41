/// @file PyTorch's own nn.EmbeddingBag forward on CUDA, sum or mean pooling (aten/src/ATen/native/
/// cuda/EmbeddingBag.cu, EmbeddingBag_updateOutputKernel_sum_mean), one launch per table, as
/// eager PyTorch DLRMs run it (no FBGEMM). The launch is fixed: 1024 blocks of 32 x 8 threads.
/// Each warp takes one 32-element chunk of one bag's output at a time, so the B ceil(D/32) chunks
/// run in rounds of 8192 warps, and within a chunk the loads depend on one another: the bag's
/// offsets, then for each of its L lookups the index and, through it, the row's element. The
/// kernel is latency-bound long before it is bandwidth-bound:
///     time = max(HBM roofline, ceil(B ceil(D/32) / 8192) (1 + 2 L) t_load)
/// t_load (one dependent global load per warp, with the whole GPU loading) is a calibration
/// input measured on an H100 SXM with PyTorch 2.11 (validation/measurements/h100-sxm/
/// dlrm-fp32.json.gz: 26 tables of 65536 one-hot bags at D = 128, 32 rounds of 3 loads in
/// 86-106 us; 87 us for the 21 tables that live in L2, whose 0.906 us per load is t_load).
/// Tables far larger than L2 take up to 20 % longer (their row loads miss); not modelled.
/// HBM bytes per bag: two 8-byte offsets, per lookup an 8-byte index and the row's D elements
/// in 32-byte sectors, the output row, and the 8-byte bag size and offset2bag entries.
#include <cmath>

#include "models/compute/roofline.hpp"

namespace stepsim::models {
namespace {

constexpr double kWarpsPerLaunch = 1024 * 8;
constexpr Seconds kDependentLoad = 87e-6 / (32 * 3);

class TorchEmbeddingBag : public KernelModel {
 public:
  std::vector<KernelParam> params() const override {
    return {{"batch", "bags (samples)", std::nullopt, 1},
            {"dim", "elements per row", std::nullopt, 1},
            {"pooling", "lookups per bag", 1, 1}};
  }

  KernelCost cost(const KernelSpec& spec, const platforms::GpuModel& gpu) const override {
    const double b = spec.param("batch"), d = spec.param("dim"), l = spec.param("pooling");
    const Bytes row = std::ceil(d * bytes_of(spec.dtype) / 32) * 32;
    const Bytes bytes = b * (16 + l * (8 + row) + row + 16);
    const double rounds = std::ceil(b * std::ceil(d / 32) / kWarpsPerLaunch);
    const Seconds latency = rounds * (1 + 2 * l) * kDependentLoad;
    KernelCost cost = roofline(0, 0, bytes, gpu);
    if (latency > cost.time) {
      cost.time = latency;
      cost.bound = "latency";
    }
    return cost;
  }
};

}  // namespace

STEPSIM_REGISTER_KERNEL_MODEL(TorchEmbeddingBag, "torch_embedding_bag",
                              "PyTorch's nn.EmbeddingBag forward kernel (one table): dependent-load latency or HBM")

}  // namespace stepsim::models
