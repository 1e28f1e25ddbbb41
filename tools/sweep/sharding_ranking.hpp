#pragma once
/// @file DLRM embedding-sharding ranking behind `stepsim rank-sharding` (docs/dlrm.md,
/// "Ranking sharding plans"): every table-wise planner, plus an exhaustive search of table
/// placements for small cases, ranked by predicted iteration time.
///
/// Contract: each planner is simulated in process with the analytical engine on the workload
/// with `sharding.plan=table_wise` and `sharding.planner=NAME` (after the caller's overrides).
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
  std::vector<std::string> planners;     ///< empty = every planner of workloads::sharding_planners()
  int exhaustive_max_tables = 8;
  double max_placements = 50000;
};

/// @brief One ranked plan.
struct ShardingCandidate {
  std::string planner;                   ///< planner name, or "exhaustive"
  Seconds iteration_time = 0;
  double throughput = 0;                 ///< samples per second, all ranks together
  Bytes max_lookup_bytes = 0;            ///< the busiest rank's embedding lookup bytes per iteration
  std::vector<int> placement;            ///< the rank of every table
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

/// @brief "[0,1,1,0]".
std::string placement_text(const std::vector<int>& placement);

}  // namespace stepsim::sweep
