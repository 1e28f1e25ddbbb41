// Planner benchmark (issue 21's target: >= 5,000 layouts per second on two cores): `stepsim plan`
// of shipped models on dgx-h100 clusters, printing the layouts enumerated, those that fit, the
// wall time of pruning and estimating them all and its rate, and the re-timed best layout.
// Not a test: numbers depend on the machine. Run: meson test -C BUILD --benchmark.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "tools/plan/planner.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Layouts per second of `stepsim plan`"};
  // MODEL:GPUS:GLOBAL_BATCH
  std::vector<std::string> cases = {"llama3-8b:128:256", "llama3-70b:256:512", "llama3-405b:512:256"};
  app.add_option("--cases", cases, "MODEL:GPUS:GLOBAL_BATCH, comma separated")->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  std::printf("%-12s %6s %8s %8s %6s %10s %12s  %s\n", "model", "GPUs", "batch", "layouts", "fit", "estimate s",
              "layouts/s", "best (replayed)");
  for (const std::string& text : cases) {
    const auto first = text.find(':'), second = text.rfind(':');
    stepsim::plan::PlanRequest r;
    r.platform = "dgx-h100";
    r.model = text.substr(0, first);
    r.gpus = std::stoi(text.substr(first + 1, second - first - 1));
    r.global_batch = std::stoi(text.substr(second + 1));
    r.retime = 1;
    const stepsim::plan::PlanResult p = stepsim::plan::run_plan(r);
    std::printf("%-12s %6d %8d %8ld %6ld %10.3f %12.0f  %s: %.4f s\n", r.model.c_str(), r.gpus, r.global_batch,
                p.layouts, p.fit, p.estimate_seconds, p.layouts / p.estimate_seconds,
                p.retimed.empty() ? "-" : p.retimed.front().layout.label().c_str(),
                p.retimed.empty() ? 0.0 : p.retimed.front().replay->iteration_time);
    std::fflush(stdout);
  }
  return 0;
}
