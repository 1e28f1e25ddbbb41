/// @file A scatter-add of rows (PyTorch's index_add_, indexFuncLargeIndex with atomicAdd): `rows`
/// source rows of `dim` elements added into the destination rows their indices name, as
/// torch.optim.SGD applies a sparse embedding gradient (`param.add_(grad, alpha=-lr)`). Per
/// element it reads the source and read-modify-writes the destination with an atomic; per row an
/// 8-byte index. Atomics keep it at a fraction of the HBM roof:
///     time = rows (8 + 3 dim e) / (hbm_bandwidth * hbm * 0.50)
/// The 0.50 is measured on an H100 SXM with PyTorch 2.11 (validation/measurements/h100-sxm/
/// dlrm-fp32.json.gz and dlrm-amp.json.gz: 65536 rows of 128 fp32 into 10M-row tables in 62-70 us,
/// 1.55 TB/s of the 3.07 TB/s roof); a calibration input for other GPUs.
///
/// Collisions: atomics on one address are applied one after another at the L2, so a destination
/// row that receives h source rows takes h x t_atomic however many SMs issue them, and
///     time = max(the time above, hottest_row_hits x t_atomic)
/// t_atomic = 12.7 ns is the least-squares fit (log error) of the H100 runs' per-table index_add
/// kernels into the 3-, 4- and 10-row tables at 65536 and 8192 lookups (validation/measurements/
/// h100-sxm/dlrm-graph-amp.json.gz, dlrm-graph-amp-8192.json.gz; 220/204/93 and 30/28/13 us,
/// predicted 277/208/83 and 35/26/10): before, 66 us for all of them. A 14-row table (4681 hits
/// per row, 59 us of chain) runs at the bandwidth bound, as the model says. A calibration input
/// for other GPUs.
///
/// Strided (`strided: 1`): the index runs along an inner dimension, so a "row" is a strided
/// slice (index_select's backward over dim 1, as PyTorch's DLRM interaction picks the lower
/// triangle of each sample's products): every element is an atomic of its own at an address of
/// its own, and the L2's atomic rate bounds the kernel:
///     time = max(the time above, rows dim x 7.75 ps)
/// 7.75 ps (129 G atomics/s) is the geomean fit of the H100 traces' indexFuncLargeIndex over 351
/// slices of 65536 and 8192 samples (dlrm{,-amp,-fp32,-graph-*}.json.gz: fp16 177.7 and 23.0 us,
/// fp32 188.6 and 20.5 us; 45-90 us by bytes), within 8 % of each. A calibration input for other
/// GPUs.
#include <algorithm>

#include "models/compute/roofline.hpp"

namespace stepsim::models {
namespace {

constexpr double kAtomicEfficiency = 0.50;
constexpr Seconds kSameAddressAtomic = 12.7e-9;
constexpr Seconds kScatteredAtomic = 7.75e-12;

class IndexAdd : public KernelModel {
 public:
  std::vector<KernelParam> params() const override {
    return {{"rows", "source rows added (one per looked-up row)", std::nullopt, 1},
            {"dim", "elements per row", std::nullopt, 1},
            {"hottest_row_hits", "most source rows added into one destination row (0: no collisions)", 0, 0},
            {"strided", "1 = rows are strided slices (the index runs along an inner dimension)", 0, 0}};
  }

  KernelCost cost(const KernelSpec& spec, const platforms::GpuModel& gpu) const override {
    const double rows = spec.param("rows"), dim = spec.param("dim");
    const Bytes bytes = rows * (8 + 3 * dim * bytes_of(spec.dtype));
    KernelCost cost = roofline(rows * dim, 0, bytes, gpu);
    cost.time /= kAtomicEfficiency;
    const Seconds collisions = spec.param("hottest_row_hits") * kSameAddressAtomic;
    const Seconds scattered = spec.param("strided") != 0 ? rows * dim * kScatteredAtomic : 0;
    if (std::max(collisions, scattered) > cost.time) {
      cost.time = std::max(collisions, scattered);
      cost.bound = "latency";
    }
    return cost;
  }
};

}  // namespace

STEPSIM_REGISTER_KERNEL_MODEL(IndexAdd, "index_add",
                              "scatter-add of rows with atomics (PyTorch index_add_, sparse SGD on embeddings)")

}  // namespace stepsim::models
