// TorchRec's EmbeddingShardingPlanner in outline (see the header). Sources, pytorch/torchrec at
// commit a48cef79, torchrec/distributed/planner/: enumerators.py (the options of a table),
// shard_estimators.py perf_func_emb_wall_time and its _get_{tw,rw,twrw,dp}_sharding_perf (the
// estimate), constants.py (its factors), partitioners.py GreedyPerfPartitioner (sort_by storage,
// the planner's default), proposers.py (GridSearchProposer, GreedyProposer, UniformProposer, the
// planner's default list) and planners.py EmbeddingShardingPlanner.plan (NoopPerfModel's rating:
// the busiest rank's summed estimate, the lowest first found wins).
#include "workloads/generators/dlrm_torchrec_planner.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>

#include "platforms/config_error.hpp"

namespace stepsim::workloads {
namespace {

constexpr double kIndexBytes = 8;          // BIGINT_DTYPE: the KJT's int64 indices
constexpr double kBackwardCompute = 2;     // BWD_COMPUTE_MULTIPLIER
constexpr double kBatchedCopy = 2.455;     // BATCHED_COPY_PERF_FACTOR: RW / TWRW backward copies
constexpr double kDpElementwise = 9.22;    // DP_ELEMENTWISE_KERNELS_PERF_FACTOR: DP's optimizer passes
constexpr int kMinColumnBlock = 128;       // MIN_CW_DIM
constexpr double kMaxGridProposals = 1e4;  // MAX_PROPOSALS: GridSearchProposer gives up above it

struct Shard {
  Seconds perf = 0;
  Bytes storage = 0;  // the shard's rows and optimizer state, its input indices and pooled output
};

struct Option {
  TableSharding sharding;  // ranks: every rank for row_wise / data_parallel, else filled by the partition
  std::vector<Shard> shards;
  Seconds perf_sum() const { return sum(&Shard::perf); }
  Seconds perf_max() const { return max(&Shard::perf); }
  Bytes storage_sum() const { return sum(&Shard::storage); }
  Bytes storage_max() const { return max(&Shard::storage); }

 private:
  double sum(double Shard::*field) const {
    double s = 0;
    for (const Shard& x : shards) s += x.*field;
    return s;
  }
  double max(double Shard::*field) const {
    double m = 0;
    for (const Shard& x : shards) m = std::max(m, x.*field);
    return m;
  }
};

/// _find_base_dim: the first multiple of 4 from MIN_CW_DIM up that divides D, else D.
int column_block(int dim) {
  for (int block = kMinColumnBlock; block < dim; ++block)
    if (dim % block == 0 && block % 4 == 0) return block;
  return dim;
}

/// EmbeddingPerfEstimator's wall time of one shard (forward and backward compute and comms),
/// with X = L B lookups and Y = B pooled outputs per rank; EmbeddingStorageEstimator's bytes.
class Estimator {
 public:
  Estimator(const TorchrecPlannerInputs& in, int ranks) : in_(in), ws_(ranks), lws_(in.ranks_per_node) {}

