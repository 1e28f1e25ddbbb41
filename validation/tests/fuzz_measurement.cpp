// libFuzzer target: measurement files (`stepsim validate`, `calibrate`). A file that loads must
// also survive the round trip its contract promises: written back, it reads to an equal file.
// Any exception but ConfigError, or a round trip that changes the file, is a finding.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#include "platforms/tests/fuzz_entry.hpp"
#include "validation/measurement.hpp"

namespace {

using stepsim::validation::Measurement;
using stepsim::validation::MeasurementFile;

/// "'a' became 'b'", around the first character that changed when the texts are long.
std::string contrast(const std::string& read, const std::string& reread) {
  std::size_t at = 0;
  while (at < read.size() && at < reread.size() && read[at] == reread[at]) ++at;
  const std::size_t from = at > 40 ? at - 40 : 0;
  const auto part = [&](const std::string& text) {
    return (from ? "..." : "") + fmt::format("{:?}", text.substr(from, 80)) + (text.size() > from + 80 ? "..." : "");
  };
  return part(read) + " became " + part(reread) + (from ? " (from character " + std::to_string(from) + ")" : "");
}
std::string contrast(double read, double reread) { return fmt::format("{} became {}", read, reread); }

template <class Map>
std::string map_difference(const std::string& field, const Map& read, const Map& reread) {
  for (const auto& [key, value] : read) {
    const auto again = reread.find(key);
    if (again == reread.end()) return field + "." + key + " (lost)";
    if (!(again->second == value)) return field + "." + key + " (" + contrast(value, again->second) + ")";
  }
  return field + " (a key appeared)";
}

/// The field of one measurement that differs, to start the triage there.
std::string difference(const Measurement& read, const Measurement& reread) {
  if (read.kind != reread.kind) return "kind";
  if (read.time_s != reread.time_s) return "time_s (" + contrast(read.time_s, reread.time_s) + ")";
  if (read.spread != reread.spread) return "spread";
  if (read.numbers != reread.numbers) return map_difference("numbers", read.numbers, reread.numbers);
  if (read.texts != reread.texts) return map_difference("texts", read.texts, reread.texts);
  return "params";
}

/// What differs between `read` and `reread` ("" = nothing).
std::string difference(const MeasurementFile& read, const MeasurementFile& reread) {
  if (!(read.source == reread.source)) return "source";
  if (!(read.system == reread.system)) return "system";
  if (read.measurements.size() != reread.measurements.size()) return "the number of measurements";
  for (std::size_t i = 0; i < read.measurements.size(); ++i)
    if (!(read.measurements[i] == reread.measurements[i]))
      return "measurements[" + std::to_string(i) + "] (line " + std::to_string(read.measurements[i].line) +
             "): " + difference(read.measurements[i], reread.measurements[i]);
  return "";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace stepsim::validation;
  const std::string text = stepsim::fuzz::input_text(data, size);
  stepsim::fuzz::expect_config_error_only([&] {
    const MeasurementFile file = parse_measurements(text, "measured.yaml");
    const std::string written = format_measurements(file);
    if (const std::string what = difference(file, parse_measurements(written, "written.yaml")); !what.empty()) {
      std::fprintf(stderr, "the measurement round trip changed %s\n", what.c_str());
      std::abort();
    }
  });
  return 0;
}
