// The `nccl` algorithm end to end: every op at 2..17 ranks passes the data-movement
// checker, NVLS goes through the NVSwitch endpoint, and the schedule's protocol fields
// carry NCCL's constants.
#include <gtest/gtest.h>

#include "models/algorithm.hpp"
#include "models/checker.hpp"
#include "models/collectives/nccl_topology.hpp"
#include "models/collectives/nccl_versions.hpp"
#include "platforms/loader.hpp"

namespace stepsim::models {
namespace {

struct Case {
  platforms::Platform platform;
  platforms::Allocation allocation;
};

Case make(const std::string& preset, int nodes, int ranks) {
  platforms::PlatformOptions options;
  options.nodes = nodes;
  Case c{platforms::load_platform(preset, options), {}};
  for (int g = 0; g < ranks; ++g) c.allocation.gpus.push_back(g);
  return c;
}

Schedule lower(const Case& c, CollectiveOp op, Bytes bytes, AlgorithmOptions options = {}) {
  const CollectiveContext ctx{c.platform, c.allocation, options};
  CollectiveSpec spec;
  spec.op = op;
  spec.ranks = c.allocation.ranks();
  spec.bytes = bytes;
  spec.root = spec.ranks > 1 ? 1 : 0;
  return AlgorithmRegistry::instance().get("nccl").make()->lower(spec, ctx);
}

TEST(NcclLowering, EveryOpAt2To17RanksPassesTheChecker) {
  // dgx-h100 x 3 nodes = 24 GPUs: 2..8 ranks stay on one node (NVLS for allreduce), 9..17
  // span two or three nodes (rings, trees, NVLSTree across NICs).
  const Case all = make("dgx-h100", 3, 24);
  for (int n = 2; n <= 17; ++n) {
    Case c{all.platform, {}};
    for (int g = 0; g < n; ++g) c.allocation.gpus.push_back(g);
    for (CollectiveOp op : all_ops())
      for (Bytes bytes : {4096.0, 64.0 * 1024 * 1024}) {
        const Schedule s = lower(c, op, bytes);
        const auto verdict = check_schedule(s);
        EXPECT_FALSE(verdict.has_value()) << to_string(op) << " n=" << n << " bytes=" << bytes << " "
                                          << s.algorithm << ": " << verdict.value_or("");
      }
  }
}

TEST(NcclLowering, ForcedAlgorithmsPassTheChecker) {
  const Case c = make("dgx-h100", 2, 16);
  for (const char* algo : {"ring", "tree", "nvls_tree"})
    for (const char* proto : {"LL", "LL128", "Simple"}) {
      AlgorithmOptions o;
      o.extra = {{"algo", algo}, {"proto", proto}};
      if (std::string(algo) == "nvls_tree" && std::string(proto) != "Simple") continue;
      const Schedule s = lower(c, CollectiveOp::allreduce, 8.0 * 1024 * 1024, o);
      EXPECT_FALSE(check_schedule(s).has_value()) << algo << "/" << proto;
      EXPECT_EQ(s.protocol.name, proto);
    }
}

TEST(NcclLowering, NvlsTreeRunsItsWayUpAndWayDownInTwoLanes) {
  // NCCL's NVLSTree kernel reduces up (scatter, reduce, send to the parent node) and
  // broadcasts down (receive, multicast, gather) in warp groups of their own (all_reduce.h),
  // so a chunk's way down never waits behind a later chunk's way up at the same head:
  // every reduction travels lane 0 at both ends and every result arrives on lane 1.
  const Case c = make("dgx-h100", 2, 16);
  AlgorithmOptions o;
  o.extra = {{"algo", "nvls_tree"}};
  const Schedule s = lower(c, CollectiveOp::allreduce, 1 << 30, o);
  EXPECT_EQ(s.algorithm, "nccl:nvls_tree/Simple");
  EXPECT_EQ(s.lanes, 2);
  EXPECT_FALSE(check_schedule(s).has_value());
  int up = 0, down = 0, inter_node = 0;
  s.for_each_expanded([&](std::int64_t, const Step& step) {
    if (step.combine == Combine::reduce) {
      ++up;
      EXPECT_EQ(step.src_lane, 0);
      EXPECT_EQ(step.dst_lane, 0);
    } else {
      ++down;
      EXPECT_EQ(step.dst_lane, 1);
    }
    inter_node += step.src < 16 && step.dst < 16 && step.src / 8 != step.dst / 8;
  });
  EXPECT_GT(up, 0);
  EXPECT_GT(down, 0);
  EXPECT_GT(inter_node, 0);
}

TEST(NcclLowering, NvlsOnDgxH100GoesThroughTheSwitch) {
  const Case c = make("dgx-h100", 1, 8);
  const Schedule s = lower(c, CollectiveOp::allreduce, 1 << 30);
  EXPECT_EQ(s.algorithm, "nccl:nvls/Simple");
  ASSERT_EQ(s.switch_vertices.size(), 1u);
  EXPECT_EQ(s.switch_vertices[0], c.platform.nvswitch_vertex(0));
  bool to_switch = false;
  s.for_each_expanded([&](std::int64_t, const Step& step) { to_switch |= step.dst == 8; });
  EXPECT_TRUE(to_switch);
  // Cap = NCCL's algBw (8 heads x 40 x 0.85 x 7/8 x 2, x 8/14) split over the 16 channels
  // NVLS launches (NCCL_NVLS_NCHANNELS, transport/nvls.cc).
  EXPECT_NEAR(s.protocol.per_step_bandwidth_cap, 476.0 * 8 / 14 / 16 * 1e9, 1e3);
}

TEST(NcclLowering, NvlsPipelinesOneChunkPerNcclLoop) {
  // 8 MiB NVLS on 8 H100: 16 channels (NCCL_NVLS_NCHANNELS), 2 loops of 16 x 8 x 32 KiB
  // (calcCollChunking), so 2 chunks through the 2-stage switch pipeline: 3 rounds, the fill
  // the engines charge.
  const Case c = make("dgx-h100", 1, 8);
  const Schedule s = lower(c, CollectiveOp::allreduce, 8.0 * 1024 * 1024);
  EXPECT_EQ(s.algorithm, "nccl:nvls/Simple");
  EXPECT_EQ(s.channels, 16);
  EXPECT_EQ(s.num_blocks, 2);
  EXPECT_EQ(s.rounds.size(), 3u);
}

TEST(NcclLowering, ProtocolFieldsComeFromNcclConstants) {
  const Case c = make("dgx-h100", 1, 8);
  AlgorithmOptions o;
  o.extra = {{"nvls", "off"}};
  const Schedule small = lower(c, CollectiveOp::allreduce, 1024, o);
  EXPECT_EQ(small.protocol.name, "LL");
  EXPECT_DOUBLE_EQ(small.protocol.efficiency, 0.5);   // 8 B data per 16 B line
  // Ring LL cap: min(llMaxBw 141, 0.5 x 360) x 8/14 x 14/8 / 12 channels = 141 / 12 GB/s.
  EXPECT_NEAR(small.protocol.per_step_bandwidth_cap, 141.0 / 12 * 1e9, 1e3);
  // Launch latency: NCCL's 6.6 + 14 x 0.6 us less the route latency the 14 rounds carry.
  EXPECT_GT(small.launch_latency, 0);
  EXPECT_LE(small.launch_latency, (6.6 + 14 * 0.6) * 1e-6);
  const Schedule big = lower(c, CollectiveOp::allreduce, 1 << 30, o);
  EXPECT_EQ(big.protocol.name, "Simple");
  EXPECT_DOUBLE_EQ(big.protocol.efficiency, 1.0);
  EXPECT_NEAR(big.protocol.per_step_bandwidth_cap, 30e9, 1e3);   // 360 GB/s over 12 channels
}

TEST(NcclLowering, NvlsAllGatherAndReduceScatterMoveEachBlockOnceThroughTheSwitch) {
  // One node: an allgather rank multicasts its 1/n (multimem.st), a reduce-scatter rank's
  // whole buffer is reduced in the switch for the blocks' owners (multimem.ld_reduce).
  const Case c = make("dgx-h100", 1, 8);
  AlgorithmOptions o;
  o.extra = {{"algo", "nvls"}};
  const double bytes = 64.0 * 1024 * 1024;
  for (CollectiveOp op : {CollectiveOp::allgather, CollectiveOp::reduce_scatter}) {
    const Schedule s = lower(c, op, bytes, o);
    EXPECT_FALSE(check_schedule(s).has_value()) << to_string(op) << ": " << check_schedule(s).value_or("");
    double sent = 0, received = 0;   // by rank 0, every repeat of a round counted
    for (const Round& r : s.rounds)
      for (const Step& st : r.steps) {
        if (st.src == 0) sent += st.wire_bytes * r.repeat;
        if (st.dst == 0) received += st.wire_bytes * r.repeat;
      }
    const bool gather = op == CollectiveOp::allgather;
    EXPECT_NEAR(sent, gather ? bytes / 8 : bytes, 1e-6 * bytes) << to_string(op);
    EXPECT_NEAR(received, gather ? bytes * 7 / 8 : bytes / 8, 1e-6 * bytes) << to_string(op);
  }
}

TEST(NcclLowering, OlderReleasesNvlsRunsAtTheSwitchesMeasuredEfficiency) {
  // 2.27's model has no nvlsEfficiency (2.28+: 0.74 on Blackwell), so its NVLS estimate is
  // faster than the switches deliver; the channel cap stays at HEAD's estimate.
  const Case c = make("dgx-b200", 1, 8);
  AlgorithmOptions o;
  o.extra = {{"algo", "nvls"}, {"proto", "Simple"}, {"version", "2.27"}};
  const Schedule old = lower(c, CollectiveOp::allreduce, 1 << 30, o);
  o.extra["version"] = "head";
  const Schedule head = lower(c, CollectiveOp::allreduce, 1 << 30, o);
  EXPECT_DOUBLE_EQ(old.protocol.per_step_bandwidth_cap, head.protocol.per_step_bandwidth_cap);
  // ... while 2.27's own estimate for the same choice is faster, so the bound is what bites.
  const CollectiveContext ctx{c.platform, c.allocation, {}};
  nccl::Forced same;
  same.has_algo = same.has_proto = true;
  same.algo = nccl::Algo::nvls;
  same.proto = nccl::Proto::simple;
  const double v227 = nccl::nccl_tune(CollectiveOp::allreduce, 1 << 30, nccl::nccl_system(ctx), same,
                                      nccl::nccl_version("2.27")).choice.alg_bw;
  const double head_bw = nccl::nccl_tune(CollectiveOp::allreduce, 1 << 30, nccl::nccl_system(ctx), same,
                                         nccl::head_version()).choice.alg_bw;
  EXPECT_GT(v227, 1.1 * head_bw);   // 600 vs 532.8 GB/s
}

TEST(NcclLowering, NotesCarryTheChoiceAndEstimate) {
  const Case c = make("dgx-h100", 1, 8);
  const Schedule s = lower(c, CollectiveOp::allgather, 1 << 30);
  ASSERT_GE(s.notes.size(), 2u);
  EXPECT_NE(s.notes[0].find("nccl:ring/Simple"), std::string::npos);
  EXPECT_NE(s.notes[1].find("nccl estimate"), std::string::npos);
}

TEST(NcclLowering, UnknownOptionIsAConfigError) {
  const Case c = make("dgx-h100", 1, 8);
  AlgorithmOptions o;
  o.extra = {{"colour", "blue"}};
  EXPECT_THROW(lower(c, CollectiveOp::allreduce, 1024, o), std::exception);
}

}  // namespace
}  // namespace stepsim::models
