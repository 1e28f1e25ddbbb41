/// @file Handovers of NCCL's ring and NVLS kernels (see nccl_slices.hpp).
#include "models/collectives/nccl_slices.hpp"

#include <algorithm>
#include <cmath>

namespace stepsim::models::nccl {
namespace {

// LL128 chunk per loop and ring step: one FIFO step of data, 120 x 640 x 8 B x 15/16
// (NCCL_LL128_ELEMS_PER_THREAD x NCCL_LL128_MAX_NTHREADS, device.h).
constexpr double kLL128StepBytes = 120.0 * 640 * 8 * 15 / 16;

/// LL128 warp trips of one channel per ring step: each loop's chunk (calcCollChunking,
/// the last loop shares what is left evenly over channels x ranks) in 38400 B trips.
int ll128_trips(double bytes, int ranks, int channels) {
  const double per_loop = static_cast<double>(channels) * ranks;
  int trips = 0;
  for (double left = bytes; left > 0;) {
    const double chunk = std::min(kLL128StepBytes, std::ceil(left / per_loop));
    trips += static_cast<int>(std::ceil(chunk / kLL128TripBytes));
    left -= chunk * per_loop;
  }
  return trips;
}

}  // namespace

int handovers_per_step(CollectiveOp op, Algo algo, Proto proto, double bytes, const NcclSystem& sys, int channels) {
  if (sys.ranks < 2) return 0;
  if (algo == Algo::nvls) return op == CollectiveOp::allreduce && sys.nodes == 1 ? 1 : 0;
  const bool ring_op =
      op == CollectiveOp::allreduce || op == CollectiveOp::allgather || op == CollectiveOp::reduce_scatter;
  if (!ring_op || algo != Algo::ring) return 0;
  if (proto == Proto::simple) return loop_count(op, algo, proto, bytes, sys, channels) * kSimpleRingSlicesPerChunk;
  if (proto == Proto::ll128) return ll128_trips(bytes, sys.ranks, std::max(1, channels));
  // LL: one LLGenericOp call per loop and ring step, each opened and closed by a barrier of
  // the channel's threads (waitSend, postRecv); its warp trips are not counted, as every
  // thread polls its own lines, which its upstream thread stores in the same order.
  return loop_count(op, algo, proto, bytes, sys, channels);
}

double handover_us(Algo algo, Proto proto, int sm) {
  // Written-down calibration (no NCCL constant prices a handover). Each entry is fitted by
  // least squares of ln(predicted / measured busbw) over ONE data set's points >= 1 MiB
  // where NCCL runs that (algo, proto), and validated on the other data sets of the same
  // architecture (rms log error before -> after):
  //  - sm80 ring Simple, h = 4.9 us: azure-nd-a100-v4-8gpu (NCCL 2.18.5, 12 channels), 9
  //    points 32 MiB-8 GiB, 0.174 -> 0.063; validation stas00 A100 T1, 12 points: 0.165 -> 0.065.
  //  - sm80 ring LL128, h = 1.2 us per warp trip: azure-nd-a100-v4-8gpu, 4 points 2-16 MiB,
  //    0.357 -> 0.052; validation stas00 A100 T1 (4-16 MiB, 3 points) 0.350 -> 0.115, abci
  //    1 node (NCCL 2.8.4, 4 and 8 GPUs, 6 points) 0.829 -> 0.527; aws-p4de runs no LL128.
  //  - sm90 NVLS, h = 3.5 us per chunk step: azure-nd-h100-v5-8gpu (NCCL 2.18.5), 14 points
  //    1 MiB-8 GiB, 0.143 -> 0.060; validation azure-nd-h200-v5 (14) 0.094 -> 0.070,
  //    stas00 H200 (19) 0.164 -> 0.087, aws-p5 1 node (14) 0.103 -> 0.042; hgx-h100 (NCCL
  //    2.29.2, 10 points >= 32 MiB only) gets worse, 0.043 -> 0.063, as large messages pay
  //    a handover the NCCL bandwidth figure already absorbs.
  //  - sm80 ring LL, h = 1.15 us per LLGenericOp call (one per loop and ring step): fitted
  //    on azure-nd-a100-v4-8gpu over ALL its sizes where NCCL runs ring LL on >= 2 channels,
  //    5 points 64 KiB-1 MiB (the 1 MiB cut-off is the reported geomean's, not the fit's),
  //    0.448 -> 0.096 (its one point >= 1 MiB: +0.106 -> -0.197); its points below 1 MiB sit
  //    near that run's -g 8 launch floor (~43 us per call), which was not modelled when this
  //    was fitted and is now 32 us (nccl.cpp), so h partly stands for it. Validation (same sizes):
  //    stas00 A100 T1 (6 points, 1-2 MiB are >= 1 MiB) 0.904 -> 0.469, >= 1 MiB 0.844 ->
  //    0.530; abci (NCCL 2.8.4) 1 node 4 and 8 GPUs (10 points) and 2 nodes (3 points, which
  //    get worse) 0.746 -> 0.450 together; aws-p4de runs no ring LL. Counting warp trips
  //    (prims_ll.h: 512 threads x 8 B per pass) instead fits azure-a100 worse (best 0.239).
  //  - sm100 NVLS uses the sm90 fit (3.5 us): the handover belongs to NCCL's NVLS kernel, not
  //    to the GPU; stas00 B200 (NCCL 2.27.7, the only Blackwell data set, not fitted on) is a
  //    pure validation: its 15 single-node NVLS points (T3 8 GPUs 4 MiB-16 GiB, T5 7 and 8
  //    GPUs at 8 GiB) 0.460 -> 0.310, 31.6 % -> 24.8 % geomean.
  // Uncalibrated (0): Hopper ring Simple and LL128 (its 8-GPU allreduces run NVLS); sm90/100
  // ring LL and sm70 (one data set each, or no LL fit set: a fit there would be judged on the
  // data it was fitted to).
  if (algo == Algo::ring && proto == Proto::simple) return sm == 80 ? 4.9 : 0.0;
  if (algo == Algo::ring && proto == Proto::ll128) return sm == 80 ? 1.2 : 0.0;
  if (algo == Algo::ring && proto == Proto::ll) return sm == 80 ? 1.15 : 0.0;
  if (algo == Algo::nvls) return sm == 90 || sm == 100 ? 3.5 : 0.0;
  return 0.0;
}

}  // namespace stepsim::models::nccl
