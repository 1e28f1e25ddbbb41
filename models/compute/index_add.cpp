/// @file A scatter-add of rows (PyTorch's index_add_, indexFuncLargeIndex with atomicAdd): `rows`
/// source rows of `dim` elements added into the destination rows their indices name, as
/// torch.optim.SGD applies a sparse embedding gradient (`param.add_(grad, alpha=-lr)`). Per
/// element it reads the source and read-modify-writes the destination with an atomic; per row an
/// 8-byte index. Atomics keep it at a fraction of the HBM roof:
///     time = rows (8 + 3 dim e) / (hbm_bandwidth * hbm * 0.50)
/// The 0.50 is measured on an H100 SXM with PyTorch 2.11 (validation/measurements/h100-sxm/
/// dlrm-fp32.json.gz and dlrm-amp.json.gz: 65536 rows of 128 fp32 into 10M-row tables in 62-70 us,
/// 1.55 TB/s of the 3.07 TB/s roof); a calibration input for other GPUs. Tables of a handful of
/// rows, whose atomics collide on the same addresses, took 3x longer (3 and 4 rows: 206-221 us);
/// not modelled.
#include "models/compute/roofline.hpp"

namespace stepsim::models {
namespace {

constexpr double kAtomicEfficiency = 0.50;

class IndexAdd : public KernelModel {
 public:
  std::vector<KernelParam> params() const override {
    return {{"rows", "source rows added (one per looked-up row)", std::nullopt, 1},
            {"dim", "elements per row", std::nullopt, 1}};
  }

  KernelCost cost(const KernelSpec& spec, const platforms::GpuModel& gpu) const override {
    const double rows = spec.param("rows"), dim = spec.param("dim");
    const Bytes bytes = rows * (8 + 3 * dim * bytes_of(spec.dtype));
    KernelCost cost = roofline(rows * dim, 0, bytes, gpu);
    cost.time /= kAtomicEfficiency;
    return cost;
  }
};

}  // namespace

STEPSIM_REGISTER_KERNEL_MODEL(IndexAdd, "index_add",
                              "scatter-add of rows with atomics (PyTorch index_add_, sparse SGD on embeddings)")

}  // namespace stepsim::models
