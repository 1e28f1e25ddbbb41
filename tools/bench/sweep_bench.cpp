// Sweep benchmark: points per second of `stepsim sweep` on an analytical collective sweep
// (tools/bench/sweep-10k.yaml: 10,000 points), results streamed to a CSV file as the CLI
// does. Target (issue 7): >= 2,000 points/s with 2 jobs. Not a test: numbers depend on the
// machine. Run: meson test -C BUILD --benchmark (or the binary; --help lists the knobs).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "platforms/config_error.hpp"
#include "tools/bench/measure.hpp"
#include "tools/sweep/sweep_runner.hpp"

namespace {

using namespace stepsim;

int run(const std::string& file, const std::vector<int>& jobs, int repeat) {
  const sweep::Sweep s = sweep::load_sweep(file);
  char dir[] = "/tmp/sweep-bench-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  std::printf("%s\n%6s %8s %8s %10s %8s %10s\n", file.c_str(), "jobs", "points", "failed", "best s", "points/s",
              "peak MiB");
  for (int j : jobs) {
    double best = 1e300;
    sweep::RunSummary summary;
    for (int r = 0; r < repeat; ++r) {
      sweep::RunOptions options;
      options.jobs = j;
      options.out = fmt::format("{}/run-{}-{}.csv", dir, j, r);
      const auto start = std::chrono::steady_clock::now();
      summary = sweep::run_sweep(s, options);
      best = std::min(best, bench::seconds_since(start));
    }
    std::printf("%6d %8d %8d %10.3f %8.0f %10.1f\n", j, summary.evaluated, summary.failed, best, summary.evaluated / best,
                bench::peak_rss_mib());
    std::fflush(stdout);
  }
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Points per second of an analytical collective sweep"};
  std::string file = std::string(STEPSIM_SOURCE_ROOT) + "/tools/bench/sweep-10k.yaml";
  std::vector<int> jobs = {1, 2};
  int repeat = 3;
  app.add_option("--sweep", file, "sweep file");
  app.add_option("--jobs", jobs, "worker counts to measure")->delimiter(',');
  app.add_option("--repeat", repeat, "runs per worker count (the best is reported)")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  try {
    return run(file, jobs, repeat);
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
