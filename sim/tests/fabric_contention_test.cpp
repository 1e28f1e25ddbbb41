// Fabric contention on both engines: a tapered leaf's uplinks to the spine, a rail-optimized
// fabric with and without NCCL's PXN relay, priced against closed forms counted by hand.
#include <gtest/gtest.h>

#include <string>

#include "platforms/tests/node_builder.hpp"
#include "sim/tests/fixtures.hpp"

namespace stepsim::sim::testing {
namespace {

constexpr double kUs = 1e-6;
constexpr int kGpus = 4;  // per node

// Four GPUs on an NVSwitch (100 GB/s, 0.3 us a side), GPU i with its own NIC i (rail i) over
// PCIe (50 GB/s, 0.5 us); NICs at 10 GB/s, 2 us one way, 0.5 us per switch. So a route
// GPU-NIC-leaf-NIC-GPU costs 0.5 + 1.25 + 1.25 + 0.5 = 3.5 us, one through the spine 1 us more,
// and a PXN relay adds the NVSwitch's 0.6 us.
platforms::Platform cluster(int nodes, platforms::FabricKind kind, double oversubscription, int nodes_per_leaf,
                            bool pxn) {
  const platforms::Fabric f = platforms::testing::rail_fabric(kind, oversubscription, nodes_per_leaf, pxn);
  platforms::GpuModel gpu;
  gpu.name = "test-gpu";
  return platforms::Platform("fabric-cluster", gpu, platforms::testing::rail_node(), nodes, f);
}

// GPU i of node 0 sends `bytes` to GPU i of node 1, all four at once.
models::Schedule across_nodes(Bytes bytes) {
  models::Schedule s = direct_alltoall(2 * kGpus, bytes * 2 * kGpus);
  models::Round& round = s.rounds.front();
  std::erase_if(round.steps, [](const models::Step& step) { return step.dst != step.src + kGpus; });
  return s;
}

Bytes bytes_on(const CollectiveResult& result, const platforms::Platform& p, const std::string& link) {
  for (const LinkUsage& usage : result.link_usage)
    if (p.link(usage.link).name == link) return usage.bytes_forward + usage.bytes_backward;
  return 0;
}

TEST(FabricContention, OversubscriptionTwoHalvesCrossLeafBandwidth) {
  // One node per leaf: the four flows share leaf 0's uplink, 4 NICs x 10 GB/s / ratio. At 1:1
  // each flow keeps its NIC's 10 GB/s; at 2:1 it gets 5 GB/s. Route: 3.5 us + two switches.
  const Bytes b = 1e9;
  const auto alloc = first_gpus(2 * kGpus);
  for (const char* engine : {"analytical", "event"}) {
    for (double ratio : {1.0, 2.0}) {
      const auto p = cluster(2, platforms::FabricKind::fat_tree, ratio, 1, true);
      const CollectiveResult r = run_engine(engine, across_nodes(b), p, alloc);
      const double expected = b / (10e9 / ratio) + 4.5 * kUs;
      EXPECT_NEAR(r.time, expected, 1e-9 * expected) << engine << " ratio " << ratio;
      EXPECT_DOUBLE_EQ(bytes_on(r, p, "leaf0-spine"), 4 * b) << engine;
      EXPECT_DOUBLE_EQ(bytes_on(r, p, "leaf1-spine"), 4 * b) << engine;
    }
    // Both nodes under one leaf: the taper is never crossed.
    const auto one_leaf = cluster(2, platforms::FabricKind::fat_tree, 2, 2, true);
    const double expected = b / 10e9 + 3.5 * kUs;
    EXPECT_NEAR(run_engine(engine, across_nodes(b), one_leaf, alloc).time, expected, 1e-9 * expected) << engine;
  }
}

// Direct alltoall of `block` bytes per pair over 2 nodes of 4 GPUs: each GPU sends 4 blocks to
// the other node. By hand, per fabric:
//  - fat tree, or rail-optimized with PXN: every NIC link carries 4 flows, 2.5 GB/s each; the
//    relay's NVLink and PCIe hops are wider. Fat-tree route 3.5 us, PXN route 4.1 us.
//  - rail-optimized without PXN at 2:1: the 3 cross-rail flows of each of the 2 NICs of rail r
//    share rail r's uplink (2 NICs x 10 GB/s / 2 = 10 GB/s), and as many come down it: 10/6
//    GB/s each, the bottleneck (same-rail flows finish first); route 4.5 us.
TEST(FabricContention, RailOptimizedDiffersFromFatTreeUnlessPxnKeepsItOffTheSpine) {
  const Bytes block = 1e8;
  const auto alloc = first_gpus(2 * kGpus);
  const auto schedule = direct_alltoall(2 * kGpus, block * 2 * kGpus);
  struct Case {
    const char* label;
    platforms::Platform platform;
    double expected;
  };
  const Case cases[] = {
      {"fat tree", cluster(2, platforms::FabricKind::fat_tree, 1, 0, true), block / 2.5e9 + 3.5 * kUs},
      {"rail, PXN, 2:1", cluster(2, platforms::FabricKind::rail_optimized, 2, 0, true), block / 2.5e9 + 4.1 * kUs},
      {"rail, no PXN, 1:1", cluster(2, platforms::FabricKind::rail_optimized, 1, 0, false), block / 2.5e9 + 4.5 * kUs},
      {"rail, no PXN, 2:1", cluster(2, platforms::FabricKind::rail_optimized, 2, 0, false), block / (10e9 / 6) + 4.5 * kUs},
  };
  for (const char* engine : {"analytical", "event"})
    for (const Case& c : cases) {
      const CollectiveResult r = run_engine(engine, schedule, c.platform, alloc);
      EXPECT_NEAR(r.time, c.expected, 1e-9 * c.expected) << engine << ", " << c.label;
      // Hand-counted spine bytes: without PXN, rail r's uplink carries the 2 x 3 cross-rail
      // blocks leaving its NICs (and as many arrive); with PXN nothing reaches the spine.
      const bool spine = c.platform.fabric().kind == platforms::FabricKind::rail_optimized && !c.platform.fabric().pxn;
      for (int rail = 0; rail < kGpus; ++rail)
        EXPECT_DOUBLE_EQ(bytes_on(r, c.platform, "rail" + std::to_string(rail) + "-spine"), spine ? 12 * block : 0)
            << engine << ", " << c.label << ", rail " << rail;
    }
}

TEST(FabricContention, SameInputSameOutput) {
  const auto alloc = first_gpus(3 * kGpus);
  const auto schedule = direct_alltoall(3 * kGpus, 3 * kGpus * 1e7);
  for (const char* engine : {"analytical", "event"}) {
    const auto first = run_engine(engine, schedule, cluster(3, platforms::FabricKind::rail_optimized, 2, 2, false), alloc);
    const auto again = run_engine(engine, schedule, cluster(3, platforms::FabricKind::rail_optimized, 2, 2, false), alloc);
    EXPECT_EQ(first.time, again.time) << engine;
    EXPECT_EQ(first.rank_finish, again.rank_finish) << engine;
    ASSERT_EQ(first.link_usage.size(), again.link_usage.size()) << engine;
    for (std::size_t i = 0; i < first.link_usage.size(); ++i) {
      EXPECT_EQ(first.link_usage[i].link, again.link_usage[i].link) << engine;
      EXPECT_EQ(first.link_usage[i].bytes_forward, again.link_usage[i].bytes_forward) << engine;
      EXPECT_EQ(first.link_usage[i].bytes_backward, again.link_usage[i].bytes_backward) << engine;
    }
  }
}

}  // namespace
}  // namespace stepsim::sim::testing
