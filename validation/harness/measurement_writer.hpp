#pragma once
/// @file Writes measurement files (docs/measurements.md) without yaml-cpp, which the GPU machine
/// lacks: a header (source + system) and an ordered list of records.
///
/// Contract: the output is YAML that validation/measurement.cpp loads; keys appear in the order
/// they were added; texts are double-quoted unless they are plain identifiers; reals are written
/// with the fewest digits that read back to the same double. Non-finite numbers and records
/// without `time_s` are programming errors (std::logic_error).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "validation/harness/spread_stats.hpp"

namespace stepsim::harness {

/// @brief One measured case: `kind` then keys in insertion order.
class MeasurementRecord {
 public:
  explicit MeasurementRecord(std::string kind);

  MeasurementRecord& integer(const std::string& key, int64_t value);
  MeasurementRecord& real(const std::string& key, double value);
  MeasurementRecord& text(const std::string& key, const std::string& value);
  MeasurementRecord& flag(const std::string& key, bool value);
  /// @brief Adds `time_s` (the mean) and `spread` from the repetitions.
  MeasurementRecord& timing(const SampleStats& stats);

  /// @brief The record as YAML lines of a list item ("  - kind: ...\n    key: ...\n").
  std::string format() const;
  /// @brief The value of `key` as written (tests and progress lines), or "" when absent.
  std::string value(const std::string& key) const;

 private:
  MeasurementRecord& add(const std::string& key, std::string yaml_value);
  std::string kind_;
  std::vector<std::pair<std::string, std::string>> fields_;  ///< key, YAML text of the value
};

/// @brief The `source` and `system` sections.
struct FileHeader {
  std::string tool;     ///< "stepsim-harness nccl"
  std::string command;  ///< the command line
  std::string date;     ///< YYYY-MM-DD (UTC)
  std::string notes;
  std::string platform;   ///< stepsim preset, "" = omitted
  std::string gpu;        ///< driver's GPU name
  std::string gpu_model;  ///< stepsim catalogue name, "" = omitted
  int gpus = 1;
  int nodes = 1;
  std::vector<std::pair<std::string, std::string>> software;  ///< name, version
};

/// @brief The whole file as YAML text.
std::string format_measurement_file(const FileHeader& header, const std::vector<MeasurementRecord>& records);

/// @brief Writes format_measurement_file to `path` (ConfigError naming the path when it cannot).
void write_measurement_file(const std::string& path, const FileHeader& header,
                            const std::vector<MeasurementRecord>& records);

/// @brief A YAML scalar for `text`: plain when it is an identifier-like word that YAML reads back
/// as the same string, double-quoted (with escapes) otherwise.
std::string yaml_text(const std::string& text);

/// @brief `text` as a double-quoted YAML scalar (for texts that must stay strings, e.g. "13.0").
std::string yaml_quoted(const std::string& text);

/// @brief The shortest decimal form of `value` that reads back as the same double.
std::string yaml_real(double value);

}  // namespace stepsim::harness
