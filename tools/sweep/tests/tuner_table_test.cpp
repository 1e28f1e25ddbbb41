// The NCCL tuner table: contiguous ranges, each row the argmin of its candidates, errors.
#include <gtest/gtest.h>

#include "platforms/config_error.hpp"
#include "platforms/loader.hpp"
#include "sim/collective_prediction.hpp"
#include "tools/sweep/tuner_table.hpp"

namespace stepsim::sweep {
namespace {

class TunerTableTest : public ::testing::Test {
 protected:
  // dgx1-v100's 5-GPU allocation: an irregular NVLink subgraph where the choice varies with size.
  platforms::Platform platform = platforms::load_platform("dgx1-v100");
  platforms::Allocation allocation = platforms::parse_allocation("0-4", platform);
  models::CollectiveContext ctx{platform, allocation, {}};

  TunerRequest request(std::vector<TunerCandidate> candidates) const {
    TunerRequest r;
    r.ops = {models::CollectiveOp::allreduce, models::CollectiveOp::allgather};
    r.min_bytes = 1024;
    r.max_bytes = 1024.0 * 1024 * 1024;
    r.candidates = std::move(candidates);
    return r;
  }

  /// The fastest candidate's time at `bytes`, predicted directly.
  Seconds best_time(models::CollectiveOp op, Bytes bytes, const std::vector<TunerCandidate>& candidates) {
    auto engine = sim::make_engine("analytical");
    models::CollectiveSpec spec{};
    spec.op = op;
    spec.bytes = bytes;
    spec.ranks = allocation.ranks();
    Seconds best = 1e300;
    for (const TunerCandidate& c : candidates) {
      models::AlgorithmOptions options;
      sim::add_algo_params(c.params, options);
      const models::CollectiveContext cctx{platform, allocation, options};
      if (sim::collective_unsupported(c.algo, spec, cctx)) continue;
      try {
        best = std::min(best, sim::predict_collective(c.algo, spec, cctx, *engine).result.time);
      } catch (const ConfigError&) {
      }
    }
    return best;
  }

