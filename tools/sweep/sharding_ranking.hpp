#pragma once
/// @file DLRM embedding-sharding ranking behind `stepsim rank-sharding` (docs/dlrm.md,
/// "Ranking sharding plans"): every table-wise planner, the other plans (row_wise, column_wise,
/// data_parallel, and TorchRec's per-table planner), plus an exhaustive search of table
/// placements for small cases, ranked by predicted iteration time.
///
/// Contract: each planner is simulated in process with the analytical engine on the workload
/// with `sharding.plan=table_wise` and `sharding.planner=NAME`, each other plan with
/// `sharding.plan=NAME` (after the caller's overrides); a plan the workload refuses is skipped
/// with its reason.
/// The exhaustive search runs when the workload has at most `exhaustive_max_tables` tables and
/// ranks^tables ≤ `max_placements`: it simulates every `sharding.placement` (lexicographic
/// order; placements whose tables do not fit in GPU memory are skipped) and keeps the first
/// fastest. Every placement a planner can produce is one the search tries, so the exhaustive
/// time is ≤ every planner's. Rows are sorted by iteration time (ties by name); the result
/// depends on its inputs only.
#include <string>
#include <vector>

#include "platforms/platform.hpp"
#include "platforms/units.hpp"

namespace stepsim::sweep {

struct ShardingRankingRequest {
  std::string workload;                  ///< a dlrm preset name or YAML file
  std::vector<std::string> overrides;    ///< workload `key=value` assignments (no `workload.` prefix)
  /// Table-wise planners and other plans by name; empty = every planner of
  /// workloads::sharding_planners() and every plan of other_sharding_plans()
  std::vector<std::string> planners;
  int exhaustive_max_tables = 8;
  double max_placements = 50000;
};

/// @brief One ranked plan.
struct ShardingCandidate {
  std::string planner;                   ///< planner or plan name, or "exhaustive"
  std::string plan = "table_wise";       ///< the sharding.plan it ran
  std::string plan_text;                 ///< a torchrec plan's per-table list, as its note prints it
  Seconds iteration_time = 0;
  double throughput = 0;                 ///< samples per second, all ranks together
  Bytes max_lookup_bytes = 0;            ///< the busiest rank's embedding lookup bytes per iteration
  std::vector<int> placement;            ///< the rank of every table (whole tables only, else empty)
};

struct ShardingRanking {
  std::vector<ShardingCandidate> rows;   ///< sorted by iteration time
  int tables = 0;
  bool exhaustive = false;               ///< whether the exhaustive search ran
  std::string exhaustive_note;           ///< why it did not run, or how many placements it tried
  std::vector<std::string> skipped;      ///< "planner: why" for planners whose plan does not fit
};

/// @brief Ranks the plans (see the file contract). Throws ConfigError for a workload that is not
/// dlrm, an unknown planner, or one whose tables fit under no planner.
ShardingRanking rank_sharding(const ShardingRankingRequest& request, const platforms::Platform& platform,
                              const platforms::Allocation& allocation);

/// @brief The plans ranked besides the table-wise planners, in the order they are run.
const std::vector<std::string>& other_sharding_plans();

/// @brief "[0,1,1,0]".
std::string placement_text(const std::vector<int>& placement);

}  // namespace stepsim::sweep
