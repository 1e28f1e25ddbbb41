/// @file NCCL's view of a platform reads datasheet figures: a link's achieved fraction, stated by
/// the preset or fitted by calibration, changes what the engines move but never what NCCL detects
/// (NVLink counts, PCIe widths, the NIC's port rate), so its graphs and choices stay put.
#include <gtest/gtest.h>

#include "models/algorithm.hpp"
#include "models/collectives/nccl_topology.hpp"
#include "platforms/loader.hpp"

namespace stepsim::models {
namespace {

platforms::Platform load(const std::string& preset, int nodes, std::vector<std::string> overrides) {
  platforms::PlatformOptions options;
  options.nodes = nodes;
  options.overrides = std::move(overrides);
  return platforms::load_platform(preset, options);
}

platforms::Allocation all_gpus(const platforms::Platform& platform) {
  platforms::Allocation allocation;
  for (int g = 0; g < platform.gpu_count(); ++g) allocation.gpus.push_back(g);
  return allocation;
}

BytesPerSecond route_bandwidth(const platforms::Platform& p, int a, int b) {
  return p.route(p.gpu_vertex(a), p.gpu_vertex(b)).bandwidth;
}

struct Case {
  const char* preset;
  int nodes;
  std::vector<std::string> base;       ///< the platform as stated
  std::vector<std::string> fractions;  ///< achieved fractions on top (preset keys or calibration)
  int far_gpu;                         ///< a GPU whose route from GPU 0 crosses the scaled links
  double route_factor;                 ///< what the fractions make of that route's bandwidth
};

// Every figure NCCL's graph search and tuning read, with the links achieving half (DGX-1: 0.7) of
// their rate: if NCCL's view followed the achieved figures, or divided a factor back out of the
// datasheet figure, the NVLink counts, PCIe and NIC figures below would shrink or grow. (DGX-1's
// single NVLinks keep 0.7: at 0.5 they would achieve less than the PCIe path, routes would leave
// them, and NCCL's path types follow the routes: docs/platforms.md, "Link figures".)
TEST(NcclTopology, AchievedFractionsNeverReachNcclsFigures) {
  const std::vector<Case> cases = {
      {"dgx-h100", 2, {},
       {"node.nvswitch.achieved_fraction=0.5", "calibration.links.nvlink.bandwidth_scale=0.5",
        "calibration.links.network.bandwidth_scale=0.5"}, 8, 0.5},
      {"dgx-h100", 1, {}, {"node.nvswitch.achieved_fraction=0.5"}, 1, 0.5},
      {"dgx1-v100", 1, {}, {"calibration.links.nvlink.bandwidth_scale=0.7"}, 1, 0.7},
      {"pcie-gen4-x4", 1, {}, {"calibration.links.pcie.bandwidth_scale=0.5"}, 1, 0.5},
      {"pcie-gen4-x4", 1, {"node.p2p.disabled=all"}, {"calibration.links.pcie.bandwidth_scale=0.5"}, 1, 0.5},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.preset) + " on " + std::to_string(c.nodes) + " node(s), " + c.fractions.front());
    std::vector<std::string> scaled_overrides = c.base;
    scaled_overrides.insert(scaled_overrides.end(), c.fractions.begin(), c.fractions.end());
    const platforms::Platform rated = load(c.preset, c.nodes, c.base);
    const platforms::Platform scaled = load(c.preset, c.nodes, scaled_overrides);
    // The fractions do reach the engines' routes...
    EXPECT_DOUBLE_EQ(route_bandwidth(scaled, 0, c.far_gpu), c.route_factor * route_bandwidth(rated, 0, c.far_gpu));
    // ...and nothing of NCCL's view.
    const platforms::Allocation allocation = all_gpus(rated);
    const CollectiveContext rated_ctx{rated, allocation, {}};
    const CollectiveContext scaled_ctx{scaled, allocation, {}};
    const nccl::NcclSystem a = nccl::nccl_system(rated_ctx);
    const nccl::NcclSystem b = nccl::nccl_system(scaled_ctx);
    EXPECT_GT(a.intra_bw, 0);
    EXPECT_EQ(b.intra_bw, a.intra_bw);
    EXPECT_EQ(b.intra, a.intra);
    EXPECT_EQ(b.nvswitch, a.nvswitch);
    EXPECT_EQ(b.nic_bw, a.nic_bw);
    EXPECT_EQ(b.mesh_ring_channels, a.mesh_ring_channels);
    EXPECT_EQ(b.mesh_ring_bw, a.mesh_ring_bw);
    for (int g = 1; g < rated.gpus_per_node(); ++g)
      EXPECT_EQ(nccl::nvlink_count(scaled_ctx, 0, g), nccl::nvlink_count(rated_ctx, 0, g)) << "GPU " << g;
  }
}

// The anchors those comparisons rest on: an H100's 18 NVLinks at topo.h's 20.6 GB/s, the NDR
// port's 400 Gb/s / 8 = 50 GB/s, read off the datasheet figures of a fully scaled platform.
TEST(NcclTopology, ScaledH100StillShowsEighteenNvlinksAndTheNdrPortRate) {
  const platforms::Platform p = load("dgx-h100", 2, {"node.nvswitch.achieved_fraction=0.5",
                                                     "calibration.links.nvlink.bandwidth_scale=0.8",
                                                     "calibration.links.network.bandwidth_scale=0.7"});
  const platforms::Allocation allocation = all_gpus(p);
  const CollectiveContext ctx{p, allocation, {}};
  const nccl::NcclSystem sys = nccl::nccl_system(ctx);
  EXPECT_EQ(nccl::nvlink_count(ctx, 0, 1), 18);
  EXPECT_DOUBLE_EQ(sys.intra_bw, 18 * nccl::nvlink_bw_per_link(90));
  EXPECT_DOUBLE_EQ(sys.nic_bw, 50);
}

}  // namespace
}  // namespace stepsim::models
