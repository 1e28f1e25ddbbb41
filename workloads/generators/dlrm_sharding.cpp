// Sharding planners for DLRM embedding tables.
//
// The table-wise planners carry the names Lin et al. use (../shared/papers.md §3.1: naive,
// random, size_greedy, lookup_greedy, size_lookup_greedy). Their fork's code was not in the
// stored snapshot; the public DreamShard code (github daochenzha/dreamshard, commit e76a4adb,
// dreamshard/sharders.py) defines sharders with exactly these names, and we follow it:
//  - naive: table i to rank i mod n;
//  - random: each table to a uniformly drawn rank;
//  - the greedy ones: tables in descending (cost, bytes, index) order, each to the rank with
//    the smallest summed cost among the ranks where it still fits, ties to the smaller summed
//    bytes, then to the lower rank; cost = bytes (size_greedy), dim x pooling (lookup_greedy:
//    bytes read per sample), dim x pooling x log10(rows) (size_lookup_greedy: lookups weighted
//    by table size, since larger tables miss the cache more).
// `nvidia_dle` is NVIDIA DeepLearningExamples' DLRM placement (PyTorch/Recommendation/DLRM
// README "Embedding table placement and load balancing", and dlrm/utils/distributed.py
// get_device_mapping at commit 115867b5): GPU 0 runs the bottom MLP and gets no table when the
// job has more than 4 GPUs; tables largest first, each to the GPU with the most free memory, at
// most ceil(tables / GPUs) tables per GPU so that the all-to-all stays balanced.
#include "workloads/generators/dlrm_sharding.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <tuple>

#include "platforms/config_error.hpp"
#include "platforms/yaml_reader.hpp"

