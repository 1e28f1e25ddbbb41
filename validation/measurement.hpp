#pragma once
/// @file Measurement files (schema: docs/measurements.md): what ran, on which hardware, with
/// what result and spread. Importers write them, calibrate fits from them, validate compares.
///
/// Contract: `load_measurements` rejects unknown keys, missing required keys and bad values
/// with ConfigError naming the file, the YAML path, the line and a fix. `write_measurements`
/// emits a file that `load_measurements` reads back to an equal MeasurementFile.
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace stepsim::validation {

/// @brief Where the numbers come from.
struct Source {
  std::string tool;
  std::string command;
  std::string file;
  std::string date;
  std::string notes;
  bool operator==(const Source&) const = default;
};

/// @brief What the measurements ran on.
struct System {
  std::string platform;   ///< stepsim preset it corresponds to ("" = unknown)
  std::string gpu;        ///< driver's name of the GPU
  std::string gpu_model;  ///< stepsim catalogue name ("" = unknown)
  int gpus = 0;           ///< GPUs in the whole run (0 = not stated)
  int nodes = 1;
  std::string gpu_list;   ///< --gpus allocation ("" = the first `gpus` GPUs)
  std::map<std::string, std::string> software;  ///< cuda, nccl, driver, torch, ...
  std::vector<std::string> params;              ///< -p overrides stating facts of the hardware
  bool operator==(const System&) const = default;
};

/// @brief Repetitions of one case.
struct Spread {
  int repetitions = 0;
  double min_s = 0;
  double max_s = 0;
  double stdev_s = 0;
  bool operator==(const Spread&) const = default;
};

/// @brief One measured case. `kind` selects which of `fields` are required (docs table);
/// every kind has `time_s`. Numbers and strings are kept by key, as written, so a kind's
/// optional keys need no struct member each.
struct Measurement {
  std::string kind;                           ///< collective copy gemm embedding compression kernel iteration
  double time_s = 0;
  std::optional<Spread> spread;
  std::map<std::string, double> numbers;      ///< size_bytes, ranks, m, n, k, busbw_GBps, ...
  std::map<std::string, std::string> texts;   ///< op, dtype, codec, direction, workload, ...
  std::vector<std::string> params;            ///< iteration: -p overrides; collective: --algo-param settings
  int line = 0;                               ///< line in the file (0 = built in memory)

  double number(const std::string& key) const;                 ///< logic_error when absent
  double number_or(const std::string& key, double fallback) const;
  const std::string& text(const std::string& key) const;       ///< logic_error when absent
  std::string text_or(const std::string& key, const std::string& fallback) const;
  bool operator==(const Measurement& other) const;             ///< ignores `line`
};

/// @brief One measurement file.
struct MeasurementFile {
  std::string path;  ///< where it was read from ("" = built in memory)
  Source source;
  System system;
  std::vector<Measurement> measurements;
};

/// @brief Reads and checks one file (ConfigError on any schema violation).
MeasurementFile load_measurements(const std::string& path);
/// @brief The same from text; `origin` names it in errors.
MeasurementFile parse_measurements(const std::string& yaml_text, const std::string& origin);
/// @brief YAML text of `file`, keys in the schema's order; numbers are written as the shortest
/// text that reads back to the same double (std::to_chars), so they round-trip exactly.
std::string format_measurements(const MeasurementFile& file);
/// @brief Writes format_measurements(file) to `path` (ConfigError when it cannot).
void write_measurements(const MeasurementFile& file, const std::string& path);

}  // namespace stepsim::validation
