#pragma once
/// @file The harness's command-line reader: `--name value` / `--name=value` pairs and bare
/// `--flag`s checked against a table of the options a subcommand accepts, and typed getters.
///
/// Contract: every user mistake (unknown option, missing or malformed value, value out of range)
/// throws stepsim::ConfigError whose `where()` is the option (e.g. "--max") and whose message says
/// what was expected and how to fix it. Nothing here touches a GPU.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace stepsim::harness {

/// @brief One option a subcommand accepts.
struct OptionSpec {
  std::string name;   ///< without the leading "--"
  bool takes_value;   ///< false for flags such as --quick
  std::string help;   ///< one line, shown by --help
};

/// @brief Parsed options of one subcommand.
class CliArgs {
 public:
  /// @brief Parses `args` (the words after the subcommand) against `specs`; `command` names the
  /// subcommand in errors ("stepsim-harness nccl").
  CliArgs(const std::vector<std::string>& args, const std::vector<OptionSpec>& specs, std::string command);

  /// @brief Whether the option was given.
  bool has(const std::string& name) const;
  /// @brief The raw text of an option, or `fallback`.
  std::string text(const std::string& name, const std::string& fallback) const;
  /// @brief A whole number in [min, max].
  int64_t integer(const std::string& name, int64_t fallback, int64_t min, int64_t max) const;
  /// @brief A real number in [min, max].
  double real(const std::string& name, double fallback, double min, double max) const;
  /// @brief A byte count (`8`, `64KiB`, `8GiB`, `1e9`; whole bytes), at least `min`.
  uint64_t bytes(const std::string& name, uint64_t fallback, uint64_t min) const;
  /// @brief A comma-separated list whose items are all in `choices`.
  std::vector<std::string> choices(const std::string& name, const std::vector<std::string>& fallback,
                                   const std::vector<std::string>& choices) const;
  /// @brief A comma-separated list of whole numbers in [min, max].
  std::vector<int64_t> integers(const std::string& name, const std::vector<int64_t>& fallback, int64_t min,
                                int64_t max) const;

 private:
  std::string command_;
  std::map<std::string, std::string> values_;
};

/// @brief Parses a byte count: a number with an optional unit B, KB/MB/GB/TB (powers of 1000; also
/// k/K/M/G/T) or KiB/MiB/GiB/TiB (powers of 1024); the result must be a whole number of bytes.
/// Throws ConfigError naming `where` when it is not.
uint64_t parse_bytes(const std::string& text, const std::string& where);

/// @brief Parses a whole number; ConfigError naming `where` when malformed.
int64_t parse_integer(const std::string& text, const std::string& where);

/// @brief Splits on `separator`, keeping empty items (so "a,,b" is caught as an error by callers).
std::vector<std::string> split(const std::string& text, char separator);

/// @brief The geometric size sweep min, min*factor, ... <= max (nccl-tests' -b/-e/-f).
/// ConfigError (where "--min"/"--max"/"--factor") when min > max or factor < 2.
std::vector<uint64_t> size_sweep(uint64_t min, uint64_t max, uint64_t factor);

/// @brief `bytes` in the shortest exact binary unit ("64MiB", "8GiB", "1000").
std::string format_bytes(uint64_t bytes);

}  // namespace stepsim::harness
