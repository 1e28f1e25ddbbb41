// Engine benchmark: ring allreduce of 1 GiB on dgx-h100 clusters of 8 .. 16384 GPUs, on both
// engines, each case in its own process so that wall time and peak memory are its own.
// Not a test: numbers depend on the machine. Run: meson test -C BUILD --benchmark
// (or the binary directly; --help lists the knobs).
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "models/algorithm.hpp"
#include "platforms/loader.hpp"
#include "sim/child_process.hpp"
#include "sim/engine.hpp"
#include "tools/bench/measure.hpp"

namespace {

using namespace stepsim;
using bench::peak_rss_mib;
using bench::seconds_since;

struct Case {
  int ranks = 0;
  std::string engine;
};

// Runs one case (in a child process) and returns its table row.
std::string run_case(const Case& c, const std::string& platform_name, Bytes bytes, int channels) {
  const auto start = std::chrono::steady_clock::now();
  platforms::PlatformOptions options;
  options.nodes = (c.ranks + 7) / 8;
  const platforms::Platform platform = platforms::load_platform(platform_name, options);
  platforms::Allocation allocation;
  for (int g = 0; g < c.ranks; ++g) allocation.gpus.push_back(g);
  models::CollectiveContext context{platform, allocation, {}};
  context.options.channels = channels;
  const models::CollectiveSpec spec{models::CollectiveOp::allreduce, c.ranks, bytes, 0};
  const models::Schedule schedule =
      models::AlgorithmRegistry::instance().get("ring").make()->lower(spec, context);
  const double setup_s = seconds_since(start);

  const auto run_start = std::chrono::steady_clock::now();
  const sim::CollectiveResult result = sim::make_engine(c.engine)->run(schedule, {platform, allocation});
  const double run_s = seconds_since(run_start);
  const double busbw = bytes / result.time * models::busbw_factor(spec.op, c.ranks) / kGB;
  return fmt::format("{:>6} {:>10} {:>12} {:>13.4f} {:>10.2f} {:>9.2f} {:>9.2f} {:>11.1f}\n", c.ranks, c.engine,
                     schedule.expanded_step_count(), result.time * 1e3, busbw, setup_s, run_s, peak_rss_mib());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Wall time and peak memory of both engines on a ring allreduce"};
  std::vector<int> ranks = {8, 64, 1024, 16384};
  std::vector<std::string> engines = {"analytical", "event"};
  std::string platform = "dgx-h100";
  std::string size = "1GiB";
  int channels = 1;
  int event_max_ranks = 1024;
  app.add_option("--ranks", ranks, "rank counts (multiples of 8 use whole nodes)")->delimiter(',');
  app.add_option("--engines", engines, "engines to run")->delimiter(',');
  app.add_option("--platform", platform, "platform preset or file, replicated over ranks/8 nodes");
  app.add_option("--size", size, "allreduce size");
  app.add_option("--channels", channels, "ring channels");
  app.add_option("--event-max-ranks", event_max_ranks,
                 "skip the event engine above this many ranks (16384 ranks is ~537 M flows)");
  CLI11_PARSE(app, argc, argv);

  const Bytes bytes = parse_size(size);
  std::printf("ring allreduce of %s on %s nodes of 8 GPUs, %d channel(s); each case in its own process\n",
              size.c_str(), platform.c_str(), channels);
  std::printf("%6s %10s %12s %13s %10s %9s %9s %11s\n", "ranks", "engine", "steps", "time (ms)", "busbw GB/s",
              "setup s", "run s", "peak MiB");
  int failures = 0;
  for (int r : ranks) {
    for (const std::string& engine : engines) {
      if (engine == "event" && r > event_max_ranks) {
        std::printf("%6d %10s   skipped: above --event-max-ranks %d (flows grow as ranks^2)\n", r, engine.c_str(),
                    event_max_ranks);
        continue;
      }
      try {
        std::fputs(sim::run_in_child([&] { return run_case({r, engine}, platform, bytes, channels); }).c_str(),
                   stdout);
      } catch (const std::exception& e) {
        ++failures;
        std::printf("%6d %10s   failed: %s\n", r, engine.c_str(), e.what());
      }
      std::fflush(stdout);
    }
  }
  return failures == 0 ? 0 : 1;
}
