// NCCL version-specific tuning constants (models/collectives/nccl_versions.hpp): values
// hand-computed from the cited tuning.cc tables, and the selection changes each release made.
#include "models/collectives/nccl_versions.hpp"

#include <gtest/gtest.h>

#include "models/tests/nccl_estimates.hpp"
#include "platforms/config_error.hpp"

namespace stepsim::models::nccl {
namespace {

NcclSystem node(int sm, int ranks, double intra_bw, bool nvls) {
  NcclSystem s;
  s.sm = sm;
  s.ranks = s.ppn = ranks;
  s.nodes = 1;
  s.intra = IntraPath::nvlink;
  s.nvswitch = true;
  s.intra_bw = intra_bw;
  s.nvls = nvls;
  return s;
}
NcclSystem h100(int ranks) { return node(90, ranks, 18 * 20.6, true); }   // 18 NVLink4 links
NcclSystem a100(int ranks) { return node(80, ranks, 12 * 20.0, false); }  // 12 NVLink3 links

NcclSystem a100_nodes(int nodes) {
  NcclSystem s = a100(8);
  s.nodes = nodes;
  s.ranks = 8 * nodes;
  s.nic_bw = 25;
  s.nics_per_node = 8;
  return s;
}

TEST(NcclVersions, PatchLevelsSelectTheirReleaseAndUnknownVersionsListTheKnownOnes) {
  EXPECT_EQ(nccl_version("2.20.5").name, "2.20");
  EXPECT_EQ(nccl_version("2.18.5-1").name, "2.20");   // nearest stored source: v2.20.3
  EXPECT_EQ(nccl_version("2.8.4").name, "2.8");   // nearest stored source: v2.8.3
  EXPECT_EQ(&nccl_version("2.29.2"), &head_version());
  try {
    nccl_version("2.99");
    FAIL() << "2.99 accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("2.18"), std::string::npos) << e.what();
  }
}

TEST(NcclVersions, HeadIsTheDefault) {
  const Tuning a = nccl_tune(CollectiveOp::allreduce, 1 << 26, h100(8));
  const Tuning b = nccl_tune(CollectiveOp::allreduce, 1 << 26, h100(8), {}, head_version());
  EXPECT_EQ(a.choice.algo, b.choice.algo);
  EXPECT_DOUBLE_EQ(a.choice.time_us, b.choice.time_us);
}

TEST(NcclVersions, V27RingSimpleLatencyAndA100Cap) {
  // v2.7.5: baseLat Ring/Simple 8.4 + (2(n-1) = 14) x hwLat NVLink Ring/Simple 3.4 = 56 us;
  // busBw = min(nCh x bwIntra, 235) on sm80, algBw = busBw x 8/14.
  const Tuning t = nccl_tune(CollectiveOp::allreduce, 1 << 30, a100(8), {}, nccl_version("2.7"));
  const Estimate e = pick(t, Algo::ring, Proto::simple);
  EXPECT_NEAR(e.latency_us, 8.4 + 14 * 3.4, 1e-9);
  EXPECT_NEAR(e.bus_bw, std::min(235.0, t.graphs.ring.channels * t.graphs.ring.bw_intra), 1e-9);
  EXPECT_NEAR(e.alg_bw, e.bus_bw * 8 / 14, 1e-9);
}

TEST(NcclVersions, V220RingLLIsAQuarterOfTheGraphAndHeadAHalf) {
  // Ring/LL AllReduce on one node: latency 6.6 + 14 x 0.6 = 15 us in both; busBw
  // min(llMaxBw Ampere-N1 87.7, nCh x bw x 1/4) at v2.20.3, x 1/2 at HEAD.
  const NcclSystem s = a100(8);
  const Tuning v220 = nccl_tune(CollectiveOp::allreduce, 1 << 20, s, {}, nccl_version("2.20"));
  const Tuning head = nccl_tune(CollectiveOp::allreduce, 1 << 20, s, {}, head_version());
  const double graph = v220.graphs.ring.channels * v220.graphs.ring.bw_intra;
  EXPECT_NEAR(pick(v220, Algo::ring, Proto::ll).latency_us, 15.0, 1e-9);
  EXPECT_NEAR(pick(head, Algo::ring, Proto::ll).latency_us, 15.0, 1e-9);
  EXPECT_NEAR(pick(v220, Algo::ring, Proto::ll).bus_bw, std::min(87.7, graph / 4), 1e-9);
  EXPECT_NEAR(pick(head, Algo::ring, Proto::ll).bus_bw, std::min(87.7, graph / 2), 1e-9);
}

TEST(NcclVersions, V220NvlsUsesTheFiveSixthsRatioAndItsLatency) {
  // v2.20.3: NVLS bw = min(bwIntra, bwInter), busBw = nCh x bw, algBw = busBw x 5/6;
  // latency = hwLat NVLink NVLS/Simple 23 us (HEAD: 25).
  const Tuning t = nccl_tune(CollectiveOp::allreduce, 1 << 30, h100(8), {}, nccl_version("2.20"));
  const Estimate e = pick(t, Algo::nvls, Proto::simple);
  const Graph& g = t.graphs.nvls;
  EXPECT_NEAR(e.latency_us, 23.0, 1e-9);
  EXPECT_NEAR(e.alg_bw, g.channels * std::min(g.bw_intra, g.bw_inter) * 5 / 6, 1e-9);
  EXPECT_NEAR(pick(nccl_tune(CollectiveOp::allreduce, 1 << 30, h100(8)), Algo::nvls, Proto::simple).latency_us, 25.0,
              1e-9);
}

TEST(NcclVersions, NoNvlsBefore217AndNoLL128Before25) {
  const Tuning v27 = nccl_tune(CollectiveOp::allreduce, 1 << 30, h100(8), {}, nccl_version("2.7"));
  EXPECT_NE(v27.choice.algo, Algo::nvls);
  EXPECT_FALSE(pick(v27, Algo::nvls, Proto::simple).enabled);
  EXPECT_EQ(nccl_tune(CollectiveOp::allreduce, 1 << 30, h100(8), {}, nccl_version("2.20")).choice.algo, Algo::nvls);
  // v2.7.5 enables LL128 only on sm70/sm80; 2.4 has no LL128 at all.
  EXPECT_FALSE(pick(v27, Algo::ring, Proto::ll128).enabled);
  const Tuning v24 = nccl_tune(CollectiveOp::allreduce, 1 << 20, a100(8), {}, nccl_version("2.4"));
  EXPECT_FALSE(pick(v24, Algo::ring, Proto::ll128).enabled);
}

TEST(NcclVersions, V24TreeThresholdRule) {
  // One node: treeThreshold 0, always ring. 4 nodes x 8 NVLink ranks: ringlat 6 x 31 = 186,
  // treelat 15 x 2 + 4 x 7 = 58, treebw = 3/4 ringbw, so the tree runs up to
  // ringbw x 3 x 128 bytes with ringbw = 5000 x channels.
  const VersionConstants& v = nccl_version("2.4");
  EXPECT_EQ(nccl_tune(CollectiveOp::allreduce, 1024, a100(8), {}, v).choice.algo, Algo::ring);
  const NcclSystem s = a100_nodes(4);
  const double threshold = 5000.0 * search_graphs(s).ring.channels * 3 * 128;
  EXPECT_EQ(nccl_tune(CollectiveOp::allreduce, threshold, s, {}, v).choice.algo, Algo::tree);
  EXPECT_EQ(nccl_tune(CollectiveOp::allreduce, 2 * threshold, s, {}, v).choice.algo, Algo::ring);
  // 2 nodes: treebw = 1.5 ringbw > ringbw, tree at every size.
  EXPECT_EQ(nccl_tune(CollectiveOp::allreduce, 1 << 30, a100_nodes(2), {}, v).choice.algo, Algo::tree);
}

TEST(NcclVersions, V24LLThresholdRule) {
  // Ring AllReduce, 8 ranks: nt grows to 256, the LL threshold is nc x 256 x 8 x 64 bytes
  // with nc = bytes / (256 x 8 x 8) capped by the channels.
  const VersionConstants& v = nccl_version("2.4");
  const NcclSystem s = a100(8);
  const int ch = search_graphs(s).ring.channels;
  EXPECT_EQ(nccl_tune(CollectiveOp::allreduce, ch * 256.0 * 8 * 64, s, {}, v).choice.proto, Proto::ll);
  EXPECT_EQ(nccl_tune(CollectiveOp::allreduce, ch * 256.0 * 8 * 64 + 1, s, {}, v).choice.proto, Proto::simple);
}

}  // namespace
}  // namespace stepsim::models::nccl
