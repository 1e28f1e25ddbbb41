// Routing and indexing of hand-built platforms (no YAML involved).
#include <gtest/gtest.h>

#include <thread>

#include "platforms/config_error.hpp"
#include "platforms/platform.hpp"
#include "platforms/tests/node_builder.hpp"

namespace stepsim::platforms {
namespace {

using testing::add_link;
using testing::add_vertex;

// gpu0 = gpu1 (50 GB/s NVLink); gpu0 - gpu2 (25 GB/s NVLink); gpu3 has no NVLink.
// Every GPU hangs off one PCIe switch (12 GB/s) that also holds the node's NIC.
NodeTemplate small_node(int nics = 1) {
  NodeTemplate n;
  for (int i = 0; i < 4; ++i) add_vertex(n, "gpu" + std::to_string(i), VertexKind::gpu);
  int sw = add_vertex(n, "pcie_sw", VertexKind::pcie_switch);
  for (int r = 0; r < nics; ++r) {
    int nic = add_vertex(n, "nic" + std::to_string(r), VertexKind::nic);
    add_link(n, sw, nic, LinkType::pcie, 12, 0.5);
  }
  add_link(n, 0, 1, LinkType::nvlink, 50, 0.7);
  add_link(n, 0, 2, LinkType::nvlink, 25, 0.7);
  for (int g = 0; g < 4; ++g) add_link(n, g, sw, LinkType::pcie, 12, 0.5);
  return n;
}

Fabric fat_tree() {
  Fabric f;
  f.kind = FabricKind::fat_tree;
  f.nic_bandwidth = 12.5e9;
  f.nic_latency = 2e-6;
  f.switch_latency = 0.3e-6;
  return f;
}

// Checks that the hops form a connected path from `from` to `to` and the summary matches.
void expect_consistent(const Platform& p, int from, int to, const Route& r) {
  int at = from;
  double lat = 0, bw = std::numeric_limits<double>::infinity();
  for (const Hop& hop : r.hops) {
    Link l = p.link(hop.link);
    ASSERT_EQ(hop.forward ? l.a : l.b, at) << "hop does not start where the last ended";
    at = hop.forward ? l.b : l.a;
    lat += l.latency;
    bw = std::min(bw, l.bandwidth());
  }
  EXPECT_EQ(at, to);
  EXPECT_DOUBLE_EQ(r.latency, lat);
  EXPECT_DOUBLE_EQ(r.bandwidth, bw);
}

TEST(PlatformRouting, DirectNvlinkWins) {
  Platform p("t", {}, small_node(), 1, {});
  const Route& r = p.route(p.gpu_vertex(0), p.gpu_vertex(1));
  ASSERT_EQ(r.hops.size(), 1u);
  EXPECT_DOUBLE_EQ(r.bandwidth, 50e9);
  EXPECT_EQ(r.worst, LinkType::nvlink);
}

TEST(PlatformRouting, GpusDoNotForward) {
  // gpu1 -> gpu2 via gpu0 would be 25 GB/s of NVLink, but GPUs do not forward: PCIe it is.
  Platform p("t", {}, small_node(), 1, {});
  const Route& r = p.route(p.gpu_vertex(1), p.gpu_vertex(2));
  EXPECT_DOUBLE_EQ(r.bandwidth, 12e9);
  EXPECT_EQ(r.worst, LinkType::pcie);
  ASSERT_EQ(r.hops.size(), 2u);
  expect_consistent(p, p.gpu_vertex(1), p.gpu_vertex(2), r);
}

TEST(PlatformRouting, WidestBeatsShortest) {
  // Two switch paths from gpu0 to gpu1: a narrow one-hop-each (10 GB/s, 0.1us) and a wide
  // two-switch path (40 GB/s, 3us in total). The wide one must be taken.
  NodeTemplate n;
  int g0 = add_vertex(n, "gpu0", VertexKind::gpu), g1 = add_vertex(n, "gpu1", VertexKind::gpu);
  int narrow = add_vertex(n, "narrow", VertexKind::pcie_switch);
  int w1 = add_vertex(n, "wide1", VertexKind::nvswitch), w2 = add_vertex(n, "wide2", VertexKind::nvswitch);
  add_link(n, g0, narrow, LinkType::pcie, 10, 0.05);
  add_link(n, narrow, g1, LinkType::pcie, 10, 0.05);
  add_link(n, g0, w1, LinkType::nvlink, 40, 1);
  add_link(n, w1, w2, LinkType::nvlink, 40, 1);
  add_link(n, w2, g1, LinkType::nvlink, 40, 1);
  Platform p("t", {}, n, 1, {});
  const Route& r = p.route(g0, g1);
  EXPECT_DOUBLE_EQ(r.bandwidth, 40e9);
  EXPECT_EQ(r.hops.size(), 3u);
  EXPECT_NEAR(r.latency, 3e-6, 1e-15);
}

TEST(PlatformRouting, WidestThenLowestLatencyIsNotGreedy) {
  // A label-greedy Dijkstra would keep the wide-but-slow prefix into `mid` and miss the fast
  // narrow-enough prefix, since the final bottleneck (5 GB/s) hides the difference in width.
  NodeTemplate n;
  int g0 = add_vertex(n, "gpu0", VertexKind::gpu), g1 = add_vertex(n, "gpu1", VertexKind::gpu);
  int a = add_vertex(n, "a", VertexKind::pcie_switch), b = add_vertex(n, "b", VertexKind::pcie_switch);
  int mid = add_vertex(n, "mid", VertexKind::pcie_switch);
  add_link(n, g0, a, LinkType::pcie, 50, 5);   // wide, slow
  add_link(n, a, mid, LinkType::pcie, 50, 5);
  add_link(n, g0, b, LinkType::pcie, 8, 0.1);  // narrower, fast
  add_link(n, b, mid, LinkType::pcie, 8, 0.1);
  add_link(n, mid, g1, LinkType::pcie, 5, 1);
  Platform p("t", {}, n, 1, {});
  const Route& r = p.route(g0, g1);
  EXPECT_DOUBLE_EQ(r.bandwidth, 5e9);
  EXPECT_NEAR(r.latency, 1.2e-6, 1e-15);
}

TEST(PlatformRouting, DisconnectedGpuIsConfigError) {
  NodeTemplate n;
  add_vertex(n, "gpu0", VertexKind::gpu);
  add_vertex(n, "gpu1", VertexKind::gpu);
  try {
    Platform p("lonely", {}, n, 1, {});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no route from gpu0 to gpu1"), std::string::npos) << e.what();
  }
}

// gpu0 and gpu1 under one PCIe switch (20 GB/s ports, 0.5 us), its 16 GB/s uplink to cpu0;
// cpu1 on the other socket, 10 GB/s and 1 us away from cpu0.
NodeTemplate switch_node() {
  NodeTemplate n;
  int g0 = add_vertex(n, "gpu0", VertexKind::gpu), g1 = add_vertex(n, "gpu1", VertexKind::gpu);
  int sw = add_vertex(n, "pcie_sw", VertexKind::pcie_switch);
  int cpu0 = add_vertex(n, "cpu0", VertexKind::cpu), cpu1 = add_vertex(n, "cpu1", VertexKind::cpu);
  add_link(n, g0, sw, LinkType::pcie, 20, 0.5);
  add_link(n, g1, sw, LinkType::pcie, 20, 0.5);
  add_link(n, sw, cpu0, LinkType::pcie, 16, 0.5);
  add_link(n, cpu0, cpu1, LinkType::inter_socket, 10, 1);
  return n;
}

TEST(PlatformRouting, PeerToPeerTurnsInsideTheSwitch) {
  Platform p("t", {}, switch_node(), 1, {});
  const Route& r = p.route(p.gpu_vertex(0), p.gpu_vertex(1));
  ASSERT_EQ(r.hops.size(), 2u);
  EXPECT_EQ(p.vertex(p.link(r.hops[0].link).b).kind, VertexKind::pcie_switch);
  EXPECT_DOUBLE_EQ(r.bandwidth, 20e9);   // the uplink's 16 GB/s is not on the way
  EXPECT_EQ(r.worst, LinkType::pcie);
}

TEST(PlatformRouting, WithoutPeerToPeerTrafficGoesThroughTheNearestCpu) {
  NodeTemplate n = switch_node();
  n.p2p_disabled = {{0, 1}};
  Platform p("t", {}, n, 1, {});
  for (const auto& [from, to] : {std::pair{0, 1}, std::pair{1, 0}}) {
    const Route& r = p.route(p.gpu_vertex(from), p.gpu_vertex(to));
    expect_consistent(p, p.gpu_vertex(from), p.gpu_vertex(to), r);
    // GPU -> switch -> cpu0 -> switch -> GPU: up the uplink and back down it (cpu1 is farther).
    ASSERT_EQ(r.hops.size(), 4u);
    EXPECT_EQ(r.hops[1].link, r.hops[2].link);
    EXPECT_TRUE(r.hops[1].forward);
    EXPECT_FALSE(r.hops[2].forward);
    EXPECT_EQ(p.vertex(p.link(r.hops[1].link).b).name, "cpu0");
    EXPECT_DOUBLE_EQ(r.bandwidth, 16e9);
    EXPECT_NEAR(r.latency, 2e-6, 1e-15);
    EXPECT_EQ(r.worst, LinkType::pcie);
  }
  EXPECT_TRUE(p2p_disabled(p.node(), 1, 0));
  EXPECT_FALSE(p2p_disabled(switch_node(), 0, 1));
}

TEST(PlatformRouting, WithoutPeerToPeerNorCpuIsConfigError) {
  NodeTemplate n = small_node();
  n.p2p_disabled = {{2, 3}};
  try {
    Platform p("no-host", {}, n, 1, {});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no route from gpu2 to gpu3 through a CPU"), std::string::npos) << e.what();
  }
}

TEST(PlatformRouting, MultiNodeNeedsFabric) {
  EXPECT_THROW(Platform("t", {}, small_node(), 2, {}), ConfigError);
}

TEST(PlatformIndexing, GlobalIdsFollowTheContract) {
  Platform p("t", {}, small_node(), 3, fat_tree());
  const int V = 6, L = 7;  // 4 GPUs + switch + NIC; 1 + 2 NVLink + 4 PCIe links
  EXPECT_EQ(p.vertex_count(), 3 * V + 1);
  EXPECT_EQ(p.link_count(), 3 * L + 3);
  EXPECT_EQ(p.gpu_count(), 12);
  EXPECT_EQ(p.gpu_vertex(5), V + 1);
  EXPECT_EQ(p.node_of_vertex(2 * V + 3), 2);
  EXPECT_EQ(p.node_of_vertex(3 * V), -1);
  EXPECT_EQ(p.vertex(3 * V).kind, VertexKind::fabric_switch);
  Link l = p.link(L + 1);  // node 1's gpu0-gpu1 link
  EXPECT_EQ(l.a, V + 0);
  EXPECT_EQ(l.b, V + 1);
}

TEST(PlatformRouting, InterNodeGoesThroughNicsAndFabric) {
  Platform p("t", {}, small_node(), 2, fat_tree());
  int from = p.gpu_vertex(1), to = p.gpu_vertex(4 + 2);
  const Route& r = p.route(from, to);
  expect_consistent(p, from, to, r);
  EXPECT_EQ(r.worst, LinkType::network);
  EXPECT_DOUBLE_EQ(r.bandwidth, 12e9);  // PCIe to the NIC is the bottleneck
  // gpu1 -> pcie_sw -> nic0 -> fabric switch -> nic0 -> pcie_sw -> gpu2
  EXPECT_EQ(r.hops.size(), 6u);
  EXPECT_NEAR(r.latency, 4 * 0.5e-6 + 2e-6 + 0.3e-6, 1e-15);
}

TEST(PlatformRouting, RailOptimizedCrossesSpineOnlyBetweenRails) {
  Fabric f = fat_tree();
  f.kind = FabricKind::rail_optimized;
  // Two NICs on the switch: every GPU's nearest NIC is nic0 (tie broken by NIC index), so
  // build a node where gpu0/gpu1 sit near nic0 and gpu2/gpu3 near nic1. No NVLink: PXN has no
  // relay, so cross-rail traffic takes the spine.
  NodeTemplate n;
  for (int i = 0; i < 4; ++i) add_vertex(n, "gpu" + std::to_string(i), VertexKind::gpu);
  int sw0 = add_vertex(n, "sw0", VertexKind::pcie_switch), sw1 = add_vertex(n, "sw1", VertexKind::pcie_switch);
  int cpu = add_vertex(n, "cpu", VertexKind::cpu);
  int nic0 = add_vertex(n, "nic0", VertexKind::nic), nic1 = add_vertex(n, "nic1", VertexKind::nic);
  add_link(n, 0, sw0, LinkType::pcie, 12, 0.5);
  add_link(n, 1, sw0, LinkType::pcie, 12, 0.5);
  add_link(n, 2, sw1, LinkType::pcie, 12, 0.5);
  add_link(n, 3, sw1, LinkType::pcie, 12, 0.5);
  add_link(n, sw0, nic0, LinkType::pcie, 12, 0.5);
  add_link(n, sw1, nic1, LinkType::pcie, 12, 0.5);
  add_link(n, sw0, cpu, LinkType::pcie, 12, 0.5);
  add_link(n, sw1, cpu, LinkType::pcie, 12, 0.5);
  Platform p("t", {}, n, 2, f);
  const Route& same_rail = p.route(p.gpu_vertex(0), p.gpu_vertex(4 + 1));
  const Route& cross_rail = p.route(p.gpu_vertex(0), p.gpu_vertex(4 + 2));
  expect_consistent(p, p.gpu_vertex(0), p.gpu_vertex(5), same_rail);
  expect_consistent(p, p.gpu_vertex(0), p.gpu_vertex(6), cross_rail);
  EXPECT_EQ(same_rail.hops.size(), 6u);   // gpu-sw-nic-rail-nic-sw-gpu
  EXPECT_EQ(cross_rail.hops.size(), 8u);  // ... nic-rail-spine-rail-nic ...
  EXPECT_GT(cross_rail.latency, same_rail.latency);
}

TEST(PlatformRouting, RouteFromNvswitchAndToSelf) {
  Platform p("t", {}, small_node(), 1, {});
  const Route& self = p.route(p.gpu_vertex(2), p.gpu_vertex(2));
  EXPECT_TRUE(self.hops.empty());
  EXPECT_EQ(self.latency, 0);
  EXPECT_EQ(p.nvswitch_vertex(0), -1);
  EXPECT_FALSE(p.has_nvls());
}

TEST(PlatformRouting, SixteenThousandGpuRingIsCheapAndConsistent) {
  NodeTemplate n;
  int sw = add_vertex(n, "nvswitch", VertexKind::nvswitch);
  n.vertices[sw].reduces_in_network = true;
  for (int i = 0; i < 8; ++i) {
    int g = add_vertex(n, "gpu" + std::to_string(i), VertexKind::gpu);
    int nic = add_vertex(n, "nic" + std::to_string(i), VertexKind::nic);
    add_link(n, g, sw, LinkType::nvlink, 450, 0.5);
    add_link(n, g, nic, LinkType::pcie, 50, 0.5);
  }
  Fabric f = fat_tree();
  f.kind = FabricKind::rail_optimized;
  f.nic_bandwidth = 50e9;
  Platform p("big", {}, n, 2048, f);
  ASSERT_EQ(p.gpu_count(), 16384);
  EXPECT_TRUE(p.has_nvls());
  EXPECT_EQ(p.nvswitch_vertex(3), 3 * 17);
  for (int g = 0; g < p.gpu_count(); ++g) {
    int next = (g + 1) % p.gpu_count();
    const Route& r = p.route(p.gpu_vertex(g), p.gpu_vertex(next));
    bool same_node = p.node_of_gpu(g) == p.node_of_gpu(next);
    ASSERT_EQ(r.worst, same_node ? LinkType::nvlink : LinkType::network) << g;
    if (same_node) {
      ASSERT_EQ(r.hops.size(), 2u);  // gpu -> nvswitch -> gpu
    }
  }
  // gpu7 of node 0 (rail 7) to gpu0 of node 1 (rail 0): with PXN it relays over the NVSwitch to
  // node 0's gpu0 and stays on rail 0 (gpu-nvswitch-gpu-nic-rail-nic-gpu), never the spine.
  const Route& r = p.route(p.gpu_vertex(7), p.gpu_vertex(8));
  expect_consistent(p, p.gpu_vertex(7), p.gpu_vertex(8), r);
  EXPECT_EQ(r.hops.size(), 6u);
  for (const Hop& hop : r.hops) EXPECT_NE(p.vertex(p.link(hop.link).b).name, "spine");
}

TEST(PlatformRouting, ConcurrentQueriesAgree) {
  // route() is const and caches: concurrent callers must all see the same, complete routes.
  Platform p("t", {}, small_node(), 64, fat_tree());
  const int n = p.gpu_count();
  std::vector<std::vector<std::size_t>> hops(4, std::vector<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int g = 0; g < n; ++g) hops[t][g] = p.route(p.gpu_vertex(g), p.gpu_vertex((g + 5) % n)).hops.size();
    });
  for (std::thread& th : threads) th.join();
  for (int t = 1; t < 4; ++t) EXPECT_EQ(hops[t], hops[0]);
  EXPECT_EQ(hops[0][0], 6u);  // GPU 0 -> GPU 5 (node 1): gpu-sw-nic-fabric-nic-sw-gpu
}

}  // namespace
}  // namespace stepsim::platforms
