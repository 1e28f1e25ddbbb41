#include "platforms/units.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace stepsim {
namespace {

struct Suffix {
  std::string_view text;
  double scale;
};

// Splits "64MiB" into 64 and "MiB"; rejects empty, negative, non-finite or malformed numbers.
std::pair<double, std::string_view> split_number(std::string_view text, std::string_view kind) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data() || !std::isfinite(value) || value < 0)
    throw std::invalid_argument("'" + std::string(text) + "' is not a valid " + std::string(kind));
  return {value, text.substr(static_cast<std::size_t>(end - text.data()))};
}

// The largest value each kind accepts: far beyond any machine, small enough that every
// product the models form with it stays finite (a size times a rank count, a time summed over
// a sweep). A value past it is a typo or an attack, and is refused with the limit stated.
struct Limit {
  double value;
  std::string_view text;
};

double apply_suffix(std::string_view text, std::string_view kind, const std::vector<Suffix>& suffixes,
                    std::string_view examples, bool unit_required, Limit limit) {
  auto [value, unit] = split_number(text, kind);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  if (unit.empty() && unit_required && value != 0)
    throw std::invalid_argument("'" + std::string(text) + "' has no unit: a " + std::string(kind) +
                                " needs one (write e.g. " + std::string(examples) + ")");
  for (const Suffix& s : suffixes) {
    if (unit != s.text) continue;
    const double result = value * s.scale;
    if (!(result <= limit.value))
      throw std::invalid_argument("'" + std::string(text) + "' is too large: a " + std::string(kind) +
                                  " is at most " + std::string(limit.text));
    return result;
  }
  throw std::invalid_argument("'" + std::string(text) + "' is not a valid " + std::string(kind) +
                              " (write e.g. " + std::string(examples) + ")");
}

}  // namespace

Bytes parse_size(std::string_view text) {
  static const std::vector<Suffix> suffixes = {
      {"", 1},          {"B", 1},         {"k", 1e3},       {"K", 1e3},       {"KB", 1e3},
      {"kB", 1e3},      {"M", 1e6},       {"MB", 1e6},      {"G", 1e9},       {"GB", 1e9},
      {"T", 1e12},      {"TB", 1e12},     {"KiB", 1024.0},  {"MiB", 1048576.0},
      {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  return apply_suffix(text, "size", suffixes, "8, 1e9, 64KiB, 1GiB, 512MB", false, {1125899906842624.0, "1PiB"});
}

BytesPerSecond parse_bandwidth(std::string_view text) {
  static const std::vector<Suffix> suffixes = {
      {"", 1},         {"Bps", 1},      {"B/s", 1},      {"KBps", 1e3},   {"KB/s", 1e3},
      {"MBps", 1e6},   {"MB/s", 1e6},   {"GBps", 1e9},   {"GB/s", 1e9},   {"TBps", 1e12},
      {"TB/s", 1e12},  {"bps", 0.125},  {"Kbps", 125.0}, {"Mbps", 1.25e5}, {"Gbps", 1.25e8},
      {"Gb/s", 1.25e8}, {"Tbps", 1.25e11}};
  return apply_suffix(text, "bandwidth", suffixes, "25GBps, 25GB/s, 200Gbps", true, {1e15, "1000TBps"});
}

Seconds parse_duration(std::string_view text) {
  static const std::vector<Suffix> suffixes = {
      {"", 1}, {"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}};
  return apply_suffix(text, "duration", suffixes, "0.7us, 1.5ms, 2ns, 3s", true, {1e6, "1e6s (11.6 days)"});
}

std::string format_size(Bytes bytes) {
  static const std::vector<std::pair<double, const char*>> units = {
      {1099511627776.0, "TiB"}, {1073741824.0, "GiB"}, {1048576.0, "MiB"}, {1024.0, "KiB"}};
  for (const auto& [scale, name] : units) {
    double q = bytes / scale;
    if (q >= 1 && q == std::floor(q)) return std::to_string(static_cast<long long>(q)) + name;
  }
  if (bytes == std::floor(bytes)) return std::to_string(static_cast<long long>(bytes)) + "B";
  return std::to_string(bytes) + "B";
}

}  // namespace stepsim
