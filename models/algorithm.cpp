#include "models/algorithm.hpp"

#include <algorithm>

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

void AlgorithmInfo::check_params(const AlgorithmOptions& options) const {
  for (const auto& [key, value] : options.extra) {
    const bool declared =
        std::any_of(params.begin(), params.end(), [&key = key](const AlgorithmParam& p) { return p.name == key; });
    if (declared) continue;
    std::string accepted;
    for (const AlgorithmParam& p : params)
      accepted += (accepted.empty() ? "" : "; ") + p.name + "=" + p.description + " (default: " + p.default_value + ")";
    throw ConfigError("--algo-param " + key + "=" + value, "'" + key + "' is not a parameter of --algo " + name,
                      accepted.empty() ? name + " takes no --algo-param; drop it"
                                       : name + " accepts: " + accepted);
  }
}

std::vector<const AlgorithmInfo*> AlgorithmRegistry::all() const {
  std::vector<const AlgorithmInfo*> out;
  for (const auto& [_, info] : by_name_) out.push_back(&info);
  return out;
}

}  // namespace stepsim::models