namespace stepsim::workloads {
namespace {

std::string gb(Bytes bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GB", bytes / 1e9);
  return text;
}

std::vector<std::string> planner_names() {
  std::vector<std::string> names;
  for (const PlannerInfo& p : sharding_planners()) names.push_back(p.name);
  return names;
}

/// Bytes per rank of a table-wise assignment.
std::vector<Bytes> table_wise_bytes(const std::vector<EmbeddingTable>& tables,
                                    const std::vector<std::vector<int>>& tables_of_rank) {
  std::vector<Bytes> bytes(tables_of_rank.size(), 0);
  for (std::size_t r = 0; r < tables_of_rank.size(); ++r)
    for (int t : tables_of_rank[r]) bytes[r] += tables[static_cast<std::size_t>(t)].bytes();
  return bytes;
}

/// What a rank may store: GPU memory minus the reserve (infinite when unchecked).
Bytes capacity_of(const ShardingRequest& request) {
  if (request.gpu_memory <= 0) return std::numeric_limits<Bytes>::infinity();
  return std::max<Bytes>(0, request.gpu_memory - request.memory_reserve);
}

std::string capacity_text(const ShardingRequest& request) {
  return gb(capacity_of(request)) + " per GPU for embeddings (" +
         (request.gpu_name.empty() ? std::string("GPU") : request.gpu_name) + ": " + gb(request.gpu_memory) +
         " memory minus a " + gb(request.memory_reserve) + " reserve)";
}

Bytes total_bytes(const std::vector<EmbeddingTable>& tables) {
  Bytes total = 0;
  for (const EmbeddingTable& t : tables) total += t.bytes();
  return total;
}

/// The fix for a plan that does not fit: what sharding or how many GPUs would.
std::string overflow_fix(const ShardingRequest& request) {
  const Bytes capacity = capacity_of(request);
  const double need = capacity > 0 ? std::ceil(total_bytes(request.tables) / capacity) : 0;
  std::string fix;
  if (request.ranks > 1 && request.kind != ShardingKind::row_wise)
    fix = "shard with sharding.plan: row_wise (or column_wise), which spreads every table over all GPUs; or ";
  if (need > request.ranks)
    fix += "use at least " + std::to_string(static_cast<long long>(need)) + " GPUs (" +
           gb(total_bytes(request.tables)) + " of tables in all); or ";
  return fix + "store tables in fp16 (training.embedding_dtype: fp16), lower sharding.memory_reserve, "
               "or pick a GPU with more memory";
}

void check_fits(const ShardingRequest& request, const ShardingPlan& plan) {
  const Bytes capacity = capacity_of(request);
  for (int r = 0; r < plan.ranks; ++r) {
    const Bytes held = plan.bytes_of_rank[static_cast<std::size_t>(r)];
    if (held > capacity)
      throw ConfigError(request.where,
                        "rank " + std::to_string(r) + " would store " + gb(held) + " of embedding tables and their optimizer state (" +
                            std::to_string(plan.tables_of_rank[static_cast<std::size_t>(r)].size()) + " tables, " +
                            to_string(plan.kind) + ") but there are only " + capacity_text(request),
                        overflow_fix(request));
  }
}

/// DreamShard's greedy: descending (cost, bytes, index); least summed cost among the ranks
/// where the table fits, ties to less summed bytes, then the lower rank.
std::vector<std::vector<int>> greedy(const ShardingRequest& request, const std::vector<double>& cost) {
  const auto& tables = request.tables;
  std::vector<int> order(tables.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const auto key = [&](int t) {
      return std::make_tuple(cost[static_cast<std::size_t>(t)], tables[static_cast<std::size_t>(t)].bytes(), t);
    };
    return key(a) > key(b);
  });
  const Bytes capacity = capacity_of(request);
  std::vector<std::vector<int>> tables_of_rank(static_cast<std::size_t>(request.ranks));
  std::vector<double> cost_sum(tables_of_rank.size(), 0);
  std::vector<Bytes> bytes_sum(tables_of_rank.size(), 0);
  for (int t : order) {
    const EmbeddingTable& table = tables[static_cast<std::size_t>(t)];
    int best = -1;
    for (int r = 0; r < request.ranks; ++r) {
      const auto ur = static_cast<std::size_t>(r);
      if (bytes_sum[ur] + table.bytes() > capacity) continue;
      if (best < 0 || cost_sum[ur] < cost_sum[static_cast<std::size_t>(best)] ||
          (cost_sum[ur] == cost_sum[static_cast<std::size_t>(best)] &&
           bytes_sum[ur] < bytes_sum[static_cast<std::size_t>(best)]))
        best = r;
    }
    if (best < 0) {
      const auto fullest = std::min_element(bytes_sum.begin(), bytes_sum.end());
      throw ConfigError(request.where,
                        "table '" + table.name + "' (" + gb(table.bytes()) + ") fits on no rank: the least loaded rank " +
                            std::to_string(fullest - bytes_sum.begin()) + " already stores " + gb(*fullest) +
                            " and there are only " + capacity_text(request),
                        overflow_fix(request));
    }
    const auto ub = static_cast<std::size_t>(best);
    tables_of_rank[ub].push_back(t);
    cost_sum[ub] += cost[static_cast<std::size_t>(t)];
    bytes_sum[ub] += table.bytes();
  }
  return tables_of_rank;
}

std::vector<std::vector<int>> nvidia_dle(const ShardingRequest& request) {
  const auto& tables = request.tables;
  std::vector<int> available;
  for (int r = request.ranks > 4 ? 1 : 0; r < request.ranks; ++r) available.push_back(r);
  const std::size_t max_per_rank = (tables.size() + available.size() - 1) / available.size();
  std::vector<int> order(tables.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return tables[static_cast<std::size_t>(a)].bytes() > tables[static_cast<std::size_t>(b)].bytes();
  });
  const Bytes capacity = capacity_of(request);
  std::vector<std::vector<int>> tables_of_rank(static_cast<std::size_t>(request.ranks));
  std::vector<Bytes> bytes_sum(tables_of_rank.size(), 0);
  for (int t : order) {
    // The most free memory is the least stored bytes: all GPUs of a job are the same model.
    const auto it = std::min_element(available.begin(), available.end(), [&](int a, int b) {
      return bytes_sum[static_cast<std::size_t>(a)] < bytes_sum[static_cast<std::size_t>(b)];
    });
    const auto r = static_cast<std::size_t>(*it);
    const EmbeddingTable& table = tables[static_cast<std::size_t>(t)];
    if (bytes_sum[r] + table.bytes() > capacity)
      throw ConfigError(request.where,
                        "table '" + table.name + "' (" + gb(table.bytes()) + ") does not fit on rank " +
                            std::to_string(r) + ", which already stores " + gb(bytes_sum[r]) +
                            " (the GPU with the most free memory); there are only " + capacity_text(request),
                        overflow_fix(request));
    tables_of_rank[r].push_back(t);
    bytes_sum[r] += table.bytes();
    if (tables_of_rank[r].size() == max_per_rank) available.erase(it);
  }
  return tables_of_rank;
}

