// Import of `nvidia-smi topo -m` matrices: the YAML loads and its routes match the hardware.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "platforms/config_error.hpp"
#include "platforms/loader.hpp"
#include "platforms/nvidia_smi_topo.hpp"

namespace stepsim::platforms {
namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(STEPSIM_PLATFORMS_FIXTURES) + "/" + name);
  EXPECT_TRUE(in) << name;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

const Route& gpu_route(const Platform& p, int a, int b) { return p.route(p.gpu_vertex(a), p.gpu_vertex(b)); }

TEST(NvidiaSmiTopo, Dgx1VoltaMatchesThePreset) {
  std::string yaml = import_nvidia_smi_topo(fixture("dgx1v_topo.txt"), "dgx1v_topo.txt", "V100-SXM2");
  Platform imported = parse_platform(yaml, "imported.yaml");
  Platform preset = load_platform("dgx1-v100");
  ASSERT_EQ(imported.gpu_count(), 8);
  EXPECT_EQ(imported.node().nics.size(), 4u);
  // Same NVLink graph: every GPU pair has the same direct bandwidth or none in both.
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) {
      if (a == b) continue;
      const Route& ri = gpu_route(imported, a, b);
      const Route& rp = gpu_route(preset, a, b);
      EXPECT_EQ(ri.worst == LinkType::nvlink, rp.worst == LinkType::nvlink) << a << "->" << b;
      if (rp.worst == LinkType::nvlink) {
        EXPECT_DOUBLE_EQ(ri.bandwidth, rp.bandwidth) << a << "->" << b;
      }
    }
  // GPU0 -> GPU5: no NVLink, PCIe through both sockets.
  EXPECT_EQ(gpu_route(imported, 0, 5).worst, LinkType::inter_socket);
  // GPUs 0 and 1 share a PCIe switch with mlx5_0 (PIX); GPUs 0-3 sit on socket 0.
  for (int g = 0; g < 4; ++g) EXPECT_EQ(imported.node().vertices[imported.node().gpus[g]].socket, 0);
  for (int g = 4; g < 8; ++g) EXPECT_EQ(imported.node().vertices[imported.node().gpus[g]].socket, 1);
}

TEST(NvidiaSmiTopo, AllPairsNv18BecomesNvswitch) {
  std::string yaml = import_nvidia_smi_topo(fixture("hgx_h100_topo.txt"), "hgx_h100_topo.txt", "H100-SXM5-80GB");
  PlatformOptions two_nodes;
  two_nodes.nodes = 2;
  Platform p = parse_platform(yaml, "imported.yaml", two_nodes);
  ASSERT_EQ(p.gpus_per_node(), 8);
  EXPECT_TRUE(p.has_nvls());
  const Route& r = gpu_route(p, 2, 7);
  ASSERT_EQ(r.hops.size(), 2u);
  EXPECT_DOUBLE_EQ(r.bandwidth, 18 * 25e9);
  // Each GPU leaves the node through the NIC behind its own PCIe switch (PXB).
  const Route& out = gpu_route(p, 3, 8 + 3);
  Link first = p.link(out.hops[0].link), second = p.link(out.hops[1].link);
  EXPECT_EQ(p.vertex(first.b).kind, VertexKind::pcie_switch);
  EXPECT_EQ(p.vertex(second.a).name, "nic3");
}

TEST(NvidiaSmiTopo, Errors) {
  EXPECT_THROW(import_nvidia_smi_topo("hello\n", "x.txt", "H100-SXM5-80GB"), ConfigError);
  try {
    import_nvidia_smi_topo("\tGPU0\tGPU1\nGPU0\tX\tNV9x\nGPU1\tNV1\tX\n", "bad.txt", "V100-SXM2");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.txt (line 2): unknown connection 'NV9x'"), std::string::npos) << e.what();
  }
  try {
    import_nvidia_smi_topo("\tGPU0\tGPU1\nGPU0\tX\n", "short.txt", "V100-SXM2");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("short.txt (line 2)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(import_nvidia_smi_topo(fixture("dgx1v_topo.txt"), "x.txt", "V100-XYZ"), ConfigError);
}

}  // namespace
}  // namespace stepsim::platforms