  /// The time of the row's own choice (its candidate label) at `bytes`.
  Seconds row_time(const TunerRow& row, Bytes bytes, const std::vector<TunerCandidate>& candidates) {
    for (const TunerCandidate& c : candidates)
      if (c.label() == row.candidate) return best_time(row.op, bytes, {c});
    ADD_FAILURE() << "no candidate " << row.candidate;
    return 0;
  }
};

TEST_F(TunerTableTest, SizesDoubleAndEndAtMax) {
  EXPECT_EQ(tuner_sizes(1024, 8192), (std::vector<Bytes>{1024, 2048, 4096, 8192}));
  EXPECT_EQ(tuner_sizes(1000, 5000), (std::vector<Bytes>{1000, 2000, 4000, 5000}));
  EXPECT_EQ(tuner_sizes(64, 64), (std::vector<Bytes>{64}));
}

TEST_F(TunerTableTest, RangesCoverEachOpContiguouslyAndMerge) {
  const TunerRequest r = request(nccl_candidates());
  const std::vector<TunerRow> rows = build_tuner_table(r, ctx);
  for (models::CollectiveOp op : r.ops) {
    Bytes next = r.min_bytes;
    int count = 0;
    const TunerRow* previous = nullptr;
    for (const TunerRow& row : rows) {
      if (row.op != op) continue;
      ++count;
      EXPECT_EQ(row.min_bytes, next) << "gap or overlap before row " << count;
      EXPECT_LE(row.min_bytes, row.max_bytes);
      EXPECT_GT(row.busbw_GBps, 0);
      if (previous) {   // neighbours with the same choice would have been merged
        EXPECT_FALSE(previous->algorithm == row.algorithm && previous->protocol == row.protocol &&
                     previous->channels == row.channels);
      }
      EXPECT_NE(row.algorithm.rfind("stepsim:", 0), 0u) << "nccl-only rows carry NCCL names";
      next = row.max_bytes + 1;
      previous = &row;
    }
    EXPECT_EQ(next, r.max_bytes + 1);
    EXPECT_GE(count, 2) << "small and large messages should not pick the same algorithm/protocol";
  }
}

TEST_F(TunerTableTest, EachRowIsTheArgminAtItsSizes) {
  const std::vector<TunerCandidate> candidates = nccl_candidates();
  const std::vector<TunerRow> rows = build_tuner_table(request(candidates), ctx);
  for (const TunerRow& row : rows)
    for (Bytes size : {row.min_bytes, row.max_bytes + 1 == 1024.0 * 1024 * 1024 + 1 ? row.max_bytes
                                                                                     : (row.max_bytes + 1) / 2}) {
      EXPECT_DOUBLE_EQ(row_time(row, size, candidates), best_time(row.op, size, candidates))
          << models::to_string(row.op) << " at " << size << " bytes, row " << row.candidate;
    }
}

TEST_F(TunerTableTest, OtherAlgorithmsAreMarkedAsStepsimOnes) {
  const std::vector<TunerCandidate> candidates = {{"nccl", {}}, {"ring", {}}, {"rhd", {}}, {"blink", {}}};
  TunerRequest r = request(candidates);
  r.ops = {models::CollectiveOp::allreduce};
  const std::vector<TunerRow> rows = build_tuner_table(r, ctx);
  ASSERT_FALSE(rows.empty());
  for (const TunerRow& row : rows) {
    const bool nccl = row.candidate == "nccl";
    EXPECT_EQ(row.algorithm.rfind("stepsim:", 0) == 0, !nccl) << row.algorithm;
    EXPECT_DOUBLE_EQ(row_time(row, row.min_bytes, candidates), best_time(row.op, row.min_bytes, candidates));
  }
}

TEST_F(TunerTableTest, Deterministic) {
  const TunerRequest r = request(nccl_candidates());
  EXPECT_EQ(tuner_table_csv(build_tuner_table(r, ctx)), tuner_table_csv(build_tuner_table(r, ctx)));
}

TEST_F(TunerTableTest, CsvHasTheDocumentedHeader) {
  TunerRequest r = request(nccl_candidates());
  r.ops = {models::CollectiveOp::allreduce};
  r.max_bytes = 4096;
  const std::string csv = tuner_table_csv(build_tuner_table(r, ctx));
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "op,min_bytes,max_bytes,algorithm,protocol,channels,predicted_busbw_GBps");
  EXPECT_NE(csv.find("\nallreduce,1024,"), std::string::npos);
}

TEST_F(TunerTableTest, BadInputIsAConfigError) {
  TunerRequest r = request(nccl_candidates());
  r.min_bytes = 0;
  EXPECT_THROW(build_tuner_table(r, ctx), ConfigError);
  r = request(nccl_candidates());
  r.max_bytes = 512;   // below min
  EXPECT_THROW(build_tuner_table(r, ctx), ConfigError);
  r = request(nccl_candidates());
  r.min_bytes = 1.5;   // not whole bytes
  EXPECT_THROW(build_tuner_table(r, ctx), ConfigError);
  r = request({});
  EXPECT_THROW(build_tuner_table(r, ctx), ConfigError);
  r = request(nccl_candidates());
  r.ops.clear();
  EXPECT_THROW(build_tuner_table(r, ctx), ConfigError);
  // Only a forced combination NCCL never runs: every size fails with the reasons listed.
  r = request({{"nccl", {"algo=tree", "proto=LL"}}});
  r.ops = {models::CollectiveOp::allgather};
  EXPECT_THROW(build_tuner_table(r, ctx), ConfigError);
  const platforms::Allocation one = platforms::parse_allocation("0", platform);
  const models::CollectiveContext single{platform, one, {}};
  EXPECT_THROW(build_tuner_table(request(nccl_candidates()), single), ConfigError);
}

}  // namespace
}  // namespace stepsim::sweep
