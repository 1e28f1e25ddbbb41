// The event (SimGrid) engine: closed forms, max-min contention, repeated runs in one process.
#include <gtest/gtest.h>

#include <cstring>

#include "sim/tests/fixtures.hpp"

namespace stepsim::sim::testing {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

TEST(Event, SingleTransferHasNoTcpFactors) {
  // SimGrid's default LV08 model turns this 1 GB, 1 GB/s, 1 us transfer into 1.0825 s.
  const auto platform = two_gpus(1e9, 1e-6);
  const auto result = run_engine("event", single_transfer(1e9), platform, first_gpus(2));
  EXPECT_NEAR(result.time, 1.000001, 1e-6 * 1.000001);

  const auto nvlink = two_gpus(25e9, 0.7e-6);
  const auto big = run_engine("event", single_transfer(kGiB), nvlink, first_gpus(2));
  EXPECT_NEAR(big.time, 0.7e-6 + kGiB / 25e9, 1e-6 * big.time);
}

TEST(Event, FastLongLinkIsNotWindowCapped) {
  // A TCP window cap once held a 100 GB/s, 100 us link to ~21 GB/s.
  const auto platform = two_gpus(100e9, 100e-6);
  const auto result = run_engine("event", single_transfer(1e9), platform, first_gpus(2));
  EXPECT_NEAR(result.time, 100e-6 + 1e9 / 100e9, 1e-6 * result.time);
}

TEST(Event, RingAllgatherOnNvswitch) {
  const int n = 8;
  const double alpha = 2e-6, bandwidth = 450e9, size = kGiB;
  const auto platform = nvswitch_node(n, bandwidth, alpha);
  const auto result = run_engine("event", ring_allgather(n, size), platform, first_gpus(n));
  const double expected = (n - 1) * (alpha + size / n / bandwidth);
  EXPECT_NEAR(result.time, expected, 1e-6 * expected);
}

TEST(Event, ProtocolEfficiencyCapAndLatencies) { expect_protocol_costs("event", 4, 1e-6); }

// GPUs 0, 1 under PCIe switch A; GPUs 2, 3 under switch B; one A-B link of 12 GB/s.
// Ring X (GPUs 0, 2) and ring Y (GPUs 1, 3) both cross A-B, in both directions.
platforms::Platform two_switches(double gpu3_bandwidth) {
  platforms::NodeTemplate n;
  for (int g = 0; g < 4; ++g) add_vertex(n, "gpu" + std::to_string(g), platforms::VertexKind::gpu);
  const int a = add_vertex(n, "pcie_a", platforms::VertexKind::pcie_switch);
  const int b = add_vertex(n, "pcie_b", platforms::VertexKind::pcie_switch);
  add_link(n, 0, a, platforms::LinkType::pcie, 48e9, 0.5e-6);
  add_link(n, 1, a, platforms::LinkType::pcie, 48e9, 0.5e-6);
  add_link(n, 2, b, platforms::LinkType::pcie, 48e9, 0.5e-6);
  add_link(n, 3, b, platforms::LinkType::pcie, gpu3_bandwidth, 0.5e-6);
  add_link(n, a, b, platforms::LinkType::pcie, 12e9, 0.5e-6);
  return make_platform(std::move(n));
}

// X is round 0 on channel 0, Y round 1 on channel 1: by the dependency rule Y does not wait
// for X, so both run at once, but no round holds both (the analytical engine sees no sharing).
models::Schedule two_rings(double bytes) {
  models::Schedule s;
  s.spec = {models::CollectiveOp::sendrecv, 4, bytes, 0};
  s.algorithm = "test-two-rings";
  s.num_blocks = 4;
  s.block_bytes = bytes;
  s.channels = 2;
  auto step = [&](int src, int dst, int channel) {
    models::Step st;
    st.src = src;
    st.dst = dst;
    st.block = src;
    st.channel = channel;
    st.wire_bytes = bytes;
    return st;
  };
  s.rounds.push_back({{step(0, 2, 0), step(2, 0, 0)}, 1, 0});
  s.rounds.push_back({{step(1, 3, 1), step(3, 1, 1)}, 1, 0});
  return s;
}

TEST(Event, TwoRingsCrossingOnePcieLinkSplitItEvenly) {
  const double bytes = 1.2e9, latency = 1.5e-6;
  const auto platform = two_switches(48e9);
  const auto event = run_engine("event", two_rings(bytes), platform, first_gpus(4));
  const auto analytical = run_engine("analytical", two_rings(bytes), platform, first_gpus(4));
  // Alone, a ring step gets all 12 GB/s; together each gets half.
  EXPECT_NEAR(analytical.time, latency + bytes / 12e9, 1e-9 * analytical.time);
  EXPECT_NEAR(event.time, latency + bytes / 6e9, 1e-6 * event.time);
  for (double finish : event.rank_finish) EXPECT_NEAR(finish, event.time, 1e-6 * event.time);
}

TEST(Event, MaxMinGivesTheUnusedShareToTheOtherRing) {
  // GPU 3's own 3 GB/s link holds ring Y below its fair 6 GB/s; max-min hands the other
  // 9 GB/s of the shared link to ring X (an even split would give X 6 GB/s).
  const double bytes = 0.9e9, latency = 1.5e-6;
  const auto platform = two_switches(3e9);
  const auto result = run_engine("event", two_rings(bytes), platform, first_gpus(4));
  EXPECT_NEAR(result.rank_finish[0], latency + bytes / 9e9, 1e-6 * result.rank_finish[0]);
  EXPECT_NEAR(result.rank_finish[2], latency + bytes / 9e9, 1e-6 * result.rank_finish[2]);
  EXPECT_NEAR(result.time, latency + bytes / 3e9, 1e-6 * result.time);
}

TEST(Event, FractionalStepBytesAreKept) {
  // 1000 bytes over 3 ranks: 333.33 bytes per step, not rounded to whole bytes.
  const auto platform = nvswitch_node(3, 1e6, 0);
  const auto result = run_engine("event", ring_allgather(3, 1000), platform, first_gpus(3));
  const double expected = 2 * (1000.0 / 3) / 1e6;
  EXPECT_NEAR(result.time, expected, 1e-7 * expected);
}

TEST(Event, ManyRunsInOneProcessGiveTheSameBits) {
  const auto platform = nvswitch_node(8, 123e9, 1.7e-6);
  const auto first = run_engine("event", ring_allreduce(8, 3e8), platform, first_gpus(8));
  for (int i = 0; i < 3; ++i) {
    const auto again = run_engine("event", ring_allreduce(8, 3e8), platform, first_gpus(8));
    EXPECT_EQ(0, std::memcmp(&first.time, &again.time, sizeof first.time));
    EXPECT_EQ(first.rank_finish, again.rank_finish);
  }
}

}  // namespace
}  // namespace stepsim::sim::testing
