#include "validation/harness/measurement_writer.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "platforms/config_error.hpp"

namespace stepsim::harness {

std::string yaml_text(const std::string& text) {
  // Plain scalars: a letter or underscore, then letters, digits and _ . + - /; and not a word
  // YAML 1.1 readers turn into a boolean or null.
  static const char* kReserved[] = {"true", "false", "yes", "no", "on", "off", "y", "n", "null"};
  bool plain = !text.empty() && (std::isalpha(static_cast<unsigned char>(text[0])) || text[0] == '_');
  for (char c : text)
    plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '+' || c == '-' || c == '/');
  if (plain) {
    std::string lower;
    for (char c : text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const char* word : kReserved) plain = plain && lower != word;
  }
  return plain ? text : yaml_quoted(text);
}

std::string yaml_quoted(const std::string& text) {
  std::string quoted = "\"";
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (u < 0x20 || u == 0x7f) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\x%02x", u);
      quoted += escape;
    } else {
      quoted += c;
    }
  }
  return quoted + "\"";
}

std::string yaml_real(double value) {
  if (!std::isfinite(value)) throw std::logic_error("measurement writer: non-finite number");
  char text[32];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  return text;
}

MeasurementRecord::MeasurementRecord(std::string kind) : kind_(std::move(kind)) {}

MeasurementRecord& MeasurementRecord::add(const std::string& key, std::string yaml_value) {
  for (const auto& field : fields_)
    if (field.first == key) throw std::logic_error("measurement writer: key '" + key + "' added twice");
  fields_.emplace_back(key, std::move(yaml_value));
  return *this;
}

MeasurementRecord& MeasurementRecord::integer(const std::string& key, int64_t value) {
  return add(key, std::to_string(value));
}

MeasurementRecord& MeasurementRecord::real(const std::string& key, double value) { return add(key, yaml_real(value)); }

MeasurementRecord& MeasurementRecord::text(const std::string& key, const std::string& value) {
  return add(key, yaml_text(value));
}

MeasurementRecord& MeasurementRecord::flag(const std::string& key, bool value) { return add(key, value ? "true" : "false"); }

MeasurementRecord& MeasurementRecord::timing(const SampleStats& stats) {
  real("time_s", stats.mean_s);
  return add("spread", "{repetitions: " + std::to_string(stats.repetitions) + ", min_s: " + yaml_real(stats.min_s) +
                           ", max_s: " + yaml_real(stats.max_s) + ", stdev_s: " + yaml_real(stats.stdev_s) + "}");
}

std::string MeasurementRecord::format() const {
  if (value("time_s").empty()) throw std::logic_error("measurement writer: " + kind_ + " record without time_s");
  std::string out = "  - kind: " + yaml_text(kind_) + "\n";
  for (const auto& [key, text] : fields_) out += "    " + key + ": " + text + "\n";
  return out;
}

std::string MeasurementRecord::value(const std::string& key) const {
  for (const auto& field : fields_)
    if (field.first == key) return field.second;
  return "";
}

std::string format_measurement_file(const FileHeader& header, const std::vector<MeasurementRecord>& records) {
  std::string out = "version: 1\nsource:\n";
  out += "  tool: " + yaml_text(header.tool) + "\n";
  out += "  command: " + yaml_text(header.command) + "\n";
  out += "  date: " + yaml_text(header.date) + "\n";
  if (!header.notes.empty()) out += "  notes: " + yaml_text(header.notes) + "\n";
  out += "system:\n";
  if (!header.platform.empty()) out += "  platform: " + yaml_text(header.platform) + "\n";
  out += "  gpu: " + yaml_text(header.gpu) + "\n";
  if (!header.gpu_model.empty()) out += "  gpu_model: " + yaml_text(header.gpu_model) + "\n";
  out += "  gpus: " + std::to_string(header.gpus) + "\n";
  out += "  nodes: " + std::to_string(header.nodes) + "\n";
  if (!header.software.empty()) {
    out += "  software: {";
    for (std::size_t i = 0; i < header.software.size(); ++i)
      out += (i ? ", " : "") + yaml_text(header.software[i].first) + ": " + yaml_quoted(header.software[i].second);
    out += "}\n";
  }
  out += records.empty() ? "measurements: []\n" : "measurements:\n";
  for (const MeasurementRecord& record : records) out += record.format();
  return out;
}

void write_measurement_file(const std::string& path, const FileHeader& header,
                            const std::vector<MeasurementRecord>& records) {
  const std::string text = format_measurement_file(header, records);
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) throw ConfigError(path, "cannot open the output file for writing", "check that its folder exists and is writable");
  file << text;
  file.close();
  if (!file) throw ConfigError(path, "writing the output file failed", "check free disk space");
}

}  // namespace stepsim::harness
