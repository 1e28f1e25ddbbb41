/// @file PyTorch's own nn.EmbeddingBag forward on CUDA, sum or mean pooling (aten/src/ATen/native/
/// cuda/EmbeddingBag.cu, EmbeddingBag_updateOutputKernel_sum_mean), one launch per table, as
/// eager PyTorch DLRMs run it (no FBGEMM). The launch is fixed: 1024 blocks of 32 x 8 threads.
/// Each warp takes one 32-element chunk of one bag's output at a time, so the B ceil(D/32) chunks
/// run in rounds of 8192 warps, and within a chunk the loads depend on one another: the bag's
/// offsets, the first lookup's index and, through it, the row's element; later lookups overlap
/// with the ones before. The kernel is latency-bound long before it is bandwidth-bound:
///     round = t_load (3 + f (L - 1)) + m t_miss (1 + f (L - 1))
///     time  = max(HBM roofline, ceil(B ceil(D/32) / 8192) round)
/// with m = max(0, 1 - L2 size / table bytes), the share of row loads that miss L2 under uniform
/// indices. t_load = 0.95 us (a dependent global load with the whole GPU loading), f = 0.37 (what
/// a further lookup adds, in loads) and t_miss = 0.44 us (what a row from DRAM adds) are fitted
/// (grid search, geomean |log error|) to 64 H100 SXM cases of PyTorch 2.11 (validation/
/// measurements/h100-sxm/embedding-bag.yaml, >= 20 us: rows 1000 and 10M, D 32-256, L 1-16,
/// B 8192 and 65536, fp32 and fp16): 4.5 % geomean; fitted on fp32 they predict fp16 within
/// 7.8 %, on B = 65536 they predict B = 8192 within 5.1 %. The profiled DLRM (dlrm-fp32.json.gz:
/// 86-106 us for 65536 one-hot bags at D = 128) agrees. Calibration inputs for other GPUs.
/// HBM bytes per bag: two 8-byte offsets, per lookup an 8-byte index and the row's D elements
/// in 32-byte sectors, the output row, and the 8-byte bag size and offset2bag entries.
#include <algorithm>
#include <cmath>

#include "models/compute/roofline.hpp"

namespace stepsim::models {
namespace {

constexpr double kWarpsPerLaunch = 1024 * 8;
constexpr Seconds kDependentLoad = 0.95e-6;
constexpr double kFurtherLookup = 0.37;
constexpr Seconds kRowMiss = 0.44e-6;

class TorchEmbeddingBag : public KernelModel {
 public:
  std::vector<KernelParam> params() const override {
    return {{"batch", "bags (samples)", std::nullopt, 1},
            {"rows", "rows of the table", std::nullopt, 1},
            {"dim", "elements per row", std::nullopt, 1},
            {"pooling", "lookups per bag", 1, 1}};
  }

  KernelCost cost(const KernelSpec& spec, const platforms::GpuModel& gpu) const override {
    const double b = spec.param("batch"), d = spec.param("dim"), l = spec.param("pooling");
    const Bytes row = std::ceil(d * bytes_of(spec.dtype) / 32) * 32;
    const double miss = std::max(0.0, 1 - gpu.l2_size / (spec.param("rows") * row));
    const double further = kFurtherLookup * (l - 1);
    const Seconds round = kDependentLoad * (3 + further) + miss * kRowMiss * (1 + further);
    const double rounds = std::ceil(b * std::ceil(d / 32) / kWarpsPerLaunch);
    const Bytes bytes = b * (16 + l * (8 + row) + row + 16);
    KernelCost cost = roofline(0, 0, bytes, gpu);
    if (rounds * round > cost.time) {
      cost.time = rounds * round;
      cost.bound = "latency";
    }
    return cost;
  }
};

}  // namespace

STEPSIM_REGISTER_KERNEL_MODEL(TorchEmbeddingBag, "torch_embedding_bag",
                              "PyTorch's nn.EmbeddingBag forward kernel (one table): dependent-load latency or HBM")

}  // namespace stepsim::models
