#pragma once
/// @file `stepsim merge`: joining the result files of a sweep's shards (or of resumed runs).
///
/// Contract: every input has the same columns (CSV header or JSON keys), else ConfigError
/// naming the file. Rows are keyed by their `point` id: identical duplicates collapse into one,
/// two different rows for one point are a ConfigError naming both files. A half-written last
/// line of an input (a shard that was killed) is left out and reported. The merged rows are
/// sorted by index.
#include <string>
#include <vector>

#include "tools/sweep/sweep_results.hpp"

namespace stepsim::sweep {

/// @brief The merged rows and what merging found.
struct MergeResult {
  ResultTable table;
  int duplicates = 0;                          ///< identical rows collapsed
  std::vector<std::string> partial_files;      ///< inputs whose half-written last line was left out
};

/// @brief Merges the result files at `paths` as described above.
MergeResult merge_results(const std::vector<std::string>& paths);

/// @brief Writes `table` to `path` (format by extension) through a temporary file renamed
/// into place, so a reader never sees half a file.
void write_results(const std::string& path, const ResultTable& table);

}  // namespace stepsim::sweep
