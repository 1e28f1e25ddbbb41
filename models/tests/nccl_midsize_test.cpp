// Ring Simple slice handovers (nccl_slices.hpp): how many a channel makes per ring step,
// the calibrated cost per handover, and the step latency the nccl lowering charges.
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
  EXPECT_EQ(ring_slices_per_step(CollectiveOp::allreduce, Algo::ring, Proto::simple, 128 * kMiB, sys, 12), 2);
  EXPECT_EQ(ring_slices_per_step(CollectiveOp::allreduce, Algo::ring, Proto::simple, 256 * kMiB, sys, 12), 4);
  EXPECT_EQ(ring_slices_per_step(CollectiveOp::allgather, Algo::ring, Proto::simple, 8192 * kMiB, sys, 12), 86);
}

TEST(NcclMidsize, OnlyRingSimpleCollectivesHaveSlices) {
  const NcclSystem sys = a100_node();
  EXPECT_EQ(ring_slices_per_step(CollectiveOp::allreduce, Algo::ring, Proto::ll128, 128 * kMiB, sys, 12), 0);
  EXPECT_EQ(ring_slices_per_step(CollectiveOp::allreduce, Algo::tree, Proto::simple, 128 * kMiB, sys, 12), 0);
  EXPECT_EQ(ring_slices_per_step(CollectiveOp::broadcast, Algo::ring, Proto::simple, 128 * kMiB, sys, 12), 0);
}

TEST(NcclMidsize, OverheadIsCalibratedOnlyForAmpere) {
  EXPECT_DOUBLE_EQ(simple_slice_overhead_us(80), 4.9);
  EXPECT_DOUBLE_EQ(simple_slice_overhead_us(70), 0.0);
  EXPECT_DOUBLE_EQ(simple_slice_overhead_us(90), 0.0);
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

TEST(NcclMidsize, UncalibratedArchitecturesKeepZeroStepLatency) {
  const Schedule s = lower_allreduce("dgx-h100", 4, 128 * kMiB);
  ASSERT_EQ(s.algorithm, "nccl:ring/Simple");
  EXPECT_EQ(s.protocol.step_latency, 0.0);
}

}  // namespace
}  // namespace stepsim::models::nccl
