/// @file NCCL's graph on PCIe boxes: the host-diverted PHB path without P2P (pcie-gen3-x2, and
/// pcie-gen4-x4 with node.p2p.disabled), the PIX path through a switch with it (pcie-gen4-x4).
#include <gtest/gtest.h>

#include "models/algorithm.hpp"
#include "models/collectives/nccl_topology.hpp"
#include "platforms/loader.hpp"

namespace stepsim::models {
namespace {

platforms::Platform platform_of(const std::string& preset, const std::string& cpu_vendor, bool p2p = true) {
  platforms::PlatformOptions options;
  options.overrides = {"cpu_vendor=" + cpu_vendor};
  if (!p2p) options.overrides.push_back("node.p2p.disabled=all");
  return platforms::load_platform(preset, options);
}

platforms::Allocation first(int gpus) {
  platforms::Allocation allocation;
  for (int g = 0; g < gpus; ++g) allocation.gpus.push_back(g);
  return allocation;
}

nccl::NcclSystem system_of(const std::string& preset, const std::string& cpu_vendor) {
  return nccl::nccl_system(CollectiveContext{platform_of(preset, cpu_vendor), first(2), {}});
}

nccl::PathType path_between(const platforms::Platform& platform, int a, int b) {
  return nccl::path_type(platform, platform.route(platform.gpu_vertex(a), platform.gpu_vertex(b)));
}

// NCCL sees the Gen3 x16 wire (12 GB/s, topo.cc), not the preset's 8 GB/s host staging; the
// path is diverted through the CPU (PHB), where an Intel root complex costs 6/5 of the speed.
TEST(NcclPcie, NoP2pPathTakesNcclsPhbFigure) {
  const nccl::NcclSystem intel = system_of("pcie-gen3-x2", "intel");
  EXPECT_EQ(intel.intra, nccl::IntraPath::pcie);
  EXPECT_NEAR(intel.intra_bw, 10.0, 1e-9);
  EXPECT_NEAR(system_of("pcie-gen3-x2", "amd").intra_bw, 12.0, 1e-9);
  EXPECT_EQ(path_between(platform_of("pcie-gen3-x2", "intel"), 0, 1), nccl::PathType::phb);
}

// GPUs under one Gen4 switch with P2P: NCCL's PIX path at its Gen4 x16 figure (24 GB/s, topo.cc),
// the same for every CPU (no host bridge on the way).
TEST(NcclPcie, P2pUnderASwitchTakesNcclsPixFigure) {
  for (const char* vendor : {"intel", "amd"}) {
    const platforms::Platform platform = platform_of("pcie-gen4-x4", vendor);
    for (int b = 1; b < 4; ++b) EXPECT_EQ(path_between(platform, 0, b), nccl::PathType::pix) << vendor;
    const nccl::NcclSystem sys = nccl::nccl_system(CollectiveContext{platform, first(4), {}});
    EXPECT_EQ(sys.intra, nccl::IntraPath::pcie);
    EXPECT_FALSE(sys.nvswitch);
    EXPECT_NEAR(sys.intra_bw, 24.0, 1e-9) << vendor;
  }
}

// The same box with P2P off: NCCL diverts every pair through the CPU (PHB) and sees the same
// Gen4 wires, less Intel's 6/5 P2P overhead on PHB paths (search.cc followPath).
TEST(NcclPcie, P2pOffUnderASwitchTakesNcclsPhbFigure) {
  const platforms::Platform intel = platform_of("pcie-gen4-x4", "intel", false);
  for (int b = 1; b < 4; ++b) EXPECT_EQ(path_between(intel, 0, b), nccl::PathType::phb);
  const nccl::NcclSystem sys = nccl::nccl_system(CollectiveContext{intel, first(4), {}});
  EXPECT_EQ(sys.intra, nccl::IntraPath::pcie);
  EXPECT_NEAR(sys.intra_bw, 20.0, 1e-9);
  const platforms::Platform amd = platform_of("pcie-gen4-x4", "amd", false);
  EXPECT_NEAR(nccl::nccl_system(CollectiveContext{amd, first(4), {}}).intra_bw, 24.0, 1e-9);
}

// NCCL's other path classes on the shipped presets: PXB/PHB/SYS on the 8-GPU PCIe server,
// NVL through an NVSwitch, NET between nodes.
TEST(NcclPcie, PathTypesOfThePresets) {
  const platforms::Platform pcie = platform_of("pcie-gen4-x8", "amd");
  EXPECT_EQ(path_between(pcie, 0, 1), nccl::PathType::pix);
  EXPECT_EQ(path_between(pcie, 0, 2), nccl::PathType::phb);
  EXPECT_EQ(path_between(pcie, 0, 4), nccl::PathType::sys);
  EXPECT_EQ(path_between(platforms::load_platform("dgx-h100"), 0, 7), nccl::PathType::nvl);
  platforms::PlatformOptions two;
  two.nodes = 2;
  EXPECT_EQ(path_between(platforms::load_platform("dgx-h100", two), 0, 8), nccl::PathType::net);
}

}  // namespace
}  // namespace stepsim::models
