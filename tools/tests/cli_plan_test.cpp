// `stepsim plan` as a user runs it: the same stdout on every run (wall time goes to stderr), the
// documented JSON keys, layouts that fit and reproduce with `stepsim simulate`, exit 2 with the
// fix when nothing fits.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tools/tests/cli_run.hpp"

namespace stepsim::cli_test {
namespace {

const std::vector<std::string> kSmallPlan = {"plan",
                                             "dgx-h100",
                                             "llama3-8b",
                                             "--gpus",
                                             "8",
                                             "--global-batch",
                                             "8",
                                             "--seq",
                                             "2048",
                                             "-p",
                                             "workload.model.layers=2",
                                             "--top",
                                             "3"};

TEST(CliPlan, SameOutputEveryRunAndTheDocumentedKeys) {
  std::vector<std::string> args = kSmallPlan;
  args.insert(args.end(), {"--format", "json"});
  const RunResult first = run_stepsim(args), second = run_stepsim(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, second.out);
  EXPECT_NE(first.err.find("layouts/s"), std::string::npos) << first.err;
  const nlohmann::json plan = nlohmann::json::parse(first.out);
  for (const char* key : {"platform", "model", "gpus", "global_batch", "sequence", "layouts", "fit", "top", "notes"})
    EXPECT_TRUE(plan.contains(key)) << key;
  ASSERT_EQ(plan["top"].size(), 3u);
  double previous = 0;
  for (const auto& layout : plan["top"]) {
    EXPECT_GE(layout["iteration_time_s"].get<double>(), previous);  // fastest first
    previous = layout["iteration_time_s"].get<double>();
    EXPECT_LE(layout["required_memory_bytes"].get<double>(), 80.0 * (1 << 30));
  }
  // The best layout's overrides reproduce its time with `stepsim simulate`.
  std::vector<std::string> simulate = {"simulate", "dgx-h100", "llama3-8b", "-p", "workload.model.layers=2"};
  for (const auto& o : plan["top"][0]["overrides"])
    simulate.insert(simulate.end(), {"-p", "workload." + o.get<std::string>()});
  simulate.insert(simulate.end(), {"--format", "json"});
  const RunResult replay = run_stepsim(simulate);
  ASSERT_EQ(replay.exit_code, 0) << replay.err;
  EXPECT_EQ(nlohmann::json::parse(replay.out)["iteration_time_s"].get<double>(),
            plan["top"][0]["iteration_time_s"].get<double>());
}

TEST(CliPlan, NothingFitsExitsTwoWithTheFix) {
  const RunResult r = run_stepsim({"plan", "dgx-h100", "llama3-405b", "--gpus", "8", "--global-batch", "8"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("fits gpu.memory"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("use more GPUs"), std::string::npos) << r.err;
  const RunResult half_node = run_stepsim({"plan", "dgx-h100", "llama3-8b", "--gpus", "12", "--global-batch", "8"});
  EXPECT_EQ(half_node.exit_code, 2);
  EXPECT_NE(half_node.err.find("--gpus 12"), std::string::npos) << half_node.err;
}

}  // namespace
}  // namespace stepsim::cli_test
