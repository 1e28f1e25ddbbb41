#include "models/algorithm.hpp"

#include "platforms/config_error.hpp"

namespace stepsim::models {

const char* to_string(CompressionMode mode) { return mode == CompressionMode::p2p ? "p2p" : "collective"; }

AlgorithmRegistry& AlgorithmRegistry::instance() {
  static AlgorithmRegistry registry;
  return registry;
}

void AlgorithmRegistry::add(AlgorithmInfo info) {
  if (by_name_.count(info.name)) throw std::logic_error("algorithm registered twice: " + info.name);
  std::string name = info.name;
  by_name_.emplace(std::move(name), std::move(info));
}

const AlgorithmInfo& AlgorithmRegistry::get(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it != by_name_.end()) return it->second;
  std::string known;
  for (const auto& [n, _] : by_name_) known += (known.empty() ? "" : ", ") + n;
  throw ConfigError("--algo", "unknown algorithm '" + name + "'", "use one of: " + known + ", best");
}

std::vector<const AlgorithmInfo*> AlgorithmRegistry::all() const {
  std::vector<const AlgorithmInfo*> out;
  for (const auto& [_, info] : by_name_) out.push_back(&info);
  return out;
}

}  // namespace stepsim::models
