// The fabric between nodes: leaf switches, the spine and its tapered uplinks, and NCCL's PXN
// relay on rail-optimized fabrics, on hand-built nodes whose routes are counted by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "platforms/config_error.hpp"
#include "platforms/platform.hpp"
#include "platforms/tests/node_builder.hpp"

namespace stepsim::platforms {
namespace {

constexpr double kUs = 1e-6;

using testing::add_link;
using testing::add_vertex;
using testing::rail_node;

constexpr int kV = 9, kL = 8, kR = 4;

Fabric fabric(FabricKind kind, double oversubscription = 1, int nodes_per_leaf = 0, bool pxn = true) {
  return testing::rail_fabric(kind, oversubscription, nodes_per_leaf, pxn);
}

Platform cluster(int nodes, const Fabric& f) { return Platform("fabric-test", {}, rail_node(), nodes, f); }

// Vertex names along a route, starting at `from`.
std::vector<std::string> path(const Platform& p, int from, const Route& r) {
  std::vector<std::string> names{p.vertex(from).name};
  int at = from;
  for (const Hop& hop : r.hops) {
    const Link l = p.link(hop.link);
    EXPECT_EQ(hop.forward ? l.a : l.b, at) << "hop does not start where the last ended";
    at = hop.forward ? l.b : l.a;
    names.push_back(p.vertex(at).name);
  }
  return names;
}

using Names = std::vector<std::string>;

TEST(Fabric, OneLeafIsTheSingleSwitchOfBefore) {
  // Defaults (every node under one leaf, no taper): a fat tree is one switch and no spine; a
  // rail-optimized fabric one switch per rail and a spine whose uplinks carry every NIC of a rail.
  const Platform fat = cluster(3, fabric(FabricKind::fat_tree));
  EXPECT_EQ(fat.vertex_count(), 3 * kV + 1);
  EXPECT_EQ(fat.link_count(), 3 * kL + 3 * kR);
  EXPECT_EQ(fat.vertex(3 * kV).name, "fabric_switch");
  const Platform rail = cluster(3, fabric(FabricKind::rail_optimized));
  EXPECT_EQ(rail.vertex_count(), 3 * kV + kR + 1);
  EXPECT_EQ(rail.link_count(), 3 * kL + 3 * kR + kR);
  EXPECT_EQ(rail.vertex(3 * kV + 2).name, "rail2");
  EXPECT_EQ(rail.vertex(rail.vertex_count() - 1).name, "spine");
  const Link uplink = rail.link(3 * kL + 3 * kR + 2);
  EXPECT_EQ(uplink.name, "rail2-spine");
  EXPECT_DOUBLE_EQ(uplink.bandwidth(), 3 * 10e9);
}

TEST(Fabric, TaperedFatTreeHasLeavesAndASpine) {
  // 5 nodes, 2 per leaf: leaves 0-2 (the last one half full) and the spine, the last vertex.
  // Each uplink carries a full leaf's down ports over the taper: 2 nodes x 4 NICs x 10 GB/s / 2.
  const Platform p = cluster(5, fabric(FabricKind::fat_tree, 2, 2));
  EXPECT_EQ(p.vertex_count(), 5 * kV + 3 + 1);
  EXPECT_EQ(p.link_count(), 5 * kL + 5 * kR + 3);
  EXPECT_EQ(p.vertex(5 * kV + 1).name, "leaf1");
  EXPECT_EQ(p.vertex(p.vertex_count() - 1).name, "spine");
  for (int leaf = 0; leaf < 3; ++leaf) {
    const Link uplink = p.link(5 * kL + 5 * kR + leaf);
    EXPECT_EQ(uplink.name, "leaf" + std::to_string(leaf) + "-spine");
    EXPECT_DOUBLE_EQ(uplink.bandwidth(), 40e9);
    EXPECT_DOUBLE_EQ(uplink.latency, 0.5 * kUs);
  }
  // NIC 3 of node 4 joins leaf 2.
  EXPECT_EQ(p.link(5 * kL + 4 * kR + 3).b, 5 * kV + 2);
}

TEST(Fabric, SameLeafStaysInTheLeafOtherLeavesCrossTheSpine) {
  const Platform p = cluster(4, fabric(FabricKind::fat_tree, 2, 2));
  const int from = p.gpu_vertex(1);
  const Route& near = p.route(from, p.gpu_vertex(4 + 2));       // node 1: leaf 0 too
  EXPECT_EQ(path(p, from, near), (Names{"gpu1", "nic1", "leaf0", "nic2", "gpu2"}));
  EXPECT_NEAR(near.latency, 0.5 * kUs + 1.25 * kUs + 1.25 * kUs + 0.5 * kUs, 1e-15);
  const Route& far = p.route(from, p.gpu_vertex(2 * 4 + 2));    // node 2: leaf 1
  EXPECT_EQ(path(p, from, far), (Names{"gpu1", "nic1", "leaf0", "spine", "leaf1", "nic2", "gpu2"}));
  EXPECT_NEAR(far.latency, near.latency + 2 * 0.5 * kUs, 1e-15);  // two more switches
  EXPECT_DOUBLE_EQ(far.bandwidth, 10e9);                          // the 40 GB/s uplinks are wider
  EXPECT_EQ(far.worst, LinkType::network);
}

TEST(Fabric, RailLeavesPerGroupOfNodes) {
  // 4 nodes, 2 per leaf: leaves (group, rail) = 2 x 4, then the spine; uplinks 2 NICs x 10 / 4.
  const Platform p = cluster(4, fabric(FabricKind::rail_optimized, 4, 2));
  EXPECT_EQ(p.vertex_count(), 4 * kV + 2 * kR + 1);
  EXPECT_EQ(p.vertex(4 * kV + kR + 2).name, "leaf1.rail2");
  const Link uplink = p.link(4 * kL + 4 * kR + kR + 2);
  EXPECT_EQ(uplink.name, "leaf1.rail2-spine");
  EXPECT_DOUBLE_EQ(uplink.bandwidth(), 5e9);
  const int from = p.gpu_vertex(2);
  EXPECT_EQ(path(p, from, p.route(from, p.gpu_vertex(4 + 2))), (Names{"gpu2", "nic2", "leaf0.rail2", "nic2", "gpu2"}));
  const Route& far = p.route(from, p.gpu_vertex(3 * 4 + 2));
  EXPECT_EQ(path(p, from, far), (Names{"gpu2", "nic2", "leaf0.rail2", "spine", "leaf1.rail2", "nic2", "gpu2"}));
  EXPECT_DOUBLE_EQ(far.bandwidth, 5e9);  // the tapered uplink is the bottleneck
}

TEST(Fabric, PxnKeepsCrossRailTrafficOnTheDestinationsRail) {
  // gpu0 of node 0 to gpu1 of node 1: NIC 0 and NIC 1 are on different rails.
  const int to = 4 + 1;
  // Fat tree: straight out of gpu0's own NIC; both NICs are on the one switch.
  const Platform fat = cluster(2, fabric(FabricKind::fat_tree));
  EXPECT_EQ(path(fat, fat.gpu_vertex(0), fat.route(fat.gpu_vertex(0), fat.gpu_vertex(to))),
            (Names{"gpu0", "nic0", "fabric_switch", "nic1", "gpu1"}));
  // Rail-optimized without PXN: rail 0 up to the spine and down rail 1.
  const Platform spine = cluster(2, fabric(FabricKind::rail_optimized, 1, 0, false));
  const Route& crossing = spine.route(spine.gpu_vertex(0), spine.gpu_vertex(to));
  EXPECT_EQ(path(spine, spine.gpu_vertex(0), crossing), (Names{"gpu0", "nic0", "rail0", "spine", "rail1", "nic1", "gpu1"}));
  EXPECT_NEAR(crossing.latency, (0.5 + 1.25 + 0.5 + 0.5 + 1.25 + 0.5) * kUs, 1e-15);
  // With PXN (the default): over NVLink to node 0's gpu1, out of its NIC 1, along rail 1.
  const Platform pxn = cluster(2, fabric(FabricKind::rail_optimized));
  const Route& relayed = pxn.route(pxn.gpu_vertex(0), pxn.gpu_vertex(to));
  EXPECT_EQ(path(pxn, pxn.gpu_vertex(0), relayed), (Names{"gpu0", "nvswitch", "gpu1", "nic1", "rail1", "nic1", "gpu1"}));
  EXPECT_NEAR(relayed.latency, (0.3 + 0.3 + 0.5 + 1.25 + 1.25 + 0.5) * kUs, 1e-15);
  EXPECT_DOUBLE_EQ(relayed.bandwidth, 10e9);
  EXPECT_EQ(relayed.worst, LinkType::network);
  // Same rail: no relay.
  EXPECT_EQ(path(pxn, pxn.gpu_vertex(2), pxn.route(pxn.gpu_vertex(2), pxn.gpu_vertex(4 + 2))),
            (Names{"gpu2", "nic2", "rail2", "nic2", "gpu2"}));
  // The reverse direction relays on node 1 (the sender's side).
  EXPECT_EQ(path(pxn, pxn.gpu_vertex(to), pxn.route(pxn.gpu_vertex(to), pxn.gpu_vertex(0))),
            (Names{"gpu1", "nvswitch", "gpu0", "nic0", "rail0", "nic0", "gpu0"}));
}

TEST(Fabric, PxnNeedsARelayOnNvlinkThatReachesItsNicWithoutTheCpu) {
  // gpu0 and gpu1 share an NVLink; nic0 sits on gpu0's PCIe switch, nic1 on the CPU, gpu1's
  // switch under the CPU too: gpu1 reaches nic1 through the CPU (NCCL's PHB), so NCCL does not
  // relay through it (paths[NET] must be <= PATH_PXB) and gpu0 -> gpu1 crosses the spine.
  NodeTemplate n;
  add_vertex(n, "gpu0", VertexKind::gpu);
  add_vertex(n, "gpu1", VertexKind::gpu);
  const int sw0 = add_vertex(n, "sw0", VertexKind::pcie_switch), sw1 = add_vertex(n, "sw1", VertexKind::pcie_switch);
  const int cpu = add_vertex(n, "cpu", VertexKind::cpu);
  const int nic0 = add_vertex(n, "nic0", VertexKind::nic), nic1 = add_vertex(n, "nic1", VertexKind::nic);
  add_link(n, 0, 1, LinkType::nvlink, 50, 0.6);
  add_link(n, 0, sw0, LinkType::pcie, 12, 0.5);
  add_link(n, 1, sw1, LinkType::pcie, 12, 0.5);
  add_link(n, sw0, nic0, LinkType::pcie, 12, 0.5);
  add_link(n, sw0, cpu, LinkType::pcie, 12, 0.5);
  add_link(n, sw1, cpu, LinkType::pcie, 12, 0.5);
  add_link(n, cpu, nic1, LinkType::pcie, 12, 0.5);
  const Platform p("t", {}, n, 2, fabric(FabricKind::rail_optimized));
  const Route& r = p.route(p.gpu_vertex(0), p.gpu_vertex(2 + 1));
  EXPECT_EQ(path(p, p.gpu_vertex(0), r), (Names{"gpu0", "sw0", "nic0", "rail0", "spine", "rail1", "nic1", "cpu", "sw1", "gpu1"}));
  // The other way the relay (gpu0) is on nic0's switch: PXN applies.
  const Route& back = p.route(p.gpu_vertex(1), p.gpu_vertex(2 + 0));
  EXPECT_EQ(path(p, p.gpu_vertex(1), back), (Names{"gpu1", "gpu0", "sw0", "nic0", "rail0", "nic0", "sw0", "gpu0"}));
}

TEST(Fabric, SameInputSameRoutes) {
  // Two platforms built alike, queried in opposite orders, give identical routes.
  const Fabric f = fabric(FabricKind::rail_optimized, 2, 2);
  const Platform a = cluster(5, f), b = cluster(5, f);
  const int gpus = a.gpu_count();
  for (int s = gpus - 1; s >= 0; --s)
    for (int d = gpus - 1; d >= 0; --d) b.route(b.gpu_vertex(s), b.gpu_vertex(d));
  for (int s = 0; s < gpus; ++s)
    for (int d = 0; d < gpus; ++d) {
      const Route& x = a.route(a.gpu_vertex(s), a.gpu_vertex(d));
      const Route& y = b.route(b.gpu_vertex(s), b.gpu_vertex(d));
      ASSERT_EQ(x.hops.size(), y.hops.size()) << s << " -> " << d;
      for (std::size_t h = 0; h < x.hops.size(); ++h) {
        EXPECT_EQ(x.hops[h].link, y.hops[h].link);
        EXPECT_EQ(x.hops[h].forward, y.hops[h].forward);
      }
      EXPECT_EQ(x.latency, y.latency);
      EXPECT_EQ(x.bandwidth, y.bandwidth);
    }
}

TEST(Fabric, BadTiersAreConfigErrors) {
  for (double ratio : {0.0, 0.5, -1.0}) EXPECT_THROW(cluster(2, fabric(FabricKind::fat_tree, ratio, 1)), ConfigError) << ratio;
  EXPECT_THROW(cluster(2, fabric(FabricKind::rail_optimized, 1, -1)), ConfigError);
}

}  // namespace
}  // namespace stepsim::platforms
