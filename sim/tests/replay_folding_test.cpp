// Folding ranks that replay alike (ReplayCore::run with fold): every per-rank figure equals the
// unfolded replay's bit for bit on generated traces of every parallel layout (FSDP, TP, async TP,
// PP, CP, a 3D 405B-shaped job with Float8 all-gathers, whose tree all-reduces split the ranks by
// depth); the ranks fold as far as their symmetry allows; links see every instance's bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "platforms/loader.hpp"
#include "sim/replay.hpp"
#include "sim/replay_core.hpp"
#include "sim/replay_plan.hpp"
#include "workloads/workload.hpp"

namespace stepsim::sim {
namespace {

struct Job {
  Job(const std::string& preset, const std::vector<std::string>& overrides, int nodes) {
    platforms::PlatformOptions options;
    options.nodes = nodes;
    platform = std::make_unique<platforms::Platform>(platforms::load_platform("dgx-h100", options));
    allocation = platforms::parse_allocation("", *platform);
    trace = workloads::load_workload(preset, workloads::JobContext{*platform, allocation}, overrides);
  }
  struct Run {
    Prediction prediction;
    int replayed = 0;
    std::vector<std::int64_t> starts;
  };
  Run replay(bool fold) const {
    const Placement placement{*platform, allocation};
    ReplayPlan plan(trace, placement);
    ReplayCore core(trace, placement, plan);
    core.run(*make_replay_backend("analytical"), fold);
    return {core.prediction(), core.replayed_ranks(), core.schedule_starts()};
  }
  std::unique_ptr<platforms::Platform> platform;
  platforms::Allocation allocation;
  workloads::Trace trace;
};

void expect_same(const Prediction& folded, const Prediction& whole) {
  ASSERT_EQ(folded.rank_time.size(), whole.rank_time.size());
  for (std::size_t r = 0; r < whole.rank_time.size(); ++r) EXPECT_EQ(folded.rank_time[r], whole.rank_time[r]) << "rank " << r;
  EXPECT_EQ(folded.iteration_time, whole.iteration_time);
  EXPECT_EQ(folded.slowest_rank, whole.slowest_rank);
  EXPECT_EQ(folded.breakdown.compute, whole.breakdown.compute);
  EXPECT_EQ(folded.breakdown.communication, whole.breakdown.communication);
  EXPECT_EQ(folded.breakdown.exposed_communication, whole.breakdown.exposed_communication);
  EXPECT_EQ(folded.breakdown.idle, whole.breakdown.idle);
  for (const auto& [name, time] : whole.breakdown.by_group) {
    EXPECT_EQ(folded.breakdown.by_group.at(name).communication, time.communication) << name;
    EXPECT_EQ(folded.breakdown.by_group.at(name).exposed, time.exposed) << name;
  }
  EXPECT_EQ(folded.ops_replayed, whole.ops_replayed);
}

void expect_folds_exactly(const Job& job, int at_most) {
  const Job::Run folded = job.replay(true), whole = job.replay(false);
  expect_same(folded.prediction, whole.prediction);
  EXPECT_EQ(whole.replayed, job.trace.ranks);
  EXPECT_LE(folded.replayed, at_most);
  EXPECT_GE(folded.replayed, 1);
  EXPECT_EQ(folded.starts, whole.starts);   // every instance counted once, replayed or not
}

TEST(ReplayFolding, LayoutsReplayTheSameFoldedAsWhole) {
  // 1D FSDP and CP 2 over two nodes: one 16-rank FSDP group whose members finish its
  // collectives at different offsets (ring and tree positions across the nodes): nothing folds.
  expect_folds_exactly(Job("llama3-8b", {"training.sequence=2048"}, 2), 16);
  expect_folds_exactly(Job("llama3-8b", {"training.sequence=4096", "parallelism.cp=2"}, 2), 16);
  // TP 2: the two ranks of a TP pair are alike (a two-rank ring is symmetric), sync or async.
  expect_folds_exactly(Job("llama3-8b", {"training.sequence=2048", "parallelism.tp=2"}, 2), 8);
  expect_folds_exactly(Job("llama3-8b", {"training.sequence=2048", "training.compile=true", "parallelism.tp=2",
                                         "tensor_parallel.async=true"},
                           2),
                       8);
  // PP 2: each stage is one node whose 8-rank FSDP group runs on the NVSwitch: one class each.
  expect_folds_exactly(
      Job("llama3-8b", {"training.sequence=2048", "parallelism.pp=2", "training.gradient_accumulation=4"}, 2), 2);
}

TEST(ReplayFolding, A512RankThreeDimensionalJobFoldsToAFewRanks) {
  // Table 5's layout (TP 8 x PP 8 x FSDP 8, interleaved, compile, Float8 with fp8 all-gathers
  // and their amax all-reduce, async TP) with 16 blocks: the tree all-reduces on the 8-node
  // FSDP groups part a stage's 64 ranks by tree depth, at most 8 classes per stage.
  const Job job("llama3-405b-3d", {"model.layers=16", "training.micro_batch=1"}, 64);
  expect_folds_exactly(job, 8 * 8);
}

TEST(ReplayFolding, ReplayFoldsUnlessATimelineIsAsked) {
  const Job job("llama3-8b", {"training.sequence=2048", "parallelism.tp=2"}, 2);
  const Placement placement{*job.platform, job.allocation};
  ReplayOptions options;
  const Prediction folded = sim::replay(job.trace, placement, options);
  std::ostringstream timeline;
  options.timeline = &timeline;
  const Prediction whole = sim::replay(job.trace, placement, options);
  expect_same(folded, whole);
  EXPECT_EQ(folded.critical_path.size(), whole.critical_path.size());
  // The folded replay says so: 8 of the 16 ranks (the TP pairs) ran.
  EXPECT_NE(std::find(folded.notes.begin(), folded.notes.end(),
                      "8 of 16 ranks replayed: the others provably replay as one of them (same program, collective "
                      "timings and peers) and report its times"),
            folded.notes.end());
  EXPECT_EQ(whole.notes.size() + 1, folded.notes.size());
  EXPECT_FALSE(timeline.str().empty());
}

}  // namespace
}  // namespace stepsim::sim
