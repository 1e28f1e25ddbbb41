#include "models/compression/codec.hpp"

#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>

#include "models/compute/kernel.hpp"
#include "platforms/config_error.hpp"

namespace stepsim::models {
namespace {

std::string join(const std::vector<std::string>& items) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : ", ") + item;
  return text;
}

std::string known_codecs() {
  std::vector<std::string> names;
  for (const CodecInfo* info : CodecRegistry::instance().all()) names.push_back(info->name);
  return join(names);
}

std::string known_keys(const CodecInfo& info) {
  std::vector<std::string> keys;
  for (const CodecParam& p : info.params) keys.push_back(p.name + " (" + p.description + ", default " + p.default_value + ")");
  return keys.empty() ? "none" : join(keys);
}

}  // namespace

CodecCost scale_cost(const CostAnchor& volta, const CostAnchor* ampere, const platforms::GpuModel& gpu,
                     const std::string& codec) {
  if (!(gpu.hbm_bandwidth > 0))
    throw ConfigError("GPU '" + gpu.name + "'", "has no memory bandwidth, which codec '" + codec + "' scales by",
                      "give the GPU model an hbm_bandwidth");
  const bool newer = gpu.arch == platforms::GpuArch::ampere || gpu.arch == platforms::GpuArch::hopper ||
                     gpu.arch == platforms::GpuArch::blackwell;
  const CostAnchor& anchor = newer && ampere ? *ampere : volta;
  return {anchor.cost.latency, anchor.cost.throughput * gpu.hbm_bandwidth / anchor.hbm_bandwidth};
}

const std::string& CodecParams::text(const std::string& key) const {
  const auto it = values_.find(key);
  if (it == values_.end()) throw std::logic_error("codec '" + codec_ + "' read undeclared parameter '" + key + "'");
  return it->second;
}

double CodecParams::number(const std::string& key, double minimum, double maximum) const {
  const std::string& value = text(key);
  char* end = nullptr;
  const double x = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(x) || x < minimum || x > maximum)
    throw ConfigError(where_ + " (" + codec_ + ")", fmt::format("{}={} is not a number in [{}, {}]", key, value, minimum, maximum),
                      fmt::format("write e.g. {}:{}={}", codec_, key, minimum));
  return x;
}

int CodecParams::integer(const std::string& key, int minimum, int maximum) const {
  const double x = number(key, minimum, maximum);
  if (x != std::floor(x))
    throw ConfigError(where_ + " (" + codec_ + ")", fmt::format("{}={} is not a whole number", key, text(key)),
                      fmt::format("write e.g. {}:{}={}", codec_, key, minimum));
  return static_cast<int>(x);
}

std::string CodecParams::choice(const std::string& key, const std::vector<std::string>& allowed) const {
  const std::string& value = text(key);
  for (const std::string& a : allowed)
    if (a == value) return value;
  throw ConfigError(where_ + " (" + codec_ + ")", key + "=" + value + " is not allowed", "use one of: " + join(allowed));
}

CodecRegistry& CodecRegistry::instance() {
  static CodecRegistry registry;
  return registry;
}

void CodecRegistry::add(CodecInfo info) {
  if (by_name_.count(info.name)) throw std::logic_error("codec registered twice: " + info.name);
  std::string name = info.name;
  by_name_.emplace(std::move(name), std::move(info));
}

const CodecInfo& CodecRegistry::get(const std::string& name, const std::string& where) const {
  const auto it = by_name_.find(name);
  if (it != by_name_.end()) return it->second;
  throw ConfigError(where, "unknown codec '" + name + "'", "use one of: " + known_codecs());
}

std::vector<const CodecInfo*> CodecRegistry::all() const {
  std::vector<const CodecInfo*> out;
  for (const auto& [_, info] : by_name_) out.push_back(&info);
  return out;
}

std::unique_ptr<Codec> parse_codec(const std::string& text, const std::string& where) {
  const auto colon = text.find(':');
  const std::string name = text.substr(0, colon);
  if (name.empty()) throw ConfigError(where, "no codec named in '" + text + "'", "write e.g. zfp:rate=8; codecs: " + known_codecs());
  const CodecInfo& info = CodecRegistry::instance().get(name, where);
  std::map<std::string, std::string> values;
  for (const CodecParam& p : info.params) values[p.name] = p.default_value;
  std::map<std::string, bool> given;
  if (colon != std::string::npos) {
    std::size_t start = colon + 1;
    for (;;) {
      const std::size_t comma = text.find(',', start);
      const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      const auto eq = item.find('=');
      if (eq == std::string::npos || eq == 0)
        throw ConfigError(where, "'" + item + "' in '" + text + "' is not key=value", "write e.g. " + name + ":key=value");
      const std::string key = item.substr(0, eq);
      if (!values.count(key))
        throw ConfigError(where, "codec '" + name + "' has no parameter '" + key + "'", "its parameters: " + known_keys(info));
      if (given[key]) throw ConfigError(where, "parameter '" + key + "' given twice in '" + text + "'", "give it once");
      given[key] = true;
      values[key] = item.substr(eq + 1);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return info.make(CodecParams(where, name, std::move(values)));
}

Bytes float_bytes(const std::string& dtype) {
  if (dtype == "fp32") return 4;
  if (dtype == "fp16" || dtype == "bf16") return 2;
  throw std::logic_error("float_bytes: not a codec dtype: " + dtype);
}

BytesPerSecond elementwise_throughput(const platforms::GpuModel& gpu, Bytes value_bytes, double read, double written) {
  KernelSpec spec;
  spec.kind = "elementwise";
  spec.dtype = Dtype::fp32;
  constexpr double kElements = 1 << 28;
  spec.params = {{"elements", kElements}, {"bytes_read", read}, {"bytes_written", written}, {"flops", 1}};
  complete_kernel(spec, "codec pass");
  return kElements * value_bytes / kernel_cost(spec, gpu).time;
}

}  // namespace stepsim::models
