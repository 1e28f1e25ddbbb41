/// @file Ring Simple slice handovers (see nccl_slices.hpp).
#include "models/collectives/nccl_slices.hpp"

namespace stepsim::models::nccl {

int ring_slices_per_step(CollectiveOp op, Algo algo, Proto proto, double bytes, const NcclSystem& sys,
                         int channels) {
  const bool ring_op =
      op == CollectiveOp::allreduce || op == CollectiveOp::allgather || op == CollectiveOp::reduce_scatter;
  if (!ring_op || algo != Algo::ring || proto != Proto::simple || sys.ranks < 2) return 0;
  return loop_count(op, algo, proto, bytes, sys, channels) * kSimpleRingSlicesPerChunk;
}

double simple_slice_overhead_us(int sm) {
  // Written-down calibration (no NCCL constant prices a slice handover). Fitted by least
  // squares of ln(predicted / measured busbw) over the ring Simple points >= 1 MiB of ONE
  // data set per architecture, validated on another of the same architecture:
  //  - sm80: azure-nd-a100-v4-8gpu-allreduce.txt (NCCL 2.18.5, 8x A100, 12 channels),
  //    its 9 ring Simple points 32 MiB-8 GiB: h = 4.9 us, rms log error 0.174 -> 0.063;
  //    validation on stas00 T1 (another A100 node, 12 points): 0.165 -> 0.065.
  // Other architectures stay uncalibrated (0): H100/H200/B200 8-GPU allreduce runs NVLS,
  // and the DGX-2 (sm70) ring Simple allreduce is already predicted slower than measured.
  return sm == 80 ? 4.9 : 0.0;
}

}  // namespace stepsim::models::nccl
