// Running sweeps: parallel runs give the same results as serial ones, failed points become
// rows, resume keeps finished rows and reruns a half-written one, shards merge into the full run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "platforms/config_error.hpp"
#include "tools/sweep/sweep_merge.hpp"
#include "tools/sweep/sweep_runner.hpp"

namespace stepsim::sweep {
namespace {

// 2 ops x 4 algorithms x 6 sizes; tree cannot run allgather, so 6 points fail.
const char* kSweep = R"(version: 1
base:
  collective: {platform: dgx1-v100, gpus: 0-4}
axes:
  - param: op
    values: [allreduce, allgather]
  - param: algo
    values: [ring, tree, rhd, nccl]
  - param: size
    range: {from: 1KiB, to: 1GiB, factor: 16}
metric: time_s
)";

std::string temp_dir() {
  char dir[] = "/tmp/sweep-runner-XXXXXX";
  return mkdtemp(dir);
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> sorted_lines(const std::string& path) {
  auto lines = lines_of(path);
  std::sort(lines.begin(), lines.end());
  return lines;
}

RunSummary run(const Sweep& sweep, const std::string& out, int jobs = 2, bool resume = false, int shard = 0,
               int shards = 1) {
  RunOptions options;
  options.jobs = jobs;
  options.out = out;
  options.resume = resume;
  options.shard = shard;
  options.shards = shards;
  return run_sweep(sweep, options);
}

class SweepRunner : public ::testing::Test {
 protected:
  void TearDown() override { std::filesystem::remove_all(dir_); }
  Sweep sweep_ = parse_sweep(kSweep, "s.yaml");
  std::string dir_ = temp_dir();
};

TEST_F(SweepRunner, ParallelRunsWriteTheSameRowsAsASerialRun) {
  const RunSummary serial = run(sweep_, dir_ + "/serial.csv", 1);
  const RunSummary parallel = run(sweep_, dir_ + "/parallel.csv", 2);
  EXPECT_EQ(serial.points, 48);
  EXPECT_EQ(serial.evaluated, 48);
  EXPECT_EQ(serial.table.rows, parallel.table.rows);
  EXPECT_EQ(sorted_lines(dir_ + "/serial.csv"), sorted_lines(dir_ + "/parallel.csv"));
  EXPECT_EQ(lines_of(dir_ + "/serial.csv").size(), 49u);   // header + one line per point
  // Rows come back sorted by index whatever order the workers finished in.
  for (std::size_t i = 0; i < parallel.table.rows.size(); ++i) EXPECT_EQ(parallel.table.rows[i][1], std::to_string(i));
}

TEST_F(SweepRunner, FailedPointsAreRowsWithTheirError) {
  const RunSummary r = run(sweep_, "");
  EXPECT_EQ(r.failed, 6);
  const int algo = r.table.column("algo"), op = r.table.column("op"), error = r.table.column("error"),
            time = r.table.column("time_s");
  for (const auto& row : r.table.rows) {
    const bool unsupported = row[algo] == "tree" && row[op] == "allgather";
    EXPECT_EQ(row[error].empty(), !unsupported) << row[error];
    EXPECT_EQ(row[time].empty(), unsupported);
    if (unsupported) {
      EXPECT_NE(row[error].find("cannot run allgather"), std::string::npos) << row[error];
    }
  }
}

TEST_F(SweepRunner, ResumeKeepsFinishedRowsAndRerunsAHalfWrittenOne) {
  const std::string full = dir_ + "/full.csv", part = dir_ + "/part.csv";
  run(sweep_, full);
  // A sweep killed while writing: header, 20 complete rows, then half of the 21st.
  const auto lines = lines_of(full);
  {
    std::ofstream out(part);
    for (int i = 0; i <= 20; ++i) out << lines[i] << "\n";
    out << lines[21].substr(0, lines[21].size() / 2);
  }
  const RunSummary resumed = run(sweep_, part, 2, true);
  EXPECT_TRUE(resumed.discarded_partial_line);
  EXPECT_EQ(resumed.resumed, 20);
  EXPECT_EQ(resumed.evaluated, 28);
  EXPECT_EQ(sorted_lines(part), sorted_lines(full));
  const auto after = lines_of(part);
  for (int i = 0; i <= 20; ++i) EXPECT_EQ(after[i], lines[i]) << "a finished row moved or changed";
  // Resuming a finished sweep evaluates nothing.
  const RunSummary again = run(sweep_, part, 2, true);
  EXPECT_EQ(again.evaluated, 0);
  EXPECT_EQ(again.table.rows, resumed.table.rows);
}

TEST_F(SweepRunner, AnExistingOutputNeedsResumeAndMustBeThisSweeps) {
  const std::string out = dir_ + "/out.csv";
  run(sweep_, out);
  EXPECT_THROW(run(sweep_, out), ConfigError);
  std::string other = kSweep;
  other.replace(other.find("gpus: 0-4"), 9, "gpus: 0-3");
  try {
    run(parse_sweep(other, "other.yaml"), out, 2, true);
    FAIL() << "rows of another sweep were accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("not a point of this sweep"), std::string::npos) << e.what();
  }
}

TEST_F(SweepRunner, ShardsMergeIntoTheFullRun) {
  const std::string full = dir_ + "/full.csv";
  const RunSummary all = run(sweep_, full);
  std::vector<std::string> shards;
  int points = 0;
  for (int k = 0; k < 3; ++k) {
    shards.push_back(dir_ + "/shard" + std::to_string(k) + ".csv");
    const RunSummary s = run(sweep_, shards.back(), 1, false, k, 3);
    points += s.points;
    for (const auto& row : s.table.rows) EXPECT_EQ(std::stoi(row[1]) % 3, k);
  }
  EXPECT_EQ(points, 48);
  // A shard listed twice adds identical duplicates, which collapse.
  shards.push_back(shards[0]);
  const MergeResult merged = merge_results(shards);
  EXPECT_EQ(merged.table.rows, all.table.rows);
  EXPECT_EQ(merged.duplicates, 16);
  write_results(dir_ + "/merged.csv", merged.table);
  EXPECT_EQ(lines_of(dir_ + "/merged.csv"), [&] {
    auto lines = lines_of(full);   // the merged file is in index order
    std::sort(lines.begin() + 1, lines.end(), [](const std::string& a, const std::string& b) {
      return std::stoi(a.substr(17)) < std::stoi(b.substr(17));
    });
    return lines;
  }());
}

TEST_F(SweepRunner, MergeRejectsConflictingRowsForOnePoint) {
  const std::string a = dir_ + "/a.csv", b = dir_ + "/b.csv";
  run(sweep_, a);
  auto lines = lines_of(a);
  lines[5] += "x";   // same point id, another error text
  std::ofstream(b) << [&] {
    std::string text;
    for (const auto& l : lines) text += l + "\n";
    return text;
  }();
  try {
    merge_results({a, b});
    FAIL() << "conflicting rows were merged";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("has a different row in"), std::string::npos) << e.what();
  }
}

TEST_F(SweepRunner, PointsInTheirOwnProcessAgreeAcrossEngines) {
  // A ring on distinct links: the event engine (a process per point) and the analytical one
  // agree (docs/collectives.md), so the two rows of each size match.
  const Sweep s = parse_sweep(R"(version: 1
base:
  collective: {platform: dgx1-v100, gpus: 0-3, op: allgather, algo: ring}
axes:
  - param: size
    values: [1MiB, 64MiB]
  - param: engine
    values: [analytical, event]
metric: time_s
)",
                              "e.yaml");
  const RunSummary r = run(s, dir_ + "/engines.jsonl");
  ASSERT_EQ(r.table.rows.size(), 4u);
  const int time = r.table.column("time_s");
  for (std::size_t i = 0; i < 4; i += 2) {
    ASSERT_EQ(r.table.rows[i][r.table.column("error")], "");
    const double analytical = std::stod(r.table.rows[i][time]), event = std::stod(r.table.rows[i + 1][time]);
    EXPECT_NEAR(event / analytical, 1, 1e-3);
  }
}

TEST_F(SweepRunner, FiltersThatLeaveNothingAndBadShardsAreConfigErrors) {
  std::string text = kSweep;
  text += "filters: [{param: size, min: 1TiB}]\n";
  EXPECT_THROW(run(parse_sweep(text, "s.yaml"), ""), ConfigError);
  EXPECT_THROW(run(sweep_, "", 1, false, 3, 3), ConfigError);
}

}  // namespace
}  // namespace stepsim::sweep
