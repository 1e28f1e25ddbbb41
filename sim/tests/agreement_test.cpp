// Where no link is shared by steps in flight at the same time, the analytical and event
// engines must agree (design.md: "agree exactly where no contention exists"; we ask 0.1 %).
#include <gtest/gtest.h>

#include "models/algorithm.hpp"
#include "models/compression/compressed_schedules.hpp"
#include "platforms/loader.hpp"
#include "sim/tests/fixtures.hpp"

namespace stepsim::sim::testing {
namespace {

void expect_agreement(const models::Schedule& schedule, const platforms::Platform& platform) {
  const auto allocation = first_gpus(schedule.spec.ranks);
  const auto analytical = run_engine("analytical", schedule, platform, allocation);
  const auto event = run_engine("event", schedule, platform, allocation);
  EXPECT_NEAR(event.time, analytical.time, 1e-6 * analytical.time) << schedule.algorithm;
  ASSERT_EQ(event.rank_finish.size(), analytical.rank_finish.size());
  for (std::size_t r = 0; r < event.rank_finish.size(); ++r)
    EXPECT_NEAR(event.rank_finish[r], analytical.rank_finish[r], 1e-6 * analytical.time) << "rank " << r;
  ASSERT_EQ(event.link_usage.size(), analytical.link_usage.size());
  for (std::size_t i = 0; i < event.link_usage.size(); ++i) {
    EXPECT_EQ(event.link_usage[i].link, analytical.link_usage[i].link);
    EXPECT_EQ(event.link_usage[i].bytes_forward, analytical.link_usage[i].bytes_forward);
    EXPECT_EQ(event.link_usage[i].bytes_backward, analytical.link_usage[i].bytes_backward);
  }
}

TEST(Agreement, NonNcclAlgorithmsOnNcclPrimitives) {
  // The runtime's launch, per-step handover and protocol efficiency on both engines.
  const platforms::Platform platform = platforms::load_platform("dgx-h100");
  const platforms::Allocation allocation = first_gpus(8);
  for (const char* algo : {"ring", "tree", "rhd"})
    for (Bytes bytes : {4096.0, 64.0 * 1024 * 1024}) {
      const models::CollectiveContext ctx{platform, allocation, {}};
      const models::CollectiveSpec spec{models::CollectiveOp::allreduce, 8, bytes, 0};
      const models::Schedule s =
          models::lower_collective(algo, *models::AlgorithmRegistry::instance().get(algo).make(), spec, ctx);
      ASSERT_NE(s.protocol.name, "ideal");
      const auto analytical = run_engine("analytical", s, platform, allocation);
      const auto event = run_engine("event", s, platform, allocation);
      EXPECT_NEAR(event.time, analytical.time, 0.02 * analytical.time) << algo << " " << bytes;
      EXPECT_GE(analytical.time, s.launch_latency);
    }
}

TEST(Agreement, RingAllgatherOnNvswitch) {
  expect_agreement(ring_allgather(8, 1024.0 * 1024 * 1024), nvswitch_node(8, 450e9, 2e-6));
}

TEST(Agreement, RingAllreduceSmallMessage) {
  auto schedule = ring_allreduce(16, 64 * 1024);
  schedule.protocol.step_latency = 0.6e-6;
  schedule.launch_latency = 4e-6;
  expect_agreement(schedule, nvswitch_node(16, 200e9, 1e-6));
}

TEST(Agreement, DirectAlltoallSharesUplinksTheSameWay) {
  expect_agreement(direct_alltoall(8, 512e6), nvswitch_node(8, 400e9, 1e-6));
}

TEST(Agreement, TwoChannelBidirectionalRingUsesDistinctLinks) {
  // Channel 0 goes clockwise, channel 1 counter-clockwise: full duplex keeps them apart.
  const int n = 8;
  const double size = 256e6;
  models::Schedule schedule = ring_allgather(n, size / 2);
  schedule.spec.bytes = size;
  schedule.channels = 2;
  std::vector<int> reversed(n);
  for (int i = 0; i < n; ++i) reversed[i] = n - 1 - i;
  const models::Schedule counter_clockwise = ring_allgather(n, size / 2, reversed);
  for (models::Step step : counter_clockwise.rounds[0].steps) {
    step.channel = 1;
    schedule.rounds[0].steps.push_back(step);
  }
  expect_agreement(schedule, nvlink_ring(n, 50e9, 0.8e-6));
}

TEST(Agreement, HeterogeneousRingWithStragglerLink) {
  const int n = 24;
  const auto platform = nvlink_ring(
      n, [](int g) { return g == 5 ? 12e9 : 100e9 + 3e9 * g; }, [](int g) { return (1 + g % 3) * 0.5e-6; });
  expect_agreement(ring_allreduce(n, 96e6), platform);
}

TEST(Agreement, RingAcrossNodesOfAFatTree) {
  // 4 nodes of 4 GPUs: every fourth step leaves through the node's NIC.
  expect_agreement(ring_allreduce(16, 512e6), nvswitch_cluster(4, 4, 450e9, 2e-6, 50e9));
}

}  // namespace
}  // namespace stepsim::sim::testing

