/// @file NCCL's graph on a PCIe box without P2P: the host-diverted PHB path (pcie-gen3-x2).
#include <gtest/gtest.h>

#include "models/algorithm.hpp"
#include "models/collectives/nccl_topology.hpp"
#include "platforms/loader.hpp"

namespace stepsim::models {
namespace {

nccl::NcclSystem system_of(const std::string& preset, const std::string& cpu_vendor) {
  platforms::PlatformOptions options;
  options.overrides = {"cpu_vendor=" + cpu_vendor};
  const platforms::Platform platform = platforms::load_platform(preset, options);
  platforms::Allocation allocation;
  allocation.gpus = {0, 1};
  return nccl::nccl_system(CollectiveContext{platform, allocation, {}});
}

// NCCL sees the Gen3 x16 wire (12 GB/s, topo.cc), not the preset's 8 GB/s host staging; the
// path is diverted through the CPU (PHB), where an Intel root complex costs 6/5 of the speed.
TEST(NcclPcie, NoP2pPathTakesNcclsPhbFigure) {
  const nccl::NcclSystem intel = system_of("pcie-gen3-x2", "intel");
  EXPECT_EQ(intel.intra, nccl::IntraPath::pcie);
  EXPECT_NEAR(intel.intra_bw, 10.0, 1e-9);
  EXPECT_NEAR(system_of("pcie-gen3-x2", "amd").intra_bw, 12.0, 1e-9);
}

}  // namespace
}  // namespace stepsim::models
