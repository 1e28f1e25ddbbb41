#include "tools/sweep/sharding_ranking.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "platforms/config_error.hpp"
#include "sim/replay.hpp"
#include "platforms/yaml_reader.hpp"
#include "workloads/generators/dlrm_sharding.hpp"
#include "workloads/workload.hpp"

namespace stepsim::sweep {
namespace {

/// The numbers of "[a,b,c]" that follows `key` in `note`; empty when `key` is absent.
std::vector<double> numbers_after(const std::string& note, const std::string& key) {
  std::vector<double> out;
  const std::size_t at = note.find(key);
  if (at == std::string::npos) return out;
  const std::size_t open = at + key.size(), close = note.find(']', open);
  std::stringstream in(note.substr(open, close - open));
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stod(item));
  return out;
}

// The dlrm generator's notes of a plan (dlrm.cpp, describe_table_plan).
constexpr const char* kTorchrecPlan = "TorchRec's plan (usable as sharding.plan): ";

class Evaluator {
 public:
  Evaluator(const ShardingRankingRequest& request, const platforms::Platform& platform,
            const platforms::Allocation& allocation)
      : request_(request), platform_(platform), allocation_(allocation), job_{platform, allocation} {}

  /// Simulates the workload with sharding.plan `plan` and `extra` overrides after the caller's.
  ShardingCandidate run(const std::string& name, const std::string& plan, const std::vector<std::string>& extra) const {
    std::vector<std::string> overrides = request_.overrides;
    overrides.push_back("sharding.plan=" + plan);
    overrides.insert(overrides.end(), extra.begin(), extra.end());
    const workloads::Trace trace = workloads::load_workload(request_.workload, job_, overrides);
    ShardingCandidate c;
    c.planner = name;
    c.plan = plan;
    // The dlrm generator states its table-wise plan in one note of a fixed form (dlrm.cpp,
    // describe_placement): the placement and each rank's lookup bytes.
    for (const std::string& note : trace.notes) {
      const std::vector<double> ranks = numbers_after(note, "table placement (usable as sharding.placement): [");
      if (ranks.empty()) continue;
      for (double r : ranks) c.placement.push_back(static_cast<int>(r));
      const std::vector<double> lookup = numbers_after(note, "lookup bytes per rank: [");
      c.max_lookup_bytes = lookup.empty() ? 0 : *std::max_element(lookup.begin(), lookup.end());
    }
    for (const std::string& note : trace.notes)
      if (note.rfind(kTorchrecPlan, 0) == 0) c.plan_text = note.substr(std::string(kTorchrecPlan).size());
    if (c.placement.empty() && plan == "table_wise")
      throw ConfigError(request_.workload, "is not a dlrm workload with table-wise sharding",
                        "rank-sharding ranks DLRM embedding plans: give a kind: dlrm workload");
    const sim::Prediction p = sim::replay(trace, {platform_, allocation_}, {});
    c.iteration_time = p.iteration_time;
    c.throughput = trace.work.items_per_rank * trace.ranks / p.iteration_time;
    return c;
  }

 private:
  const ShardingRankingRequest& request_;
  const platforms::Platform& platform_;
  const platforms::Allocation& allocation_;
  const workloads::JobContext job_;
};

/// Every placement of `tables` tables on `ranks` ranks, lexicographically; the fastest that fits.
void exhaustive(const Evaluator& eval, int tables, int ranks, ShardingRanking& out) {
  std::vector<int> placement(static_cast<std::size_t>(tables), 0);
  ShardingCandidate best;
  int tried = 0, fit = 0;
  for (bool more = true; more;) {
    ++tried;
    try {
      ShardingCandidate c = eval.run("exhaustive", "table_wise", {"sharding.placement=" + placement_text(placement)});
      ++fit;
      if (fit == 1 || c.iteration_time < best.iteration_time) best = std::move(c);
    } catch (const ConfigError&) {
      // A placement whose tables overflow some GPU's memory: not a plan.
    }
    more = false;
    for (int t = tables - 1; t >= 0 && !more; --t) {
      auto& r = placement[static_cast<std::size_t>(t)];
      if (++r < ranks) more = true;
      else r = 0;
    }
  }
  out.exhaustive = fit > 0;
  out.exhaustive_note = std::to_string(tried) + " placements tried, " + std::to_string(fit) + " fit in memory";
  if (fit > 0) out.rows.push_back(std::move(best));
}

}  // namespace

const std::vector<std::string>& other_sharding_plans() {
  static const std::vector<std::string> plans = {"row_wise", "column_wise", "data_parallel", "torchrec"};
  return plans;
}

std::string placement_text(const std::vector<int>& placement) {
  std::string out = "[";
  for (std::size_t i = 0; i < placement.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(placement[i]);
  }
  return out + "]";
}

ShardingRanking rank_sharding(const ShardingRankingRequest& request, const platforms::Platform& platform,
                              const platforms::Allocation& allocation) {
  std::vector<std::string> planners = request.planners;
  std::vector<std::string> table_wise, known;
  for (const workloads::PlannerInfo& p : workloads::sharding_planners()) table_wise.push_back(p.name);
  known = table_wise;
  known.insert(known.end(), other_sharding_plans().begin(), other_sharding_plans().end());
  if (planners.empty()) planners = known;
  for (const std::string& p : planners)
    if (std::find(known.begin(), known.end(), p) == known.end())
      throw ConfigError("--planners " + p, "unknown planner or plan", "use all or some of: " + platforms::join(known));

  const Evaluator eval(request, platform, allocation);
  ShardingRanking out;
  for (const std::string& p : planners) {
    const bool whole = std::find(table_wise.begin(), table_wise.end(), p) != table_wise.end();
    try {
      out.rows.push_back(whole ? eval.run(p, "table_wise", {"sharding.planner=" + p}) : eval.run(p, p, {}));
      if (whole) out.tables = static_cast<int>(out.rows.back().placement.size());
    } catch (const ConfigError& e) {
      out.skipped.push_back(p + ": " + e.what());
    }
  }
  if (out.rows.empty())
    throw ConfigError(request.workload,
                      "no planner gives a plan that runs (" + std::to_string(out.skipped.size()) +
                          " tried); the first: " + out.skipped.front(),
                      "give a kind: dlrm workload whose tables fit, e.g. on more GPUs");
  const int ranks = allocation.ranks();
  const double placements = std::pow(static_cast<double>(ranks), out.tables);
  if (out.tables == 0)
    out.exhaustive_note = "not run: no table-wise planner ran (it searches their placements)";
  else if (out.tables > request.exhaustive_max_tables)
    out.exhaustive_note = "not run: " + std::to_string(out.tables) + " tables > --exhaustive-max-tables " +
                          std::to_string(request.exhaustive_max_tables);
  else if (placements > request.max_placements)
    out.exhaustive_note = "not run: " + std::to_string(ranks) + "^" + std::to_string(out.tables) + " placements > " +
                          std::to_string(static_cast<long long>(request.max_placements));
  else
    exhaustive(eval, out.tables, ranks, out);
  std::stable_sort(out.rows.begin(), out.rows.end(), [](const ShardingCandidate& a, const ShardingCandidate& b) {
    return a.iteration_time != b.iteration_time ? a.iteration_time < b.iteration_time : a.planner < b.planner;
  });
  return out;
}

}  // namespace stepsim::sweep
