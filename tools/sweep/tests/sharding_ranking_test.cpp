// DLRM sharding ranking: sorted rows, the exhaustive search never behind a planner,
// determinism, and the placement key's use and errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "platforms/config_error.hpp"
#include "platforms/loader.hpp"
#include "tools/sweep/sharding_ranking.hpp"
#include "workloads/generators/dlrm_sharding.hpp"
#include "workloads/workload.hpp"

namespace stepsim::sweep {
namespace {

// Five tables with unequal rows and pooling, so placements differ in lookup load.
constexpr const char* kWorkload = R"(version: 1
kind: dlrm
model:
  dense_features: 13
  bottom_mlp: [256, 64]
  top_mlp: [256, 1]
  embedding_dim: 64
  tables:
    - {name: user, rows: 2e7, pooling: 40}
    - {name: item, rows: 1e7, pooling: 20}
    - {name: ctx, rows: 1e6, pooling: 8}
    - {name: geo, rows: 1e5, pooling: 2}
    - {name: day, rows: 1e3, pooling: 1}
training:
  global_batch: 16384
  dtype: fp16
)";

class ShardingRankingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(file_) << kWorkload;
  }
  void TearDown() override { std::filesystem::remove(file_); }

  ShardingRanking rank(const std::string& gpus, ShardingRankingRequest request = {}) {
    request.workload = file_;
    const platforms::Allocation allocation = platforms::parse_allocation(gpus, platform_);
    return rank_sharding(request, platform_, allocation);
  }

  std::string file_ = ::testing::TempDir() + "sharding_ranking_test.yaml";
  platforms::Platform platform_ = platforms::load_platform("dgx-a100");
};

TEST_F(ShardingRankingTest, SortedAndExhaustiveIsNeverBehindAPlanner) {
  for (const char* gpus : {"0-1", "0-3"}) {
    const ShardingRanking r = rank(gpus);
    ASSERT_TRUE(r.exhaustive) << gpus << ": " << r.exhaustive_note;
    EXPECT_EQ(r.tables, 5);
    EXPECT_EQ(r.rows.size() + r.skipped.size(),
              workloads::sharding_planners().size() + other_sharding_plans().size() + 1);
    EXPECT_TRUE(std::is_sorted(r.rows.begin(), r.rows.end(), [](const auto& a, const auto& b) {
      return a.iteration_time < b.iteration_time;
    }));
    Seconds best = 0;
    for (const ShardingCandidate& c : r.rows)
      if (c.planner == "exhaustive") best = c.iteration_time;
    for (const ShardingCandidate& c : r.rows) {
      EXPECT_GT(c.throughput, 0);
      if (c.plan != "table_wise") continue;  // the search covers whole-table placements only
      EXPECT_LE(best, c.iteration_time) << gpus << " " << c.planner;
      EXPECT_EQ(c.placement.size(), 5u);
      EXPECT_GT(c.max_lookup_bytes, 0);
    }
  }
}

