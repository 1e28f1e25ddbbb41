// Every shipped preset loads, and the routes of the well-known topologies are what the hardware has.
#include <gtest/gtest.h>

#include "platforms/config_error.hpp"
#include "platforms/loader.hpp"

namespace stepsim::platforms {
namespace {

const Route& gpu_route(const Platform& p, int a, int b) { return p.route(p.gpu_vertex(a), p.gpu_vertex(b)); }

TEST(Presets, AllLoadSingleAndMultiNode) {
  std::vector<PresetInfo> presets = list_presets();
  std::vector<std::string> names;
  for (const PresetInfo& info : presets) names.push_back(info.name);
  for (const char* required : {"dgx1-p100", "dgx1-v100", "dgx2", "dgx-a100", "dgx-h100", "dgx-h200", "dgx-b200",
                               "gb200-nvl72", "pcie-gen3-x2", "pcie-gen4-x4", "pcie-gen4-x8"})
    EXPECT_NE(std::find(names.begin(), names.end(), required), names.end()) << required;
  EXPECT_EQ(std::find(names.begin(), names.end(), "gpus"), names.end()) << "catalogues are not platforms";
  for (const PresetInfo& info : presets) {
    SCOPED_TRACE(info.name);
    EXPECT_FALSE(info.description.empty());
    Platform one = load_platform(info.name);
    EXPECT_EQ(one.name(), info.name);
    EXPECT_EQ(one.nodes(), 1);
    PlatformOptions options;
    options.nodes = 4;
    Platform four = load_platform(info.name, options);
    EXPECT_EQ(four.gpu_count(), 4 * one.gpu_count());
    // Every GPU reaches the next one, across nodes too, over a network link.
    const Route& r = gpu_route(four, one.gpu_count() - 1, one.gpu_count());
    EXPECT_EQ(r.worst, LinkType::network);
    EXPECT_GT(r.bandwidth, 0);
  }
}

TEST(Presets, GpuCounts) {
  EXPECT_EQ(load_platform("dgx2").gpu_count(), 16);
  EXPECT_EQ(load_platform("gb200-nvl72").gpu_count(), 72);
  EXPECT_EQ(load_platform("pcie-gen3-x2").gpu_count(), 2);
  EXPECT_EQ(load_platform("pcie-gen4-x4").gpu_count(), 4);
  EXPECT_EQ(load_platform("pcie-gen4-x8").gpu_count(), 8);
  EXPECT_EQ(load_platform("dgx-h100").gpu().name, "H100-SXM5-80GB");
}

TEST(Presets, Dgx1VoltaCubeMesh) {
  Platform p = load_platform("dgx1-v100");
  const Route& nv2 = gpu_route(p, 0, 3);
  const Route& nv1 = gpu_route(p, 0, 1);
  ASSERT_EQ(nv2.hops.size(), 1u);
  ASSERT_EQ(nv1.hops.size(), 1u);
  EXPECT_DOUBLE_EQ(nv2.bandwidth, 50e9);
  EXPECT_DOUBLE_EQ(nv1.bandwidth, 25e9);
  EXPECT_EQ(p.link(nv2.hops[0].link).lanes, 2);
  // GPU0 and GPU5 share no NVLink; GPUs do not forward, so the route is PCIe across the sockets.
  const Route& far = gpu_route(p, 0, 5);
  EXPECT_EQ(far.worst, LinkType::inter_socket);
  EXPECT_DOUBLE_EQ(far.bandwidth, 6e9);
  bool crosses_qpi = false;
  for (const Hop& hop : far.hops) crosses_qpi |= p.link(hop.link).type == LinkType::inter_socket;
  EXPECT_TRUE(crosses_qpi);
  // Every GPU has 6 NVLink lanes (DGX-1V), the P100 version 4.
  for (const char* name : {"dgx1-v100", "dgx1-p100"}) {
    Platform q = load_platform(name);
    std::vector<int> lanes(8, 0);
    for (const Link& l : q.node().links)
      if (l.type == LinkType::nvlink) {
        lanes[q.node().vertices[l.a].local_gpu] += l.lanes;
        lanes[q.node().vertices[l.b].local_gpu] += l.lanes;
      }
    for (int g = 0; g < 8; ++g) EXPECT_EQ(lanes[g], q.gpu().nvlinks) << name << " gpu" << g;
  }
}

TEST(Presets, NvswitchRoutesThroughTheSwitch) {
  Platform p = load_platform("dgx-h100");
  const Route& r = gpu_route(p, 1, 6);
  ASSERT_EQ(r.hops.size(), 2u);
  EXPECT_EQ(p.link(r.hops[0].link).b, p.nvswitch_vertex(0));
  EXPECT_DOUBLE_EQ(r.bandwidth, 18 * 25e9);
  EXPECT_EQ(r.worst, LinkType::nvlink);
  EXPECT_TRUE(p.has_nvls());
  EXPECT_FALSE(load_platform("dgx-a100").has_nvls());
  EXPECT_DOUBLE_EQ(gpu_route(load_platform("dgx2"), 0, 15).bandwidth, 6 * 25e9);
}

TEST(Presets, MultiNodeLeavesThroughOwnNic) {
  PlatformOptions options;
  options.nodes = 2;
  Platform p = load_platform("dgx-a100", options);
  EXPECT_DOUBLE_EQ(p.fabric().nic_bandwidth, 25e9);  // HDR 200 Gb/s
  // GPU0 and GPU1 share a PCIe switch with two NICs: each gets its own.
  auto exit_nic = [&](int gpu) {
    const Route& r = gpu_route(p, gpu, 8 + gpu);
    for (const Hop& hop : r.hops) {
      Link l = p.link(hop.link);
      int to = hop.forward ? l.b : l.a;
      if (p.vertex(to).kind == VertexKind::nic) return p.vertex(to).name;
    }
    return std::string();
  };
  EXPECT_EQ(exit_nic(0), "nic0");
  EXPECT_EQ(exit_nic(1), "nic1");
  const Route& r = gpu_route(p, 0, 8);
  EXPECT_EQ(r.worst, LinkType::network);
  EXPECT_DOUBLE_EQ(r.bandwidth, 25e9);
}

TEST(Presets, NoP2pPcieBouncesThroughHost) {
  Platform p = load_platform("pcie-gen3-x2");
  const Route& r = gpu_route(p, 0, 1);
  // GPU -> its port -> host -> the peer's port -> GPU: the SHM buffer lives in host memory.
  ASSERT_EQ(r.hops.size(), 4u);
  const Link wire = p.link(r.hops[0].link);
  const Link staging = p.link(r.hops[1].link);
  EXPECT_EQ(p.vertex(staging.b).kind, VertexKind::cpu);
  // The x16 wire is full duplex; each GPU's staging is one resource for its sends and receives
  // (the data file's 11.09 GB/s one way, 8.0 GB/s in total both ways), and it bounds the route.
  EXPECT_FALSE(wire.half_duplex);
  EXPECT_DOUBLE_EQ(wire.bandwidth(), 15.75e9);
  EXPECT_TRUE(staging.half_duplex);
  EXPECT_DOUBLE_EQ(staging.bandwidth(), 11.09e9);
  EXPECT_DOUBLE_EQ(staging.two_way_bandwidth(), 8.0e9);
  EXPECT_TRUE(p.link(r.hops[2].link).half_duplex);
  EXPECT_DOUBLE_EQ(r.bandwidth, 11.09e9);
}

TEST(Presets, P2pPcieTurnsInsideTheSwitch) {
  Platform p = load_platform("pcie-gen4-x4");
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) {
      if (a == b) continue;
      // GPU -> pcie_sw0 -> GPU on the Gen4 x16 wires; the uplink to the CPU carries nothing.
      const Route& r = gpu_route(p, a, b);
      ASSERT_EQ(r.hops.size(), 2u);
      EXPECT_EQ(p.vertex(p.link(r.hops[0].link).b).name, "pcie_sw0");
      EXPECT_DOUBLE_EQ(r.bandwidth, 31.5e9);
      EXPECT_NEAR(r.latency, 1.0e-6, 1e-15);
    }
}

TEST(Presets, P2pOffDivertsThroughTheHost) {
  // The same box with P2P off (ACS, GeForce cards): every pair goes up the switch's uplink to
  // cpu0 and back down it, so the four GPUs share its 31.5 GB/s each way.
  PlatformOptions options;
  options.overrides = {"node.p2p.disabled=all"};
  Platform p = load_platform("pcie-gen4-x4", options);
  const Route& r = gpu_route(p, 0, 1);
  ASSERT_EQ(r.hops.size(), 4u);
  const Link uplink = p.link(r.hops[1].link);
  EXPECT_EQ(p.vertex(uplink.b).kind, VertexKind::cpu);
  EXPECT_EQ(r.hops[2].link, r.hops[1].link);
  EXPECT_NE(r.hops[2].forward, r.hops[1].forward);
  EXPECT_NEAR(r.latency, 2.0e-6, 1e-15);
  EXPECT_EQ(p.node().p2p_disabled.size(), 6u);
}

TEST(Presets, OverridesSwapGpuAndNic) {
  PlatformOptions options;
  options.overrides = {"gpu.model=H200-SXM5-141GB", "nodes=3", "fabric.nic=HDR", "fabric.kind=rail-optimized"};
  Platform p = load_platform("dgx-h100", options);
  EXPECT_EQ(p.gpu().name, "H200-SXM5-141GB");
  EXPECT_EQ(p.nodes(), 3);
  EXPECT_EQ(p.fabric().kind, FabricKind::rail_optimized);
  EXPECT_DOUBLE_EQ(p.fabric().nic_bandwidth, 25e9);
  // NVLink bandwidth follows the GPU model: V100 on the DGX-1 mesh vs P100 figures.
  PlatformOptions pascal;
  pascal.overrides = {"gpu.model=P100-SXM2"};
  EXPECT_DOUBLE_EQ(gpu_route(load_platform("dgx1-v100", pascal), 0, 3).bandwidth, 2 * 20e9);
  PlatformOptions figure;
  figure.overrides = {"gpu.memory=16GB"};
  EXPECT_DOUBLE_EQ(load_platform("dgx1-v100", figure).gpu().memory, 16e9);
}

TEST(Presets, DefaultNicFollowsGpuGeneration) {
  PlatformOptions options;
  options.nodes = 2;
  options.overrides = {"gpu.model=V100-SXM2"};
  // pcie-gen4-x8 names no NIC: the default for the GPU's generation applies (EDR for Volta).
  EXPECT_DOUBLE_EQ(load_platform("pcie-gen4-x8", options).fabric().nic_bandwidth, 12.5e9);
  options.overrides = {"gpu.model=H100-SXM5-80GB"};
  EXPECT_DOUBLE_EQ(load_platform("pcie-gen4-x8", options).fabric().nic_bandwidth, 50e9);
}

TEST(Presets, NetPluginProtocolsFollowTheNic) {
  // EFAv1's plugin leaves NCCL only Simple; InfiniBand NICs leave every protocol.
  EXPECT_EQ(load_platform("aws-p4de").fabric().nccl_protocols, std::vector<std::string>{"Simple"});
  PlatformOptions options;
  options.nodes = 2;
  EXPECT_TRUE(load_platform("dgx-h100", options).fabric().nccl_protocols.empty());
  options.overrides = {"fabric.nic=EFA-100"};
  EXPECT_EQ(load_platform("dgx-h100", options).fabric().nccl_protocols, std::vector<std::string>{"Simple"});
  // A list value on the command line is a YAML flow list.
  options.overrides = {"fabric.nccl_protocols=[LL, Simple]"};
  EXPECT_EQ(load_platform("dgx-h100", options).fabric().nccl_protocols, (std::vector<std::string>{"LL", "Simple"}));
}

TEST(Presets, UnknownNameListsPresets) {
  try {
    load_platform("dgx-9000");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("dgx-h100"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stepsim::platforms