  /// Table-wise, or one column block of `dim` columns (column_wise shares the formula).
  Shard whole_rows(const EmbeddingTable& t, int dim) const {
    const double x = lookups(t), y = outputs(t);
    const double input = x * ws_ * kIndexBytes, output = y * ws_ * dim * in_.output_bytes;
    const double lookup = x * ws_ * std::max(dim, 32) * t.element_bytes;
    const double penalty = dim >= 128 ? 1 : dim >= 64 ? 1.15 : 1.75;  // HALF_ / QUARTER_BLOCK_PENALTY
    const Seconds forward = (input + lookup + output) * penalty / in_.hbm;
    return {forward * (1 + kBackwardCompute) + 2 * output / bandwidth(ws_), t.stored(t.rows, dim) + input + output};
  }
  Shard row_block(const EmbeddingTable& t, double rows) const {
    const double x = lookups(t), y = outputs(t);
    const double input = x * kIndexBytes, output = y * ws_ * t.dim * in_.output_bytes;
    const Seconds forward = (input + x * t.dim * t.element_bytes + output) / in_.hbm;
    // Reduce-scatter forward, all-gather and the batched copy backward.
    const Seconds comms = 2 * output / bandwidth(ws_) + output * kBatchedCopy / in_.hbm;
    return {forward * (1 + kBackwardCompute) + comms, t.stored(rows, t.dim) + input + output};
  }
  Shard node_row_block(const EmbeddingTable& t, double rows) const {
    const double x = lookups(t) * ws_ / lws_, y = outputs(t);
    const double input = x * kIndexBytes, output = y * ws_ * t.dim * in_.output_bytes;
    const Seconds forward = (input + x * t.dim * t.element_bytes + output) / in_.hbm;
    const double nodes = static_cast<double>(ws_) / lws_;
    const Seconds across = nodes > 1 ? y * nodes * t.dim * in_.output_bytes / in_.inter_node : 0;
    const Seconds comms = 2 * (output / bandwidth(lws_) + across) + output * kBatchedCopy / in_.hbm;
    return {forward * (1 + kBackwardCompute) + comms, t.stored(rows, t.dim) + input + output};
  }
  Shard replica(const EmbeddingTable& t) const {
    const double x = lookups(t), y = outputs(t);
    const Seconds forward = (x * kIndexBytes + x * t.dim * t.element_bytes + y * t.dim * t.element_bytes) / in_.hbm;
    const double table = t.rows * t.dim * t.element_bytes;
    const double nodes = static_cast<double>(ws_) / lws_, n = std::min(nodes, 2.0);
    Seconds allreduce = table * (2 * n - 1) / n / allreduce_bandwidth();
    if (ws_ > 2 * lws_) allreduce *= 2;
    return {forward * (1 + kBackwardCompute) + allreduce + table * kDpElementwise / in_.hbm,
            t.stored(t.rows, t.dim) + x * kIndexBytes + y * t.dim * in_.output_bytes};
  }

 private:
  double lookups(const EmbeddingTable& t) const { return t.pooling * in_.batch_per_rank; }
  /// Y: outputs per rank, one per sample pooled, one per lookup for a sequence table.
  double outputs(const EmbeddingTable& t) const { return t.sequence ? lookups(t) : in_.batch_per_rank; }
  /// BasicCommsBandwidths.get_bw: intra-node for a group within one node, else inter-node.
  BytesPerSecond bandwidth(int group) const { return group <= lws_ ? in_.intra_node : in_.inter_node; }
  /// TorchRec prices every allreduce at inter-node bandwidth times the local world size; a
  /// platform without NICs (no inter-node figure) gets the intra-node one.
  BytesPerSecond allreduce_bandwidth() const {
    return in_.inter_node > 0 ? in_.inter_node * lws_ : in_.intra_node;
  }

