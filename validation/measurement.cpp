#include "validation/measurement.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <stdexcept>

#include "platforms/config_error.hpp"
#include "platforms/yaml_reader.hpp"

namespace stepsim::validation {
namespace {

using platforms::YamlReader;

/// How a key's value is read and written.
enum class Type {
  Real,    ///< number >= 0 (double)
  Whole,   ///< whole number >= `min`, kept as double (sizes exceed int)
  Text,    ///< any string
  Choice,  ///< one of `choices`
  Flag,    ///< true / false, kept as text
};

// Whole numbers past these are refused with the limit stated: counts (ranks, GPU indices,
// GEMM dimensions) become ints, and sizes past 1 PiB are no measurement.
constexpr double kMaxCount = 1 << 30;
constexpr double kMaxBytes = 1125899906842624.0;  // 1 PiB
constexpr double kMaxRows = 1e12;                 // embedding rows (production tables hold ~1e9)

struct KeySpec {
  std::string name;
  Type type;
  double min = 0;
  std::vector<std::string> choices = {};
  double max = kMaxCount;   ///< Whole only
};

struct KindSpec {
  std::string kind;
  std::vector<KeySpec> required;  ///< in the order written; `time_s` is among them
  std::vector<KeySpec> optional;
};

const KeySpec kTime{"time_s", Type::Real};

// The one copy of docs/measurements.md's "Kinds and their keys" table. Every kind may also carry
// `spread`, and `iteration` and `collective` a `params` list; both are handled outside this
// table because they are not single values.
const std::vector<KindSpec>& kinds() {
  static const std::vector<KindSpec> table = {
      {"collective",
       {{"op", Type::Choice, 0, {"allgather", "reduce_scatter", "allreduce", "broadcast", "reduce", "alltoall", "sendrecv"}},
        {"size_bytes", Type::Whole, 0, {}, kMaxBytes},
        {"ranks", Type::Whole, 1},
        kTime},
       {{"dtype", Type::Text},
        {"algo", Type::Text},
        {"protocol", Type::Text},
        {"channels", Type::Whole, 1},
        {"in_place", Type::Flag},
        {"busbw_GBps", Type::Real},
        {"algbw_GBps", Type::Real},
        {"nodes", Type::Whole, 1}}},
      {"copy",
       {{"direction", Type::Choice, 0, {"d2d", "h2d", "d2h", "p2p"}}, {"size_bytes", Type::Whole, 0, {}, kMaxBytes}, kTime},
       {{"src", Type::Whole, 0},
        {"dst", Type::Whole, 0},
        {"host_memory", Type::Choice, 0, {"pinned", "pageable"}},
        {"cpu_s", Type::Real}}},
      {"gemm",
       {{"m", Type::Whole, 1},
        {"n", Type::Whole, 1},
        {"k", Type::Whole, 1},
        {"dtype", Type::Choice, 0, {"fp32", "tf32", "fp16", "bf16", "fp8"}},
        kTime},
       {{"batch", Type::Whole, 1}, {"layout", Type::Choice, 0, {"NN", "NT", "TN", "TT"}}}},
      {"embedding",
       {{"rows", Type::Whole, 1, {}, kMaxRows},
        {"dim", Type::Whole, 1},
        {"pooling", Type::Whole, 1},
        {"batch", Type::Whole, 1},
        {"tables", Type::Whole, 1},
        {"dtype", Type::Text},
        {"distribution", Type::Choice, 0, {"uniform", "zipf"}},
        kTime},
       {{"alpha", Type::Real},
        {"seed", Type::Whole, 0, {}, 9007199254740992.0},
        {"pass", Type::Choice, 0, {"forward", "backward"}},
        {"kernel", Type::Choice, 0, {"fused", "torch"}}}},
      {"compression",
       {{"codec", Type::Text},
        {"direction", Type::Choice, 0, {"compress", "decompress"}},
        {"size_bytes", Type::Whole, 0, {}, kMaxBytes},
        kTime},
       {{"compressed_bytes", Type::Whole, 0, {}, kMaxBytes},
        {"rate", Type::Real},
        {"bits", Type::Whole, 1},
        {"block", Type::Whole, 1},
        {"to", Type::Text},
        {"dtype", Type::Text},
        {"max_abs_error", Type::Real}}},
      {"kernel", {{"name", Type::Text}, kTime}, {{"count", Type::Whole, 1}, {"stream", Type::Whole, 0}}},
      {"iteration", {{"workload", Type::Text}, kTime}, {{"tokens_per_s", Type::Real}, {"samples_per_s", Type::Real}}},
  };
  return table;
}

std::vector<std::string> kind_names() {
  std::vector<std::string> names;
  for (const KindSpec& spec : kinds()) names.push_back(spec.kind);
  return names;
}

const KindSpec* find_kind(const std::string& kind) {
  for (const KindSpec& spec : kinds())
    if (spec.kind == kind) return &spec;
  return nullptr;
}

bool is_number_type(Type type) { return type == Type::Real || type == Type::Whole; }

/// Kinds with a `params` list: iteration (-p overrides of the workload) and collective
/// (--algo-param settings of the run, e.g. nvls=off, gpus_per_thread=12).
bool takes_params(const std::string& kind) { return kind == "iteration" || kind == "collective"; }

/// Keys a measurement of `spec` may carry, in the order they are written.
std::vector<std::string> allowed_keys(const KindSpec& spec) {
  std::vector<std::string> keys = {"kind"};
  for (const KeySpec& key : spec.required) keys.push_back(key.name);
  for (const KeySpec& key : spec.optional) keys.push_back(key.name);
  keys.push_back("spread");
  if (takes_params(spec.kind)) keys.push_back("params");
  return keys;
}

const std::vector<std::string> kTopKeys = {"version", "source", "system", "measurements"};
const std::vector<std::string> kSourceKeys = {"tool", "command", "file", "date", "notes"};
const std::vector<std::string> kSystemKeys = {"platform", "gpu",      "gpu_model", "gpus",  "nodes",
                                              "gpu_list", "software", "params"};
const std::vector<std::string> kSpreadKeys = {"repetitions", "min_s", "max_s", "stdev_s"};
constexpr int kVersion = 1;

std::string format_number(double value) {
  // std::to_chars without a precision gives the shortest text that reads back to the same
  // double, so files stay readable (2.31e-05, not 2.3100000000000001e-05) and round-trip exactly.
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  std::string text(buffer, result.ptr);
  // YAML 1.1 readers (PyYAML) take "2e-04" for a string: a mantissa with a dot reads as a number
  // everywhere.
  if (std::size_t e = text.find('e'); e != std::string::npos && text.find('.') == std::string::npos)
    text.insert(e, ".0");
  return text;
}

double read_whole(const YamlReader& reader, const YAML::Node& node, const std::string& path, double min, double max) {
  double value = reader.get_number(node, path);
  if (value != std::floor(value))
    reader.fail(path, node, "'" + node.Scalar() + "' is not a whole number", "write a whole number such as 8");
  if (value < min)
    reader.fail(path, node, "must be >= " + format_number(min) + ", got " + node.Scalar(),
                "write a whole number >= " + format_number(min));
  if (value > max)
    reader.fail(path, node, "must be at most " + format_number(max) + ", got " + node.Scalar(),
                "stepsim's limit for this key; check the value");
  return value;
}

std::vector<std::string> read_string_list(const YamlReader& reader, const YAML::Node& node, const std::string& path) {
  if (!node.IsSequence()) reader.fail(path, node, "expected a list", "write `[\"key=value\", ...]`");
  std::vector<std::string> items;
  for (std::size_t i = 0; i < node.size(); ++i)
    items.push_back(reader.get_string(node[i], path + "[" + std::to_string(i) + "]"));
  return items;
}

Source read_source(const YamlReader& reader, const YAML::Node& node) {
  reader.check_keys(node, "source", kSourceKeys);
  Source source;
  std::string* fields[] = {&source.tool, &source.command, &source.file, &source.date, &source.notes};
  for (std::size_t i = 0; i < kSourceKeys.size(); ++i)
    if (node[kSourceKeys[i]]) *fields[i] = reader.get_string(node[kSourceKeys[i]], "source." + kSourceKeys[i]);
  return source;
}

System read_system(const YamlReader& reader, const YAML::Node& node) {
  reader.check_keys(node, "system", kSystemKeys);
  System system;
  auto text = [&](const char* key, std::string& out) {
    if (node[key]) out = reader.get_string(node[key], std::string("system.") + key);
  };
  text("platform", system.platform);
  text("gpu", system.gpu);
  text("gpu_model", system.gpu_model);
  text("gpu_list", system.gpu_list);
  if (node["gpus"]) system.gpus = reader.get_int(node["gpus"], "system.gpus", 1);
  if (node["nodes"]) system.nodes = reader.get_int(node["nodes"], "system.nodes", 1);
  if (YAML::Node software = node["software"]) {
    if (!software.IsMap())
      reader.fail("system.software", software, "expected a section of `name: version` entries",
                  "write e.g. `software: {cuda: \"12.4\", nccl: \"2.21.5\"}`");
    for (const auto& entry : software) {
      const std::string name = entry.first.as<std::string>();
      system.software[name] = reader.get_string(entry.second, "system.software." + name);
    }
  }
  if (node["params"]) system.params = read_string_list(reader, node["params"], "system.params");
  return system;
}

Spread read_spread(const YamlReader& reader, const YAML::Node& node, const std::string& path) {
  reader.check_keys(node, path, kSpreadKeys);
  Spread spread;
  spread.repetitions = reader.get_int(reader.require(node, path, "repetitions"), path + ".repetitions", 1);
  spread.min_s = reader.get_number(reader.require(node, path, "min_s"), path + ".min_s");
  spread.max_s = reader.get_number(reader.require(node, path, "max_s"), path + ".max_s");
  if (node["stdev_s"]) spread.stdev_s = reader.get_number(node["stdev_s"], path + ".stdev_s");
  if (spread.max_s < spread.min_s)
    reader.fail(path + ".max_s", node["max_s"], "max_s is below min_s", "swap the two values");
  return spread;
}

void read_key(const YamlReader& reader, const YAML::Node& node, const std::string& path, const KeySpec& key,
              Measurement& out) {
  switch (key.type) {
    case Type::Real: out.numbers[key.name] = reader.get_number(node, path); break;
    case Type::Whole: out.numbers[key.name] = read_whole(reader, node, path, key.min, key.max); break;
    case Type::Text: out.texts[key.name] = reader.get_string(node, path); break;
    case Type::Choice: out.texts[key.name] = reader.get_choice(node, path, key.choices); break;
    case Type::Flag: out.texts[key.name] = reader.get_bool(node, path) ? "true" : "false"; break;
  }
}

Measurement read_measurement(const YamlReader& reader, const YAML::Node& node, const std::string& path) {
  if (!node.IsMap()) reader.fail(path, node, "expected a section of `key: value` entries", "start it with `- kind: ...`");
  Measurement m;
  m.line = node.Mark().is_null() ? 0 : node.Mark().line + 1;
  m.kind = reader.get_choice(reader.require(node, path, "kind"), path + ".kind", kind_names());
  const KindSpec& spec = *find_kind(m.kind);
  reader.check_keys(node, path, allowed_keys(spec));
  for (const KeySpec& key : spec.required) {
    if (key.name == kTime.name) continue;
    read_key(reader, reader.require(node, path, key.name), path + "." + key.name, key, m);
  }
  for (const KeySpec& key : spec.optional)
    if (node[key.name]) read_key(reader, node[key.name], path + "." + key.name, key, m);
  YAML::Node time = reader.require(node, path, "time_s");
  m.time_s = reader.get_number(time, path + ".time_s");
  if (!(m.time_s > 0))
    reader.fail(path + ".time_s", time, "time_s must be > 0, got " + time.Scalar(), "write the measured time in seconds, e.g. 2.31e-05");
  if (node["spread"]) m.spread = read_spread(reader, node["spread"], path + ".spread");
  if (node["params"]) m.params = read_string_list(reader, node["params"], path + ".params");
  return m;
}

// ---- writing --------------------------------------------------------------------------------

/// Quotes texts that a YAML reader would otherwise take for a number or a boolean (cuda: "12.4").
void emit_text(YAML::Emitter& out, const std::string& text) {
  bool looks_typed = text.empty() || text == "true" || text == "false" || text == "null" || text == "~";
  if (!looks_typed) {
    double ignored = 0;
    auto result = std::from_chars(text.data(), text.data() + text.size(), ignored);
    looks_typed = result.ec == std::errc() && result.ptr == text.data() + text.size();
  }
  if (looks_typed) out << YAML::DoubleQuoted;
  out << text;
}

void emit_number(YAML::Emitter& out, double value) {
  if (!std::isfinite(value)) throw std::logic_error("measurement: cannot write a non-finite number");
  out << format_number(value);
}

void emit_list(YAML::Emitter& out, const std::vector<std::string>& items) {
  out << YAML::Flow << YAML::BeginSeq;
  for (const std::string& item : items) emit_text(out, item);
  out << YAML::EndSeq;
}

void emit_measurement(YAML::Emitter& out, const Measurement& m) {
  const KindSpec* spec = find_kind(m.kind);
  if (!spec) throw std::logic_error("measurement: unknown kind '" + m.kind + "'");
  // Every key held must belong to the kind: importers that build files in memory get the same
  // discipline as users writing them by hand.
  const std::vector<std::string> allowed = allowed_keys(*spec);
  for (const auto& [key, value] : m.numbers)
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      throw std::logic_error("measurement: key '" + key + "' is not part of kind " + m.kind);
  for (const auto& [key, value] : m.texts)
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      throw std::logic_error("measurement: key '" + key + "' is not part of kind " + m.kind);

  if (!m.params.empty() && !takes_params(m.kind))
    throw std::logic_error("measurement: kind " + m.kind + " takes no params");

  out << YAML::BeginMap << YAML::Key << "kind" << YAML::Value << m.kind;
  auto emit_key = [&](const KeySpec& key, bool required) {
    if (key.name == kTime.name) {
      out << YAML::Key << "time_s" << YAML::Value;
      emit_number(out, m.time_s);
      return;
    }
    if (is_number_type(key.type)) {
      auto it = m.numbers.find(key.name);
      if (it == m.numbers.end()) {
        if (required) throw std::logic_error("measurement: " + m.kind + " lacks required '" + key.name + "'");
        return;
      }
      out << YAML::Key << key.name << YAML::Value;
      emit_number(out, it->second);
    } else {
      auto it = m.texts.find(key.name);
      if (it == m.texts.end()) {
        if (required) throw std::logic_error("measurement: " + m.kind + " lacks required '" + key.name + "'");
        return;
      }
      out << YAML::Key << key.name << YAML::Value;
      if (key.type == Type::Flag) out << it->second;  // unquoted: it is a YAML boolean
      else emit_text(out, it->second);
    }
  };
  for (const KeySpec& key : spec->required) emit_key(key, true);
  for (const KeySpec& key : spec->optional) emit_key(key, false);
  if (m.spread) {
    out << YAML::Key << "spread" << YAML::Value << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "repetitions" << YAML::Value << m.spread->repetitions;
    out << YAML::Key << "min_s" << YAML::Value;
    emit_number(out, m.spread->min_s);
    out << YAML::Key << "max_s" << YAML::Value;
    emit_number(out, m.spread->max_s);
    out << YAML::Key << "stdev_s" << YAML::Value;
    emit_number(out, m.spread->stdev_s);
    out << YAML::EndMap;
  }
  if (!m.params.empty()) {
    out << YAML::Key << "params" << YAML::Value;
    emit_list(out, m.params);
  }
  out << YAML::EndMap;
}

}  // namespace

double Measurement::number(const std::string& key) const {
  if (key == "time_s") return time_s;
  auto it = numbers.find(key);
  if (it == numbers.end()) throw std::logic_error("measurement " + kind + " has no number '" + key + "'");
  return it->second;
}

double Measurement::number_or(const std::string& key, double fallback) const {
  if (key == "time_s") return time_s;
  auto it = numbers.find(key);
  return it == numbers.end() ? fallback : it->second;
}

const std::string& Measurement::text(const std::string& key) const {
  auto it = texts.find(key);
  if (it == texts.end()) throw std::logic_error("measurement " + kind + " has no text '" + key + "'");
  return it->second;
}

std::string Measurement::text_or(const std::string& key, const std::string& fallback) const {
  auto it = texts.find(key);
  return it == texts.end() ? fallback : it->second;
}

bool Measurement::operator==(const Measurement& other) const {
  return kind == other.kind && time_s == other.time_s && spread == other.spread && numbers == other.numbers &&
         texts == other.texts && params == other.params;
}

MeasurementFile parse_measurements(const std::string& yaml_text, const std::string& origin) {
  YamlReader reader(origin);
  YAML::Node root = platforms::load_yaml(yaml_text, origin);
  if (!root || root.IsNull())
    throw ConfigError(origin, "the file is empty", "start it with `version: 1` (see docs/measurements.md)");
  reader.check_keys(root, "", kTopKeys);
  YAML::Node version = reader.require(root, "", "version");
  if (reader.get_int(version, "version", 1) != kVersion)
    reader.fail("version", version, "unknown measurement file version " + version.Scalar(),
                "write `version: 1`, the version this stepsim reads");

  MeasurementFile file;
  file.path = origin;
  if (root["source"]) file.source = read_source(reader, root["source"]);
  if (root["system"]) file.system = read_system(reader, root["system"]);
  YAML::Node list = reader.require(root, "", "measurements");
  if (!list.IsSequence())
    reader.fail("measurements", list, "expected a list of measurements", "write `measurements:` then `- kind: ...` entries");
  for (std::size_t i = 0; i < list.size(); ++i)
    file.measurements.push_back(read_measurement(reader, list[i], "measurements[" + std::to_string(i) + "]"));
  return file;
}

MeasurementFile load_measurements(const std::string& path) {
  return parse_measurements(platforms::read_text_file(path), path);
}

std::string format_measurements(const MeasurementFile& file) {
  YAML::Emitter out;
  out << YAML::Comment("stepsim measurement file (schema: docs/measurements.md)");
  out << YAML::BeginMap << YAML::Key << "version" << YAML::Value << kVersion;

  const Source& s = file.source;
  const std::string* source_fields[] = {&s.tool, &s.command, &s.file, &s.date, &s.notes};
  if (!(s == Source{})) {
    out << YAML::Key << "source" << YAML::Value << YAML::BeginMap;
    for (std::size_t i = 0; i < kSourceKeys.size(); ++i)
      if (!source_fields[i]->empty()) {
        out << YAML::Key << kSourceKeys[i] << YAML::Value;
        emit_text(out, *source_fields[i]);
      }
    out << YAML::EndMap;
  }

  const System& y = file.system;
  if (!(y == System{})) {
    out << YAML::Key << "system" << YAML::Value << YAML::BeginMap;
    auto text = [&](const char* key, const std::string& value) {
      if (value.empty()) return;
      out << YAML::Key << key << YAML::Value;
      emit_text(out, value);
    };
    text("platform", y.platform);
    text("gpu", y.gpu);
    text("gpu_model", y.gpu_model);
    if (y.gpus > 0) out << YAML::Key << "gpus" << YAML::Value << y.gpus;
    out << YAML::Key << "nodes" << YAML::Value << y.nodes;
    text("gpu_list", y.gpu_list);
    if (!y.software.empty()) {
      out << YAML::Key << "software" << YAML::Value << YAML::Flow << YAML::BeginMap;
      for (const auto& [name, version] : y.software) {
        out << YAML::Key << name << YAML::Value;
        emit_text(out, version);
      }
      out << YAML::EndMap;
    }
    if (!y.params.empty()) {
      out << YAML::Key << "params" << YAML::Value;
      emit_list(out, y.params);
    }
    out << YAML::EndMap;
  }

  out << YAML::Key << "measurements" << YAML::Value;
  if (file.measurements.empty()) out << YAML::Flow;
  out << YAML::BeginSeq;
  for (const Measurement& m : file.measurements) emit_measurement(out, m);
  out << YAML::EndSeq << YAML::EndMap;
  if (!out.good()) throw std::logic_error("measurement: YAML emitter failed: " + out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

void write_measurements(const MeasurementFile& file, const std::string& path) {
  const std::string text = format_measurements(file);
  std::ofstream stream(path);
  if (!stream) throw ConfigError(path, "cannot write the measurement file", "check that the folder exists and is writable");
  stream << text;
  if (!stream.flush()) throw ConfigError(path, "writing the measurement file failed", "check free disk space");
}

}  // namespace stepsim::validation