std::vector<std::vector<int>> table_wise(const ShardingRequest& request) {
  const auto& tables = request.tables;
  const std::size_t n = static_cast<std::size_t>(request.ranks);
  const std::string& name = request.planner;
  // One rank holds everything whatever the planner (and the memory check then says so plainly).
  if (n == 1) {
    std::vector<int> all(tables.size());
    std::iota(all.begin(), all.end(), 0);
    return {all};
  }
  if (name == "naive" || name == "random") {
    std::vector<std::vector<int>> tables_of_rank(n);
    // The engine's output sequence is fixed by the standard; std::uniform_int_distribution's
    // mapping is not (it differs between standard libraries), so draw with a plain modulo.
    std::mt19937_64 engine(request.seed);
    for (std::size_t t = 0; t < tables.size(); ++t)
      tables_of_rank[name == "naive" ? t % n : static_cast<std::size_t>(engine() % n)].push_back(static_cast<int>(t));
    return tables_of_rank;
  }
  if (name == "nvidia_dle") return nvidia_dle(request);
  std::vector<double> cost;
  for (const EmbeddingTable& t : tables) {
    if (name == "size_greedy") cost.push_back(t.bytes());
    else if (name == "lookup_greedy") cost.push_back(t.dim * t.pooling);
    else cost.push_back(t.dim * t.pooling * std::log10(t.rows));
  }
  return greedy(request, cost);
}

/// An explicit placement: whole tables only, one in-range rank per table.
void check_placement(const ShardingRequest& request) {
  const std::string where = request.where + ": placement";
  if (request.kind != ShardingKind::table_wise)
    throw ConfigError(where, std::string("places whole tables, but the plan is ") + to_string(request.kind),
                      "use plan: table_wise with a placement, or drop the placement");
  if (request.placement.size() != request.tables.size())
    throw ConfigError(where,
                      "has " + std::to_string(request.placement.size()) + " entries for " +
                          std::to_string(request.tables.size()) + " tables",
                      "give one rank per table, in the order of model.tables");
  for (std::size_t t = 0; t < request.placement.size(); ++t)
    if (request.placement[t] < 0 || request.placement[t] >= request.ranks)
      throw ConfigError(where + "[" + std::to_string(t) + "]",
                        "rank " + std::to_string(request.placement[t]) + " is not a rank of this " +
                            std::to_string(request.ranks) + "-rank job",
                        "use ranks 0.." + std::to_string(request.ranks - 1));
}

}  // namespace

const char* to_string(ShardingKind kind) {
  switch (kind) {
    case ShardingKind::table_wise: return "table_wise";
    case ShardingKind::row_wise: return "row_wise";
    case ShardingKind::column_wise: return "column_wise";
    case ShardingKind::data_parallel: return "data_parallel";
  }
  throw std::logic_error("unknown ShardingKind");
}

