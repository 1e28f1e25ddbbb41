#pragma once
/// @file The subcommands of the `stepsim` CLI: one file each, listed in main.cpp's table.
///
/// Contract: a subcommand adds its options to the CLI11 sub-app it is given and returns the
/// action to run after parsing. Actions return the process exit code, print results to
/// stdout, and throw ConfigError for user errors (main prints it and exits with 2).
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "platforms/loader.hpp"

namespace stepsim::cli {

using Action = std::function<int()>;

Action add_collective_command(CLI::App& command);
Action add_simulate_command(CLI::App& command);
Action add_presets_command(CLI::App& command);
Action add_import_command(CLI::App& command);
Action add_blink_command(CLI::App& command);
Action add_validate_command(CLI::App& command);
Action add_calibrate_command(CLI::App& command);
Action add_sweep_command(CLI::App& command);
Action add_merge_command(CLI::App& command);
Action add_tuner_table_command(CLI::App& command);
Action add_rank_sharding_command(CLI::App& command);
Action add_plan_command(CLI::App& command);

/// @brief Platform selection flags shared by every subcommand that takes a PLATFORM.
struct PlatformArgs {
  std::string platform;
  std::string gpus;
  platforms::PlatformOptions options;
};
void add_platform_options(CLI::App& command, PlatformArgs& args);
/// @brief `-p KEY=VALUE`, repeatable, one value per occurrence (so a positional argument after
/// it stays positional); `example` ends the help text.
void add_param_option(CLI::App& command, std::vector<std::string>& overrides, const std::string& example);

/// @brief `text` as a size (8, 64KiB, 1GiB, 1e9); a ConfigError naming `flag`, with `example`
/// in its fix, when it is not one.
Bytes size_flag(const std::string& flag, const std::string& text, const std::string& example = "1MiB");

/// @brief A CLI11 check that the value is a whole number in [min, max]: the stated limit, where
/// CLI11's PositiveNumber prints the range up to DBL_MAX in 309 digits.
CLI::Validator whole_number(long long min, long long max);

/// @brief `--format text|json`, validated by CLI11.
void add_format_option(CLI::App& command, std::string& format);

}  // namespace stepsim::cli
