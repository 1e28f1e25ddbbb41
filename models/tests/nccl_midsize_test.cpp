// Handovers of NCCL's ring and NVLS kernels (nccl_slices.hpp): how many a channel makes per
// step, the calibrated cost per handover, and the step latency the nccl lowering charges.
#include <gtest/gtest.h>

#include "models/algorithm.hpp"
#include "models/collectives/nccl_slices.hpp"
#include "platforms/loader.hpp"

namespace stepsim::models::nccl {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

NcclSystem a100_node() {
  NcclSystem sys;
  sys.sm = 80;
  sys.ranks = 8;
  sys.ppn = 8;
  return sys;
}

TEST(NcclMidsize, SlicesPerStepAreLoopsTimesTwo) {
  // One loop moves channels x ranks x chunk = 12 x 8 x 2 MiB = 192 MiB (chunk = 4 steps of
  // 512 KiB); each loop's chunk crosses a ring step as 2 slices.
  const NcclSystem sys = a100_node();
  EXPECT_EQ(handovers_per_step(CollectiveOp::allreduce, Algo::ring, Proto::simple, 128 * kMiB, sys, 12), 2);
  EXPECT_EQ(handovers_per_step(CollectiveOp::allreduce, Algo::ring, Proto::simple, 256 * kMiB, sys, 12), 4);
  EXPECT_EQ(handovers_per_step(CollectiveOp::allgather, Algo::ring, Proto::simple, 8192 * kMiB, sys, 12), 86);
}

TEST(NcclMidsize, LL128StepsHandOverOneWarpTripPer38400Bytes) {
  // 20 warps x 32 threads x 8 wire words x 15/16 data x 8 B = 38400 B per trip.
  EXPECT_DOUBLE_EQ(kLL128TripBytes, 38400.0);
  const NcclSystem sys = a100_node();
  // 2 MiB over 12 channels x 8 ranks: 21846 B per step, one trip.
  EXPECT_EQ(handovers_per_step(CollectiveOp::allreduce, Algo::ring, Proto::ll128, 2 * kMiB, sys, 12), 1);
  // 16 MiB: ceil(16 MiB / 96) = 174763 B per step, ceil(174763 / 38400) = 5 trips.
  EXPECT_EQ(handovers_per_step(CollectiveOp::allreduce, Algo::ring, Proto::ll128, 16 * kMiB, sys, 12), 5);
  // 128 MiB: two full loops of 576000 B (15 trips each), the rest 23625728 B over 96
  // pieces = 246101 B (7 trips).
  EXPECT_EQ(handovers_per_step(CollectiveOp::allreduce, Algo::ring, Proto::ll128, 128 * kMiB, sys, 12), 37);
}

TEST(NcclMidsize, LLStepsHandOverOncePerLoop) {
  // One LLGenericOp call per loop and ring step; a loop moves channels x ranks x 32 KiB of
  // data (LL step: 8 lines x 512 threads x 16 B / 2) = 12 x 8 x 32 KiB = 3 MiB.
  const NcclSystem sys = a100_node();
  EXPECT_EQ(handovers_per_step(CollectiveOp::allreduce, Algo::ring, Proto::ll, 64 * 1024, sys, 2), 1);
  EXPECT_EQ(handovers_per_step(CollectiveOp::allreduce, Algo::ring, Proto::ll, 1 * kMiB, sys, 12), 1);
  // 8 MiB / 3 MiB = 2.67 -> 3 loops; 128 MiB / 3 MiB = 42.67 -> 43.
  EXPECT_EQ(handovers_per_step(CollectiveOp::allreduce, Algo::ring, Proto::ll, 8 * kMiB, sys, 12), 3);
  EXPECT_EQ(handovers_per_step(CollectiveOp::allreduce, Algo::ring, Proto::ll, 128 * kMiB, sys, 12), 43);
  // allgather: the same loop of channels x ranks x 32 KiB, one call per step.
  EXPECT_EQ(handovers_per_step(CollectiveOp::allgather, Algo::ring, Proto::ll, 8 * kMiB, sys, 12), 3);
}

TEST(NcclMidsize, NvlsAllreduceStepsAreOneHandoverEach) {
  NcclSystem sys = a100_node();
  sys.sm = 90;
  EXPECT_EQ(handovers_per_step(CollectiveOp::allreduce, Algo::nvls, Proto::simple, 16 * kMiB, sys, 16), 1);
  EXPECT_EQ(handovers_per_step(CollectiveOp::allgather, Algo::nvls, Proto::simple, 16 * kMiB, sys, 16), 0);
  EXPECT_EQ(handovers_per_step(CollectiveOp::allreduce, Algo::nvls_tree, Proto::simple, 16 * kMiB, sys, 16), 0);
}

TEST(NcclMidsize, OnlyRingAndNvlsHaveHandovers) {
  const NcclSystem sys = a100_node();
  EXPECT_EQ(handovers_per_step(CollectiveOp::allreduce, Algo::tree, Proto::ll, 128 * kMiB, sys, 12), 0);
  EXPECT_EQ(handovers_per_step(CollectiveOp::allreduce, Algo::tree, Proto::simple, 128 * kMiB, sys, 12), 0);
  EXPECT_EQ(handovers_per_step(CollectiveOp::broadcast, Algo::ring, Proto::simple, 128 * kMiB, sys, 12), 0);
}

TEST(NcclMidsize, HandoverCostsFollowTheCalibrationTable) {
  EXPECT_DOUBLE_EQ(handover_us(Algo::ring, Proto::simple, 80), 4.9);
  EXPECT_DOUBLE_EQ(handover_us(Algo::ring, Proto::simple, 70), 0.0);
  EXPECT_DOUBLE_EQ(handover_us(Algo::ring, Proto::simple, 90), 0.0);
  EXPECT_DOUBLE_EQ(handover_us(Algo::ring, Proto::ll128, 80), 1.2);
  EXPECT_DOUBLE_EQ(handover_us(Algo::ring, Proto::ll128, 90), 0.0);
  EXPECT_DOUBLE_EQ(handover_us(Algo::ring, Proto::ll, 80), 1.15);
  EXPECT_DOUBLE_EQ(handover_us(Algo::ring, Proto::ll, 90), 0.0);
  EXPECT_DOUBLE_EQ(handover_us(Algo::ring, Proto::ll, 100), 0.0);
  EXPECT_DOUBLE_EQ(handover_us(Algo::nvls, Proto::simple, 90), 3.5);
  // Blackwell has no fit of its own: it takes the Hopper fit of the same NVLS kernel.
  EXPECT_DOUBLE_EQ(handover_us(Algo::nvls, Proto::simple, 100), 3.5);
  EXPECT_DOUBLE_EQ(handover_us(Algo::nvls, Proto::simple, 80), 0.0);
  EXPECT_DOUBLE_EQ(handover_us(Algo::nvls_tree, Proto::simple, 90), 0.0);
}

Schedule lower_allreduce(const std::string& preset, int ranks, double bytes) {
  const platforms::Platform platform = platforms::load_platform(preset, {});
  platforms::Allocation allocation;
  for (int g = 0; g < ranks; ++g) allocation.gpus.push_back(g);
  const CollectiveContext ctx{platform, allocation, {}};
  CollectiveSpec spec;
  spec.op = CollectiveOp::allreduce;
  spec.ranks = ranks;
  spec.bytes = bytes;
  return AlgorithmRegistry::instance().get("nccl").make()->lower(spec, ctx);
}

TEST(NcclMidsize, A100RingStepsPayTheirSliceHandovers) {
  // dgx-a100, 8 GPUs, 128 MiB: ring Simple on 12 channels, one loop: 2 slices x 4.9 us.
  const Schedule s = lower_allreduce("dgx-a100", 8, 128 * kMiB);
  ASSERT_EQ(s.algorithm, "nccl:ring/Simple");
  ASSERT_EQ(s.channels, 12);
  EXPECT_NEAR(s.protocol.step_latency, 2 * 4.9e-6, 1e-12);
}

TEST(NcclMidsize, A100LL128StepsPayTheirWarpTrips) {
  // dgx-a100, 8 GPUs, 16 MiB: ring LL128 on 12 channels, 5 trips x 1.2 us.
  const Schedule s = lower_allreduce("dgx-a100", 8, 16 * kMiB);
  ASSERT_EQ(s.algorithm, "nccl:ring/LL128");
  ASSERT_EQ(s.channels, 12);
  EXPECT_NEAR(s.protocol.step_latency, 5 * 1.2e-6, 1e-12);
}

TEST(NcclMidsize, A100LLStepsPayOneHandoverPerLoop) {
  // dgx-a100, 8 GPUs, 1 MiB: ring LL on 12 channels (1 MiB >= 12 x 512 threads x 64), one
  // loop of 3 MiB: 1 x 1.15 us.
  const Schedule s = lower_allreduce("dgx-a100", 8, 1 * kMiB);
  ASSERT_EQ(s.algorithm, "nccl:ring/LL");
  ASSERT_EQ(s.channels, 12);
  EXPECT_NEAR(s.protocol.step_latency, 1.15e-6, 1e-12);
}

TEST(NcclMidsize, B200NvlsStepsPayTheHopperHandover) {
  const Schedule s = lower_allreduce("dgx-b200", 8, 16 * kMiB);
  ASSERT_EQ(s.algorithm, "nccl:nvls/Simple");
  EXPECT_NEAR(s.protocol.step_latency, 3.5e-6, 1e-12);
}

TEST(NcclMidsize, H100NvlsStepsPayOneHandover) {
  const Schedule s = lower_allreduce("dgx-h100", 8, 16 * kMiB);
  ASSERT_EQ(s.algorithm, "nccl:nvls/Simple");
  EXPECT_NEAR(s.protocol.step_latency, 3.5e-6, 1e-12);
}

TEST(NcclMidsize, UncalibratedArchitecturesKeepZeroStepLatency) {
  const Schedule s = lower_allreduce("dgx-h100", 4, 128 * kMiB);
  ASSERT_EQ(s.algorithm, "nccl:ring/Simple");
  EXPECT_EQ(s.protocol.step_latency, 0.0);
}

}  // namespace
}  // namespace stepsim::models::nccl
