#include "validation/harness/cli_args.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "platforms/config_error.hpp"

namespace stepsim::harness {
namespace {

std::string option_list(const std::vector<OptionSpec>& specs) {
  std::string list;
  for (const OptionSpec& spec : specs) list += (list.empty() ? "--" : ", --") + spec.name;
  return list;
}

std::string join(const std::vector<std::string>& items) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : ",") + item;
  return text;
}

}  // namespace

CliArgs::CliArgs(const std::vector<std::string>& args, const std::vector<OptionSpec>& specs, std::string command)
    : command_(std::move(command)) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word.size() < 3 || word.compare(0, 2, "--") != 0)
      throw ConfigError(word, "unexpected argument to '" + command_ + "'", "options start with --: " + option_list(specs));
    std::string name = word.substr(2);
    std::optional<std::string> value;
    if (std::size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const OptionSpec* spec = nullptr;
    for (const OptionSpec& candidate : specs)
      if (candidate.name == name) spec = &candidate;
    if (spec == nullptr)
      throw ConfigError("--" + name, "unknown option for '" + command_ + "'",
                        "use one of " + option_list(specs) + " (see '" + command_ + " --help')");
    if (values_.count(name) != 0) throw ConfigError("--" + name, "given twice", "give each option once");
    if (!spec->takes_value) {
      if (value) throw ConfigError("--" + name, "takes no value", "write just --" + name);
      values_[name] = "";
      continue;
    }
    if (!value) {
      if (i + 1 >= args.size()) throw ConfigError("--" + name, "needs a value", spec->help);
      value = args[++i];
    }
    if (value->empty()) throw ConfigError("--" + name, "needs a value", spec->help);
    values_[name] = *value;
  }
}

bool CliArgs::has(const std::string& name) const { return values_.count(name) != 0; }

std::string CliArgs::text(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

int64_t CliArgs::integer(const std::string& name, int64_t fallback, int64_t min, int64_t max) const {
  if (!has(name)) return fallback;
  int64_t value = parse_integer(text(name, ""), "--" + name);
  if (value < min || value > max)
    throw ConfigError("--" + name, "must be in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " + std::to_string(value),
                      "give a value in that range");
  return value;
}

double CliArgs::real(const std::string& name, double fallback, double min, double max) const {
  if (!has(name)) return fallback;
  const std::string value_text = text(name, "");
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(value_text.c_str(), &end);
  if (end == value_text.c_str() || *end != '\0' || errno != 0 || !std::isfinite(value))
    throw ConfigError("--" + name, "'" + value_text + "' is not a number", "write e.g. 1.05");
  if (value < min || value > max)
    throw ConfigError("--" + name, "must be in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " + value_text,
                      "give a value in that range");
  return value;
}

uint64_t CliArgs::bytes(const std::string& name, uint64_t fallback, uint64_t min) const {
  if (!has(name)) return fallback;
  uint64_t value = parse_bytes(text(name, ""), "--" + name);
  if (value < min)
    throw ConfigError("--" + name, "must be at least " + std::to_string(min) + " bytes, got " + text(name, ""),
                      "give a larger size");
  return value;
}

std::vector<std::string> CliArgs::choices(const std::string& name, const std::vector<std::string>& fallback,
                                          const std::vector<std::string>& choices) const {
  if (!has(name)) return fallback;
  std::vector<std::string> items = split(text(name, ""), ',');
  for (const std::string& item : items) {
    bool known = false;
    for (const std::string& choice : choices) known = known || item == choice;
    if (!known)
      throw ConfigError("--" + name, "unknown item '" + item + "'", "use a comma-separated list of " + join(choices));
  }
  return items;
}

std::vector<int64_t> CliArgs::integers(const std::string& name, const std::vector<int64_t>& fallback, int64_t min,
                                       int64_t max) const {
  if (!has(name)) return fallback;
  std::vector<int64_t> values;
  for (const std::string& item : split(text(name, ""), ',')) {
    int64_t value = parse_integer(item, "--" + name);
    if (value < min || value > max)
      throw ConfigError("--" + name, "items must be in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " + item,
                        "give values in that range");
    values.push_back(value);
  }
  return values;
}

uint64_t parse_bytes(const std::string& text, const std::string& where) {
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},        {"B", 1},          {"k", 1e3},        {"K", 1e3},          {"KB", 1e3},
      {"kB", 1e3},    {"M", 1e6},        {"MB", 1e6},       {"G", 1e9},          {"GB", 1e9},
      {"T", 1e12},    {"TB", 1e12},      {"KiB", 1024.0},   {"MiB", 1048576.0},  {"GiB", 1073741824.0},
      {"TiB", 1099511627776.0}};
  const std::string fix = "write a whole number of bytes such as 8, 1e9, 64KiB, 8GiB or 512MB";
  char* end = nullptr;
  errno = 0;
  double number = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || errno != 0 || !std::isfinite(number) || number < 0 || text[0] == ' ')
    throw ConfigError(where, "'" + text + "' is not a size", fix);
  const std::string unit(end);
  for (const auto& [name, scale] : kUnits) {
    if (unit != name) continue;
    double value = number * scale;
    if (value != std::floor(value) || value >= 18446744073709551616.0)
      throw ConfigError(where, "'" + text + "' is not a whole number of bytes", fix);
    return static_cast<uint64_t>(value);
  }
  throw ConfigError(where, "'" + text + "' has an unknown unit '" + unit + "'", fix);
}

int64_t parse_integer(const std::string& text, const std::string& where) {
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end == text.c_str() || *end != '\0' || errno != 0 || text[0] == ' ')
    throw ConfigError(where, "'" + text + "' is not a whole number", "write digits only, e.g. 20");
  return value;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (true) {
    std::size_t end = text.find(separator, start);
    items.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return items;
    start = end + 1;
  }
}

std::vector<uint64_t> size_sweep(uint64_t min, uint64_t max, uint64_t factor) {
  if (factor < 2) throw ConfigError("--factor", "must be at least 2, got " + std::to_string(factor), "write e.g. --factor 2");
  if (min == 0) throw ConfigError("--min", "must be at least 1 byte", "write e.g. --min 8");
  if (min > max)
    throw ConfigError("--min", "is larger than --max (" + format_bytes(min) + " > " + format_bytes(max) + ")",
                      "lower --min or raise --max");
  std::vector<uint64_t> sizes;
  for (uint64_t size = min; size <= max; size *= factor) {
    sizes.push_back(size);
    if (size > max / factor) break;  // the next one would pass max (or overflow)
  }
  return sizes;
}

std::string format_bytes(uint64_t bytes) {
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  std::string unit;
  uint64_t value = bytes;
  for (const char* name : kUnits) {
    if (value == 0 || value % 1024 != 0) break;
    value /= 1024;
    unit = name;
  }
  return std::to_string(value) + unit;
}

}  // namespace stepsim::harness