  const TorchrecPlannerInputs& in_;
  int ws_, lws_;
};

Option make_option(ShardingKind kind, std::vector<int> ranks, std::vector<Shard> shards) {
  Option o;
  o.sharding.kind = kind;
  o.sharding.ranks = std::move(ranks);
  o.shards = std::move(shards);
  return o;
}

std::vector<int> first_ranks(int count) {
  std::vector<int> out(static_cast<std::size_t>(count));
  std::iota(out.begin(), out.end(), 0);
  return out;
}

/// EmbeddingEnumerator's options of one table, in its order (data_parallel, table_wise,
/// column_wise, row_wise, table_row_wise), fused kernels only.
std::vector<Option> enumerate(const EmbeddingTable& t, const Estimator& est, int ranks, int per_node) {
  std::vector<Option> out;
  if (ranks == 1) {
    out.push_back(make_option(ShardingKind::table_wise, {0}, {est.whole_rows(t, t.dim)}));
    return out;
  }
  const std::vector<int> every = first_ranks(ranks);
  out.push_back(make_option(ShardingKind::data_parallel, every, std::vector<Shard>(every.size(), est.replica(t))));
  out.push_back(make_option(ShardingKind::table_wise, {}, {est.whole_rows(t, t.dim)}));
  const int block = column_block(t.dim), blocks = t.dim / block;
  // stepsim's column_wise puts each block on its own rank (TorchRec may stack two on one).
  if (blocks > 1 && blocks <= ranks)
    out.push_back(make_option(ShardingKind::column_wise, {},
                              std::vector<Shard>(static_cast<std::size_t>(blocks), est.whole_rows(t, block))));
  const TableSharding rows{ShardingKind::row_wise, every};
  std::vector<Shard> row_shards;
  for (int r : every) row_shards.push_back(est.row_block(t, rows.rows_on(t, r)));
  out.push_back(make_option(ShardingKind::row_wise, every, std::move(row_shards)));
  if (per_node < ranks && !t.sequence) {  // EmbeddingCollection has no table_row_wise
    const TableSharding node{ShardingKind::table_row_wise, first_ranks(per_node)};
    std::vector<Shard> node_shards;
    for (int r : node.ranks) node_shards.push_back(est.node_row_block(t, node.rows_on(t, r)));
    out.push_back(make_option(ShardingKind::table_row_wise, {}, std::move(node_shards)));
  }
  return out;
}

/// GreedyPerfPartitioner (sort_by storage): row-wise and data-parallel shards to rank i; the
/// other options by summed storage, largest first: a table-wise or column block to the rank with
/// the least summed estimate (ties to the lower local then global rank) that still has room, a
/// table_row_wise table to the node with the least summed estimate that holds all its blocks.
/// Returns the busiest rank's summed estimate, or nothing when some option fits nowhere.
class Partitioner {
 public:
  Partitioner(int ranks, int per_node, Bytes capacity) : ranks_(ranks), per_node_(per_node), capacity_(capacity) {}

  std::optional<Seconds> place(std::vector<Option>& options) const {
    std::vector<Seconds> perf(static_cast<std::size_t>(ranks_), 0);
    std::vector<Bytes> free(static_cast<std::size_t>(ranks_), capacity_);
    const auto take = [&](int r, const Shard& s) {
      free[static_cast<std::size_t>(r)] -= s.storage;
      perf[static_cast<std::size_t>(r)] += s.perf;
    };
    std::vector<std::size_t> rest;
    for (std::size_t o = 0; o < options.size(); ++o) {
      Option& opt = options[o];
      if (opt.sharding.kind != ShardingKind::row_wise && opt.sharding.kind != ShardingKind::data_parallel) {
        rest.push_back(o);
        continue;
      }
      for (int r = 0; r < ranks_; ++r) {
        if (opt.shards[static_cast<std::size_t>(r)].storage > free[static_cast<std::size_t>(r)]) return std::nullopt;
        take(r, opt.shards[static_cast<std::size_t>(r)]);
      }
    }
    std::vector<Bytes> storage(options.size());
    for (std::size_t o : rest) storage[o] = options[o].storage_sum();
    std::stable_sort(rest.begin(), rest.end(), [&](std::size_t a, std::size_t b) { return storage[a] > storage[b]; });
    for (std::size_t o : rest) {
      Option& opt = options[o];
      opt.sharding.ranks.clear();
      if (opt.sharding.kind == ShardingKind::table_row_wise) {
        const int node = pick_node(opt, perf, free);
        if (node < 0) return std::nullopt;
        for (int k = 0; k < per_node_; ++k) {
          opt.sharding.ranks.push_back(node * per_node_ + k);
          take(node * per_node_ + k, opt.shards[static_cast<std::size_t>(k)]);
        }
        continue;
      }
      for (const Shard& s : opt.shards) {
        int best = -1;
        for (int r = 0; r < ranks_; ++r) {
          const auto ur = static_cast<std::size_t>(r);
          if (s.storage > free[ur] || opt.sharding.holds(r)) continue;
          const auto key = [&](int q) { return std::make_tuple(perf[static_cast<std::size_t>(q)], q % per_node_, q); };
          if (best < 0 || key(r) < key(best)) best = r;
        }
        if (best < 0) return std::nullopt;
        opt.sharding.ranks.push_back(best);
        take(best, s);
      }
    }
    return *std::max_element(perf.begin(), perf.end());
  }

