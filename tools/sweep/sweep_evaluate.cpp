#include "tools/sweep/sweep_evaluate.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "models/algorithm.hpp"
#include "models/compression/codec.hpp"
#include "models/compute/kernel.hpp"
#include "platforms/config_error.hpp"
#include "platforms/loader.hpp"
#include "sim/collective_prediction.hpp"
#include "sim/replay.hpp"
#include "workloads/workload.hpp"

namespace stepsim::sweep {
namespace {

// A sweep over many platform variants would otherwise keep every one of them in memory.
constexpr std::size_t kMaxCachedPlatforms = 64;

std::string get(const std::map<std::string, std::string>& settings, const std::string& key,
                const std::string& fallback = "") {
  const auto it = settings.find(key);
  return it == settings.end() ? fallback : it->second;
}

int get_int(const std::map<std::string, std::string>& settings, const std::string& key, int fallback, int min_value) {
  const auto it = settings.find(key);
  if (it == settings.end()) return fallback;
  try {
    std::size_t used = 0;
    const int value = std::stoi(it->second, &used);
    if (used == it->second.size() && value >= min_value) return value;
  } catch (const std::exception&) {
  }
  throw ConfigError(key, fmt::format("'{}' is not a whole number >= {}", it->second, min_value),
                    "write e.g. " + std::to_string(std::max(min_value, 1)));
}

Bytes get_size(const std::map<std::string, std::string>& settings, const std::string& key) {
  try {
    return parse_size(get(settings, key));
  } catch (const std::invalid_argument& e) {
    throw ConfigError(key, e.what(), "write a size such as 8, 64KiB, 1GiB or 1e9");
  }
}

/// Keys under `prefix` (prefix removed) as `key=value` assignments, in key order.
std::vector<std::string> assignments(const std::map<std::string, std::string>& settings, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& [key, value] : settings)
    if (key.rfind(prefix, 0) == 0) out.push_back(key.substr(prefix.size()) + "=" + value);
  return out;
}

std::string number(double v) { return fmt::format("{}", v); }

}  // namespace

bool needs_own_process(const Sweep& sweep, const Point& point) {
  if (sweep.kind == SweepKind::simulate) return true;
  return get(point_settings(sweep, point.values), "engine", "analytical") != "analytical";
}

const platforms::Platform& PointEvaluator::platform_for(const Settings& settings) {
  platforms::PlatformOptions options;
  options.nodes = get_int(settings, "nodes", 0, 1);
  options.fabric = get(settings, "fabric");
  if (!options.fabric.empty() && options.fabric != "fat-tree" && options.fabric != "rail-optimized")
    throw ConfigError("fabric", "unknown fabric '" + options.fabric + "'", "use fat-tree or rail-optimized");
  for (const auto& [key, value] : settings)
    if (param_target(sweep_.kind, key) == ParamTarget::platform) options.overrides.push_back(key + "=" + value);
  const std::string name = get(settings, "platform");
  std::string key = fmt::format("{}\n{}\n{}", name, options.nodes, options.fabric);
  for (const std::string& o : options.overrides) key.append("\n").append(o);
  auto it = platforms_.find(key);
  if (it == platforms_.end()) {
    if (platforms_.size() >= kMaxCachedPlatforms) platforms_.clear();
    it = platforms_.emplace(key, std::make_unique<platforms::Platform>(platforms::load_platform(name, options))).first;
  }
  return *it->second;
}

sim::Engine& PointEvaluator::engine_for(const std::string& name) {
  auto it = engines_.find(name);
  if (it == engines_.end()) it = engines_.emplace(name, sim::make_engine(name)).first;
  return *it->second;
}

