// `stepsim sweep`: evaluate a sweep file's points in parallel, stream them to a result file,
// print the ranked summary and optionally plot it (docs/sweep.md).
#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <iostream>

#include "platforms/config_error.hpp"
#include "tools/cli/commands.hpp"
#include "tools/sweep/sweep_plot.hpp"
#include "tools/sweep/sweep_ranking.hpp"
#include "tools/sweep/sweep_runner.hpp"

namespace stepsim::cli {
namespace {

struct SweepArgs {
  std::string file;
  int jobs = 0;
  std::string out;
  bool resume = false;
  std::string shard;
  std::string plot;
  int top = 10;
  int point_time_limit = 600;
};

/// "K/N" into options.shard / options.shards.
void parse_shard(const std::string& text, sweep::RunOptions& options) {
  const auto slash = text.find('/');
  try {
    std::size_t used_k = 0, used_n = 0;
    if (slash == std::string::npos) throw std::invalid_argument(text);
    options.shard = std::stoi(text.substr(0, slash), &used_k);
    options.shards = std::stoi(text.substr(slash + 1), &used_n);
    if (used_k != slash || used_n != text.size() - slash - 1) throw std::invalid_argument(text);
  } catch (const std::exception&) {
    throw ConfigError("--shard " + text, "not K/N", "write e.g. --shard 0/4 (the first of four slices)");
  }
}

int run(const SweepArgs& args) {
  const sweep::Sweep sweep = sweep::load_sweep(args.file);
  sweep::RunOptions options;
  options.jobs = args.jobs > 0 ? args.jobs : std::max(1, static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)));
  options.out = args.out;
  options.resume = args.resume;
  options.point_time_limit = args.point_time_limit;
  if (args.resume && args.out.empty())
    throw ConfigError("--resume", "there is no --out file to resume", "add --out FILE.csv");
  if (!args.shard.empty()) parse_shard(args.shard, options);
  if (!args.plot.empty() && (args.plot.size() < 4 || args.plot.substr(args.plot.size() - 4) != ".svg"))
    throw ConfigError("--plot " + args.plot, "the plot is written as SVG", "name a .svg file");
  options.progress = ::isatty(STDERR_FILENO) == 1;

  const sweep::RunSummary run = sweep::run_sweep(sweep, options);
  if (run.discarded_partial_line)
    std::cerr << "note: the half-written last line of " << args.out << " was discarded; its point ran again\n";
  std::cerr << fmt::format("{}: {} points{}, {} from {}, {} evaluated in {:.2f} s ({:.0f}/s), {} failed\n", args.file,
                           run.points, args.shard.empty() ? "" : " in shard " + args.shard, run.resumed,
                           args.out.empty() ? "no file" : args.out, run.evaluated, run.seconds,
                           run.seconds > 0 ? run.evaluated / run.seconds : 0.0, run.failed);
  std::cout << sweep::ranked_summary(sweep, run.table, args.top);
  if (!args.plot.empty()) {
    std::ofstream svg(args.plot);
    if (!(svg << sweep::sweep_plot_svg(sweep, run.table)))
      throw ConfigError("--plot " + args.plot, "cannot write the file", "name a writable path");
  }
  return 0;
}

}  // namespace

Action add_sweep_command(CLI::App& command) {
  auto args = std::make_shared<SweepArgs>();
  command.add_option("sweep", args->file, "Sweep file (YAML, docs/sweep.md)")->required();
  command.add_option("--jobs,-j", args->jobs, "Parallel worker processes (default: one per core)")
      ->check(whole_number(1, 1024));
  command.add_option("--point-time-limit", args->point_time_limit,
                     "Seconds one point may run before its worker is stopped and its row says so (default 600)")
      ->check(whole_number(1, 1000000));
  command.add_option("--out,-o", args->out, "Stream one row per point to FILE.csv or FILE.jsonl as points finish");
  command.add_flag("--resume", args->resume, "Keep the rows already in --out and run only the missing points");
  command.add_option("--shard", args->shard, "Run slice K of N (points with index % N == K), e.g. 0/4");
  command.add_option("--plot", args->plot, "Write the metric against the first axes as FILE.svg");
  command.add_option("--top", args->top, "Rows of the ranked summary without group_by")
      ->check(whole_number(1, 1000000));
  return [args] { return run(*args); };
}

}  // namespace stepsim::cli