 private:
  int pick_node(const Option& opt, const std::vector<Seconds>& perf, const std::vector<Bytes>& free) const {
    const int nodes = ranks_ / per_node_;
    std::vector<std::pair<Seconds, int>> order;
    for (int n = 0; n < nodes; ++n) {
      Seconds sum = 0;
      for (int k = 0; k < per_node_; ++k) sum += perf[static_cast<std::size_t>(n * per_node_ + k)];
      order.emplace_back(sum, n);
    }
    std::sort(order.begin(), order.end());
    for (const auto& [sum, n] : order) {
      bool fits = true;
      for (int k = 0; k < per_node_; ++k)
        fits = fits && opt.shards[static_cast<std::size_t>(k)].storage <= free[static_cast<std::size_t>(n * per_node_ + k)];
      if (fits) return n;
    }
    return -1;
  }

  int ranks_, per_node_;
  Bytes capacity_;
};

/// The planner's search: proposals (each table's option index) from GridSearchProposer (when the
/// product of the option counts is at most MAX_PROPOSALS), GreedyProposer by depth and by sum,
/// and UniformProposer, each new one partitioned and rated; the first lowest rating wins.
class Search {
 public:
  Search(std::vector<std::vector<Option>> options, const Partitioner& partitioner)
      : options_(std::move(options)), partitioner_(partitioner) {}

  std::optional<std::vector<Option>> best() {
    grid();
    greedy(true);
    greedy(false);
    uniform();
    return best_;
  }

 private:
  void propose(const std::vector<std::size_t>& pick) {
    if (!seen_.insert(pick).second) return;
    std::vector<Option> chosen;
    for (std::size_t t = 0; t < pick.size(); ++t) chosen.push_back(options_[t][pick[t]]);
    const std::optional<Seconds> rating = partitioner_.place(chosen);
    if (rating && (!best_ || *rating < best_rating_)) {
      best_rating_ = *rating;
      best_ = std::move(chosen);
    }
  }

  /// Each table's option indices, ascending by score (the busiest shard's estimate, or the sum).
  std::vector<std::vector<std::size_t>> ranked(bool by_depth) const {
    std::vector<std::vector<std::size_t>> out;
    for (const std::vector<Option>& table : options_) {
      std::vector<std::size_t> order(table.size());
      std::iota(order.begin(), order.end(), 0);
      const auto score = [&](std::size_t o) { return by_depth ? table[o].perf_max() : table[o].perf_sum(); };
      std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return score(a) < score(b); });
      out.push_back(std::move(order));
    }
    return out;
  }

  void grid() {
    double product = 1;
    for (const auto& table : options_) product *= static_cast<double>(table.size());
    if (product > kMaxGridProposals) return;
    const auto order = ranked(false);
    std::vector<std::size_t> at(options_.size(), 0);
    for (bool more = true; more;) {
      std::vector<std::size_t> pick;
      for (std::size_t t = 0; t < at.size(); ++t) pick.push_back(order[t][at[t]]);
      propose(pick);
      more = false;
      for (std::size_t t = at.size(); t-- > 0 && !more;) {
        if (++at[t] < order[t].size()) more = true;
        else at[t] = 0;
      }
    }
  }

