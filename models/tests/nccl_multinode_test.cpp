// NCCL 2.8's multi-node tuning (nccl_versions.cpp make_2_8, nccl_tuning.cpp bus_bw_v2_8) on
// an ABCI-A-like system: 8x A100 per node on NVSwitch, 4 HDR NICs (25 GB/s), Intel hosts.
// Expected values are hand-computed from v2.8.3 tuning.cc (920dbe5b).
#include <gtest/gtest.h>

#include "models/collectives/nccl_tuning.hpp"
#include "models/collectives/nccl_versions.hpp"
#include "models/tests/nccl_estimates.hpp"

namespace stepsim::models::nccl {
namespace {

NcclSystem abci(int nodes) {
  NcclSystem s;
  s.sm = 80;
  s.nodes = nodes;
  s.ppn = 8;
  s.ranks = 8 * nodes;
  s.intra = IntraPath::nvlink;
  s.nvswitch = true;
  s.intra_bw = 12 * 20.0;   // 12 NVLink3 links x topo.h's 20 GB/s
  s.nic_bw = 25;            // HDR 200 Gb/s / 8
  s.nics_per_node = 4;
  return s;
}

const VersionConstants& v28() { return nccl_version("2.8.4"); }

TEST(NcclMultinode, GraphIsOneChannelPerNicAt24GBps) {
  // 24 GB/s is the fastest search speed one 25 GB/s NIC carries; 12 GB/s x 8 ties (96) and
  // the search keeps the first.
  const Graphs g = search_graphs(abci(8));
  EXPECT_EQ(g.ring.channels, 4);
  EXPECT_DOUBLE_EQ(g.ring.bw_inter, 24.0);
}

TEST(NcclMultinode, V28TreeCapsPerChannelAndLlCaps) {
  const Tuning t = nccl_tune(CollectiveOp::allreduce, 8 << 20, abci(8), {}, v28());
  // Tree: min(4 x 24 x .92 = 88.32, 4 x perChMaxTreeBws[Ampere][N4] 16) = 64.
  EXPECT_NEAR(pick(t, Algo::tree, Proto::simple).bus_bw, 64.0, 1e-9);
  // Tree LL128: min(64 x .915 = 58.56, ll128MaxBwPerCh[AllReduce] 16.9 x 4 = 67.6).
  EXPECT_NEAR(pick(t, Algo::tree, Proto::ll128).bus_bw, 58.56, 1e-9);
  // Tree LL: min(64 / 3.8, llMaxBws[Intel][N4] 20.4) = 16.842...
  EXPECT_NEAR(pick(t, Algo::tree, Proto::ll).bus_bw, 64.0 / 3.8, 1e-9);
  // Ring LL: min(20.4, 96 / 4 = 24) = 20.4.
  EXPECT_NEAR(pick(t, Algo::ring, Proto::ll).bus_bw, 20.4, 1e-9);
  // Ring LL128: min(96 x .92 = 88.32, 67.6) = 67.6.
  EXPECT_NEAR(pick(t, Algo::ring, Proto::ll128).bus_bw, 67.6, 1e-9);
}

TEST(NcclMultinode, NetPluginProtocolsBoundTheChoiceUnlessForced) {
  // aws-ofi-nccl on EFAv1 sets NCCL_PROTO=simple: 1 KiB, which picks LL freely, must run
  // Simple; a user's proto= (their own NCCL_PROTO) still wins.
  NcclSystem sys = abci(2);
  EXPECT_EQ(nccl_tune(CollectiveOp::allreduce, 1024, sys, {}, v28()).choice.proto, Proto::ll);
  sys.plugin_protocols[static_cast<int>(Proto::ll)] = sys.plugin_protocols[static_cast<int>(Proto::ll128)] = false;
  const Tuning t = nccl_tune(CollectiveOp::allreduce, 1024, sys, {}, v28());
  EXPECT_EQ(t.choice.proto, Proto::simple);
  EXPECT_FALSE(pick(t, Algo::tree, Proto::ll).enabled);
  Forced ll;
  ll.has_proto = true;
  ll.proto = Proto::ll;
  EXPECT_EQ(nccl_tune(CollectiveOp::allreduce, 1024, sys, ll, v28()).choice.proto, Proto::ll);
}

TEST(NcclMultinode, V28LatenciesUseItsHwLat) {
  const Tuning t = nccl_tune(CollectiveOp::allreduce, 8 << 20, abci(8), {}, v28());
  // Tree LL128: 4.4 + 2 x (7 x 1.25 + log2(8) x 8.5) = 72.9 us.
  EXPECT_NEAR(pick(t, Algo::tree, Proto::ll128).latency_us, 72.9, 1e-9);
  // Tree Simple: 0 + 2 x (7 x 28 + 3 x 28) = 560 us (v2.7.5's NET 50 would give 692).
  EXPECT_NEAR(pick(t, Algo::tree, Proto::simple).latency_us, 560.0, 1e-9);
  // Ring LL128: 10 + (126 - 14) x 1.9 + 14 x 4.0 = 278.8 us.
  EXPECT_NEAR(pick(t, Algo::ring, Proto::ll128).latency_us, 278.8, 1e-9);
}

TEST(NcclMultinode, V28PicksTreeLl128AtEightMiBOnEightNodes) {
  // Tree LL128: 72.9 + 8388608 / (1000 x 58.56 x 0.5 x treeCorrection[LL128][17] 0.7)
  // = 482.2 us; ring LL128: 278.8 + 8388608 / (1000 x 67.6 x 64 / 126) = 523.1 us.
  const Tuning t = nccl_tune(CollectiveOp::allreduce, 8 << 20, abci(8), {}, v28());
  EXPECT_EQ(t.choice.algo, Algo::tree);
  EXPECT_EQ(t.choice.proto, Proto::ll128);
  EXPECT_NEAR(t.choice.time_us, 72.9 + 8388608 / (1000 * 58.56 * 0.5 * 0.7), 1e-6);
  EXPECT_NEAR(pick(t, Algo::ring, Proto::ll128).time_us, 278.8 + 8388608 / (1000 * 67.6 * 64 / 126), 1e-6);
}

TEST(NcclMultinode, V28TwoNodesKeepRingSimpleAtThirtyTwoMiB) {
  // Ring Simple: (8.4 + 28 x 3.4 + 2 x 9.6) x 1.9 (plateau) + 33554432 / (1000 x 96 x 16/30)
  // = 233.32 + 655.36 us; tree Simple is capped at 4 x 22.5 (N2) = 90.
  const Tuning t = nccl_tune(CollectiveOp::allreduce, 32 << 20, abci(2), {}, v28());
  EXPECT_EQ(t.choice.algo, Algo::ring);
  EXPECT_EQ(t.choice.proto, Proto::simple);
  EXPECT_NEAR(t.choice.time_us, 233.32 + 655.36, 1e-6);
  EXPECT_NEAR(pick(t, Algo::tree, Proto::simple).bus_bw, 90.0, 1e-9);
}

TEST(NcclMultinode, V27KeepsItsOwnCaps) {
  // v2.7.5: AllReduce LL128 16.7 per channel, fixed tree cap 80 above two nodes.
  const Tuning t = nccl_tune(CollectiveOp::allreduce, 8 << 20, abci(8), {}, nccl_version("2.7"));
  EXPECT_NEAR(pick(t, Algo::ring, Proto::ll128).bus_bw, 16.7 * 4, 1e-9);
  EXPECT_NEAR(pick(t, Algo::tree, Proto::simple).bus_bw, 80.0, 1e-9);
}

}  // namespace
}  // namespace stepsim::models::nccl
