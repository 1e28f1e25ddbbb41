// The ring algorithm's per-channel rings (one per NIC across nodes, as NCCL's
// src/graph/search.cc builds them) and its compact pipelined chains.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "models/collectives/lowering.hpp"
#include "models/collectives/ring_order.hpp"
#include "models/tests/test_platforms.hpp"
#include "platforms/loader.hpp"

namespace stepsim::models {
namespace {

using test_support::Job;
using test_support::lower_and_check;
using test_support::whole;

/// The NIC vertices a route crosses.
std::set<int> nics_on(const platforms::Platform& p, const platforms::Route& route) {
  std::set<int> nics;
  for (const platforms::Hop& hop : route.hops) {
    const platforms::Link link = p.link(hop.link);
    for (int v : {link.a, link.b})
      if (p.vertex(v).kind == platforms::VertexKind::nic) nics.insert(v);
  }
  return nics;
}

std::int64_t stored_steps(const Schedule& s) {
  std::int64_t stored = 0;
  for (const Round& r : s.rounds) stored += static_cast<std::int64_t>(r.steps.size());
  return stored;
}

TEST(RingChannels, EachChannelCrossesTheNetworkThroughItsOwnGpusAndNics) {
  platforms::PlatformOptions options;
  options.nodes = 4;
  const platforms::Platform p = platforms::load_platform("dgx-h100", options);
  platforms::Allocation alloc;
  for (int g = 0; g < 32; ++g) alloc.gpus.push_back(g);
  const CollectiveContext ctx{p, alloc, {}};
  // Unset channels across nodes: one per NIC (8 on a DGX H100).
  ASSERT_EQ(default_ring_channels(ctx), 8);
  Schedule s;
  ASSERT_EQ(lower_and_check("ring", {CollectiveOp::allreduce, 32, 1e9, 0}, ctx, &s), std::nullopt);
  ASSERT_EQ(s.channels, 8);

  // Per (node boundary, direction) the 8 channels use 8 distinct GPU pairs, and together
  // every NIC of each node sends once and receives once.
  std::map<std::pair<int, int>, std::set<std::pair<int, int>>> pairs;
  std::map<int, std::set<int>> nics_by_channel;
  std::multiset<int> nic_uses;
  for (const Step& st : s.rounds.front().steps) {
    if (ctx.node_of(st.src) == ctx.node_of(st.dst)) continue;
    pairs[{ctx.node_of(st.src), ctx.node_of(st.dst)}].insert({st.src, st.dst});
    for (int nic : nics_on(p, ctx.route(st.src, st.dst))) {
      EXPECT_TRUE(nics_by_channel[st.channel].insert(nic).second) << "channel " << st.channel << " reuses NIC " << nic;
      nic_uses.insert(nic);
    }
  }
  ASSERT_EQ(pairs.size(), 4u);   // nodes 0->1->2->3->0
  for (const auto& [boundary, used] : pairs) EXPECT_EQ(used.size(), 8u);
  for (int nic : nic_uses) EXPECT_EQ(nic_uses.count(nic), 2u) << "NIC vertex " << nic;   // once out, once in
  EXPECT_EQ(std::set<int>(nic_uses.begin(), nic_uses.end()).size(), 32u);
  // Allreduce stays one compact round per phase whatever the channels' orders.
  ASSERT_EQ(s.rounds.size(), 2u);
  EXPECT_EQ(s.rounds[0].repeat, 31);
}

TEST(RingChannels, RotationsKeepTheWidestIntraNodeHops) {
  // DGX-1 V100 (hybrid cube mesh of NVLink 1 and 2, 4 NICs): every channel's path inside a
  // node is as wide as ring_order's, and the 4 channels enter each node at 4 different GPUs.
  platforms::PlatformOptions options;
  options.nodes = 2;
  const platforms::Platform p = platforms::load_platform("dgx1-v100", options);
  platforms::Allocation alloc;
  for (int g = 0; g < 16; ++g) alloc.gpus.push_back(g);
  const CollectiveContext ctx{p, alloc, {}};
  ASSERT_EQ(default_ring_channels(ctx), 4);
  auto narrowest_inside = [&](const std::vector<int>& ring) {
    double narrowest = 1e300;
    for (std::size_t i = 0; i + 1 < ring.size(); ++i)
      if (ctx.node_of(ring[i]) == ctx.node_of(ring[i + 1]))
        narrowest = std::min(narrowest, ctx.route(ring[i], ring[i + 1]).bandwidth);
    return narrowest;
  };
  const double widest = narrowest_inside(ring_order(ctx));
  std::set<int> entries;
  for (const std::vector<int>& ring : channel_ring_orders(ctx, 4)) {
    EXPECT_GE(narrowest_inside(ring), widest);
    entries.insert(ring[8]);
  }
  EXPECT_EQ(entries.size(), 4u);
}

TEST(RingChannels, EveryOpPassesTheCheckerAcrossNodes) {
  const auto ring = AlgorithmRegistry::instance().get("ring").make();
  auto check = [&](Job& setup) {
    const int n = setup.allocation.ranks();
    for (int channels : {0, 1, 3, 8, 11}) {
      setup.options.channels = channels;
      setup.options.chunk_bytes = 64 * 1024;
      for (CollectiveOp op : all_ops()) {
        const CollectiveSpec spec{op, n, 3e6, n / 2};
        if (!ring->supports(spec, setup.context(), nullptr)) continue;
        SCOPED_TRACE(std::string(to_string(op)) + " ranks " + std::to_string(n) + " channels " + std::to_string(channels));
        EXPECT_EQ(lower_and_check("ring", spec, setup.context()), std::nullopt);
      }
    }
  };
  for (int nodes = 2; nodes <= 4; ++nodes)
    for (int gpus : {1, 2, 3, 8}) {
      Job setup = whole(nodes, gpus);
      check(setup);
    }
  Job uneven = whole(2, 8);
  uneven.allocation.gpus = {0, 1, 2, 8, 9, 10, 11, 12};   // 3 on node 0, 5 on node 1
  check(uneven);
}

TEST(RingChannels, AllgatherAndReduceScatterStayCompactOnPerChannelRings) {
  // Blocks follow ring positions (block_owner[c] = channel c's ring), so each channel's pass
  // is one round repeated n-1 times however the channels' orders differ.
  Job small = whole(4, 8);
  const std::vector<std::vector<int>> rings = channel_ring_orders(small.context(), 8);
  ASSERT_NE(rings[0], rings[1]);
  for (CollectiveOp op : {CollectiveOp::allgather, CollectiveOp::reduce_scatter}) {
    Schedule s;
    ASSERT_EQ(lower_and_check("ring", {op, 32, 1e9, 0}, small.context(), &s), std::nullopt);
    EXPECT_EQ(s.block_owner, rings);
    ASSERT_EQ(s.rounds.size(), 1u);
    EXPECT_EQ(s.rounds[0].repeat, 31);
  }
  // 1024 ranks x 8 channels (too big to check symbolically): still every channel on its own
  // ring, stored as one round of 8 x 1024 steps for 8 x 1024 x 1023 expanded ones.
  Job large = whole(128, 8);
  large.options.channels = 8;
  const Schedule s = AlgorithmRegistry::instance().get("ring").make()->lower(
      {CollectiveOp::allgather, 1024, 1024.0 * 1024 * 1024, 0}, large.context());
  EXPECT_EQ(s.block_owner, channel_ring_orders(large.context(), 8));
  EXPECT_EQ(stored_steps(s), 8 * 1024);
  EXPECT_EQ(s.expanded_step_count(), 8LL * 1024 * 1023);
}

TEST(RingChannels, OneNodeKeepsOneRingAndOneChannel) {
  Job setup = whole(1, 8);
  EXPECT_EQ(default_ring_channels(setup.context()), 1);
  const auto rings = channel_ring_orders(setup.context(), 3);
  for (const auto& ring : rings) EXPECT_EQ(ring, ring_order(setup.context()));
}

TEST(PipelinedChain, SteadyStateIsOneRepeatedRound) {
  // 8 ranks, 256 chunks: fill (6 rounds) + steady (1 round x 250) + drain (6 rounds).
  Job setup = whole(1, 8);
  setup.options.chunk_bytes = 1e6 / 256;
  for (CollectiveOp op : {CollectiveOp::broadcast, CollectiveOp::reduce}) {
    Schedule s;
    ASSERT_EQ(lower_and_check("ring", {op, 8, 1e6, 3}, setup.context(), &s), std::nullopt);
    ASSERT_EQ(s.num_blocks, 256);
    ASSERT_EQ(s.rounds.size(), 13u);
    EXPECT_EQ(s.rounds[6].repeat, 250);
    EXPECT_EQ(s.rounds[6].block_shift, 1);
    EXPECT_EQ(s.expanded_step_count(), 7 * 256);
    EXPECT_EQ(stored_steps(s), 6 * 7 + 7);   // fill + drain hold 7 * 6 link-rounds, steady 7
  }
}

TEST(PipelinedChain, ThousandRanksStayBounded) {
  // 128 nodes x 8 GPUs, 8 channels: links x chunks per channel, within kMaxPipelineSteps;
  // more ranks trade chunks for size.
  Job setup = whole(128, 8);
  const Schedule s = AlgorithmRegistry::instance().get("ring").make()->lower(
      {CollectiveOp::broadcast, 1024, 1024.0 * 1024 * 1024, 0}, setup.context());
  EXPECT_EQ(s.channels, 8);
  EXPECT_EQ(s.num_blocks, 256);
  EXPECT_EQ(s.expanded_step_count(), 8LL * 1023 * 256);
  EXPECT_LE(stored_steps(s), lowering::kMaxPipelineSteps);
  const CollectiveContext ctx = setup.context();
  EXPECT_EQ(lowering::pipeline_chunk_count(ctx, 1024.0 * 1024 * 1024, 8, 16383), 16);
  EXPECT_EQ(lowering::pipeline_chunk_count(ctx, 1024.0 * 1024 * 1024, 8, 7), 256);
}

}  // namespace
}  // namespace stepsim::models
