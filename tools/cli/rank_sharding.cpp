// `stepsim rank-sharding`: DLRM embedding sharding plans (every planner, plus an exhaustive
// search of placements for small cases) ranked by predicted iteration time (docs/dlrm.md).
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "platforms/config_error.hpp"
#include "tools/cli/commands.hpp"
#include "tools/sweep/sharding_ranking.hpp"

namespace stepsim::cli {
namespace {

struct RankShardingArgs {
  PlatformArgs platform;
  std::string workload;
  std::string planners = "all";
  int exhaustive_max_tables = 8;
  std::string format = "text";
};

nlohmann::json to_json(const sweep::ShardingRanking& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const sweep::ShardingCandidate& c : r.rows)
    rows.push_back({{"planner", c.planner},
                    {"iteration_time_s", c.iteration_time},
                    {"throughput_samples_per_s", c.throughput},
                    {"max_lookup_bytes", c.max_lookup_bytes},
                    {"plan", c.plan},
                    {"plan_text", c.plan_text},
                    {"placement", c.placement}});
  return {{"tables", r.tables}, {"exhaustive", r.exhaustive}, {"exhaustive_note", r.exhaustive_note},
          {"skipped", r.skipped}, {"ranking", rows}};
}

/// A whole-table row's placement, else its plan (TorchRec's per-table list where it made one).
std::string plan_of(const sweep::ShardingCandidate& c) {
  if (!c.placement.empty()) return sweep::placement_text(c.placement);
  return c.plan_text.empty() ? c.plan : c.plan_text;
}

void print_text(const sweep::ShardingRanking& r, const RankShardingArgs& args) {
  std::cout << fmt::format("{} on {} ({} tables), ranked by predicted iteration time (analytical engine)\n",
                           args.workload, args.platform.platform, r.tables);
  std::cout << fmt::format("{:<4} {:<20} {:>14} {:>16} {:>16}  {}\n", "rank", "planner", "iteration_s",
                           "samples/s", "max_lookup_MB", "placement (rank of each table) or plan");
  int i = 0;
  for (const sweep::ShardingCandidate& c : r.rows)
    std::cout << fmt::format("{:<4} {:<20} {:>14.6f} {:>16.0f} {:>16}  {}\n", ++i, c.planner, c.iteration_time,
                             c.throughput, c.placement.empty() ? "-" : fmt::format("{:.1f}", c.max_lookup_bytes / 1e6),
                             plan_of(c));
  std::cout << "exhaustive search: " << r.exhaustive_note << "\n";
  for (const std::string& s : r.skipped) std::cout << "skipped " << s << "\n";
  const sweep::ShardingCandidate& best = r.rows.front();
  std::cout << "best plan: " << best.planner << " -> "
            << (best.placement.empty()
                    ? "-p workload.sharding.plan=" + best.plan + (best.plan_text.empty() ? "" : " (" + best.plan_text + ")")
                    : "-p workload.sharding.placement=" + sweep::placement_text(best.placement))
            << "\n";
}

int run(RankShardingArgs args) {
  // `-p workload.KEY=VALUE` goes to the workload, every other `-p` to the platform (as simulate).
  sweep::ShardingRankingRequest request;
  std::erase_if(args.platform.options.overrides, [&](const std::string& o) {
    if (o.rfind("workload.", 0) != 0) return false;
    request.overrides.push_back(o.substr(9));
    return true;
  });
  platforms::Platform platform = platforms::load_platform(args.platform.platform, args.platform.options);
  platforms::Allocation allocation = platforms::parse_allocation(args.platform.gpus, platform);
  request.workload = args.workload;
  request.exhaustive_max_tables = args.exhaustive_max_tables;
  if (args.planners != "all") {
    std::stringstream in(args.planners);
    for (std::string p; std::getline(in, p, ',');)
      if (!p.empty()) request.planners.push_back(p);
    if (request.planners.empty()) throw ConfigError("--planners", "no planner named", "write all or e.g. naive,size_greedy");
  }
  const sweep::ShardingRanking ranking = sweep::rank_sharding(request, platform, allocation);
  if (args.format == "json")
    std::cout << to_json(ranking).dump(2) << "\n";
  else
    print_text(ranking, args);
  return 0;
}

}  // namespace

Action add_rank_sharding_command(CLI::App& command) {
  auto args = std::make_shared<RankShardingArgs>();
  add_platform_options(command, args->platform);
  command.add_option("workload", args->workload, "DLRM workload preset name or YAML file (kind: dlrm)")->required();
  command.add_option("--planners", args->planners,
                     "all (default) or a comma-separated list of table-wise planners and plans (row_wise, column_wise, "
                     "data_parallel, torchrec)");
  command.add_option("--exhaustive-max-tables", args->exhaustive_max_tables,
                     "Also search every placement when tables <= N (default 8) and ranks^tables <= 50,000")
      ->check(whole_number(0, 64));
  add_format_option(command, args->format);
  command.footer("-p workload.KEY=VALUE overrides a workload key; other -p keys override the platform.");
  return [args] { return run(*args); };
}

}  // namespace stepsim::cli
