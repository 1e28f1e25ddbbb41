#pragma once
/// @file Runs the stepsim binary as a user would and captures what it says.
#include <string>
#include <vector>

namespace stepsim::cli_test {

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

/// @brief Runs `stepsim ARGS...` (the binary given as the test's first argument).
RunResult run_stepsim(const std::vector<std::string>& args);

}  // namespace stepsim::cli_test
