#pragma once
/// @file What every libFuzzer target of stepsim shares (meson -Dfuzz=true; tools/fuzz builds
/// and runs them; docs/fuzzing.md).
///
/// Contract: a parser may reject any input with stepsim::ConfigError, which a target swallows;
/// anything else escaping it is a finding. Other exceptions are deliberately not caught: with no
/// handler on the stack the C++ runtime calls std::terminate from the throw itself, before any
/// unwinding, so libstdc++ prints the exception's type and what() and aborts, and libFuzzer
/// records a crash ("deadly signal") whose stack still shows the throw site. A
/// `catch (...) { abort(); }` would record the same crash with that stack already unwound.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "platforms/config_error.hpp"

namespace stepsim::fuzz {

/// @brief The fuzzer's bytes as the text of a file.
inline std::string input_text(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

/// @brief Runs `parse()`; a ConfigError is the expected answer to bad input. With
/// STEPSIM_FUZZ_VERBOSE set, its message goes to stderr (why a seed or a reproducer is rejected).
template <class Parse>
void expect_config_error_only(Parse&& parse) {
  try {
    parse();
  } catch (const ConfigError& e) {
    static const bool verbose = std::getenv("STEPSIM_FUZZ_VERBOSE") != nullptr;
    if (verbose) std::fprintf(stderr, "ConfigError: %s\n", e.what());
  }
}

/// @brief A path private to this process and `suffix` holding `text`, for entry points that
/// take only a path (the suffix picks the format); overwritten by every run, removed when the
/// fuzzer exits normally.
inline std::string temp_file(const std::string& text, const std::string& suffix) {
  struct Made {
    std::vector<std::filesystem::path> paths;
    ~Made() {
      std::error_code ignored;
      for (const auto& path : paths) std::filesystem::remove(path, ignored);
    }
  };
  static Made made;
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("stepsim-fuzz-" + std::to_string(::getpid()) + suffix);
  if (std::find(made.paths.begin(), made.paths.end(), path) == made.paths.end()) made.paths.push_back(path);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  return path.string();
}

}  // namespace stepsim::fuzz
