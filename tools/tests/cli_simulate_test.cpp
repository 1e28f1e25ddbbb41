// `stepsim simulate` as a user runs it: the documented JSON keys and their relations, workload
// overrides, the timeline file, determinism and errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "tools/tests/cli_run.hpp"

namespace stepsim::cli_test {
namespace {

nlohmann::json simulate_json(std::vector<std::string> args) {
  args.insert(args.begin(), "simulate");
  args.push_back("--format");
  args.push_back("json");
  RunResult r = run_stepsim(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(CliSimulate, JsonHasTheDocumentedKeysAndTheyAddUp) {
  const auto j = simulate_json({"dgx-h100", "llama3-8b"});
  for (const char* key : {"iteration_time_s", "ranks", "nodes", "engine", "breakdown", "slowest_rank",
                          "critical_path", "links", "throughput", "mfu_bf16", "notes", "memory"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["ranks"], 8);
  const double t = j["iteration_time_s"];
  const auto& b = j["breakdown"];
  EXPECT_GT(t, 0);
  // idle is what neither compute nor communication covers: busy + idle = the iteration.
  const double busy = b["compute_s"].get<double>() + b["exposed_communication_s"].get<double>();
  EXPECT_NEAR(busy + b["idle_s"].get<double>(), t, 1e-9 * t);
  double path = 0;
  for (const auto& e : j["critical_path"]) path += e["time_s"].get<double>();
  EXPECT_NEAR(path, t, 1e-6 * t);
  // 2 x 8192 tokens per GPU per iteration.
  EXPECT_NEAR(j["throughput"]["per_gpu_per_s"].get<double>() * t, 16384.0, 1e-6);
  // One FSDP group: its communication is all of it.
  ASSERT_TRUE(b["by_group"].contains("fsdp"));
  EXPECT_NEAR(b["by_group"]["fsdp"]["communication_s"].get<double>(), b["communication_s"].get<double>(), 1e-9 * t);
  EXPECT_NEAR(b["by_group"]["fsdp"]["exposed_communication_s"].get<double>(),
              b["exposed_communication_s"].get<double>(), 1e-9 * t);
}

TEST(CliSimulate, ParallelLayoutsSplitCommunicationByGroup) {
  const auto j = simulate_json({"dgx-h100", "--nodes", "2", "llama3-8b", "-p", "workload.parallelism.tp=2", "-p",
                                "workload.parallelism.pp=2", "-p", "workload.training.micro_batch=1", "-p",
                                "workload.training.gradient_accumulation=4"});
  const auto& groups = j["breakdown"]["by_group"];
  for (const char* name : {"fsdp", "tp", "pp"}) EXPECT_TRUE(groups.contains(name)) << name;
  EXPECT_GT(groups["pp"]["exposed_communication_s"].get<double>(), 0);
}

TEST(CliSimulate, WorkloadOverridesChangeTheWorkAndPlatformOverridesTheTime) {
  const auto base = simulate_json({"dgx-h100", "llama3-8b"});
  const auto shorter = simulate_json({"dgx-h100", "llama3-8b", "-p", "workload.training.micro_batch=1"});
  EXPECT_LT(shorter["iteration_time_s"].get<double>(), 0.6 * base["iteration_time_s"].get<double>());
  const auto slower_hbm = simulate_json({"dgx-h100", "llama3-8b", "-p", "gpu.hbm_bandwidth=1TBps"});
  EXPECT_GT(slower_hbm["iteration_time_s"].get<double>(), base["iteration_time_s"].get<double>());
}

// README's order: a -p between the platform and the workload takes one KEY=VALUE, so the
// workload stays positional however many -p follow.
TEST(CliSimulate, ParamBeforeTheWorkloadTakesOneValue) {
  const auto before = simulate_json({"dgx-h100", "-p", "gpu.hbm_bandwidth=1TBps", "llama3-8b", "-p",
                                     "workload.training.micro_batch=1"});
  const auto after = simulate_json({"dgx-h100", "llama3-8b", "-p", "gpu.hbm_bandwidth=1TBps", "-p",
                                    "workload.training.micro_batch=1"});
  EXPECT_EQ(before["iteration_time_s"].get<double>(), after["iteration_time_s"].get<double>());
}

// Issue 21: a workload that does not fit gpu.memory exits 2 naming the workload, the shortfall
// and the fix, unless --allow-oom; its JSON memory section then says it does not fit.
TEST(CliSimulate, WorkloadThatDoesNotFitIsRefusedUnlessAllowed) {
  const RunResult refused = run_stepsim({"simulate", "dgx-h100", "llama3-405b"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("llama3-405b: does not fit: needs"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("GiB short"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("--allow-oom"), std::string::npos) << refused.err;
  const auto timed = simulate_json({"dgx-h100", "llama3-405b", "--allow-oom"});
  const auto& memory = timed["memory"];
  EXPECT_FALSE(memory["fits"].get<bool>());
  // FSDP over 8 GPUs keeps 16 B per parameter (fp32 shard, gradient, AdamW's two states): 405e9
  // parameters need over 754 GiB per GPU before any activation.
  EXPECT_GT(memory["required_bytes"].get<double>(), 405e9 * 16 / 8);
  EXPECT_GT(memory["peak_bytes"].get<double>(), memory["required_bytes"].get<double>());
  double terms = 0;
  for (const auto& [term, bytes] : memory["breakdown"].items()) terms += bytes.get<double>();
  EXPECT_NEAR(terms, memory["peak_bytes"].get<double>(), 1e-6 * terms);
}

TEST(CliSimulate, SameInputSameOutputOnBothEngines) {
  const std::vector<std::string> args = {"simulate", "dgx-a100", "example-trace", "--format", "json"};
  const RunResult first = run_stepsim(args), second = run_stepsim(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, second.out);
  std::vector<std::string> event = args;
  event.push_back("--engine");
  event.push_back("event");
  const RunResult a = run_stepsim(event), b = run_stepsim(event);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
}

TEST(CliSimulate, TimelineIsChromeTraceJson) {
  const std::string path = "/tmp/stepsim_cli_timeline_" + std::to_string(::getpid()) + ".json";
  const RunResult r = run_stepsim({"simulate", "dgx-a100", "--gpus", "0-3", "example-trace", "--timeline", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(path);
  const nlohmann::json timeline = nlohmann::json::parse(in);
  std::remove(path.c_str());
  const auto& events = timeline.is_object() ? timeline["traceEvents"] : timeline;
  int slices = 0, process_names = 0;
  for (const auto& e : events) {
    if (e["ph"] == "X") ++slices;
    if (e["ph"] == "M" && e["name"] == "process_name") ++process_names;
  }
  EXPECT_EQ(process_names, 4);   // one process per rank
  EXPECT_GT(slices, 0);
}

// Issue 21: a generated workload's timeline carries each rank's allocated memory as a counter
// track, two samples per pipeline action (its peak as it starts, what it leaves as it ends), the
// largest equal to the JSON's allocated peak.
TEST(CliSimulate, TimelineHasTheMemoryTrack) {
  const std::string path = "/tmp/stepsim_cli_memory_" + std::to_string(::getpid()) + ".json";
  const std::vector<std::string> args = {"simulate", "dgx-h100", "llama3-8b", "-p", "workload.model.layers=4", "-p",
                                         "workload.parallelism.pp=2", "-p", "workload.training.gradient_accumulation=4"};
  std::vector<std::string> with_timeline = args;
  with_timeline.insert(with_timeline.end(), {"--timeline", path});
  ASSERT_EQ(run_stepsim(with_timeline).exit_code, 0);
  std::ifstream in(path);
  const nlohmann::json timeline = nlohmann::json::parse(in);
  std::remove(path.c_str());
  std::vector<std::string> json_args(args.begin() + 1, args.end());
  const auto report = simulate_json(json_args);
  std::map<int, int> samples;
  std::map<int, double> highest;
  for (const auto& e : timeline["traceEvents"]) {
    if (e["ph"] != "C") continue;
    EXPECT_EQ(e["name"], "memory allocated");
    ++samples[e["pid"].get<int>()];
    highest[e["pid"].get<int>()] = std::max(highest[e["pid"].get<int>()], e["args"]["GiB"].get<double>());
  }
  EXPECT_EQ(samples.size(), 8u);
  for (const auto& [rank, n] : samples) EXPECT_EQ(n, 2 * 2 * 4) << rank;   // 4 micro-batches, forward and backward
  double peak = 0;
  for (const auto& [rank, gib] : highest) peak = std::max(peak, gib);
  double allocated = 0;
  for (const auto& g : report["memory"]["per_group"]) allocated = std::max(allocated, g["allocated_bytes"].get<double>());
  EXPECT_NEAR(peak, allocated / (1 << 30), 1e-3);
}

TEST(CliSimulate, BadWorkloadsExitWithTwoAndSayWhy) {
  const RunResult unknown = run_stepsim({"simulate", "dgx-h100", "llama9"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("llama3-8b"), std::string::npos) << unknown.err;   // lists the presets
  const RunResult bad_key = run_stepsim({"simulate", "dgx-h100", "llama3-8b", "-p", "workload.fsdp.strategy=ZERO9"});
  EXPECT_EQ(bad_key.exit_code, 2);
  EXPECT_NE(bad_key.err.find("FULL_SHARD"), std::string::npos) << bad_key.err;  // lists the strategies
  const RunResult too_small = run_stepsim({"simulate", "dgx-a100", "--gpus", "0", "dlrm-criteo-1tb"});
  EXPECT_EQ(too_small.exit_code, 2);
  EXPECT_NE(too_small.err.find("GB"), std::string::npos) << too_small.err;      // the memory check
}

}  // namespace
}  // namespace stepsim::cli_test
