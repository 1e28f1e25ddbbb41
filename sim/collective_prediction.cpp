#include "sim/collective_prediction.hpp"

#include <algorithm>
#include <stdexcept>

#include "models/checker.hpp"
#include "models/compression/compressed_schedules.hpp"
#include "platforms/config_error.hpp"

namespace stepsim::sim {
namespace {

CollectivePrediction run_supported(const std::string& name, const models::Algorithm& algorithm,
                                   const models::CollectiveSpec& spec, const models::CollectiveContext& ctx,
                                   Engine& engine, bool check) {
  models::Schedule schedule = models::lower_collective(name, algorithm, spec, ctx);
  if (check) {
    if (auto violation = models::check_schedule(schedule))
      throw std::logic_error("schedule of '" + name + "' fails the data-movement check: " + *violation);
  }
  CollectiveResult result = engine.run(schedule, {ctx.platform, ctx.allocation});
  result.time = std::max(result.time, schedule.issue_period);
  return {name, std::move(schedule), std::move(result), {}};
}

}  // namespace

void add_algo_params(const std::vector<std::string>& assignments, models::AlgorithmOptions& options) {
  for (const std::string& kv : assignments) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ConfigError("--algo-param", "'" + kv + "' is not key=value", "write e.g. --algo-param proto=LL128");
    options.extra[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
}

std::optional<std::string> collective_unsupported(const std::string& algo, const models::CollectiveSpec& spec,
                                                  const models::CollectiveContext& ctx) {
  if (algo == "best") {
    for (const models::AlgorithmInfo* info : models::AlgorithmRegistry::instance().all())
      if (info->make()->supports(spec, ctx, nullptr)) return std::nullopt;
    return "no algorithm supports this collective here";
  }
  std::string why_not;
  if (models::AlgorithmRegistry::instance().get(algo).make()->supports(spec, ctx, &why_not)) return std::nullopt;
  return why_not;
}

CollectivePrediction predict_collective(const std::string& algo, const models::CollectiveSpec& spec,
                                        const models::CollectiveContext& ctx, Engine& engine, bool check) {
  if (algo != "best") {
    const auto algorithm = models::AlgorithmRegistry::instance().get(algo).make();
    std::string why_not;
    if (!algorithm->supports(spec, ctx, &why_not))
      throw ConfigError("--algo", "algorithm '" + algo + "' cannot run " + models::to_string(spec.op) + " here: " + why_not,
                        "choose another algorithm or --algo best");
    return run_supported(algo, *algorithm, spec, ctx, engine, check);
  }
  std::optional<CollectivePrediction> best;
  std::vector<std::pair<std::string, Seconds>> candidates;
  for (const models::AlgorithmInfo* info : models::AlgorithmRegistry::instance().all()) {
    const auto algorithm = info->make();
    if (!algorithm->supports(spec, ctx, nullptr)) continue;
    CollectivePrediction p = run_supported(info->name, *algorithm, spec, ctx, engine, check);
    candidates.emplace_back(p.algo, p.result.time);
    if (!best || p.result.time < best->result.time) best = std::move(p);
  }
  if (!best) throw ConfigError("--op", "no algorithm supports this collective here", "check --gpus and --op");
  best->candidates = std::move(candidates);
  return std::move(*best);
}

}  // namespace stepsim::sim
