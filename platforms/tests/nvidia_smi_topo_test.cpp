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

// Without --gpu-model the model comes from `nvidia-smi -L` lines after the matrix, or nowhere:
// the importer never writes one it was not given.
TEST(NvidiaSmiTopo, GpuModelIsReadFromNvidiaSmiListOrRequired) {
  const std::string matrix = fixture("dgx1v_topo.txt");
  const std::string listed = matrix + "\nGPU 0: Tesla V100-SXM2-32GB (UUID: GPU-1)\nGPU 1: Tesla V100-SXM2-32GB (UUID: GPU-2)\n";
  EXPECT_NE(import_nvidia_smi_topo(listed, "t.txt", "").find("gpu: {model: V100-SXM2}"), std::string::npos);
  EXPECT_NE(import_nvidia_smi_topo(listed, "t.txt", "V100-SXM3").find("gpu: {model: V100-SXM3}"), std::string::npos);
  try {
    import_nvidia_smi_topo(matrix, "t.txt", "");
    FAIL() << "a matrix alone does not name its GPU";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--gpu-model"), std::string::npos) << e.what();
  }
  const std::string mixed = listed + "GPU 2: NVIDIA H100 80GB HBM3 (UUID: GPU-3)\n";
  EXPECT_THROW(import_nvidia_smi_topo(mixed, "t.txt", ""), ConfigError);
  const std::string unknown = matrix + "\nGPU 0: NVIDIA GeForce GTX 480 (UUID: GPU-1)\n";
  EXPECT_THROW(import_nvidia_smi_topo(unknown, "t.txt", ""), ConfigError);
}

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

// AutoDL's GeForce pair: PIX (one PCIe switch) but P2P NS. The fixture pastes `topo -m` and
// `topo -p2p p` (the same layout as -p2p r) one after the other, so the second matrix is found.
TEST(NvidiaSmiTopo, P2pMatrixAfterTheTopologyDivertsThroughTheHost) {
  std::string yaml = import_nvidia_smi_topo(fixture("autodl_2080ti_topo.txt"), "autodl.txt", "RTX-2080Ti");
  EXPECT_NE(yaml.find("- [gpu0, gpu1]   # NS: Not supported (autodl.txt line 21)"), std::string::npos) << yaml;
  Platform p = parse_platform(yaml, "imported.yaml");
  ASSERT_EQ(p.node().p2p_disabled.size(), 1u);
  const Route& r = gpu_route(p, 1, 0);
  ASSERT_EQ(r.hops.size(), 4u);   // gpu1 -> pcie_sw0 -> cpu0 -> pcie_sw0 -> gpu0
  EXPECT_EQ(p.vertex(p.link(r.hops[0].link).b).name, "pcie_sw0");
  EXPECT_EQ(p.vertex(p.link(r.hops[1].link).b).name, "cpu0");
  EXPECT_EQ(r.hops[2].link, r.hops[1].link);
  EXPECT_FALSE(r.hops[2].forward);
}

TEST(NvidiaSmiTopo, P2pFilesOfTheSameShape) {
  // Every H100 pair OK: the import is unchanged but says it checked.
  const std::string all_ok = import_nvidia_smi_topo(fixture("hgx_h100_topo.txt"), "hgx.txt", "H100-SXM5-80GB",
                                                    {{fixture("h100_p2p_r.txt"), "h100_p2p_r.txt"}});
  EXPECT_EQ(all_ok.find("p2p:"), std::string::npos) << all_ok;
  EXPECT_NE(all_ok.find("every GPU pair OK"), std::string::npos) << all_ok;
  EXPECT_TRUE(parse_platform(all_ok, "imported.yaml").node().p2p_disabled.empty());
  const std::string unchecked = import_nvidia_smi_topo(fixture("hgx_h100_topo.txt"), "hgx.txt", "H100-SXM5-80GB");
  EXPECT_NE(unchecked.find("Peer-to-peer assumed on"), std::string::npos) << unchecked;

  // Two L4s on one root complex whose chipset refuses P2P (CNS): the -p2p r file of a 2-GPU box.
  const std::string topo = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tPHB\t0-15\nGPU1\tPHB\t X \t0-15\n";
  Platform l4 = parse_platform(
      import_nvidia_smi_topo(topo, "l4.txt", "A100-PCIe-40GB", {{fixture("l4_p2p_r.txt"), "l4_p2p_r.txt"}}),
      "imported.yaml");
  ASSERT_EQ(l4.node().p2p_disabled.size(), 1u);
  EXPECT_EQ(gpu_route(l4, 0, 1).hops.size(), 2u);   // through cpu0 either way (PHB)

  // A P2P matrix of another machine is rejected.
  try {
    import_nvidia_smi_topo(topo, "l4.txt", "A100-PCIe-40GB", {{fixture("h100_p2p_r.txt"), "h100_p2p_r.txt"}});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("h100_p2p_r.txt: the P2P matrix has 8 GPUs, the topology matrix 2"),
              std::string::npos)
        << e.what();
  }
}

TEST(NvidiaSmiTopo, P2pErrors) {
  const std::string topo = "\tGPU0\tGPU1\nGPU0\t X \tPIX\nGPU1\tPIX\t X \n";
  auto error = [&](const std::string& p2p, const std::string& gpu_model = "A100-PCIe-40GB") {
    try {
      import_nvidia_smi_topo(topo, "topo.txt", gpu_model, {{p2p, "p2p.txt"}});
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string bad_cell = error("\tGPU0\tGPU1\n GPU0\tX\tOK\n GPU1\tNOPE\tX\n");
  EXPECT_NE(bad_cell.find("p2p.txt (line 3): unknown P2P status 'NOPE' in row GPU1, column GPU0"), std::string::npos)
      << bad_cell;
  EXPECT_NE(bad_cell.find("X (the GPU itself), OK, CNS, GNS, TNS, NS, DR or U"), std::string::npos) << bad_cell;
  EXPECT_NE(error("\tGPU0\tGPU1\n GPU0\tOK\tOK\n GPU1\tOK\tX\n").find("p2p.txt (line 2): 'OK' where row GPU0 meets"),
            std::string::npos);
  EXPECT_NE(error("\tGPU0\tGPU1\n GPU0\tX\tOK\n").find("p2p.txt (line 1): the P2P matrix has no row for GPU1"),
            std::string::npos);
  EXPECT_NE(error("\tGPU0\tGPU1\n GPU0\tX\n").find("p2p.txt (line 2): row GPU0 has 1 cells"), std::string::npos);
  EXPECT_NE(error("no matrix here\n").find("p2p.txt: no P2P matrix header"), std::string::npos);
  // The newer drivers' "Disabled by regkey" is a status like the others.
  EXPECT_EQ(error("\tGPU0\tGPU1\n GPU0\tX\tDR\n GPU1\tDR\tX\n"), "no error");
  // A P2P matrix where the topology matrix belongs.
  try {
    import_nvidia_smi_topo(fixture("l4_p2p_r.txt"), "swapped.txt", "A100-PCIe-40GB");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("swapped.txt (line 5): P2P status 'CNS'"), std::string::npos) << e.what();
  }
  // NCCL refuses P2P off between NVLink-connected GPUs.
  try {
    import_nvidia_smi_topo("\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV4\t X \n", "nv.txt", "A100-PCIe-40GB",
                           {{"\tGPU0\tGPU1\n GPU0\tX\tNS\n GPU1\tNS\tX\n", "p2p.txt"}});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("p2p.txt (line 2): GPU0 and GPU1 are joined by NV4"), std::string::npos)
        << e.what();
  }
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
