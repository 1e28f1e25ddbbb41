// Every algorithm of this folder, on every op it supports, over 2..17 ranks and several
// channel counts, passes the data-movement checker; plus properties specific to each one.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>

#include "models/collectives/ring_order.hpp"
#include "models/tests/test_platforms.hpp"
#include "platforms/config_error.hpp"

namespace stepsim::models {
namespace {

using test_support::lower_and_check;
using test_support::Job;
using test_support::whole;

const std::map<std::string, std::set<CollectiveOp>> kSupported = {
    {"ring", {CollectiveOp::allgather, CollectiveOp::reduce_scatter, CollectiveOp::allreduce, CollectiveOp::broadcast,
              CollectiveOp::reduce}},
    {"tree", {CollectiveOp::allreduce, CollectiveOp::broadcast, CollectiveOp::reduce}},
    {"rhd", {CollectiveOp::allgather, CollectiveOp::reduce_scatter, CollectiveOp::allreduce, CollectiveOp::broadcast,
             CollectiveOp::reduce}},
    {"direct", {CollectiveOp::allgather, CollectiveOp::reduce_scatter, CollectiveOp::allreduce, CollectiveOp::broadcast,
                CollectiveOp::reduce, CollectiveOp::alltoall, CollectiveOp::sendrecv}},
    {"hierarchical", {CollectiveOp::allgather, CollectiveOp::reduce_scatter, CollectiveOp::allreduce,
                      CollectiveOp::broadcast, CollectiveOp::reduce}},
};

/// Roots worth trying: first, last and one in the middle.
std::vector<int> roots(CollectiveOp op, int n) {
  if (op != CollectiveOp::broadcast && op != CollectiveOp::reduce) return {0};
  return {0, n / 2, n - 1};
}

/// Lowers every supported op (and every root) and checks it; unsupported ops must be refused.
void check_all_ops(const std::string& algo, Job& setup) {
  const int n = setup.allocation.ranks();
  const auto algorithm = AlgorithmRegistry::instance().get(algo).make();
  for (int channels : {1, 2, 3}) {
    setup.options.channels = channels;
    setup.options.chunk_bytes = 256 * 1024;
    const CollectiveContext ctx = setup.context();
    for (CollectiveOp op : all_ops()) {
      for (int root : roots(op, n)) {
        const CollectiveSpec spec{op, n, 4.0 * 1024 * 1024, root};
        SCOPED_TRACE(algo + " " + to_string(op) + " ranks " + std::to_string(n) + " channels " +
                     std::to_string(channels) + " root " + std::to_string(root));
        std::string why;
        const bool expected = kSupported.at(algo).count(op) > 0;
        ASSERT_EQ(algorithm->supports(spec, ctx, &why), expected) << why;
        if (!expected) {
          EXPECT_FALSE(why.empty());
          EXPECT_THROW(algorithm->lower(spec, ctx), ConfigError);
          continue;
        }
        Schedule s;
        EXPECT_EQ(lower_and_check(algo, spec, ctx, &s), std::nullopt);
        EXPECT_GT(s.expanded_step_count(), 0);
      }
    }
  }
}

class FlatAlgorithms : public ::testing::TestWithParam<std::string> {};

TEST_P(FlatAlgorithms, EveryOpEveryRankCount) {
  for (int n = 2; n <= 17; ++n) {
    Job setup = whole(1, n);
    check_all_ops(GetParam(), setup);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, FlatAlgorithms, ::testing::Values("ring", "tree", "rhd", "direct"));

TEST(FlatAlgorithms, SeveralNodes) {
  // Single-level algorithms also run across nodes (3 nodes x 3 GPUs).
  for (const char* algo : {"ring", "tree", "rhd", "direct"}) {
    Job setup = whole(3, 3);
    check_all_ops(algo, setup);
  }
}

TEST(Hierarchical, TwoToFourNodesOfTwoToEightGpus) {
  for (int nodes = 2; nodes <= 4; ++nodes)
    for (int gpus : {1, 2, 3, 5, 8}) {
      Job setup = whole(nodes, gpus);
      check_all_ops("hierarchical", setup);
    }
}

TEST(Hierarchical, InterleavedAllocation) {
  // Ranks alternate between two nodes of 4 GPUs: rails are not contiguous rank ranges.
  Job setup = whole(2, 4);
  setup.allocation.gpus = {0, 4, 1, 5, 2, 6, 3, 7};
  check_all_ops("hierarchical", setup);
  check_all_ops("ring", setup);
}

TEST(Hierarchical, RefusesOneNodeAndUnevenNodes) {
  const auto algorithm = AlgorithmRegistry::instance().get("hierarchical").make();
  std::string why;
  Job one = whole(1, 8);
  const CollectiveSpec spec{CollectiveOp::allreduce, 8, 1e6, 0};
  EXPECT_FALSE(algorithm->supports(spec, one.context(), &why));
  EXPECT_NE(why.find("one node"), std::string::npos) << why;
  EXPECT_THROW(algorithm->lower(spec, one.context()), ConfigError);

  Job uneven = whole(2, 8);
  uneven.allocation.gpus = {0, 1, 2, 8, 9, 10, 11, 12};   // 3 on node 0, 5 on node 1
  EXPECT_FALSE(algorithm->supports(spec, uneven.context(), &why));
  EXPECT_NE(why.find("GPUs per node differ (3 vs 5)"), std::string::npos) << why;
}

TEST(Hierarchical, OnlyOneGpuPerNodeCrossesTheNetworkPerShard) {
  // Allreduce over 3 nodes x 4 GPUs: network bytes per GPU = 2 (N-1)/N of its 1/G shard.
  Job setup = whole(3, 4);
  const CollectiveSpec spec{CollectiveOp::allreduce, 12, 12e6, 0};
  Schedule s;
  ASSERT_EQ(lower_and_check("hierarchical", spec, setup.context(), &s), std::nullopt);
  std::vector<double> inter(12, 0);
  s.for_each_expanded([&](std::int64_t, const Step& st) {
    if (setup.context().node_of(st.src) != setup.context().node_of(st.dst)) inter[static_cast<std::size_t>(st.src)] += st.wire_bytes;
  });
  for (double bytes : inter) EXPECT_NEAR(bytes, 2.0 * 2 / 3 * 12e6 / 4, 1e-3);
}

TEST(Ring, AllreduceSendsTwiceTheShareOfEveryRank) {
  // Bandwidth optimality (Patarasuk & Yuan 2009): each rank sends 2 (n-1)/n of the buffer.
  for (int n : {2, 5, 8}) {
    Job setup = whole(1, n);
    setup.options.channels = 2;
    const CollectiveSpec spec{CollectiveOp::allreduce, n, 1e6, 0};
    Schedule s;
    ASSERT_EQ(lower_and_check("ring", spec, setup.context(), &s), std::nullopt);
    std::vector<double> sent(static_cast<std::size_t>(n), 0);
    s.for_each_expanded([&](std::int64_t, const Step& st) { sent[static_cast<std::size_t>(st.src)] += st.wire_bytes; });
    for (double bytes : sent) EXPECT_NEAR(bytes, 2.0 * (n - 1) / n * 1e6, 1e-6);
  }
}

TEST(Ring, OrderFollowsTheWidestCycle) {
  // crossed_node's NVLinks form 0-2-1-3-0; rank order 0-1-2-3 would cross PCIe.
  const platforms::Platform p = test_support::crossed_node();
  platforms::Allocation alloc{{0, 1, 2, 3}};
  const CollectiveContext ctx{p, alloc, {}};
  EXPECT_EQ(ring_order(ctx), (std::vector<int>{0, 2, 1, 3}));
  Schedule s;
  ASSERT_EQ(lower_and_check("ring", {CollectiveOp::allgather, 4, 4e6, 0}, ctx, &s), std::nullopt);
  s.for_each_expanded([&](std::int64_t, const Step& st) {
    EXPECT_DOUBLE_EQ(ctx.route(st.src, st.dst).bandwidth, 100e9) << st.src << "->" << st.dst;
  });
}

TEST(Ring, OrderIsRankOrderWhenAllHopsAreEqual) {
  Job setup = whole(2, 4);
  EXPECT_EQ(ring_order(setup.context()), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(CompactForm, RingAllreduceAt16384Ranks) {
  // 2048 nodes x 8 GPUs: the ring is one compact round per phase, never materialised, with
  // one channel (its own rotated ring) per NIC by default.
  const auto start = std::chrono::steady_clock::now();
  Job setup = whole(2048, 8);
  const int n = 16384;
  const Schedule s = AlgorithmRegistry::instance().get("ring").make()->lower(
      {CollectiveOp::allreduce, n, 1024.0 * 1024 * 1024, 0}, setup.context());
  ASSERT_EQ(s.rounds.size(), 2u);
  std::size_t stored = 0;
  for (const Round& r : s.rounds) {
    EXPECT_EQ(r.repeat, n - 1);
    stored += r.steps.size();
  }
  ASSERT_EQ(s.channels, 8);
  EXPECT_EQ(stored, 2u * n * 8);
  EXPECT_EQ(s.expanded_step_count(), 2LL * (n - 1) * n * 8);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
}

TEST(CompactForm, HierarchicalAllreduceKeepsRailsCompact) {
  Job setup = whole(256, 8);
  const int n = 2048;
  const Schedule s = AlgorithmRegistry::instance().get("hierarchical").make()->lower(
      {CollectiveOp::allreduce, n, 1e9, 0}, setup.context());
  // 7 explicit intra rounds, one compact round per rail phase, 7 intra rounds.
  ASSERT_EQ(s.rounds.size(), 16u);
  EXPECT_EQ(s.rounds[7].repeat, 255);
  EXPECT_EQ(s.expanded_step_count(), 2LL * 7 * n + 2LL * 255 * n);
}

TEST(CompactForm, SmallCompactScheduleStillChecks) {
  Job setup = whole(1, 9);
  Schedule s;
  ASSERT_EQ(lower_and_check("ring", {CollectiveOp::reduce_scatter, 9, 9e6, 0}, setup.context(), &s), std::nullopt);
  ASSERT_EQ(s.rounds.size(), 1u);
  EXPECT_EQ(s.rounds[0].repeat, 8);
}

TEST(Tree, EveryRankIsInnerInAtMostOneTree) {
  // The point of NCCL's double binary tree: a rank forwards down in one tree only (even n).
  for (int n : {4, 6, 8, 16}) {
    Job setup = whole(1, n);
    Schedule s;
    ASSERT_EQ(lower_and_check("tree", {CollectiveOp::allreduce, n, 1e6, 0}, setup.context(), &s), std::nullopt);
    std::set<int> inner[2];
    s.for_each_expanded([&](std::int64_t, const Step& st) {
      if (st.combine == Combine::replace) inner[st.channel % 2].insert(st.src);
    });
    for (int r : inner[0]) EXPECT_EQ(inner[1].count(r), 0u) << "rank " << r << " of " << n;
  }
}

TEST(Tree, PipelineChunksFollowChunkBytes) {
  Job setup = whole(1, 8);
  setup.options.chunk_bytes = 1e5;
  Schedule s;
  ASSERT_EQ(lower_and_check("tree", {CollectiveOp::broadcast, 8, 1e6, 3}, setup.context(), &s), std::nullopt);
  EXPECT_EQ(s.num_blocks, 10);
  // Binary tree of 8: depth 3 from the root, so 10 chunks drain in 10 + 3 - 1 rounds.
  EXPECT_EQ(s.rounds.size(), 12u);
}

TEST(Rhd, RoundCountIsLogarithmic) {
  // 2 log2(p) rounds for the largest power of two p <= n, plus pre and post fold otherwise.
  for (auto [n, rounds] : {std::pair{8, 6u}, {12, 8u}, {16, 8u}, {17, 10u}}) {
    Job setup = whole(1, n);
    Schedule s;
    ASSERT_EQ(lower_and_check("rhd", {CollectiveOp::allreduce, n, 1e6, 0}, setup.context(), &s), std::nullopt);
    EXPECT_EQ(s.rounds.size(), rounds) << n;
  }
}

TEST(Algorithms, RefuseMismatchedRanks) {
  Job setup = whole(1, 4);
  EXPECT_THROW(AlgorithmRegistry::instance().get("ring").make()->lower({CollectiveOp::allreduce, 5, 1e6, 0},
                                                                        setup.context()),
               ConfigError);
  EXPECT_THROW(AlgorithmRegistry::instance().get("rhd").make()->lower({CollectiveOp::broadcast, 4, 1e6, 4},
                                                                       setup.context()),
               ConfigError);
}

}  // namespace
}  // namespace stepsim::models
