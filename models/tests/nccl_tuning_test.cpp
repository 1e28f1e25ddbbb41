// NCCL's tuning model (models/collectives/nccl_tuning.hpp): values hand-computed from the
// constants of tuning.cc / search.cc / topo.h (papers.md §4), and NCCL's choices.
#include <gtest/gtest.h>

#include "models/collectives/nccl_tuning.hpp"

namespace stepsim::models::nccl {
namespace {

// 8x H100 on NVSwitch: 18 NVLinks x 20.6 GB/s (topo.h SM90_NVLINK_BW) = 370.8 GB/s per GPU.
NcclSystem h100_node(int ranks) {
  NcclSystem s;
  s.sm = 90;
  s.ranks = ranks;
  s.ppn = ranks;
  s.nvswitch = true;
  s.intra_bw = 18 * 20.6;
  s.nvls = true;
  return s;
}

// ABCI-like: nodes x 8 A100 (12 x 20 GB/s) with 4 HDR NICs (25 GB/s) per node, Intel CPUs.
NcclSystem a100_nodes(int nodes) {
  NcclSystem s;
  s.sm = 80;
  s.nodes = nodes;
  s.ppn = 8;
  s.ranks = 8 * nodes;
  s.nvswitch = true;
  s.intra_bw = 12 * 20.0;
  s.nic_bw = 25;
  s.nics_per_node = 4;
  return s;
}

const Estimate& find(const Tuning& t, Algo a, Proto p) {
  for (const Estimate& e : t.estimates)
    if (e.algo == a && e.proto == p) return e;
  throw std::runtime_error("estimate missing");
}

TEST(NcclGraphs, H100RingIsTwelveChannelsOfThirty) {
  // Best total: 6 channels x 60 GB/s (360 <= 370.8); ncclTopoDupChannels (bw >= 50 on sm90)
  // doubles to 12 x 30.
  const Graphs g = search_graphs(h100_node(8));
  EXPECT_EQ(g.ring.channels, 12);
  EXPECT_DOUBLE_EQ(g.ring.bw_intra, 30.0);
  // NVLS: one head per GPU; 8 x 40 = 320 <= 370.8 while 8 x 50 does not fit.
  EXPECT_EQ(g.nvls.channels, 8);
  EXPECT_DOUBLE_EQ(g.nvls.bw_intra, 40.0);
}

TEST(NcclGraphs, MultiNodeRingTakesOneChannelPerNic) {
  // Inter speeds (pre-sm90): 24 GB/s is the fastest <= 25 GB/s per NIC, one channel per NIC.
  const Graphs g = search_graphs(a100_nodes(4));
  EXPECT_EQ(g.ring.channels, 4);
  EXPECT_DOUBLE_EQ(g.ring.bw_inter, 24.0);
  // Trees may raise bwIntra to 2 x bwInter when it fits through the GPU (4 x 48 <= 240).
  EXPECT_DOUBLE_EQ(g.tree.bw_intra, 48.0);
}

TEST(NcclTuning, RingSimpleOnEightH100) {
  const Tuning t = nccl_tune(CollectiveOp::allreduce, 1 << 30, h100_node(8));
  const Estimate& e = find(t, Algo::ring, Proto::simple);
  // latency = baseLat 8.4 + 2(n-1) x hwLat[NVLink][Ring][Simple] 3.4 = 8.4 + 14 x 3.4.
  EXPECT_NEAR(e.latency_us, 8.4 + 14 * 3.4, 1e-9);
  // busBw = 12 x 30 = 360 GB/s; algBw = busBw x n / nsteps = 360 x 8 / 14.
  EXPECT_NEAR(e.bus_bw, 360.0, 1e-9);
  EXPECT_NEAR(e.alg_bw, 360.0 * 8 / 14, 1e-9);
  EXPECT_NEAR(e.time_us, e.latency_us + (1 << 30) / (1000.0 * e.alg_bw), 1e-6);
}

TEST(NcclTuning, RingLLAndLL128Refinements) {
  const Tuning t = nccl_tune(CollectiveOp::allgather, 1 << 20, h100_node(8));
  // LL: min(llMaxBw[Hopper][N1] = 141, 0.5 x 360); LL128: min(0.92 x 360, 12 x 36.7).
  EXPECT_NEAR(find(t, Algo::ring, Proto::ll).bus_bw, 141.0, 1e-9);
  EXPECT_NEAR(find(t, Algo::ring, Proto::ll128).bus_bw, 0.92 * 360, 1e-9);
  // Allgather: nsteps = n - 1, so algBw = busBw x n / (n - 1); latency 6.6 + 7 x 0.6.
  EXPECT_NEAR(find(t, Algo::ring, Proto::ll).alg_bw, 141.0 * 8 / 7, 1e-9);
  EXPECT_NEAR(find(t, Algo::ring, Proto::ll).latency_us, 6.6 + 7 * 0.6, 1e-9);
}

TEST(NcclTuning, TreeLatencyAcrossNodes) {
  const Tuning t = nccl_tune(CollectiveOp::allreduce, 1 << 20, a100_nodes(4));
  // baseLat + 2 x ((ppn - 1) x intraLat + log2(nodes) x interLat), NVLink intra, NET inter.
  EXPECT_NEAR(find(t, Algo::tree, Proto::ll).latency_us, 6.8 + 2 * (7 * 0.6 + 2 * 5.0), 1e-9);
  EXPECT_NEAR(find(t, Algo::tree, Proto::simple).latency_us, 8.4 + 2 * (7 * 4.0 + 2 * 14.0), 1e-9);
  // Ring across nodes: (nsteps - nInter) x max(intraLat, net overhead 1 us) + nInter x interLat.
  const double ring_ll = 6.6 + (62 - 6) * 1.0 + 6 * 2.7;
  EXPECT_NEAR(find(t, Algo::ring, Proto::ll).latency_us, ring_ll, 1e-9);
}

TEST(NcclTuning, TreeBandwidthUsesPerChannelCapAndHalvesForAlgbw) {
  const Tuning t = nccl_tune(CollectiveOp::allreduce, 1 << 30, a100_nodes(2));
  const Estimate& e = find(t, Algo::tree, Proto::simple);
  // Two nodes use bwIntra (48): min(0.92 x 4 x 48, 4 x perChMaxTreeBw[Ampere][N2] 23.6).
  EXPECT_NEAR(e.bus_bw, 4 * 23.6, 1e-9);
  // algBw = busBw / 2, x treeCorrectionFactor[Simple][log2(1 GiB / 64) = 24 -> none].
  EXPECT_NEAR(e.alg_bw, 4 * 23.6 / 2, 1e-9);
}

TEST(NcclChoice, LLAtSmallSizesThenLL128OrSimple) {
  NcclSystem s = h100_node(8);
  s.nvls = false;
  EXPECT_EQ(nccl_tune(CollectiveOp::allreduce, 1024, s).choice.proto, Proto::ll);
  const Proto mid = nccl_tune(CollectiveOp::allreduce, 8 << 20, s).choice.proto;
  EXPECT_NE(mid, Proto::ll);
  const Estimate big = nccl_tune(CollectiveOp::allreduce, 4.0 * (1 << 30), s).choice;
  EXPECT_EQ(big.algo, Algo::ring);
  EXPECT_EQ(big.proto, Proto::simple);
}

TEST(NcclChoice, NvlsOnEightH100ButNotOnFour) {
  EXPECT_EQ(nccl_tune(CollectiveOp::allreduce, 1 << 30, h100_node(8)).choice.algo, Algo::nvls);
  // 4 heads x 60 GB/s: 4 x 60 x 0.85 x 3/4 x 2 = 306 < ring's 360: NCCL keeps the ring.
  EXPECT_EQ(nccl_tune(CollectiveOp::allreduce, 1 << 30, h100_node(4)).choice.algo, Algo::ring);
  // NVLS is an allreduce here; allgather stays on the ring.
  EXPECT_EQ(nccl_tune(CollectiveOp::allgather, 1 << 30, h100_node(8)).choice.algo, Algo::ring);
}

TEST(NcclChoice, NvlsEstimateFollowsHeadFormula) {
  const Estimate e = nccl_tune(CollectiveOp::allreduce, 1 << 30, h100_node(8)).choice;
  // bw = bwIntra x nvlsEfficiency x (nCh - 1) / nCh x 2 = 40 x 0.85 x 7/8 x 2; busBw x 8.
  EXPECT_NEAR(e.bus_bw, 8 * 40 * 0.85 * 7 / 8 * 2, 1e-9);
  EXPECT_NEAR(e.alg_bw, e.bus_bw * 8 / 14, 1e-9);
  EXPECT_NEAR(e.latency_us, 25.0, 1e-9);   // NVLS latency = hwLat[NVLink][NVLS][Simple]
}

TEST(NcclChoice, ForcedChoicesAreHonouredOrRefused) {
  Forced f;
  f.has_algo = true;
  f.algo = Algo::tree;
  f.has_proto = true;
  f.proto = Proto::ll128;
  const Estimate e = nccl_tune(CollectiveOp::allreduce, 1 << 30, h100_node(8), f).choice;
  EXPECT_EQ(e.algo, Algo::tree);
  EXPECT_EQ(e.proto, Proto::ll128);
  Forced nvls_ag;
  nvls_ag.has_algo = true;
  nvls_ag.algo = Algo::collnet_direct;
  EXPECT_THROW(nccl_tune(CollectiveOp::allreduce, 1 << 20, h100_node(8), nvls_ag), std::exception);
  Forced ch;
  ch.channels = 6;
  const Estimate half = nccl_tune(CollectiveOp::allgather, 1 << 30, h100_node(8), ch).choice;
  EXPECT_EQ(half.channels, 6);
  EXPECT_NEAR(half.alg_bw, 180.0 * 8 / 7, 1e-9);   // 6 of 12 channels of 30 GB/s
}

TEST(NcclChoice, LL128IsOffWithoutNvlink) {
  NcclSystem s = h100_node(2);
  s.intra = IntraPath::pcie;
  s.nvswitch = false;
  s.nvls = false;
  s.intra_bw = 12;
  for (const Estimate& e : nccl_tune(CollectiveOp::allreduce, 1 << 20, s).estimates) {
    if (e.proto == Proto::ll128) {
      EXPECT_FALSE(e.enabled);
    }
  }
}

// enqueue.cc topoGetAlgoInfo (2.19-2.30): channels drop while bytes < nc x maxThreads x
// threadThreshold; maxThreads LL 512, LL128 640, Simple 512; thresholds LL 8 x nRanks on
// rings, LL128 8, Simple 64 (tuning.cc).
TEST(NcclLaunch, SmallMessagesLaunchFewerChannels) {
  // Simple: 100 KiB < nc x 512 x 64 = nc x 32 KiB until nc = 3.
  EXPECT_EQ(launch_channels(Algo::ring, Proto::simple, 100 * 1024, 8, 24, 16), 3);
  // Ring LL on 8 ranks: 8 x 8 = 64 B per thread, again 32 KiB per channel.
  EXPECT_EQ(launch_channels(Algo::ring, Proto::ll, 100 * 1024, 8, 24, 16), 3);
  // Tree LL: no nRanks factor, 512 x 8 = 4 KiB per channel: 100 KiB keeps 24.
  EXPECT_EQ(launch_channels(Algo::tree, Proto::ll, 100 * 1024, 8, 24, 16), 24);
  // LL128: 640 x 8 = 5 KiB per channel: 100 KiB -> 20.
  EXPECT_EQ(launch_channels(Algo::ring, Proto::ll128, 100 * 1024, 8, 24, 16), 20);
  // Large messages keep the graph's channels; NVLS launches the release's NVLS channels.
  EXPECT_EQ(launch_channels(Algo::ring, Proto::simple, 1 << 30, 8, 24, 16), 24);
  EXPECT_EQ(launch_channels(Algo::nvls, Proto::simple, 1024, 8, 8, 24), 24);
  EXPECT_EQ(launch_channels(Algo::ring, Proto::simple, 16, 8, 24, 16), 1);
}

// enqueue.cc calcCollChunking (2.19-2.30): loops = ceil(bytes / (nCh x chunksPerLoop x chunk)).
TEST(NcclLaunch, LoopCountsFollowCalcCollChunking) {
  const NcclSystem h = h100_node(8);
  // NVLS, 16 channels x 8 heads = 128 concurrent chunks of 128 KiB, shrunk for small sizes:
  // 8 MiB < 8 x 128 x 64 KiB -> 32 KiB; not < 2 x 128 x 32 KiB: loop 4 MiB -> 2 loops.
  EXPECT_EQ(loop_count(CollectiveOp::allreduce, Algo::nvls, Proto::simple, 8.0 * (1 << 20), h, 16), 2);
  // 2 MiB < 2 x 128 x 32 KiB -> 16 KiB chunks: one 2 MiB loop.
  EXPECT_EQ(loop_count(CollectiveOp::allreduce, Algo::nvls, Proto::simple, 2.0 * (1 << 20), h, 16), 1);
  // 1 GiB keeps 128 KiB chunks: 16 MiB loops -> 64.
  EXPECT_EQ(loop_count(CollectiveOp::allreduce, Algo::nvls, Proto::simple, 1 << 30, h, 16), 64);
  // Ring Simple allreduce: chunk = 4 steps x 512 KiB, loop = 24 ch x 8 ranks x 2 MiB = 384 MiB.
  EXPECT_EQ(loop_count(CollectiveOp::allreduce, Algo::ring, Proto::simple, 1 << 30, h, 24), 3);
  // Tree LL128 on one 8-GPU node, 2 channels: nsteps = 1 + log2(1) + 0.1 x 8 = 1.8. The chunk
  // (576000 B) halves while bytes / (2 x chunk) < 1.8 x 64 / 8 = 14.4: 7 and 14 halve it to
  // 144000, where 29 stops; the second rule (< 3.6) does not bite: 8 MiB / 288000 -> 30 loops.
  EXPECT_EQ(loop_count(CollectiveOp::allreduce, Algo::tree, Proto::ll128, 8.0 * (1 << 20), h, 2), 30);
  // Tree Simple on one 8-GPU node: depth 7 + log2(1) = 7. 4 MiB over 2 channels has 4 chunks of
  // 512 KiB (< 56): 8, 16 (< 56) halve to 128 KiB, where the first rule stops; 16 < 28 halves
  // to 64 KiB (32 chunks); 32 >= 7: 32 loops. 1 GiB keeps 512 KiB chunks: 1024 loops.
  EXPECT_EQ(loop_count(CollectiveOp::allreduce, Algo::tree, Proto::simple, 4.0 * (1 << 20), h, 2), 32);
  EXPECT_EQ(loop_count(CollectiveOp::allreduce, Algo::tree, Proto::simple, 1 << 30, h, 2), 1024);
}

TEST(NcclParse, NamesAndErrors) {
  EXPECT_EQ(parse_algo("NVLS"), Algo::nvls);
  EXPECT_EQ(parse_algo("collnet"), Algo::collnet_direct);
  EXPECT_EQ(parse_proto("ll128"), Proto::ll128);
  EXPECT_THROW(parse_proto("fast"), std::exception);
}

}  // namespace
}  // namespace stepsim::models::nccl
