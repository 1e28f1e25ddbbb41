// The platform's `calibration` section: factors scale exactly the links of their type (their
// achieved fraction, never their datasheet figure), an absent section changes nothing, and bad
// factors or keys are rejected with a fix.
#include <gtest/gtest.h>

#include "platforms/config_error.hpp"
#include "platforms/loader.hpp"

namespace stepsim::platforms {
namespace {

Platform load(std::vector<std::string> overrides, int nodes = 0) {
  PlatformOptions options;
  options.nodes = nodes;
  options.overrides = std::move(overrides);
  return load_platform("dgx-h100", options);
}

// A bandwidth factor is what the links achieve: it multiplies their achieved fraction and leaves
// the datasheet figure, which NCCL's view reads, exactly as the preset states it.
TEST(Calibration, ScalesTheAchievedFractionAndLatencyOfItsLinkTypeOnly) {
  const Platform plain = load({});
  const Platform fitted = load({"calibration.links.nvlink.bandwidth_scale=0.8",
                                "calibration.links.nvlink.latency_scale=2"});
  ASSERT_EQ(plain.link_count(), fitted.link_count());
  int nvlinks = 0;
  for (int id = 0; id < plain.link_count(); ++id) {
    const Link a = plain.link(id), b = fitted.link(id);
    EXPECT_EQ(b.datasheet_bandwidth, a.datasheet_bandwidth);
    EXPECT_EQ(b.datasheet_two_way_bandwidth, a.datasheet_two_way_bandwidth);
    if (a.type == LinkType::nvlink) {
      ++nvlinks;
      EXPECT_DOUBLE_EQ(b.achieved_fraction, a.achieved_fraction * 0.8);
      EXPECT_DOUBLE_EQ(b.bandwidth(), a.bandwidth() * 0.8);
      EXPECT_DOUBLE_EQ(b.latency, a.latency * 2);
    } else {
      EXPECT_EQ(b.achieved_fraction, a.achieved_fraction);
      EXPECT_EQ(b.latency, a.latency);
    }
  }
  EXPECT_GT(nvlinks, 0);
  const Route& r = fitted.route(fitted.gpu_vertex(0), fitted.gpu_vertex(1));
  EXPECT_DOUBLE_EQ(r.bandwidth, plain.route(plain.gpu_vertex(0), plain.gpu_vertex(1)).bandwidth * 0.8);
}

// A fraction the preset states (NVLink achieving 0.9 of its rate) and a fitted factor compound:
// the fit corrects what the preset already says the links achieve.
TEST(Calibration, FactorsMultiplyThePresetsFraction) {
  const Platform stated = load({"node.nvswitch.achieved_fraction=0.9"});
  const Platform fitted = load({"node.nvswitch.achieved_fraction=0.9", "calibration.links.nvlink.bandwidth_scale=0.5"});
  const Link a = stated.link(stated.route(stated.gpu_vertex(0), stated.gpu_vertex(1)).hops[0].link);
  const Link b = fitted.link(fitted.route(fitted.gpu_vertex(0), fitted.gpu_vertex(1)).hops[0].link);
  ASSERT_EQ(a.type, LinkType::nvlink);
  EXPECT_DOUBLE_EQ(a.achieved_fraction, 0.9);
  EXPECT_DOUBLE_EQ(b.achieved_fraction, 0.45);
  EXPECT_EQ(b.datasheet_bandwidth, a.datasheet_bandwidth);
}

TEST(Calibration, NetworkFactorsScaleTheFabricsAchievedFraction) {
  const Platform plain = load({}, 2);
  const Platform fitted = load({"calibration.links.network.bandwidth_scale=0.5"}, 2);
  EXPECT_EQ(fitted.fabric().nic_bandwidth, plain.fabric().nic_bandwidth);
  EXPECT_DOUBLE_EQ(fitted.fabric().nic_achieved_fraction, 0.5);
  const int a = plain.gpu_vertex(0), b = plain.gpu_vertex(8);
  const Route& r = fitted.route(a, b);
  EXPECT_DOUBLE_EQ(r.bandwidth, plain.route(a, b).bandwidth * 0.5);
  int fabric_links = 0;
  for (const Hop& hop : r.hops) {
    const Link link = fitted.link(hop.link);
    if (fitted.node_of_vertex(link.a) >= 0 && fitted.node_of_vertex(link.b) >= 0) continue;
    ++fabric_links;
    EXPECT_EQ(link.datasheet_bandwidth, plain.link(hop.link).datasheet_bandwidth);
    EXPECT_DOUBLE_EQ(link.bandwidth(), plain.link(hop.link).bandwidth() * 0.5);
  }
  EXPECT_GT(fabric_links, 0);
}

TEST(Calibration, AbsentSectionIsTheIdentity) {
  const Platform p = load({});
  EXPECT_TRUE(p.calibration.links.empty());
  EXPECT_EQ(p.calibration.protocol("Simple").efficiency_scale, 1.0);
  EXPECT_EQ(p.calibration.protocol("LL").latency_scale, 1.0);
  EXPECT_TRUE(p.gpu().gemm_efficiency.empty());
}

TEST(Calibration, ProtocolAndGemmFactorsAreKept) {
  const Platform p = load({"calibration.protocols.LL128.efficiency_scale=0.9",
                           "calibration.gemm_efficiency.bf16=0.71"});
  EXPECT_EQ(p.calibration.protocol("LL128").efficiency_scale, 0.9);
  EXPECT_EQ(p.calibration.protocol("Simple").efficiency_scale, 1.0);
  EXPECT_EQ(p.gpu().gemm_efficiency.at("bf16"), 0.71);
}

TEST(Calibration, FittedCasesAreRecorded) {
  const std::string yaml = R"(version: 1
name: t
gpu: {model: H100-SXM5-80GB}
node:
  vertices: [{name: "gpu[0-1]", kind: gpu}]
  links: [{between: [gpu0, gpu1], type: nvlink, bandwidth: 100GBps, latency: 1us}]
calibration:
  links: {nvlink: {bandwidth_scale: 0.5}}
  fitted: [{file: m.yaml, cases: [0, 2]}]
)";
  const Platform p = parse_platform(yaml, "t.yaml");
  EXPECT_TRUE(p.calibration.was_fitted("m.yaml", 2));
  EXPECT_FALSE(p.calibration.was_fitted("m.yaml", 1));
  EXPECT_FALSE(p.calibration.was_fitted("other.yaml", 0));
  EXPECT_DOUBLE_EQ(p.route(p.gpu_vertex(0), p.gpu_vertex(1)).bandwidth, 50e9);
}

void expect_rejected(const std::string& assignment, const std::string& needle) {
  try {
    load({assignment});
    FAIL() << assignment << " was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Calibration, BadInputIsRejectedWithAFix) {
  expect_rejected("calibration.links.nvlink.bandwidth_scale=0", "must be > 0");
  expect_rejected("calibration.links.nvlnk.bandwidth_scale=0.5", "nvlink");
  expect_rejected("calibration.links.nvlink.speed=0.5", "bandwidth_scale");
  expect_rejected("calibration.protocols.LL256.latency_scale=2", "LL128");
  expect_rejected("calibration.gemm_efficiency.bf16=1.5", "(0, 1]");
  expect_rejected("calibration.factor=2", "links");
  expect_rejected("calibration.codecs.zpf.throughput_scale=2", "zfp");
  expect_rejected("calibration.codecs.zfp.throughput_scale=0", "must be > 0");
}

}  // namespace
}  // namespace stepsim::platforms
