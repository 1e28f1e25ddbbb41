// The analytical engine against closed forms worked out by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "sim/tests/fixtures.hpp"

namespace stepsim::sim::testing {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

TEST(Analytical, SingleTransferIsAlphaPlusSizeOverBandwidth) {
  const auto platform = two_gpus(25e9, 0.7e-6);
  const auto result = run_engine("analytical", single_transfer(kGiB), platform, first_gpus(2));
  EXPECT_NEAR(result.time, 0.7e-6 + kGiB / 25e9, 1e-9 * result.time);
  ASSERT_EQ(result.rank_finish.size(), 2u);
  // The sender is done once its bytes have left; they land the latency later.
  EXPECT_NEAR(result.rank_finish[0], kGiB / 25e9, 1e-9 * result.time);
  EXPECT_EQ(result.rank_finish[1], result.time);
}

TEST(Analytical, RingAllgatherOnNvswitchIsNMinusOneSteps) {
  for (int n : {2, 3, 8, 16}) {
    const double alpha = 2e-6, bandwidth = 450e9, size = kGiB;
    const auto platform = nvswitch_node(n, bandwidth, alpha);
    const auto result = run_engine("analytical", ring_allgather(n, size), platform, first_gpus(n));
    const double expected = (n - 1) * (alpha + size / n / bandwidth);
    EXPECT_NEAR(result.time, expected, 1e-9 * expected) << n << " ranks";
    for (double finish : result.rank_finish) EXPECT_NEAR(finish, expected, 1e-9 * expected);
  }
}

TEST(Analytical, ProtocolAndLaunchLatencyEnterEveryStep) { expect_protocol_costs("analytical", 8, 1e-9); }

TEST(Analytical, StepsOfOneRoundShareALinkEvenly) {
  // Direct alltoall on an NVSwitch: every GPU uplink carries n-1 steps of the one round.
  const int n = 8;
  const double alpha = 1e-6, bandwidth = 400e9, per_rank = 256e6;
  const auto platform = nvswitch_node(n, bandwidth, alpha);
  const auto result = run_engine("analytical", direct_alltoall(n, per_rank), platform, first_gpus(n));
  const double expected = alpha + (per_rank / n) / (bandwidth / (n - 1));
  EXPECT_NEAR(result.time, expected, 1e-9 * expected);
}

TEST(Analytical, LinkUsageCountsEveryRepetition) {
  const int n = 4;
  const double size = 4e6;
  const auto platform = nvswitch_node(n, 100e9, 1e-6);
  const auto result = run_engine("analytical", ring_allgather(n, size), platform, first_gpus(n));
  // Each GPU's uplink (GPU -> switch, forward) and downlink carry (n-1) blocks of size/n.
  ASSERT_EQ(result.link_usage.size(), static_cast<std::size_t>(n));
  for (int g = 0; g < n; ++g) {
    EXPECT_EQ(result.link_usage[g].link, g);
    EXPECT_DOUBLE_EQ(result.link_usage[g].bytes_forward, (n - 1) * size / n);
    EXPECT_DOUBLE_EQ(result.link_usage[g].bytes_backward, (n - 1) * size / n);
  }
}

// Full iteration of a ring whose links all differ: no uniform advance until the slowest link
// has gated everybody, so the engine must iterate, and extrapolate only once that is exact.
// Reference: the clock's rule (models/schedule_clock.hpp) applied to every expanded step, no
// extrapolation: rank i sends for transmit[i], its bytes land latency[i] later.
double reference_ring_time(int n, int repeat, const std::vector<double>& transmit, const std::vector<double>& latency) {
  std::vector<double> ready(n, 0), sent(n);
  for (int rep = 0; rep < repeat; ++rep) {
    for (int i = 0; i < n; ++i) sent[i] = ready[i] + transmit[i];
    for (int i = 0; i < n; ++i) {
      ready[i] = std::max(ready[i], sent[i]);
      ready[(i + 1) % n] = std::max(ready[(i + 1) % n], sent[i] + latency[i]);
    }
  }
  return *std::max_element(ready.begin(), ready.end());
}

TEST(Analytical, HeterogeneousRingMatchesFullIteration) {
  const int n = 64;
  const double size = 1e9, latency = 1e-6;
  // Every 8th link is a slow "inter-node" hop, one link slower still.
  auto bandwidth = [](int g) { return g == 37 ? 20e9 : (g % 8 == 7 ? 50e9 : 300e9 + 7e9 * g); };
  const auto platform = nvlink_ring(n, bandwidth, [=](int) { return latency; });
  std::vector<double> transmit(n), latencies(n, latency);
  for (int g = 0; g < n; ++g) transmit[g] = size / n / bandwidth(g);
  const auto result = run_engine("analytical", ring_allgather(n, size), platform, first_gpus(n));
  const double expected = reference_ring_time(n, n - 1, transmit, latencies);
  EXPECT_NEAR(result.time, expected, 1e-12 * expected);
}

TEST(Analytical, ClusterRingOf4096RanksMatchesFullIteration) {
  // 512 nodes of 8: seven NVSwitch steps then one NIC step per node, so the advance per
  // repetition becomes uniform only after the slow steps have gated everybody.
  const int nodes = 512, n = 8 * nodes;
  const double size = 1024.0 * 1024 * 1024;
  const auto platform = nvswitch_cluster(nodes, 8, 450e9, 2e-6, 50e9);
  const auto allocation = first_gpus(n);
  std::vector<double> transmit(n), latencies(n);
  for (int i = 0; i < n; ++i) {
    const auto& route = platform.route(platform.gpu_vertex(i), platform.gpu_vertex((i + 1) % n));
    transmit[i] = size / n / route.bandwidth;
    latencies[i] = route.latency;
  }
  const auto result = run_engine("analytical", ring_allgather(n, size), platform, allocation);
  const double expected = reference_ring_time(n, n - 1, transmit, latencies);
  EXPECT_NEAR(result.time, expected, 1e-9 * expected);
}

TEST(Analytical, CompactRingOf1024RanksIsExact) {
  const int n = 1024;
  const double alpha = 3e-6, bandwidth = 450e9, size = kGiB;
  const auto platform = nvswitch_node(n, bandwidth, alpha);
  const auto result = run_engine("analytical", ring_allreduce(n, size), platform, first_gpus(n));
  const double expected = 2 * (n - 1) * (alpha + size / n / bandwidth);
  EXPECT_NEAR(result.time, expected, 1e-9 * expected);
}

TEST(Analytical, SameInputSameBits) {
  const auto platform = nvswitch_node(16, 123e9, 1.7e-6);
  const auto a = run_engine("analytical", ring_allreduce(16, 3e8), platform, first_gpus(16));
  const auto b = run_engine("analytical", ring_allreduce(16, 3e8), platform, first_gpus(16));
  EXPECT_EQ(0, std::memcmp(&a.time, &b.time, sizeof a.time));
  EXPECT_EQ(a.rank_finish, b.rank_finish);
}

}  // namespace
}  // namespace stepsim::sim::testing