  /// From every table's best option, then repeatedly the table whose current option takes the
  /// most memory (the largest shard, then the sum; ties to the first table) moves to its next.
  void greedy(bool by_depth) {
    const auto order = ranked(by_depth);
    std::vector<std::size_t> at(options_.size(), 0);
    for (;;) {
      std::vector<std::size_t> pick;
      for (std::size_t t = 0; t < at.size(); ++t) pick.push_back(order[t][at[t]]);
      propose(pick);
      std::optional<std::size_t> move;
      for (std::size_t t = 0; t < at.size(); ++t) {
        if (at[t] + 1 >= order[t].size()) continue;
        const Option& o = options_[t][pick[t]];
        const Option* m = move ? &options_[*move][pick[*move]] : nullptr;
        if (!m || std::make_pair(o.storage_max(), o.storage_sum()) > std::make_pair(m->storage_max(), m->storage_sum()))
          move = t;
      }
      if (!move) return;
      ++at[*move];
    }
  }

  /// One proposal per sharding kind every table offers.
  void uniform() {
    for (ShardingKind kind : sharding_kinds()) {
      std::vector<std::size_t> pick;
      for (const std::vector<Option>& table : options_) {
        const auto it = std::find_if(table.begin(), table.end(), [&](const Option& o) { return o.sharding.kind == kind; });
        if (it == table.end()) break;
        pick.push_back(static_cast<std::size_t>(it - table.begin()));
      }
      if (pick.size() == options_.size()) propose(pick);
    }
  }

  std::vector<std::vector<Option>> options_;
  const Partitioner& partitioner_;
  std::set<std::vector<std::size_t>> seen_;
  std::optional<std::vector<Option>> best_;
  Seconds best_rating_ = 0;
};

}  // namespace

TorchrecPlannerInputs torchrec_default_topology() {
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  TorchrecPlannerInputs in;
  in.hbm_cap = 32 * kGiB;
  in.hbm = 897 * kGiB;
  in.intra_node = 600 * kGiB;
  in.inter_node = 12.5 * kGiB;
  return in;
}

std::vector<TableSharding> torchrec_plan(const ShardingRequest& request, const TorchrecPlannerInputs& inputs) {
  const int ranks = request.ranks, per_node = std::clamp(inputs.ranks_per_node, 1, ranks);
  const Estimator estimator(inputs, ranks);
  std::vector<std::vector<Option>> options;
  for (const EmbeddingTable& t : request.tables) options.push_back(enumerate(t, estimator, ranks, per_node));
  // The planner's memory: the smaller of its cap and the GPU's, either 0 when not known.
  const auto known = [](Bytes b) { return b > 0 ? b : std::numeric_limits<double>::infinity(); };
  const Bytes capacity = std::min(known(inputs.hbm_cap), known(request.gpu_memory)) - request.memory_reserve;
  const Partitioner partitioner(ranks, per_node, capacity);
  const std::optional<std::vector<Option>> best = Search(std::move(options), partitioner).best();
  if (!best) {
    const bool capped = inputs.hbm_cap > 0 && (request.gpu_memory <= 0 || inputs.hbm_cap < request.gpu_memory);
    const std::string gpu = request.gpu_name.empty() ? std::string("the GPU") : request.gpu_name;
    const std::string room = capped ? "TorchRec's default Topology's 32 GiB per GPU (below " + gpu + "'s memory)"
                                    : gpu + "'s memory";
    throw ConfigError(request.where,
                      "plan torchrec found no proposal whose shards, with their inputs and outputs, fit in " + room +
                          " less the reserve on every rank",
                      std::string("use more GPUs") + (capped ? ", sharding.torchrec_topology: platform (the GPU's own memory)" : "") +
                          ", or list a per-table sharding.plan");
  }
  std::vector<TableSharding> out;
  for (const Option& o : *best) out.push_back(o.sharding);
  return out;
}

}  // namespace stepsim::workloads