TEST_F(ShardingRankingTest, PlannerRowsReportTheirPlacement) {
  const ShardingRanking r = rank("0-3");
  int checked = 0;
  for (const ShardingCandidate& c : r.rows) {
    if (c.planner == "naive") {   // table i on rank i mod n
      EXPECT_EQ(c.placement, (std::vector<int>{0, 1, 2, 3, 0}));
      ++checked;
    }
    // size_greedy's busiest rank holds the 2e7-row, pooling-40 table alone: 16384 x 40 x 64 x 4 B.
    if (c.planner == "size_greedy") {
      EXPECT_DOUBLE_EQ(c.max_lookup_bytes, 16384.0 * 40 * 64 * 4);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2);
}

// The plans besides the table-wise planners are ranked too, each run with its own
// sharding.plan; TorchRec's planner reports the plan it chose.
TEST_F(ShardingRankingTest, OtherPlansAreRankedBesideThePlanners) {
  const ShardingRanking r = rank("0-3");
  std::set<std::string> ran;
  for (const ShardingCandidate& c : r.rows) {
    ran.insert(c.planner);
    if (c.plan == "table_wise") continue;
    EXPECT_EQ(c.planner, c.plan);
    if (c.plan == "torchrec") EXPECT_TRUE(!c.plan_text.empty() || c.placement.size() == 5u);
    else EXPECT_TRUE(c.placement.empty()) << c.plan;
  }
  for (const std::string& plan : other_sharding_plans()) EXPECT_TRUE(ran.count(plan)) << plan;
  ShardingRankingRequest only;
  only.planners = {"torchrec"};
  const ShardingRanking one = rank("0-3", only);
  ASSERT_EQ(one.rows.size(), 1u);
  EXPECT_FALSE(one.exhaustive);
}

TEST_F(ShardingRankingTest, Deterministic) {
  const ShardingRanking a = rank("0-3"), b = rank("0-3");
  ASSERT_EQ(a.rows.size(), b.rows.size());
  for (std::size_t i = 0; i < a.rows.size(); ++i) {
    EXPECT_EQ(a.rows[i].planner, b.rows[i].planner);
    EXPECT_EQ(a.rows[i].iteration_time, b.rows[i].iteration_time);
    EXPECT_EQ(a.rows[i].placement, b.rows[i].placement);
  }
}

TEST_F(ShardingRankingTest, ExhaustiveLimits) {
  ShardingRankingRequest request;
  request.exhaustive_max_tables = 4;
  EXPECT_FALSE(rank("0-3", request).exhaustive);
  request = {};
  request.max_placements = 1000;   // 4^5 = 1024
  const ShardingRanking r = rank("0-3", request);
  EXPECT_FALSE(r.exhaustive);
  EXPECT_NE(r.exhaustive_note.find("not run"), std::string::npos);
}

TEST_F(ShardingRankingTest, BadInputIsAConfigError) {
  ShardingRankingRequest request;
  request.planners = {"nope"};
  EXPECT_THROW(rank("0-3", request), ConfigError);
  request = {};
  request.workload = "llama3-8b";   // not dlrm
  const platforms::Allocation allocation = platforms::parse_allocation("0-3", platform_);
  EXPECT_THROW(rank_sharding(request, platform_, allocation), ConfigError);
}

TEST_F(ShardingRankingTest, PlacementKeyIsValidated) {
  const platforms::Allocation allocation = platforms::parse_allocation("0-3", platform_);
  const workloads::JobContext job{platform_, allocation};
  EXPECT_NO_THROW(workloads::load_workload(file_, job, {"sharding.placement=[3,2,1,0,0]"}));
  for (const char* bad : {"sharding.placement=[0,1,2,3]", "sharding.placement=[0,1,2,3,4]",
                          "sharding.placement=[0,1,x,3,0]", "sharding.placement=[0,1,-1,3,0]"})
    EXPECT_THROW(workloads::load_workload(file_, job, {bad}), ConfigError) << bad;
  EXPECT_THROW(workloads::load_workload(file_, job, {"sharding.plan=row_wise", "sharding.placement=[0,1,2,3,0]"}),
               ConfigError);
}

TEST_F(ShardingRankingTest, YamlPlacementIsUsedAndReported) {
  const platforms::Allocation allocation = platforms::parse_allocation("0-3", platform_);
  const workloads::JobContext job{platform_, allocation};
  const workloads::Trace t = workloads::parse_workload(
      std::string(kWorkload) + "sharding: {placement: [3, 3, 0, 1, 2]}\n", "placement.yaml", job);
  bool found = false;
  for (const std::string& note : t.notes) {
    if (note.find("by planner placement") != std::string::npos) found = true;
    if (note.rfind("table placement", 0) == 0) {
      EXPECT_NE(note.find("[3,3,0,1,2]; lookup bytes per rank: [33554432,8388608,4194304,251658240]"),
                std::string::npos)
          << note;
    }
  }
  EXPECT_TRUE(found);
  EXPECT_THROW(workloads::parse_workload(std::string(kWorkload) + "sharding: {placement: {a: 1}}\n", "p.yaml", job),
               ConfigError);
}

}  // namespace
}  // namespace stepsim::sweep