std::vector<std::string> PointEvaluator::collective(const Settings& settings) {
  // The same checks, in the same order, as `stepsim collective` (tools/cli/collective.cpp).
  const platforms::Platform& platform = platform_for(settings);
  const platforms::Allocation allocation = platforms::parse_allocation(get(settings, "gpus"), platform);
  models::CollectiveSpec spec;
  spec.op = models::parse_op(get(settings, "op"));
  spec.ranks = allocation.ranks();
  spec.root = get_int(settings, "root", 0, 0);
  spec.bytes = get_size(settings, "size");
  if (spec.bytes <= 0) throw ConfigError("size", "size must be > 0", "write a positive size such as 1MiB");
  if (spec.bytes != std::floor(spec.bytes))
    throw ConfigError("size", fmt::format("size must be a whole number of bytes, got {}", spec.bytes),
                      "write e.g. 1KiB or 1536");
  if (spec.ranks < 2)
    throw ConfigError("gpus", "a collective needs at least 2 ranks, got " + std::to_string(spec.ranks),
                      "select 2 or more GPUs");
  if (spec.root >= spec.ranks)
    throw ConfigError("root", fmt::format("root {} is not a rank (0..{})", spec.root, spec.ranks - 1),
                      "choose a rank in range");
  models::AlgorithmOptions options;
  options.channels = get_int(settings, "channels", 0, 0);
  if (settings.count("chunk")) options.chunk_bytes = get_size(settings, "chunk");
  sim::add_algo_params(assignments(settings, "algo_param."), options);
  const std::string runtime = get(settings, "runtime", "primitives");
  if (runtime != "primitives" && runtime != "ideal")
    throw ConfigError("runtime", "unknown runtime '" + runtime + "'", "use primitives or ideal");
  options.ideal_runtime = runtime == "ideal";
  const std::string codec = get(settings, "compression");
  if (!codec.empty()) {
    models::parse_codec(codec, "compression");
    options.compression.codec = codec;
    const std::string mode = get(settings, "compression_mode", "collective");
    if (mode != "collective" && mode != "p2p")
      throw ConfigError("compression_mode", "unknown mode '" + mode + "'", "use collective or p2p");
    if (mode == "p2p") options.compression.mode = models::CompressionMode::p2p;
    if (settings.count("compression_threshold")) options.compression.threshold = get_size(settings, "compression_threshold");
  }
  const models::CollectiveContext ctx{platform, allocation, options};
  const sim::CollectivePrediction p = sim::predict_collective(get(settings, "algo", "nccl"), spec, ctx,
                                                              engine_for(get(settings, "engine", "analytical")));
  return {std::to_string(spec.ranks),     number(spec.bytes),      number(p.result.time),
          number(p.algbw_GBps()),         number(p.busbw_GBps()),  p.algo,
          p.schedule.algorithm,           p.schedule.protocol.name, std::to_string(p.schedule.channels),
          std::to_string(p.schedule.expanded_step_count())};
}

std::vector<std::string> PointEvaluator::simulate(const Settings& settings) {
  const platforms::Platform& platform = platform_for(settings);
  const platforms::Allocation allocation = platforms::parse_allocation(get(settings, "gpus"), platform);
  const workloads::JobContext job{platform, allocation};
  const workloads::Trace trace =
      workloads::load_workload(get(settings, "workload"), job, assignments(settings, "workload."));
  sim::ReplayOptions options;
  options.engine = get(settings, "engine", "analytical");
  const sim::Prediction p = sim::replay(trace, {platform, allocation}, options);
  const double peak = models::peak_flops(platform.gpu(), models::Dtype::bf16);
  return {std::to_string(p.ranks),
          number(p.iteration_time),
          number(p.breakdown.compute),
          number(p.breakdown.communication),
          number(p.breakdown.exposed_communication),
          number(p.breakdown.idle),
          std::to_string(p.slowest_rank),
          trace.work.items_per_rank > 0 ? number(trace.work.items_per_rank / p.iteration_time) : "",
          trace.work.model_flops_per_rank > 0 && peak > 0
              ? number(trace.work.model_flops_per_rank / p.iteration_time / peak)
              : "",
          std::to_string(p.ops_replayed),
          trace.memory ? number(trace.memory->worst().peak) : "",
          trace.memory ? (trace.memory->fits() ? "true" : "false") : ""};
}

std::vector<std::string> PointEvaluator::evaluate(const Point& point) {
  const Settings settings = point_settings(sweep_, point.values);
  std::vector<std::string> values;
  std::string error;
  try {
    values = sweep_.kind == SweepKind::collective ? collective(settings) : simulate(settings);
  } catch (const ConfigError& e) {
    error = e.what();
  } catch (const std::exception& e) {
    // A model bug or a crashed SimGrid child: still one failed point, reported as such.
    error = std::string("internal error: ") + e.what();
  }
  values.resize(result_columns(sweep_.kind).size());
  values.push_back(error);
  return values;
}

}  // namespace stepsim::sweep
