#include <CLI/CLI.hpp>
#include <charconv>

#include "platforms/config_error.hpp"
#include "tools/cli/commands.hpp"

namespace stepsim::cli {

void add_platform_options(CLI::App& command, PlatformArgs& args) {
  command.add_option("platform", args.platform, "Platform preset name (see `stepsim presets`) or YAML file")
      ->required();
  command.add_option("--gpus", args.gpus,
                     "GPUs of the job in rank order: 0,1,4 or 0-3 (node 0) or n0:0-2,n1:0-4; default all");
  command.add_option("--nodes", args.options.nodes, "Number of servers (replicates the preset's node)")
      ->check(whole_number(1, platforms::kMaxNodes));
  command.add_option("--fabric", args.options.fabric, "Inter-node fabric: fat-tree or rail-optimized")
      ->check(CLI::IsMember({"fat-tree", "rail-optimized"}));
  add_param_option(command, args.options.overrides, "gpu.model=H200-SXM5-141GB");
}

void add_param_option(CLI::App& command, std::vector<std::string>& overrides, const std::string& example) {
  command.add_option("-p,--param", overrides, "Override a platform parameter, e.g. -p " + example)
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

Bytes size_flag(const std::string& flag, const std::string& text, const std::string& example) {
  try {
    return parse_size(text);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(flag, e.what(), "write a size such as " + example);
  }
}

CLI::Validator whole_number(long long min, long long max) {
  const std::string range = std::to_string(min) + " to " + std::to_string(max);
  return CLI::Validator(
      [min, max, range](const std::string& text) -> std::string {
        long long value = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max)
          return "'" + text + "' is not a whole number from " + range;
        return "";
      },
      "INT in " + range);
}

void add_format_option(CLI::App& command, std::string& format) {
  command.add_option("--format", format, "Output format")->check(CLI::IsMember({"text", "json"}));
}

}  // namespace stepsim::cli