namespace stepsim::sim::testing {
namespace {

/// Two GPUs whose only path is a half-duplex staging link of 10 GB/s (1 us), carrying
/// `two_way` in total both ways (0: none).
platforms::Platform staging_pair(double two_way) {
  platforms::NodeTemplate n;
  add_vertex(n, "gpu0", platforms::VertexKind::gpu);
  add_vertex(n, "gpu1", platforms::VertexKind::gpu);
  add_link(n, 0, 1, platforms::LinkType::pcie, 10e9, 1e-6);
  n.links.back().half_duplex = true;
  n.links.back().datasheet_two_way_bandwidth = two_way;
  return make_platform(std::move(n));
}

/// On staging_pair(two_way), both engines: a 1 GB allgather exchanges in both directions at
/// once and shares `both_ways_total`; the same with one step crosses one way at 10 GB/s.
void expect_staging_times(double two_way, double both_ways_total) {
  const auto platform = staging_pair(two_way);
  const double size = 1e9;
  models::Schedule exchange = ring_allgather(2, size);
  const auto allocation = first_gpus(2);
  const double both = 1e-6 + (size / 2) / (both_ways_total / 2);
  for (const char* engine : {"analytical", "event"})
    EXPECT_NEAR(run_engine(engine, exchange, platform, allocation).time, both, 1e-6 * both) << engine;
  exchange.rounds[0].steps.resize(1);
  const double one_way = 1e-6 + (size / 2) / 10e9;
  for (const char* engine : {"analytical", "event"})
    EXPECT_NEAR(run_engine(engine, exchange, platform, allocation).time, one_way, 1e-6 * one_way) << engine;
}

// An exchange in both directions at once gets half the capacity each, a one-way transfer all.
TEST(Agreement, HalfDuplexLinkSharesOneCapacityBetweenDirections) { expect_staging_times(0, 10e9); }

// Carrying 10 GB/s one way but 6 GB/s in total both ways: the exchange gets 3 GB/s each way,
// the one-way transfer still 10 GB/s.
TEST(Agreement, TwoWayTotalAppliesOnlyToSchedulesCrossingBothWays) { expect_staging_times(6e9, 6e9); }

// Credits: k transfers on one connection with one slot wait for each other's arrival and
// credit, tx + 2 latency apart; with 3 slots over a 2-latency round trip longer than 3 tx,
// in threes. Both engines follow the clock's rule (models/schedule_clock.hpp) exactly.
TEST(Agreement, SlotsInFlightBoundAConnectionOnBothEngines) {
  const double bytes = 5e4, bandwidth = 25e9, latency = 4e-6;
  const double tx = bytes / bandwidth;
  const int k = 20;
  models::Schedule schedule = single_transfer(bytes);
  schedule.rounds[0].repeat = k;
  schedule.protocol.slots_in_flight = 1;
  const auto platform = two_gpus(bandwidth, latency);
  const double one_slot = (k - 1) * (tx + 2 * latency) + tx + latency;
  for (const char* engine : {"analytical", "event"})
    EXPECT_NEAR(run_engine(engine, schedule, platform, first_gpus(2)).time, one_slot, 1e-9 * one_slot) << engine;
  schedule.protocol.slots_in_flight = 3;
  ASSERT_GT(2 * latency, 2 * tx);
  const double three_slots = (k - 1) / 3 * (tx + 2 * latency) + (k - 1) % 3 * tx + tx + latency;
  for (const char* engine : {"analytical", "event"})
    EXPECT_NEAR(run_engine(engine, schedule, platform, first_gpus(2)).time, three_slots, 1e-9 * three_slots) << engine;
  expect_agreement(schedule, platform);
}

// NCCL's tree on two DGX H100 at 256 KiB (tree/LL128: two lanes, reduce up and broadcast down at
// once, fluid chunks, credits per connection), one channel so that no link is shared unevenly.
TEST(Agreement, NcclTreeWithLanesOnBothEngines) {
  platforms::PlatformOptions options;
  options.nodes = 2;
  const platforms::Platform platform = platforms::load_platform("dgx-h100", options);
  const platforms::Allocation allocation = first_gpus(16);
  models::CollectiveContext ctx{platform, allocation, {}};
  ctx.options.channels = 1;
  ctx.options.extra["algo"] = "tree";
  const models::Schedule schedule = models::AlgorithmRegistry::instance().get("nccl").make()->lower(
      {models::CollectiveOp::allreduce, 16, 256.0 * 1024, 0}, ctx);
  ASSERT_EQ(schedule.lanes, 2);
  ASSERT_GT(schedule.protocol.slots_in_flight, 0);
  expect_agreement(schedule, platform);
}

}  // namespace
}  // namespace stepsim::sim::testing
