#pragma once
/// @file The one exception type for bad user input.
///
/// Contract: anything a user can get wrong (a YAML file, a CLI flag, a preset name) raises
/// ConfigError with where it happened (file, YAML path, line) and how to fix it. Library code
/// never exits; `main` catches ConfigError, prints it and returns exit code 2. Internal
/// invariant failures use std::logic_error and are bugs.
#include <stdexcept>
#include <string>

namespace stepsim {

/// @brief User-input error: what is wrong, where, and how to fix it.
class ConfigError : public std::runtime_error {
 public:
  /// @param where  e.g. "platform.yaml: links[3].bandwidth (line 17)" or "--gpus"
  /// @param what   what is wrong, e.g. "bandwidth must be > 0, got 0GBps"
  /// @param fix    how to fix it, e.g. "write a positive value such as 25GBps"
  ConfigError(std::string where, std::string what, std::string fix)
      : std::runtime_error(where + ": " + what + (fix.empty() ? "" : " (fix: " + fix + ")")),
        where_(std::move(where)) {}
  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

}  // namespace stepsim
