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
#include <map>
#include <numeric>
#include <random>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

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

std::vector<int> all_ranks(int ranks) {
  std::vector<int> all(static_cast<std::size_t>(ranks));
  std::iota(all.begin(), all.end(), 0);
  return all;
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
    fix += fmt::format("use at least {:.0f} GPUs (", need) +
           gb(total_bytes(request.tables)) + " of tables in all); or ";
  return fix + "store tables in fp16 (training.embedding_dtype: fp16), lower sharding.memory_reserve, "
               "or pick a GPU with more memory";
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string out = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

std::string kinds_text(const ShardingPlan& plan) {
  std::vector<std::string> names;
  for (ShardingKind k : plan.kinds()) names.push_back(to_string(k));
  return platforms::join(names);
}

void check_fits(const ShardingRequest& request, const ShardingPlan& plan) {
  const Bytes capacity = capacity_of(request);
  for (int r = 0; r < plan.ranks; ++r) {
    const Bytes held = plan.bytes_of_rank[static_cast<std::size_t>(r)];
    if (held > capacity)
      throw ConfigError(request.where,
                        "rank " + std::to_string(r) + " would store " + gb(held) + " of embedding tables and their optimizer state (" +
                            std::to_string(plan.tables_of_rank[static_cast<std::size_t>(r)].size()) + " tables, " +
                            kinds_text(plan) + ") but there are only " + capacity_text(request),
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

/// table_row_wise: the ranks of one node, all of them, on a job whose nodes hold equally many
/// ranks (TorchRec's intra-node reduce-scatter and cross-node all-to-all need that shape).
void check_one_node(const ShardingRequest& request, const std::vector<int>& ranks, const std::string& where) {
  const auto node_of = [&](int r) {
    return request.node_of_rank.empty() ? 0 : request.node_of_rank[static_cast<std::size_t>(r)];
  };
  std::map<int, std::vector<int>> members;
  for (int r = 0; r < request.ranks; ++r) members[node_of(r)].push_back(r);
  const std::vector<int>& node = members[node_of(ranks.front())];
  for (const auto& [n, m] : members)
    if (m.size() != node.size())
      throw ConfigError(where, "table_row_wise needs every node to hold as many ranks of the job; node " +
                                   std::to_string(n) + " holds " + std::to_string(m.size()) + ", others " +
                                   std::to_string(node.size()),
                        "allocate the same number of GPUs on every node, or use row_wise");
  if (ranks != node)
    throw ConfigError(where, "table_row_wise spreads the table over the ranks of one node, in order",
                      "list ranks " + ranks_text(node) + " (the node of rank " + std::to_string(ranks.front()) + ")");
}

/// A plan given per table: one entry per table, its ranks as its kind needs them (empty = every
/// rank for row_wise and data_parallel).
std::vector<TableSharding> checked_per_table(const ShardingRequest& request) {
  if (request.per_table.size() != request.tables.size())
    throw ConfigError(request.where + ": plan",
                      "has " + std::to_string(request.per_table.size()) + " entries for " +
                          std::to_string(request.tables.size()) + " tables",
                      "plan every table once");
  const std::vector<int> every = all_ranks(request.ranks);
  std::vector<TableSharding> out = request.per_table;
  for (std::size_t t = 0; t < out.size(); ++t) {
    TableSharding& s = out[t];
    const std::string where = request.where + ": plan[table " + std::to_string(t) + "].ranks";
    const std::string kind = to_string(s.kind);
    const bool spans_job = s.kind == ShardingKind::row_wise || s.kind == ShardingKind::data_parallel;
    if (s.ranks.empty() && spans_job) s.ranks = every;
    if (s.ranks.empty())
      throw ConfigError(where, kind + " needs the ranks that hold the table", "list them, e.g. ranks: [0]");
    for (int r : s.ranks)
      if (r < 0 || r >= request.ranks)
        throw ConfigError(where, "rank " + std::to_string(r) + " is not a rank of this " +
                                     std::to_string(request.ranks) + "-rank job",
                          "use ranks 0.." + std::to_string(request.ranks - 1));
    std::vector<int> sorted = s.ranks;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      throw ConfigError(where, "lists a rank twice", "list each rank that holds a shard once");
    if (s.kind == ShardingKind::table_wise && s.ranks.size() != 1)
      throw ConfigError(where, "a table_wise table lives on exactly one rank", "write e.g. ranks: [1]");
    if (spans_job && sorted != every)
      throw ConfigError(where, kind + " spreads the table over every rank of the job",
                        "list ranks 0.." + std::to_string(request.ranks - 1) + " in order, or omit ranks");
    if (s.kind == ShardingKind::table_row_wise) check_one_node(request, s.ranks, where);
  }
  return out;
}

}  // namespace

const char* to_string(ShardingKind kind) {
  switch (kind) {
    case ShardingKind::table_wise: return "table_wise";
    case ShardingKind::row_wise: return "row_wise";
    case ShardingKind::column_wise: return "column_wise";
    case ShardingKind::table_row_wise: return "table_row_wise";
    case ShardingKind::data_parallel: return "data_parallel";
  }
  throw std::logic_error("unknown ShardingKind");
}

const std::vector<ShardingKind>& sharding_kinds() {
  static const std::vector<ShardingKind> kinds = {ShardingKind::table_wise, ShardingKind::row_wise,
                                                  ShardingKind::column_wise, ShardingKind::table_row_wise,
                                                  ShardingKind::data_parallel};
  return kinds;
}

std::optional<ShardingKind> sharding_kind(const std::string& name) {
  for (ShardingKind kind : sharding_kinds())
    if (name == to_string(kind)) return kind;
  return std::nullopt;
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

int TableSharding::position(int rank) const {
  const auto it = std::find(ranks.begin(), ranks.end(), rank);
  return it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
}

double TableSharding::rows_on(const EmbeddingTable& table, int rank) const {
  const int at = position(rank);
  if (at < 0) return 0;
  if (kind != ShardingKind::row_wise && kind != ShardingKind::table_row_wise) return table.rows;
  const double block = std::ceil(table.rows / static_cast<double>(ranks.size()));
  return std::clamp(table.rows - at * block, 0.0, block);
}

int TableSharding::dim_on(const EmbeddingTable& table, int rank) const {
  const int at = position(rank);
  if (at < 0) return 0;
  if (kind != ShardingKind::column_wise) return table.dim;
  const int k = static_cast<int>(ranks.size());
  const int block = (table.dim + k - 1) / k;
  return std::clamp(table.dim - at * block, 0, block);
}

std::vector<ShardingKind> ShardingPlan::kinds() const {
  std::vector<ShardingKind> out;
  for (const TableSharding& t : tables)
    if (std::find(out.begin(), out.end(), t.kind) == out.end()) out.push_back(t.kind);
  return out;
}

std::optional<ShardingKind> ShardingPlan::kind() const {
  const std::vector<ShardingKind> all = kinds();
  if (all.size() == 1) return all.front();
  return std::nullopt;
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
  plan.ranks = request.ranks;
  const std::vector<int> every = all_ranks(request.ranks);
  if (!request.per_table.empty()) {
    plan.planner = "per_table";
    plan.tables = checked_per_table(request);
  } else if (!request.placement.empty()) {
    check_placement(request);
    plan.planner = "placement";
    plan.tables_of_rank.assign(static_cast<std::size_t>(request.ranks), {});
    for (std::size_t t = 0; t < request.placement.size(); ++t)
      plan.tables_of_rank[static_cast<std::size_t>(request.placement[t])].push_back(static_cast<int>(t));
  } else if (request.kind == ShardingKind::table_wise) {
    const auto names = planner_names();
    if (std::find(names.begin(), names.end(), request.planner) == names.end())
      throw ConfigError(request.where, "unknown planner '" + request.planner + "'",
                        "use one of: " + platforms::join(names));
    plan.planner = request.planner;
    plan.tables_of_rank = table_wise(request);
  } else if (request.kind == ShardingKind::table_row_wise) {
    throw ConfigError(request.where, "table_row_wise needs each table's node",
                      "list the plan per table: {table: I, type: table_row_wise, ranks: [the node's ranks]}");
  } else {
    plan.tables.assign(request.tables.size(), TableSharding{request.kind, every});
  }
  if (plan.tables.empty()) {  // whole tables: each table's rank from the assignment
    plan.tables.resize(request.tables.size());
    for (int r = 0; r < request.ranks; ++r)
      for (int t : plan.tables_of_rank[static_cast<std::size_t>(r)])
        plan.tables[static_cast<std::size_t>(t)] = TableSharding{ShardingKind::table_wise, {r}};
  } else {
    plan.tables_of_rank.assign(static_cast<std::size_t>(request.ranks), {});
    for (std::size_t t = 0; t < plan.tables.size(); ++t)
      for (int r : plan.tables[t].ranks) plan.tables_of_rank[static_cast<std::size_t>(r)].push_back(static_cast<int>(t));
  }
  plan.bytes_of_rank.assign(static_cast<std::size_t>(request.ranks), 0);
  for (std::size_t t = 0; t < plan.tables.size(); ++t)
    for (int r : plan.tables[t].ranks) {
      const EmbeddingTable& table = request.tables[t];
      plan.bytes_of_rank[static_cast<std::size_t>(r)] +=
          table.stored(plan.tables[t].rows_on(table, r), plan.tables[t].dim_on(table, r));
    }
  check_fits(request, plan);
  return plan;
}

}  // namespace stepsim::workloads
