/// @file A row gather (PyTorch's index_select, vectorized_gather_kernel): `rows` rows of `dim`
/// elements copied from the rows their 8-byte indices name, as the sparse gradient of an
/// nn.EmbeddingBag takes one gradient row per lookup (index_select by offset2bag). Each thread
/// loads its index before its 16-byte vector, so the kernel stays at a fraction of the HBM roof:
///     time = rows (8 + 2 dim e) / (hbm_bandwidth * hbm * 0.54)
/// The 0.54 is measured on an H100 SXM with PyTorch 2.11 (validation/measurements/h100-sxm/
/// dlrm-{fp32,amp}.json.gz and dlrm-graph-{fp32,amp}.json.gz: 104 gathers of 65536 rows of 128
/// fp32, 40.9-41.6 us each, where the HBM roof gives 22.0); at 8192 rows they take 6.3-6.9 us
/// against 5.1 predicted (a fixed cost per kernel is not modelled). A calibration input for other GPUs.
#include "models/compute/roofline.hpp"

namespace stepsim::models {
namespace {

constexpr double kGatherEfficiency = 0.54;

class Gather : public KernelModel {
 public:
  std::vector<KernelParam> params() const override {
    return {{"rows", "rows gathered (one per index)", std::nullopt, 1},
            {"dim", "elements per row", std::nullopt, 1}};
  }

  KernelCost cost(const KernelSpec& spec, const platforms::GpuModel& gpu) const override {
    const double rows = spec.param("rows"), dim = spec.param("dim");
    const Bytes bytes = rows * (8 + 2 * dim * bytes_of(spec.dtype));
    KernelCost cost = roofline(0, 0, bytes, gpu);
    cost.time /= kGatherEfficiency;
    return cost;
  }
};

}  // namespace

STEPSIM_REGISTER_KERNEL_MODEL(Gather, "gather", "row gather by index (PyTorch index_select): a fraction of the HBM roof")

}  // namespace stepsim::models
