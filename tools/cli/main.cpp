// stepsim: predicts collective and training-iteration times on multi-GPU platforms.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>

#include "platforms/config_error.hpp"
#include "tools/cli/commands.hpp"

namespace {

struct Subcommand {
  const char* name;
  const char* description;
  stepsim::cli::Action (*add)(CLI::App&);
};

// The subcommands, in the order `stepsim --help` lists them.
constexpr Subcommand kSubcommands[] = {
    {"collective", "Predict one collective (nccl-tests style time, algbw, busbw)",
     stepsim::cli::add_collective_command},
    {"simulate", "Predict one training iteration of a workload (time, breakdown, critical path)",
     stepsim::cli::add_simulate_command},
    {"presets", "List the shipped platform and workload presets", stepsim::cli::add_presets_command},
    {"import", "Turn external data into stepsim files (nvidia-smi-topo, nccl-tests, kineto)",
     stepsim::cli::add_import_command},
    {"blink", "Blink's tree packing: the allocation census of a server (census)", stepsim::cli::add_blink_command},
    {"validate", "Compare predictions with measurement files: per-case and geomean errors, HTML report",
     stepsim::cli::add_validate_command},
    {"calibrate", "Fit a platform's calibration factors to measurement files (least squares, holdout)",
     stepsim::cli::add_calibrate_command},
    {"sweep", "Evaluate a sweep file's points in parallel, rank them, stream a CSV and plot (docs/sweep.md)",
     stepsim::cli::add_sweep_command},
    {"merge", "Join the result files of a sweep's shards into one", stepsim::cli::add_merge_command},
    {"tuner-table", "Best predicted NCCL algorithm/protocol/channels per op and size range, as CSV (docs/sweep.md)",
     stepsim::cli::add_tuner_table_command},
    {"rank-sharding", "Rank DLRM embedding sharding plans (every planner, exhaustive when small) by iteration time",
     stepsim::cli::add_rank_sharding_command},
    {"plan", "Rank the torchtitan layouts of a model on N GPUs that fit memory, by predicted iteration time",
     stepsim::cli::add_plan_command},
};

// CLI11's own errors (a missing option, a value outside a list) in stepsim's form: what is
// wrong, then where to read what is accepted.
std::string failure_message(const CLI::App* app, const CLI::Error& error) {
  std::string command = "stepsim";
  for (const CLI::App* at = app; !at->get_subcommands().empty();) {
    at = at->get_subcommands().front();
    command += " " + at->get_name();
  }
  return "error: " + std::string(error.what()) + " (fix: `" + command +
         " --help` lists the options and what they accept)\n";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"stepsim: performance model and simulator of distributed deep-learning training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "stepsim 0.1.0");
  app.failure_message(failure_message);
  std::vector<std::pair<CLI::App*, stepsim::cli::Action>> actions;
  for (const Subcommand& sub : kSubcommands) {
    CLI::App* command = app.add_subcommand(sub.name, sub.description);
    actions.emplace_back(command, sub.add(*command));
  }
  // CLI11 reports an unknown first word as "A subcommand is required"; name the word instead.
  if (argc > 1 && argv[1][0] != '-' &&
      std::none_of(std::begin(kSubcommands), std::end(kSubcommands),
                   [&](const Subcommand& sub) { return std::string(sub.name) == argv[1]; })) {
    std::string names;
    for (const Subcommand& sub : kSubcommands) names += (names.empty() ? "" : ", ") + std::string(sub.name);
    std::cerr << "error: unknown subcommand '" << argv[1] << "' (fix: use one of: " << names << ")\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    for (auto& [command, action] : actions)
      if (command->parsed()) return action();
  } catch (const stepsim::ConfigError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