const std::vector<PlannerInfo>& sharding_planners() {
  static const std::vector<PlannerInfo> planners = {
      {"naive", "table i on rank i mod n (round robin)"},
      {"random", "each table on a random rank (std::mt19937_64 seeded with sharding.seed)"},
      {"size_greedy", "largest tables first, each to the rank storing the fewest bytes"},
      {"lookup_greedy", "tables by dim x pooling (bytes read per sample) first, each to the least loaded rank"},
      {"size_lookup_greedy",
       "tables by dim x pooling x log10(rows) first, each to the least loaded rank (Lin et al.'s choice)"},
      {"nvidia_dle",
       "NVIDIA DeepLearningExamples: GPU 0 keeps the bottom MLP (no tables when > 4 GPUs), largest tables first "
       "to the GPU with the most free memory, at most ceil(tables/GPUs) per GPU"},
  };
  return planners;
}

double ShardingPlan::rows_of(const EmbeddingTable& table, int rank) const {
  if (kind != ShardingKind::row_wise) return table.rows;
  const double block = std::ceil(table.rows / ranks);
  return std::clamp(table.rows - rank * block, 0.0, block);
}

int ShardingPlan::dim_of(const EmbeddingTable& table, int rank) const {
  if (kind != ShardingKind::column_wise) return table.dim;
  const int block = (table.dim + ranks - 1) / ranks;
  return std::clamp(table.dim - rank * block, 0, block);
}

ShardingPlan plan_sharding(const ShardingRequest& request) {
  if (request.ranks < 1)
    throw ConfigError(request.where, "needs at least one rank, got " + std::to_string(request.ranks),
                      "allocate one or more GPUs");
  if (request.tables.empty())
    throw ConfigError(request.where, "no embedding tables to shard", "list at least one table under model.tables");
  for (std::size_t t = 0; t < request.tables.size(); ++t) {
    const EmbeddingTable& table = request.tables[t];
    if (!(table.rows >= 1) || table.dim < 1 || !(table.pooling > 0) || !(table.element_bytes > 0))
      throw ConfigError(request.where + ": tables[" + std::to_string(t) + "]",
                        "table '" + table.name + "' needs rows >= 1, dim >= 1, pooling > 0 and element bytes > 0",
                        "give every table positive rows, dim and pooling");
  }
  ShardingPlan plan;
  plan.kind = request.kind;
  plan.ranks = request.ranks;
  if (!request.placement.empty()) {
    check_placement(request);
    plan.planner = "placement";
    plan.tables_of_rank.assign(static_cast<std::size_t>(request.ranks), {});
    for (std::size_t t = 0; t < request.placement.size(); ++t)
      plan.tables_of_rank[static_cast<std::size_t>(request.placement[t])].push_back(static_cast<int>(t));
    plan.bytes_of_rank = table_wise_bytes(request.tables, plan.tables_of_rank);
  } else if (request.kind == ShardingKind::table_wise) {
    const auto names = planner_names();
    if (std::find(names.begin(), names.end(), request.planner) == names.end())
      throw ConfigError(request.where, "unknown planner '" + request.planner + "'",
                        "use one of: " + platforms::join(names));
    plan.planner = request.planner;
    plan.tables_of_rank = table_wise(request);
    plan.bytes_of_rank = table_wise_bytes(request.tables, plan.tables_of_rank);
  } else {
    std::vector<int> all(request.tables.size());
    std::iota(all.begin(), all.end(), 0);
    plan.tables_of_rank.assign(static_cast<std::size_t>(request.ranks), all);
    plan.bytes_of_rank.assign(static_cast<std::size_t>(request.ranks), 0);
    for (int r = 0; r < request.ranks; ++r)
      for (const EmbeddingTable& t : request.tables)
        plan.bytes_of_rank[static_cast<std::size_t>(r)] += t.stored(plan.rows_of(t, r), plan.dim_of(t, r));
  }
  check_fits(request, plan);
  return plan;
}

}  // namespace stepsim::workloads
