// Iteration benchmark: `stepsim simulate` of shipped workloads on dgx-h100 clusters, each case
// in its own process so that wall time and peak memory are its own. Issue 3's targets:
// llama3-70b FSDP on 1024 GPUs (128 nodes) analytical < 2 s; on 64 GPUs event < 60 s. Issue
// 19's: Llama 3.1 405B in 4D on 512 GPUs analytical < 2 s (llama3-405b-3d, TP x PP x FSDP,
// until context parallelism joins it in a preset).
// Not a test: numbers depend on the machine. Run: meson test -C BUILD --benchmark
// (or the binary directly; --help lists the knobs).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "platforms/loader.hpp"
#include "sim/child_process.hpp"
#include "tools/bench/measure.hpp"
#include "sim/replay.hpp"
#include "workloads/workload.hpp"

namespace {

using namespace stepsim;
using bench::peak_rss_mib;
using bench::seconds_since;

struct Case {
  std::string workload;
  int nodes = 1;
  std::string engine;
};

std::string run_case(const Case& c, const std::string& platform_name) {
  const auto start = std::chrono::steady_clock::now();
  platforms::PlatformOptions options;
  options.nodes = c.nodes;
  const platforms::Platform platform = platforms::load_platform(platform_name, options);
  const platforms::Allocation allocation = platforms::parse_allocation("", platform);
  const workloads::Trace trace = workloads::load_workload(c.workload, {platform, allocation});
  const double load_s = seconds_since(start);

  const auto run_start = std::chrono::steady_clock::now();
  sim::ReplayOptions replay_options;
  replay_options.engine = c.engine;
  const sim::Prediction prediction = sim::replay(trace, {platform, allocation}, replay_options);
  const double run_s = seconds_since(run_start);
  return fmt::format("{:<16} {:>6} {:>10} {:>12} {:>14.4f} {:>9.2f} {:>9.2f} {:>11.1f}\n", c.workload,
                     allocation.ranks(), c.engine, prediction.ops_replayed, prediction.iteration_time, load_s,
                     run_s, peak_rss_mib());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Wall time and peak memory of `stepsim simulate` on shipped workloads"};
  std::vector<std::string> cases = {"llama3-8b:1:analytical", "llama3-8b:1:event", "llama3-70b:8:analytical",
                                    "llama3-70b:8:event", "llama3-70b:128:analytical",
                                    "llama3-405b-3d:64:analytical"};
  std::string platform = "dgx-h100";
  app.add_option("--cases", cases, "WORKLOAD:NODES:ENGINE, comma separated")->delimiter(',');
  app.add_option("--platform", platform, "platform preset or file, replicated over NODES nodes");
  CLI11_PARSE(app, argc, argv);

  std::printf("one iteration per case on %s; each case in its own process\n", platform.c_str());
  std::printf("%-16s %6s %10s %12s %14s %9s %9s %11s\n", "workload", "ranks", "engine", "ops", "iteration (s)",
              "load s", "replay s", "peak MiB");
  int failures = 0;
  for (const std::string& text : cases) {
    Case c;
    const auto first = text.find(':'), second = text.rfind(':');
    if (first == std::string::npos || first == second) {
      std::printf("%s: not WORKLOAD:NODES:ENGINE\n", text.c_str());
      return 2;
    }
    c.workload = text.substr(0, first);
    c.nodes = std::stoi(text.substr(first + 1, second - first - 1));
    c.engine = text.substr(second + 1);
    try {
      std::fputs(sim::run_in_child([&] { return run_case(c, platform); }).c_str(), stdout);
    } catch (const std::exception& e) {
      ++failures;
      std::printf("%-16s %6d %10s   failed: %s\n", c.workload.c_str(), c.nodes * 8, c.engine.c_str(), e.what());
    }
    std::fflush(stdout);
  }
  return failures == 0 ? 0 : 1;
}
