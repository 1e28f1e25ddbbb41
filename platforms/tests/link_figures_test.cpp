// A link's two figures: the datasheet rate the file's `bandwidth` states (NVLink: lanes x the
// GPU's per-link rate) and the fraction of it that transfers achieve (`achieved_fraction`,
// default 1). Routes and the engines see their product; the datasheet figure stays as rated.
#include <gtest/gtest.h>

#include "platforms/loader.hpp"

namespace stepsim::platforms {
namespace {

// Two GPUs reach each other through a PCIe switch (gpu0's side rated 31.5 GB/s but achieving
// half of it, gpu1's side 20 GB/s) and through an NVLink bundle whose fraction the test sets.
std::string two_paths(const std::string& nvlink_fraction) {
  return R"(version: 1
name: two-paths
gpu: {model: V100-SXM2}
node:
  vertices:
    - {name: "gpu[0-1]", kind: gpu}
    - {name: sw, kind: pcie_switch}
  links:
    - {between: [gpu0, sw], type: pcie, bandwidth: 31.5GBps, achieved_fraction: 0.5, latency: 0.5us}
    - {between: [gpu1, sw], type: pcie, bandwidth: 20GBps, latency: 0.5us}
    - {between: [gpu0, gpu1], type: nvlink, lanes: 2, latency: 0.6us)" +
         (nvlink_fraction.empty() ? "" : ", achieved_fraction: " + nvlink_fraction) + "}\n";
}

Link link_named(const Platform& p, const std::string& name) {
  for (int id = 0; id < p.link_count(); ++id)
    if (p.link(id).name == name) return p.link(id);
  throw std::logic_error("no link " + name);
}

TEST(LinkFigures, BandwidthIsTheDatasheetFigureAndTheFractionDefaultsToOne) {
  const Platform p = parse_platform(two_paths(""), "t.yaml");
  const Link pcie = link_named(p, "gpu0-sw");
  EXPECT_EQ(pcie.datasheet_bandwidth, 31.5e9);
  EXPECT_EQ(pcie.achieved_fraction, 0.5);
  EXPECT_DOUBLE_EQ(pcie.bandwidth(), 15.75e9);
  const Link plain = link_named(p, "gpu1-sw");
  EXPECT_EQ(plain.achieved_fraction, 1.0);
  EXPECT_EQ(plain.bandwidth(), plain.datasheet_bandwidth);
  // NVLink without `bandwidth`: lanes x the V100's 25 GB/s per link, the rated figure.
  const Link nvlink = parse_platform(two_paths("0.9"), "t.yaml").link(2);
  EXPECT_EQ(nvlink.datasheet_bandwidth, 50e9);
  EXPECT_EQ(nvlink.achieved_fraction, 0.9);
  EXPECT_DOUBLE_EQ(nvlink.bandwidth(), 45e9);
}

// A route's bottleneck is the narrowest achieved figure, which need not sit on the narrowest
// datasheet figure: through the switch gpu0's 31.5 GB/s side achieves 15.75, less than gpu1's 20.
TEST(LinkFigures, RoutesTakeTheAchievedBandwidth) {
  const std::string no_nvlink = "    - {between: [gpu0, gpu1], type: nvlink, lanes: 2, latency: 0.6us}\n";
  std::string yaml = two_paths("");
  yaml.erase(yaml.find(no_nvlink), no_nvlink.size());
  const Platform p = parse_platform(yaml, "t.yaml");
  const Route& r = p.route(p.gpu_vertex(0), p.gpu_vertex(1));
  ASSERT_EQ(r.hops.size(), 2u);
  EXPECT_DOUBLE_EQ(r.bandwidth, 15.75e9);
  EXPECT_DOUBLE_EQ(p.route(p.gpu_vertex(1), p.gpu_vertex(0)).bandwidth, 15.75e9);
}

// The widest path is chosen on achieved figures: the NVLink bundle (50 GB/s rated) wins over the
// switch until it achieves less than the switch path's 15.75 GB/s.
TEST(LinkFigures, TheWidestPathIsChosenOnAchievedFigures) {
  for (const auto& [fraction, nvlink_wins] : std::vector<std::pair<std::string, bool>>{{"0.9", true}, {"0.3", false}}) {
    const Platform p = parse_platform(two_paths(fraction), "t.yaml");
    const Route& r = p.route(p.gpu_vertex(0), p.gpu_vertex(1));
    EXPECT_EQ(r.worst == LinkType::nvlink, nvlink_wins) << fraction;
    EXPECT_DOUBLE_EQ(r.bandwidth, nvlink_wins ? 50e9 * 0.9 : 15.75e9) << fraction;
  }
}

// The compact NVSwitch form: every GPU's bundle of all its NVLinks, rated at nvlinks x the
// per-link rate, achieves the stated fraction.
TEST(LinkFigures, TheNvswitchFormCarriesTheFractionToEveryGpu) {
  PlatformOptions options;
  options.overrides = {"node.nvswitch.achieved_fraction=0.9"};
  const Platform p = load_platform("dgx-h100", options);
  const Platform rated = load_platform("dgx-h100");
  int nvlinks = 0;
  for (int id = 0; id < p.link_count(); ++id) {
    const Link link = p.link(id);
    if (link.type != LinkType::nvlink) continue;
    ++nvlinks;
    EXPECT_EQ(link.datasheet_bandwidth, 18 * 25e9);
    EXPECT_EQ(link.achieved_fraction, 0.9);
  }
  EXPECT_EQ(nvlinks, 8);
  EXPECT_DOUBLE_EQ(p.route(p.gpu_vertex(0), p.gpu_vertex(5)).bandwidth,
                   0.9 * rated.route(rated.gpu_vertex(0), rated.gpu_vertex(5)).bandwidth);
}

// A half-duplex resource's two-way total is rated like its one-way figure and achieves the same
// fraction of it.
TEST(LinkFigures, TheTwoWayTotalAchievesTheSameFraction) {
  std::string yaml = two_paths("");
  const std::string from = "bandwidth: 20GBps, latency";
  yaml.replace(yaml.find(from), from.size(),
               "bandwidth: 20GBps, two_way_bandwidth: 16GBps, duplex: half, achieved_fraction: 0.75, latency");
  const Link staging = link_named(parse_platform(yaml, "t.yaml"), "gpu1-sw");
  EXPECT_EQ(staging.datasheet_two_way_bandwidth, 16e9);
  EXPECT_DOUBLE_EQ(staging.two_way_bandwidth(), 12e9);
  EXPECT_DOUBLE_EQ(staging.bandwidth(), 15e9);
}

}  // namespace
}  // namespace stepsim::platforms
