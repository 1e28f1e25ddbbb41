/// @file The DLRM generator (kind: dlrm): one hybrid-parallel training iteration per rank.
///
/// Model (Naumov et al., arXiv 1906.00091; sizes of MLPerf's Criteo 1TB reference in
/// workloads/presets/dlrm-criteo-1tb.yaml): a bottom MLP over the dense features, one pooled
/// embedding lookup per sparse feature, a feature interaction and a top MLP. Parallelism
/// (NVIDIA DeepLearningExamples DLRM, TorchRec): embedding tables model-parallel as
/// `sharding.plan` says, MLPs data-parallel with DDP gradient buckets, the change of layout
/// between them an all-to-all (table- and column-wise) or a reduce-scatter / all-gather
/// (row-wise) of pooled embeddings. docs/dlrm.md has the schema, the op sequence, and every
/// assumption; the generator also repeats its assumptions in Trace::notes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "models/compute/elementwise.hpp"
#include "platforms/config_error.hpp"
#include "workloads/generators/dlrm_config.hpp"
#include "workloads/generators/dlrm_torchrec_ops.hpp"
#include "workloads/generators/dlrm_torchrec_planner.hpp"
#include "workloads/generators/dlrm_memory.hpp"
#include "workloads/generators/dlrm_sharding.hpp"
#include "workloads/generators/dlrm_trace.hpp"
#include "workloads/workload.hpp"

namespace stepsim::workloads {
namespace {

using models::Dtype;
using models::KernelSpec;
using platforms::find_node;
using platforms::YamlReader;
using namespace dlrm;

std::string gb(Bytes bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GB", bytes / 1e9);
  return text;
}

std::string mb(Bytes bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f MB", bytes / 1e6);
  return text;
}

/// A rank's lookups of one kind of shard: `tables` shards alike in rows, dim, pooling and
/// index reuse, of one sharding kind, looked up by one multi-table kernel (FBGEMM's
/// table-batched embedding).
struct LookupGroup {
  double tables = 0;
  double rows = 0;
  int dim = 0;
  double pooling = 0;
  std::vector<double> histogram;
  /// Lookups of a table's hottest row: the sparse update's atomics that collide on one row.
  double hottest = 0;
  std::size_t section = 0;  ///< the plan's sharding kind it belongs to (DlrmBuilder::sections_)
  double batch = 0;         ///< samples looked up: the global batch, the local one for replicated tables
  /// Alike: everything but the count.
  bool operator==(const LookupGroup& o) const {
    return rows == o.rows && dim == o.dim && pooling == o.pooling && histogram == o.histogram &&
           hottest == o.hottest && section == o.section && batch == o.batch;
  }
};

/// The tables of one sharding kind: TorchRec looks them up together and exchanges their pooled
/// values in one collective (two for table_row_wise), apart from the other kinds'. Sequence
/// tables (an EmbeddingCollection, a module of its own) form sections apart from pooled ones.
struct Section {
  ShardingKind kind = ShardingKind::table_wise;
  std::vector<int> tables;
  bool sequence = false;
};

class DlrmBuilder {
 public:
  DlrmBuilder(const DlrmConfig& config, const JobContext& job, const std::string& origin, const YamlReader& reader,
              const YAML::Node& doc)
      : c_(config), job_(job), n_(job.ranks()), reader_(reader), doc_(doc), trace_(origin, job.ranks(), job.max_program_ops) {}

  Trace build() {
    check_batch();
    act_bytes_ = c_.dtype == Dtype::fp16 || c_.dtype == Dtype::bf16 ? 2 : 4;
    plan_ = make_plan();
    for (const bool sequence : {false, true})
      for (ShardingKind kind : plan_.kinds()) {
        Section section{kind, {}, sequence};
        for (std::size_t t = 0; t < plan_.tables.size(); ++t)
          if (plan_.tables[t].kind == kind && c_.tables[t].table.sequence == sequence)
            section.tables.push_back(static_cast<int>(t));
        if (!section.tables.empty()) sections_.push_back(section);
      }
    for (std::size_t t = 0; t < c_.tables.size(); ++t) {
      const TableEntry& e = c_.tables[t];
      const double lookups = lookup_batch(static_cast<int>(t)) * e.table.pooling;
      histograms_.push_back(reuse_histogram(e.distribution, e.table.rows, lookups));
      hottest_.push_back(hottest_row_lookups(e.distribution, e.table.rows, lookups));
    }
    for (const char* group : {"embedding", "dense"}) {
      std::vector<int> all(static_cast<std::size_t>(n_));
      std::iota(all.begin(), all.end(), 0);
      trace_.group(ProcessGroup{group, {all}, std::vector<int>(static_cast<std::size_t>(n_), 0)});
    }
    if (has_kind(ShardingKind::table_row_wise)) add_node_groups();
    double flops = 0;
    for (int r = 0; r < n_; ++r) {
      RankBuilder rank(trace_, c_.cuda_graphs ? 0 : c_.cpu_op_gap);
      flops += build_rank(r, rank);
      trace_.assign({r}, rank.take());
    }
    // CUDA graphs replay the whole iteration from one CPU call, so no per-kernel CPU launch.
    if (c_.cuda_graphs) trace_.launch().cpu_launch = 0;
    trace_.work() = Work{static_cast<double>(batch_), "samples", flops / n_};
    add_notes();
    Trace trace = trace_.finish();
    trace.memory = dlrm_memory(c_, rank_shapes(), batch_, bottom_batch(), top_input(), job_.platform.gpu());
    return trace;
  }

  std::vector<DlrmRankShape> rank_shapes() const {
    double exchanged = 0;
    if (n_ > 1)
      for (std::size_t s = 0; s < sections_.size(); ++s)
        if (sections_[s].kind != ShardingKind::data_parallel)
          for (int r = 0; r < n_; ++r) exchanged += exchange_width(r, s) * batch_;
    std::vector<DlrmRankShape> shapes;
    for (int r = 0; r < n_; ++r) {
      DlrmRankShape s{0, 0, 0, 0, exchanged, has_bottom(r)};
      for (int t : plan_.tables_of_rank[static_cast<std::size_t>(r)]) {
        const EmbeddingTable& table = c_.tables[static_cast<std::size_t>(t)].table;
        const double rows = rows_on(t, r);
        if (rows <= 0) continue;
        const double values = rows * dim_on(t, r) * table.element_bytes;
        s.table_bytes += values;
        s.table_state += table.stored(rows, dim_on(t, r)) - values;
        if (plan_.tables[static_cast<std::size_t>(t)].kind == ShardingKind::data_parallel) s.replicated_bytes += values;
        s.lookup_values += lookup_batch(t) * dim_on(t, r) * outputs_per_sample(t, r);
        s.lookups += lookup_batch(t) * table.pooling * rows / table.rows;
      }
      shapes.push_back(s);
    }
    return shapes;
  }

 private:
  void check_batch() {
    const YAML::Node node = find_node(doc_, "training.global_batch");
    if (c_.global_batch % n_ != 0) {
      const int below = c_.global_batch / n_ * n_;
      reader_.fail("training.global_batch", node,
                   std::to_string(c_.global_batch) + " samples do not split evenly over the job's " + std::to_string(n_) +
                       " ranks",
                   "use a multiple of " + std::to_string(n_) + " such as " +
                       (below > 0 ? std::to_string(below) + " or " : std::string()) + std::to_string(below + n_) +
                       ", or another number of GPUs");
    }
    batch_ = c_.global_batch / n_;
  }

  ShardingPlan make_plan() {
    ShardingRequest request;
    for (const TableEntry& t : c_.tables) request.tables.push_back(t.table);
    request.ranks = n_;
    request.planner = c_.planner;
    request.seed = c_.seed;
    request.placement = c_.placement;
    request.gpu_memory = job_.platform.gpu().memory;
    request.memory_reserve = c_.memory_reserve;
    request.gpu_name = job_.platform.gpu().name;
    request.per_table = c_.table_plan;
    for (int r = 0; r < n_; ++r) request.node_of_rank.push_back(job_.node_of(r));
    const YAML::Node sharding = doc_["sharding"];
    request.where = reader_.where("sharding", sharding ? sharding : YAML::Node());
    if (c_.plan == "per_table") return plan_sharding(request);
    if (c_.plan == "torchrec") {
      request.per_table = torchrec_plan(request, torchrec_inputs());
      ShardingPlan plan = plan_sharding(request);
      plan.planner = "torchrec";
      return plan;
    }
    if (c_.plan != "auto") {
      request.kind = *sharding_kind(c_.plan);  // dlrm_config accepts kinds' names only
      return plan_sharding(request);
    }
    // auto: whole tables where they fit (no partial pooled sums to reduce), else rows spread
    // over every GPU. Choosing by predicted time needs the simulator: that is `stepsim sweep`.
    request.kind = ShardingKind::table_wise;
    try {
      return plan_sharding(request);
    } catch (const ConfigError&) {
      request.kind = ShardingKind::row_wise;
      return plan_sharding(request);
    }
  }

  /// TorchRec's Topology: its defaults (dlrm_main.py passes world sizes only), or from the
  /// platform: the GPU's datasheet HBM rate, its NVLinks' summed rate within a node (without
  /// NVLink, the rated links of its first GPU together), its share of the node's NICs across
  /// nodes; the exchanges' element.
  TorchrecPlannerInputs torchrec_inputs() const {
    const platforms::Platform& p = job_.platform;
    TorchrecPlannerInputs in = torchrec_default_topology();
    if (c_.torchrec_platform_topology) {
      in.hbm_cap = 0;
      in.hbm = p.gpu().hbm_bandwidth;
      in.intra_node = p.gpu().nvlink_bandwidth_per_link * p.gpu().nvlinks;
      if (in.intra_node <= 0)
        for (const platforms::Link& l : p.node().links)
          if (l.a == p.node().gpus.front() || l.b == p.node().gpus.front()) in.intra_node += l.datasheet_bandwidth;
      in.inter_node = p.fabric().nic_bandwidth * static_cast<double>(p.node().nics.size()) / p.gpus_per_node();
    }
    in.batch_per_rank = static_cast<double>(c_.global_batch) / n_;
    in.output_bytes = act_bytes_;
    // Nodes as equal contiguous blocks of ranks, else (an uneven allocation) one block: no
    // table_row_wise option.
    int per_node = 0;
    for (int r = 0; r < n_; ++r) per_node += job_.node_of(r) == job_.node_of(0);
    bool even = n_ % per_node == 0;
    for (int r = 0; r < n_ && even; ++r) even = job_.node_of(r) == job_.node_of(r - r % per_node);
    in.ranks_per_node = even ? per_node : n_;
    return in;
  }

  bool has_bottom(int rank) const { return !c_.bottom_on_rank0 || rank == 0; }
  double bottom_batch() const { return c_.bottom_on_rank0 ? c_.global_batch : batch_; }
  int features() const { return static_cast<int>(c_.tables.size()); }

  int top_input() const {
    if (c_.interaction == "dot") {
      const int width = c_.embedding_dim + (features() + 1) * features() / 2;
      return (width + c_.interaction_pad_to - 1) / c_.interaction_pad_to * c_.interaction_pad_to;
    }
    int width = c_.bottom_mlp.back();
    for (const TableEntry& t : c_.tables) width += t.table.dim;
    return width;
  }

  bool has_kind(ShardingKind kind) const {
    return std::any_of(sections_.begin(), sections_.end(), [&](const Section& s) { return s.kind == kind; });
  }
  bool exchanges(std::size_t section) const { return n_ > 1 && sections_[section].kind != ShardingKind::data_parallel; }
  bool any_exchange() const {
    for (std::size_t s = 0; s < sections_.size(); ++s)
      if (exchanges(s)) return true;
    return false;
  }
  double rows_on(int t, int rank) const {
    return plan_.tables[static_cast<std::size_t>(t)].rows_on(c_.tables[static_cast<std::size_t>(t)].table, rank);
  }
  int dim_on(int t, int rank) const {
    return plan_.tables[static_cast<std::size_t>(t)].dim_on(c_.tables[static_cast<std::size_t>(t)].table, rank);
  }
  /// Sharded tables are looked up for the global batch, replicated ones for the local one.
  double lookup_batch(int t) const {
    return plan_.tables[static_cast<std::size_t>(t)].kind == ShardingKind::data_parallel ? batch_ : c_.global_batch;
  }
  /// Names of a section's ops: bare with one sharding kind, prefixed by the kind with several.
  std::string tag(std::size_t section) const {
    if (sections_.size() == 1) return {};
    return std::string(sections_[section].sequence ? "sequence." : "") + to_string(sections_[section].kind) + ".";
  }

  /// Outputs per sample of table `t`'s shard on `rank`: one pooled row, or for a sequence table
  /// one row per lookup that hits the shard.
  double outputs_per_sample(int t, int rank) const {
    const EmbeddingTable& table = c_.tables[static_cast<std::size_t>(t)].table;
    return table.sequence ? table.pooling * rows_on(t, rank) / table.rows : 1;
  }

  /// Pooled-embedding values per sample that `rank` produces for a section's exchange: its
  /// shards' columns, and the bottom MLP's output on rank 0 with NVIDIA's placement.
  double exchange_width(int rank, std::size_t section) const {
    const ShardingKind kind = sections_[section].kind;
    const bool all_to_all = kind == ShardingKind::table_wise || kind == ShardingKind::column_wise;
    double width = c_.bottom_on_rank0 && rank == 0 && all_to_all ? c_.bottom_mlp.back() : 0;
    for (int t : sections_[section].tables) width += dim_on(t, rank) * outputs_per_sample(t, rank);  // 0 without a shard
    return width;
  }

  /// The nccl-tests size of an all-to-all in which member i sends s_i bytes to each peer. With
  /// equal shares that is a per-rank buffer of n s. With unequal ones every member must agree on
  /// one size, so we take Lin et al.'s "max of max" (papers.md §3.1): the largest of any
  /// member's bytes sent, (n-1) s_i, or received, sum_{j!=i} s_j, scaled by n/(n-1) so that the
  /// uniform collective moves exactly that much through the busiest member.
  static Bytes max_of_max(const std::vector<Bytes>& s) {
    const double n = static_cast<double>(s.size());
    const double total = std::accumulate(s.begin(), s.end(), 0.0);
    double busiest = 0;
    for (double si : s) busiest = std::max({busiest, (n - 1) * si, total - si});
    return busiest * n / (n - 1);
  }
  /// A table- or column-wise section's all-to-all: rank i sends width_i x (B/n) x bytes to each peer.
  Bytes a2a_bytes(std::size_t section) const { return max_of_max(a2a_shares(section)); }
  std::vector<Bytes> a2a_shares(std::size_t section) const {
    std::vector<Bytes> s;
    for (int r = 0; r < n_; ++r) s.push_back(exchange_width(r, section) * batch_ * act_bytes_);
    return s;
  }

  /// TorchRec's KJT input distribution (torchrec/distributed/dist_data.py, KJTAllToAll), one per
  /// section: each rank sends every peer, for its local batch, the lengths (int32, one per sample
  /// and feature) or the indices (int64) of the section's features whose shards the peer holds
  /// (a row-wise shard the indices that hash into its rows, a column-wise shard all of its
  /// table's). The uniform collective's size is the busiest rank's sent or received bytes.
  Bytes input_a2a_bytes(std::size_t section, bool indices) const {
    std::vector<Bytes> received;  // what rank j receives from each peer
    for (int j = 0; j < n_; ++j) {
      double per_sample = 0;
      for (int t : sections_[section].tables) {
        const double rows = rows_on(t, j);
        if (rows <= 0) continue;
        const EmbeddingTable& table = c_.tables[static_cast<std::size_t>(t)].table;
        per_sample += indices ? 8 * table.pooling * rows / table.rows : 4;
      }
      received.push_back(per_sample * batch_);
    }
    return max_of_max(received);
  }

  /// KJTAllToAll's splits: per section, each rank sends every peer the counts of the lengths and
  /// indices it sends and its batch (3 int64; TorchRec fuses the sections' splits into one).
  Bytes splits_a2a_bytes() const {
    double sections = 0;
    for (std::size_t s = 0; s < sections_.size(); ++s) sections += exchanges(s) ? 1 : 0;
    return n_ * 3 * 8 * sections;
  }

  /// The lengths' and indices' all-to-alls of every section, once the host has read the splits.
  void input_distribution(RankBuilder& rank, int splits_done) const {
    rank.host_wait(splits_done);
    for (std::size_t s = 0; s < sections_.size(); ++s) {
      if (!exchanges(s)) continue;
      // _get_recat: the received features' order, a blocking torch.tensor copy.
      if (torchrec_ops()) rank.upload("embedding_comm", tag(s) + "input_dist.recat", 8.0 * n_ * features());
      rank.collective(kEmbeddingComm, tag(s) + "input_dist.lengths",
                      call(models::CollectiveOp::alltoall, input_a2a_bytes(s, false), kEmbeddingGroup));
      rank.collective(kEmbeddingComm, tag(s) + "input_dist.indices",
                      call(models::CollectiveOp::alltoall, input_a2a_bytes(s, true), kEmbeddingGroup));
    }
  }

  /// TrainPipelineSparseDist's copy of a later batch to the GPU (pinned memory, non-blocking, on
  /// its memcpy stream): the rank's local samples' labels and dense features (fp32), and their
  /// KJT's int32 lengths and int64 indices of every feature.
  void upload_local_batch(RankBuilder& rank) const {
    double lookups = 0;
    for (const TableEntry& t : c_.tables) lookups += t.table.pooling;
    rank.upload_pinned("memcpy", "next_batch.to_device",
                       batch_ * (4.0 + 4.0 * c_.dense_features + 4.0 * features() + 8.0 * lookups));
  }

  /// Row-wise: every rank's partial pooled sums of the section's tables for the whole batch;
  /// table-row-wise: those of the tables on `rank`'s node, reduce-scattered within it.
  Bytes reduce_scatter_bytes(std::size_t section, int rank) const {
    double width = 0;
    for (int t : sections_[section].tables)
      if (plan_.tables[static_cast<std::size_t>(t)].holds(rank)) width += c_.tables[static_cast<std::size_t>(t)].table.dim;
    return width * c_.global_batch * act_bytes_;
  }
  /// Table-row-wise's cross-node all-to-all between the ranks of one local index: after the
  /// node's reduce-scatter each holds its node's sums for those ranks' samples, and sends each
  /// peer its b samples (TorchRec's TwRwPooledEmbeddingDist).
  Bytes cross_a2a_bytes(std::size_t section) const {
    std::vector<Bytes> shares;
    for (int first : node_firsts_) shares.push_back(reduce_scatter_bytes(section, first) / c_.global_batch * batch_);
    return max_of_max(shares);
  }

  /// Table-row-wise's groups: the ranks of each node, and the ranks of each local index.
  void add_node_groups() {
    std::map<int, std::vector<int>> by_node;
    for (int r = 0; r < n_; ++r) by_node[job_.node_of(r)].push_back(r);
    ProcessGroup node{"embedding_node", {}, std::vector<int>(static_cast<std::size_t>(n_), -1)};
    ProcessGroup cross{"embedding_cross", {}, std::vector<int>(static_cast<std::size_t>(n_), -1)};
    const std::size_t local = by_node.begin()->second.size();  // every node alike (plan_sharding checks)
    cross.subgroups.resize(local);
    for (const auto& [id, ranks] : by_node) {
      node_firsts_.push_back(ranks.front());
      for (std::size_t i = 0; i < ranks.size(); ++i) {
        node.subgroup_of_rank[static_cast<std::size_t>(ranks[i])] = static_cast<int>(node.subgroups.size());
        cross.subgroup_of_rank[static_cast<std::size_t>(ranks[i])] = static_cast<int>(i);
        cross.subgroups[i].push_back(ranks[i]);
      }
      node.subgroups.push_back(ranks);
    }
    trace_.group(node);
    trace_.group(cross);
  }

  /// The collectives that hand a section's pooled values to the ranks that train on them
  /// (forward) or return their gradients (backward), on the exchange's stream.
  void exchange(RankBuilder& rank, int r, std::size_t section, bool forward) const {
    const std::string suffix = forward ? "_forward" : "_backward";
    const std::string name = tag(section);
    using models::CollectiveOp;
    // A sequence section's rows are not summed: every sharding returns each lookup's row to the
    // sample's rank (TorchRec's SequenceEmbeddingsAllToAll), forward and backward.
    if (sections_[section].sequence) {
      rank.collective(kEmbeddingComm, name + "alltoall" + suffix,
                      call(CollectiveOp::alltoall, a2a_bytes(section), kEmbeddingGroup));
      return;
    }
    switch (sections_[section].kind) {
      case ShardingKind::table_wise:
      case ShardingKind::column_wise:
        rank.collective(kEmbeddingComm, name + "alltoall" + suffix,
                        call(CollectiveOp::alltoall, a2a_bytes(section), kEmbeddingGroup));
        return;
      case ShardingKind::row_wise:
        rank.collective(kEmbeddingComm, name + (forward ? "reduce_scatter" : "allgather") + suffix,
                        call(forward ? CollectiveOp::reduce_scatter : CollectiveOp::allgather,
                             reduce_scatter_bytes(section, r), kEmbeddingGroup));
        return;
      case ShardingKind::table_row_wise: {
        const Bytes node_bytes = reduce_scatter_bytes(section, r);
        const auto within = [&] {
          if (node_bytes > 0)
            rank.collective(kEmbeddingComm, name + (forward ? "node_reduce_scatter" : "node_allgather") + suffix,
                            call(forward ? CollectiveOp::reduce_scatter : CollectiveOp::allgather, node_bytes,
                                 kNodeGroup));
        };
        const auto across = [&] {
          if (node_firsts_.size() > 1)
            rank.collective(kEmbeddingComm, name + "cross_alltoall" + suffix,
                            call(CollectiveOp::alltoall, cross_a2a_bytes(section), kCrossGroup));
        };
        if (forward) within(), across();
        else across(), within();
        return;
      }
      case ShardingKind::data_parallel: return;
    }
  }

  /// The rank's lookups, grouped by section and then by alike shards.
  std::vector<LookupGroup> lookups(int rank) const {
    std::vector<LookupGroup> groups;
    for (std::size_t s = 0; s < sections_.size(); ++s)
      for (int t : plan_.tables_of_rank[static_cast<std::size_t>(rank)]) {
        const TableEntry& entry = c_.tables[static_cast<std::size_t>(t)];
        if (plan_.tables[static_cast<std::size_t>(t)].kind != sections_[s].kind) continue;
        const double rows = rows_on(t, rank);
        const int dim = dim_on(t, rank);
        if (rows <= 0 || dim <= 0) continue;  // the last blocks of a small table may be empty
        // A row-wise shard receives the share of the lookups that hit its rows; indices are
        // assumed spread over the rows (hashed), so the shard's reuse is the whole table's, and
        // each shard is charged the table's hottest row (the one that holds it is not known).
        // A sequence shard looks up and writes one row per lookup: B L one-row bags.
        const double pooling = entry.table.pooling * rows / entry.table.rows;
        const bool sequence = entry.table.sequence;
        LookupGroup g{1,
                      rows,
                      dim,
                      sequence ? 1 : pooling,
                      histograms_[static_cast<std::size_t>(t)],
                      hottest_[static_cast<std::size_t>(t)],
                      s,
                      lookup_batch(t) * (sequence ? pooling : 1)};
        auto it = std::find(groups.begin(), groups.end(), g);
        if (it == groups.end()) groups.push_back(std::move(g));
        else it->tables += 1;
      }
    return groups;
  }

  KernelSpec embedding(const char* kind, const LookupGroup& g, double batch) const {
    KernelSpec spec{kind, c_.embedding_dtype,
                    {{"tables", g.tables}, {"rows", g.rows}, {"dim", static_cast<double>(g.dim)},
                     {"pooling", g.pooling}, {"batch", batch}},
                    g.histogram};
    return spec;
  }

  /// DDP's buckets: gradients in reverse layer order, cut every `ddp_bucket` bytes; a bucket's
  /// allreduce starts on the allreduce stream once the kernel completing it has finished.
  class Buckets {
   public:
    /// `stream` and `group`: where the allreduces run (their own, or the exchange's when shared).
    Buckets(RankBuilder& rank, Bytes cap, bool active, int stream, int group)
        : rank_(rank), cap_(cap), active_(active), stream_(stream), group_(group) {}
    void add(Bytes bytes) {
      if (!active_) return;
      pending_ += bytes;
      while (pending_ >= cap_) {
        issue(cap_);
        pending_ -= cap_;
      }
    }
    void flush() {
      if (active_ && pending_ > 0) issue(pending_);
      pending_ = 0;
    }
    int count() const { return count_; }

   private:
    void issue(Bytes bytes) {
      rank_.handoff(kCompute, stream_, "grad_bucket_" + std::to_string(count_) + "_ready");
      rank_.collective(stream_, "ddp_allreduce_" + std::to_string(count_),
                       call(models::CollectiveOp::allreduce, bytes, group_));
      ++count_;
    }
    RankBuilder& rank_;
    Bytes cap_;
    bool active_;
    int stream_;
    int group_;
    Bytes pending_ = 0;
    int count_ = 0;
  };

  /// One linear layer: `in` inputs, `out` outputs.
  struct Layer {
    int in = 0;
    int out = 0;
  };
  static std::vector<Layer> layers(int input, const std::vector<int>& widths) {
    std::vector<Layer> out;
    for (int w : widths) {
      out.push_back({input, w});
      input = w;
    }
    return out;
  }

  /// Emits rank `r`'s iteration into `rank`; returns its GEMM FLOPs.
  double build_rank(int r, RankBuilder& rank) {
    double flops = 0;
    const Dtype dt = c_.dtype;
    const auto gemm_op = [&](const std::string& name, Layout layout, double m, double n, double k, double batch = 1) {
      flops += 2 * m * n * k * batch;
      rank.kernel(name, gemm(dt, m, n, k, batch, layout));
    };
    const auto bottom = layers(c_.dense_features, c_.bottom_mlp);
    const auto top = layers(top_input(), c_.top_mlp);
    const double b = batch_;
    const double bb = bottom_batch();
    const std::vector<LookupGroup> groups = lookups(r);
    max_groups_ = std::max(max_groups_, groups.size());
    const auto suffix = [&](std::size_t g) { return groups.size() > 1 ? "[" + std::to_string(g) + "]" : std::string(); };

    if (c_.graph_forward_backward) rank.cpu("iteration_start", iteration_start_time());
    // TorchRec's KJT input distribution (torchrec/distributed/dist_data.py, KJTAllToAll): first
    // an all-to-all of the splits, which the host reads, then per section the lengths' and the
    // indices' all-to-alls. Unpipelined it precedes the lookups, which wait for it. TorchRec's
    // TrainPipelineSparseDist (train_pipeline/train_pipelines.py, progress) distributes the next
    // batch instead: its splits at the iteration's start, its lengths and indices after this
    // batch's forward (the host waiting for the splits), all on the exchange's communicator; the
    // batch after it is copied to the GPU on a side stream meanwhile.
    int splits_done = -1;
    if (c_.input_all_to_all && any_exchange()) {
      if (torchrec_ops()) splits_prologue(rank);
      rank.collective(kEmbeddingComm, "input_dist.splits",
                      call(models::CollectiveOp::alltoall, splits_a2a_bytes(), kEmbeddingGroup));
      // The host reads them transposed (.T.tolist(): a contiguous copy first).
      if (torchrec_ops()) rank.kernel_on(kEmbeddingComm, "input_dist.splits_transpose", pass_spec(3.0 * n_ * sections_.size(), 8, 8));
      splits_done = rank.record(kEmbeddingComm, "input_dist.splits_done");
      if (c_.pipelined) {
        upload_local_batch(rank);
      } else {
        input_distribution(rank, splits_done);
        rank.handoff(kEmbeddingComm, kCompute, "input_dist_done");
      }
    }

    // Forward. Every bottom layer and all top layers but the last end in a ReLU; with
    // mlp_epilogue fused, bias and ReLU are in the GEMM's epilogue.
    if (has_bottom(r))
      for (std::size_t i = 0; i < bottom.size(); ++i) {
        if (i == 0 && autocast_casts())
          rank.kernel("bottom_mlp.input_to_fp16", pass_spec(bb * c_.dense_features, 4, act_bytes_));
        cast_weights(rank, "bottom_mlp.fc" + std::to_string(i), bottom[i]);
        gemm_op("bottom_mlp.fc" + std::to_string(i), Layout::nt, bb, bottom[i].out, bottom[i].in);
        relu_forward(rank, "bottom_mlp.fc" + std::to_string(i), bb * bottom[i].out);
      }
    const double embedding_bytes = models::bytes_of(c_.embedding_dtype);
    double local_values = 0;  // pooled values of this rank's tables for the lookup batch
    // Per section (TorchRec: per sharding kind) the lookups, then its exchange, so the next
    // section's lookups run while it is in flight.
    const bool dle_exchange = any_exchange() && c_.bottom_on_rank0;
    const double received_values = b * (features() + 1) * c_.embedding_dim;
    // JointSparseEmbedding.forward adds each table's row offset to the indices (a PyTorch add over
    // the rank's int64 indices); joint_fused's gather adds them itself.
    if (joint_sparse(groups) && !joint_fused(groups))
      rank.kernel("embedding_index_offsets", pass_spec(totals(groups).lookups, 8, 8));
    for (std::size_t s = 0; s < sections_.size(); ++s) {
      if (torchrec_ops()) lookup_prologue(rank, s, groups);
      bool first_of_section = true;  // TorchRec: one TBE call per section, its groups one kernel
      for (std::size_t g = 0; g < groups.size(); ++g) {
        if (groups[g].section != s) continue;
        const double values = groups[g].batch * groups[g].tables * groups[g].dim;
        local_values += values;
        if (c_.torch_embedding_bag) {
          // Given a 2-D index tensor (one bag per row), nn.EmbeddingBag builds its offsets with
          // torch.arange on every call: one more kernel per table (int64, one per sample).
          for (double t = 0; t < groups[g].tables; ++t) {
            rank.kernel("embedding_offsets" + suffix(g), pass_spec(groups[g].batch, 0, 8));
            rank.kernel("embedding_forward" + suffix(g), torch_bag(groups[g]));
          }
          continue;
        }
        KernelSpec lookup = embedding("embedding_forward", groups[g], groups[g].batch);
        if (joint_fused(groups)) lookup.params["output_bytes"] = act_bytes_;
        rank.kernel_on(kCompute, "embedding_forward" + suffix(g), lookup, !torchrec_ops() || first_of_section);
        first_of_section = false;
        // PyTorch's embedding ops return the weights' fp32; under AMP the pooled rows are cast to
        // fp16 for the all-to-all (fused kernels such as FBGEMM's write fp16 directly).
        if (sparse_gradient() && act_bytes_ < 4 && !joint_sparse(groups))
          rank.kernel("embedding_output_cast" + suffix(g), pass_spec(values, 4, act_bytes_));
      }
      if (s + 1 == sections_.size()) {  // one section only, where these apply (dlrm_config refuses the rest)
        if (joint_sparse(groups) && !joint_fused(groups) && act_bytes_ < 4)
          rank.kernel("embedding_output_cast", pass_spec(local_values, 4, act_bytes_));
        // PyTorch's per-table outputs are stacked into one tensor (a copy), then cast under AMP.
        if (c_.torch_embedding_bag && local_values > 0) {
          if (plan_.tables_of_rank[static_cast<std::size_t>(r)].size() > 1)
            rank.kernel("embedding_stack", pass_spec(local_values, embedding_bytes, embedding_bytes));
          if (act_bytes_ < embedding_bytes)
            rank.kernel("embedding_output_cast", pass_spec(local_values, embedding_bytes, act_bytes_));
        }
        // NVIDIA DLE's hybrid parallel moves tensors with PyTorch ops around its all-to-all
        // (dlrm/nn/parts.py DlrmBottom, dlrm/model/distributed.py BottomToTop): a rank that holds
        // the bottom MLP and tables concatenates their outputs before it (a rank's joint embedding
        // is one tensor already), the received vectors are concatenated after it, and the gradient
        // is split into contiguous pieces before the backward one; each is a copy (read and write).
        if (dle_exchange && has_bottom(r) && !groups.empty())
          rank.kernel("exchange_input_cat", pass_spec(c_.global_batch * exchange_width(r, s), act_bytes_, act_bytes_));
      }
      if (!exchanges(s)) continue;
      // PooledEmbeddingsAllToAll's Request: a one-element fill before the collective.
      if (torchrec_ops() && all_to_all(s)) rank.kernel(tag(s) + "output_dist.request", pass_spec(1, 0, 4));
      rank.handoff(kCompute, kEmbeddingComm, tag(s) + "pooled_embeddings_ready");
      exchange(rank, r, s, true);
    }
    if (any_exchange()) rank.handoff(kEmbeddingComm, kCompute, "exchange_forward_done");
    if (torchrec_ops() && any_exchange()) output_dist_epilogue(rank, b);
    if (dle_exchange) rank.kernel("exchange_output_cat", pass_spec(received_values, act_bytes_, act_bytes_));
    sequence_pooling(rank, b, true);
    const double vectors = features() + 1;
    const double dim = c_.embedding_dim;
    const double pairs = vectors * (vectors - 1) / 2;
    // Dot interaction: per sample the V x D matrix X of bottom output and pooled embeddings
    // times its transpose. NVIDIA's fused dot_based_interact kernels gather the lower triangle
    // and append the bottom output in the same pass; PyTorch (interaction_kernel gemm) runs
    // torch.cat into X, torch.bmm, an index_select of the triangle and a torch.cat with the bottom
    // output, and backward the index_select's zero-filled index_add, both bmm gradients
    // (G X and X^T G, summed into dX) and the bottom output's two gradients summed.
    const auto fused_interaction = [&](const std::string& name, bool backward) {
      // As the GEMM form counts it: X X^T forward, G X and X^T G backward.
      flops += (backward ? 4 : 2) * b * vectors * vectors * dim;
      rank.kernel(name, KernelSpec{"dot_interaction", dt,
                                   {{"batch", b}, {"vectors", vectors}, {"dim", dim}, {"backward", backward ? 1.0 : 0.0}},
                                   {}});
    };
    if (c_.interaction == "dot") {
      if (c_.fused_interaction) {
        fused_interaction("interaction", false);
      } else {
        rank.kernel("interaction.cat", pass_spec(b * vectors * dim, act_bytes_, act_bytes_));
        gemm_op("interaction", Layout::nt, vectors, vectors, dim, b);
        // The triangle's elements lie in nearly every 32-byte sector of the products: read all.
        rank.kernel("interaction.pairs", pass_spec(b * pairs, act_bytes_ * vectors * vectors / pairs, act_bytes_));
        rank.kernel("interaction.output_cat", pass_spec(b * (dim + pairs), act_bytes_, act_bytes_));
      }
    }
    if (c_.interaction == "dcn_v2") cross_forward(rank, gemm_op, b);
    for (std::size_t i = 0; i < top.size(); ++i) {
      cast_weights(rank, "top_mlp.fc" + std::to_string(i), top[i]);
      gemm_op("top_mlp.fc" + std::to_string(i), Layout::nt, b, top[i].out, top[i].in);
      if (i + 1 < top.size()) relu_forward(rank, "top_mlp.fc" + std::to_string(i), b * top[i].out);
    }
    loss_forward(rank, b);
    if (c_.pipelined && splits_done >= 0) input_distribution(rank, splits_done);

    // Backward: gradient buckets fill from the last layer back.
    const int allreduce_stream = c_.shared_process_group ? kEmbeddingComm : kAllreduce;
    Buckets buckets(rank, c_.ddp_bucket, n_ > 1, allreduce_stream,
                    c_.shared_process_group ? kEmbeddingGroup : kDenseGroup);
    double dense_params = 0;  // parameters the optimizer updates, all fp32
    loss_backward(rank, b);
    for (std::size_t i = top.size(); i-- > 0;) {
      const std::string layer = "top_mlp.fc" + std::to_string(i);
      const bool relu = i + 1 < top.size();
      if (relu) relu_backward(rank, layer, b, top[i].out);
      gemm_op(layer + ".dgrad", Layout::nn, b, top[i].in, top[i].out);
      gemm_op(layer + ".wgrad", Layout::tn, top[i].out, top[i].in, b);
      bias_grad(rank, layer, b, top[i].out, relu);
      cast_weight_grads(rank, layer, top[i]);
      ddp_copy_to_bucket(rank, layer, top[i]);
      const double params = static_cast<double>(top[i].in) * top[i].out + top[i].out;
      buckets.add(params * 4);
      dense_params += params;
    }
    if (c_.interaction == "dcn_v2") dense_params += cross_backward(rank, gemm_op, b, buckets);
    // DDP launches a bucket once its last gradient is ready: without the bottom MLP in DDP
    // (rank0), the top MLP's last partial bucket is complete here.
    if (c_.bottom_on_rank0) buckets.flush();
    if (c_.interaction == "dot") {
      if (c_.fused_interaction) {
        fused_interaction("interaction.backward", true);
        // NVIDIA's kernel returns the vectors' gradient and, apart, the bottom output's. Behind
        // DLE's exchange the bottom output is a slice of the received vectors (DistributedDlrm:
        // from_bottom[:, 0, :]), so autograd's select_backward writes its gradient into zeros the
        // size of all vectors, then adds that to the vectors' gradient; otherwise the bottom
        // output's two gradients (the cat's slice and the interaction's) are summed.
        if (dle_exchange) {
          rank.kernel("interaction.select_backward.zeros", pass_spec(b * vectors * dim, 0, act_bytes_));
          rank.kernel("interaction.select_backward", strided(pass_spec(b * dim, act_bytes_, act_bytes_)));
          rank.kernel("interaction.grad_accumulate", pass_spec(b * vectors * dim, 2 * act_bytes_, act_bytes_));
        } else {
          rank.kernel("bottom_output.grad_add", strided(pass_spec(b * dim, 2 * act_bytes_, act_bytes_)));
        }
      } else {
        rank.kernel("interaction.pairs.zero", pass_spec(b * vectors * vectors, 0, act_bytes_));
        // index_select's backward: an index_add of each picked pair's column of b gradients.
        rank.kernel("interaction.pairs.backward",
                    KernelSpec{"index_add", c_.dtype, {{"rows", pairs}, {"dim", b}, {"strided", 1}}, {}});
        gemm_op("interaction.backward", Layout::nn, vectors, dim, vectors, b);
        gemm_op("interaction.backward_transposed", Layout::tn, dim, vectors, vectors, b);
        // Both sums read a view: the transposed product's gradient, the cat gradient's first slice.
        rank.kernel("interaction.grad_add", strided(pass_spec(b * vectors * dim, 2 * act_bytes_, act_bytes_)));
        rank.kernel("bottom_output.grad_add", strided(pass_spec(b * dim, 2 * act_bytes_, act_bytes_)));
      }
    }
    // The exchanges backward, later sections first (autograd runs the newest node first); each
    // section's embedding backward waits for its own.
    std::vector<int> exchanged(sections_.size(), -1);  // per section, the event after its exchange
    sequence_pooling(rank, b, false);
    if (any_exchange()) {
      // BottomToTop.backward: each piece of the split is a column slice, made contiguous.
      if (dle_exchange)
        rank.kernel("exchange_grad_split", strided(pass_spec(received_values, act_bytes_, act_bytes_)));
      if (torchrec_ops()) output_dist_backward_prologue(rank, b);
      rank.handoff(kCompute, kEmbeddingComm, "embedding_grads_ready");
      for (std::size_t s = sections_.size(); s-- > 0;) {
        if (!exchanges(s)) continue;
        exchange(rank, r, s, false);
        exchanged[s] = rank.record(kEmbeddingComm, tag(s) + "exchange_backward_done");
      }
    }
    const auto wait_exchange = [&](std::size_t s) {
      if (exchanged[s] >= 0) {
        rank.wait(kCompute, exchanged[s]);
        // All2All_Pooled_Req.backward divides the received gradient by the world size.
        if (torchrec_ops() && all_to_all(s))
          rank.kernel(tag(s) + "output_dist.grad_div", pass_spec(c_.global_batch * exchange_width(r, s), act_bytes_, act_bytes_));
      }
      exchanged[s] = -1;
    };
    // A data-parallel bottom MLP needs nothing from the exchange, so its backward overlaps it; on
    // rank 0 alone (NVIDIA) its output gradient arrives through the exchange.
    if (c_.bottom_on_rank0)
      for (std::size_t s = 0; s < sections_.size(); ++s) wait_exchange(s);
    bottom_backward(r, bottom, bb, buckets, dense_params, gemm_op, rank);
    if (!has_kind(ShardingKind::data_parallel)) buckets.flush();  // the bottom MLP's were the last
    const bool sparse = sparse_gradient();
    // PyTorch's stacked gradient (DLE's joint one) is cast back to the tables' type once.
    if (c_.torch_embedding_bag || joint_sparse(groups))
      for (std::size_t s = 0; s < sections_.size(); ++s) wait_exchange(s);
    if (c_.torch_embedding_bag && !groups.empty() && act_bytes_ < embedding_bytes)
      rank.kernel("embedding_grad_cast", widening_cast(local_values, act_bytes_, embedding_bytes));
    if (joint_fused(groups)) {
      // gather_gpu_fused_bwd: the indices plus row offsets, and the pooled gradient copied into
      // the sparse gradient's fp32 values (a cast under AMP, a plain copy in fp32; DLE's own
      // kernel, four elements per vector load).
      rank.kernel("embedding_index_offsets", pass_spec(totals(groups).lookups, 8, 8));
      rank.kernel("embedding_grad_copy", pass_spec(local_values, act_bytes_, 4));
    } else if (joint_sparse(groups) && act_bytes_ < 4) {
      rank.kernel("embedding_grad_cast", widening_cast(local_values, act_bytes_, 4));
    }
    std::vector<bool> tbe_called(sections_.size(), false);  // TorchRec: one TBE backward per section
    for (std::size_t g = 0; g < groups.size(); ++g) {
      wait_exchange(groups[g].section);
      if (c_.torch_embedding_bag) {
        // nn.EmbeddingBag's sparse backward per table: an index_select of the pooled gradient by
        // offset2bag, one row per lookup.
        for (double t = 0; t < groups[g].tables; ++t)
          rank.kernel("embedding_grad_rows" + suffix(g), gather_spec(groups[g].batch * groups[g].pooling, groups[g].dim));
      } else if (sparse) {
        // PyTorch's sparse COO gradient: the pooled gradient (cast back to the fp32 weights'
        // type under AMP), one row per lookup (a view for one-hot features, a copy for bags).
        const double pooled = groups[g].batch * groups[g].tables * groups[g].dim;
        if (act_bytes_ < 4 && !joint_sparse(groups))
          rank.kernel("embedding_grad_cast" + suffix(g), widening_cast(pooled, act_bytes_, 4));
        if (groups[g].pooling > 1)
          rank.kernel("embedding_grad_rows" + suffix(g),
                      gather_spec(groups[g].batch * groups[g].tables * groups[g].pooling, groups[g].dim));
      } else {
        // FBGEMM's / NVIDIA's fused backward applies the optimizer to the looked-up rows in the
        // same kernel, reading and writing their optimizer state beside them.
        KernelSpec backward = embedding("embedding_backward", groups[g], groups[g].batch);
        if (const double state = optimizer_state_bytes(c_.embedding_optimizer, groups[g].dim); state > 0)
          backward.params["state_bytes"] = state;
        const std::size_t s = groups[g].section;
        rank.kernel_on(kCompute, "embedding_backward" + suffix(g), backward, !torchrec_ops() || !tbe_called[s]);
        if (torchrec_ops() && !tbe_called[s]) {
          const LookupTotals t = totals(groups, s);
          torchrec::tbe_backward_internals(rank, tag(s) + "tbe_backward", t.lookups, t.rows);
        }
        tbe_called[s] = true;
      }
      // Replicated tables (TorchRec's data_parallel) get dense gradients that DDP allreduces
      // with the MLPs' and a separate optimizer step.
      if (sections_[groups[g].section].kind == ShardingKind::data_parallel) {
        const double params = groups[g].tables * groups[g].rows * groups[g].dim;
        buckets.add(params * models::bytes_of(c_.embedding_dtype));
        dense_params += params;
      }
    }
    buckets.flush();
    buckets_ = buckets.count();
    if (buckets.count() > 0) rank.handoff(allreduce_stream, kCompute, "gradients_reduced");
    weight_update(r, rank, groups, dense_params, suffix);
    return flops;
  }

  /// The model sums each sequence feature's rows per sample before the interaction (which takes
  /// one vector per feature): per sequence section one pass reading b x sum(L D) values and
  /// writing b x sum(D); backward the gradient broadcast back to every lookup.
  void sequence_pooling(RankBuilder& rank, double b, bool forward) const {
    for (std::size_t s = 0; s < sections_.size(); ++s) {
      if (!sections_[s].sequence) continue;
      double rows = 0, pooled = 0;
      for (int t : sections_[s].tables) {
        const EmbeddingTable& table = c_.tables[static_cast<std::size_t>(t)].table;
        rows += table.pooling * table.dim;
        pooled += table.dim;
      }
      const double narrow = act_bytes_ * pooled / rows;  // bytes of the pooled side per row element
      rank.kernel(tag(s) + (forward ? "sequence_pool" : "sequence_pool_backward"),
                  forward ? pass_spec(b * rows, act_bytes_, narrow) : pass_spec(b * rows, narrow, act_bytes_));
    }
  }

  /// NVIDIA DLE's loop (main.py) ends each iteration with torch.cuda.synchronize(); the GPU then
  /// waits while the CPU steps the learning-rate scheduler, copies the batch into the graph's
  /// three static inputs (copy_) and calls graph.replay(): one op gap, then four launched ops.
  Seconds iteration_start_time() const { return c_.cpu_op_gap + 4 * (c_.cpu_op_gap + LaunchModel{}.cpu_launch); }

  /// AMP's GradScaler unscales and reads its inf flag on the host, which a CUDA graph cannot hold.
  bool grad_scaler_outside_graph() const {
    return act_bytes_ < 4 && (!c_.cuda_graphs || c_.graph_forward_backward);
  }

  /// NVIDIA DLE's JointSparseEmbedding: a rank's tables (of one width) in one parameter, so its
  /// casts and sparse update are one op each however many lookup groups the tables form.
  bool joint_sparse(const std::vector<LookupGroup>& groups) const {
    return sparse_gradient() && !c_.torch_embedding_bag && !groups.empty() &&
           std::all_of(groups.begin(), groups.end(), [&](const LookupGroup& g) { return g.dim == groups.front().dim; });
  }

  /// NVIDIA DLE's main.py (validate_flags) resolves embedding_type custom_cuda to joint_fused in a
  /// single process with 26 tables of dimension 128, else to joint_sparse. joint_fused's gather
  /// (cuda_src/gather_gpu_fused.cu) adds the row offsets and casts to fp16 as it reads; its
  /// backward adds the offsets again and copies the gradient into fp32 values.
  bool joint_fused(const std::vector<LookupGroup>& groups) const {
    return joint_sparse(groups) && n_ == 1 && features() == 26 && groups.front().dim == 128;
  }

  /// A rank's bags (one per sample and table), lookups (one int64 index each) and rows, over
  /// its groups of one section or of all.
  struct LookupTotals {
    double bags = 0, lookups = 0, rows = 0;
  };
  static LookupTotals totals(const std::vector<LookupGroup>& groups, std::optional<std::size_t> section = {}) {
    LookupTotals t;
    for (const LookupGroup& g : groups) {
      if (section && g.section != *section) continue;
      t.bags += g.batch * g.tables;
      t.lookups += g.batch * g.tables * g.pooling;
      t.rows += g.tables * g.rows;
    }
    return t;
  }

  /// TorchRec's own ops around the lookups and exchanges (dlrm_torchrec_ops.hpp).
  bool torchrec_ops() const { return c_.torchrec_library; }
  /// Whether a section's exchange is an all-to-all of its tables' outputs (table- or column-wise,
  /// or any sequence section).
  bool all_to_all(std::size_t s) const {
    return sections_[s].sequence || sections_[s].kind == ShardingKind::table_wise ||
           sections_[s].kind == ShardingKind::column_wise;
  }
  /// Outputs per sample a section's exchange delivers to a rank: its tables' full widths.
  double section_values(std::size_t s) const {
    double values = 0;
    for (int t : sections_[s].tables) {
      const EmbeddingTable& table = c_.tables[static_cast<std::size_t>(t)].table;
      values += table.dim * (table.sequence ? table.pooling : 1);
    }
    return values;
  }

  /// KJTAllToAll's start (TrainPipelineSparseDist.start_sparse_data_dist): the batch's KJT
  /// permuted into the ranks' feature order, then per section three torch.tensor(list,
  /// device="cuda") of the split sizes (pageable copies the CPU waits for: upload) and their stack.
  void splits_prologue(RankBuilder& rank) const {
    double lookups = 0;
    for (const TableEntry& t : c_.tables) lookups += t.table.pooling;
    torchrec::kjt_permute(rank, kEmbeddingComm, "input_dist.permute", batch_ * features(), batch_ * lookups);
    for (std::size_t s = 0; s < sections_.size(); ++s) {
      if (!exchanges(s)) continue;
      for (const char* what : {"batch", "values", "stride"})
        rank.upload("embedding_comm", tag(s) + "input_dist.splits_" + what, 8.0 * n_);
      rank.kernel_on(kEmbeddingComm, tag(s) + "input_dist.splits_stack", pass_spec(3.0 * n_, 8, 8));
    }
  }

  /// Before a section's TBE call: the received KJT's dist_init (its permute to the tables' order
  /// and KJT.sync, the lengths' sum read by the host), then the TBE's prologue.
  void lookup_prologue(RankBuilder& rank, std::size_t s, const std::vector<LookupGroup>& groups) const {
    const LookupTotals t = totals(groups, s);
    if (t.bags == 0) return;
    if (c_.input_all_to_all && exchanges(s)) {
      torchrec::kjt_permute(rank, kCompute, tag(s) + "dist_init.permute", t.bags, t.lookups);
      rank.kernel(tag(s) + "dist_init.lengths_sum", pass_spec(t.bags, 4, 0));
      rank.stream_sync(kCompute, tag(s) + "dist_init.lengths_read");
    }
    torchrec::tbe_forward_prologue(rank, tag(s) + "tbe", t.bags, t.lookups);
  }

  /// After the pooled all-to-alls: All2All_Pooled_Wait's cat of each section's received pieces
  /// (one more across sections), then KeyedTensor.to_dict's cat over the features.
  void output_dist_epilogue(RankBuilder& rank, double b) const {
    int cats = 0;
    double values = 0;
    for (std::size_t s = 0; s < sections_.size(); ++s) {
      if (!exchanges(s) || !all_to_all(s)) continue;
      rank.kernel(tag(s) + "output_dist.cat", pass_spec(b * section_values(s), act_bytes_, act_bytes_));
      values += section_values(s);
      ++cats;
    }
    if (cats > 1) rank.kernel("output_dist.sections_cat", pass_spec(b * values, act_bytes_, act_bytes_));
    if (cats > 0) rank.kernel("output_dist.to_dict_cat", pass_spec(b * values, act_bytes_, act_bytes_));
  }

  /// Their backward before the all-to-alls: the to_dict split's cat, then per section the
  /// gradient's n pieces made contiguous and concatenated (All2All_Pooled_Wait.backward).
  void output_dist_backward_prologue(RankBuilder& rank, double b) const {
    double values = 0;
    for (std::size_t s = 0; s < sections_.size(); ++s)
      if (exchanges(s) && all_to_all(s)) values += section_values(s);
    if (values == 0) return;
    rank.kernel("output_dist.split_backward", pass_spec(b * values, act_bytes_, act_bytes_));
    for (std::size_t s = 0; s < sections_.size(); ++s) {
      if (!exchanges(s) || !all_to_all(s)) continue;
      for (int p = 0; p < n_; ++p)
        rank.kernel(tag(s) + "output_dist.grad_piece", pass_spec(b * section_values(s) / n_, act_bytes_, act_bytes_));
      rank.kernel(tag(s) + "output_dist.grad_cat", pass_spec(b * section_values(s), act_bytes_, act_bytes_));
    }
  }

  /// PyTorch DDP with gradients set to None each step: the reducer copies (scaled by 1/n) each
  /// parameter's gradient into its bucket view, one kernel per parameter.
  void ddp_copy_to_bucket(RankBuilder& rank, const std::string& layer, const Layer& l) const {
    if (!torchrec_ops() || n_ == 1) return;
    rank.kernel(layer + ".ddp_weight_to_bucket", pass_spec(static_cast<double>(l.in) * l.out, 4, 4));
    rank.kernel(layer + ".ddp_bias_to_bucket", pass_spec(l.out, 4, 4));
  }

  bool sparse_gradient() const {
    return c_.sparse_embedding_gradient && !has_kind(ShardingKind::data_parallel);
  }

  /// The optimizer steps. Inside the graph, or (graph_scope forward_backward, NVIDIA DLE's
  /// main.py) launched one by one afterwards: under AMP, GradScaler.step unscales the MLP
  /// gradients and reads their inf flag on the CPU (a device sync) before FusedSGD; then
  /// GradScaler.unscale_ and torch.optim.SGD treat the embeddings' sparse gradient (values
  /// scaled by -lr, then index_add into the rows).
  template <typename Suffix>
  void weight_update(int r, RankBuilder& rank, const std::vector<LookupGroup>& groups, double dense_params,
                     const Suffix& suffix) const {
    const bool eager = c_.graph_forward_backward;
    const bool scaler = grad_scaler_outside_graph();
    const auto launch = [&](const std::string& name, KernelSpec spec) {
      if (eager) rank.cpu(name + ".launch", c_.cpu_op_gap + LaunchModel{}.cpu_launch);
      rank.kernel(name, std::move(spec));
    };
    // GradScaler's one-element ops before each multi-tensor unscale, each a host op and a
    // kernel. NVIDIA DLE (PyTorch 1.10, torch/cuda/amp/grad_scaler.py): unscale_ computes
    // inv_scale = _scale.double().reciprocal().float() and found_inf = torch.full((1,), 0.0),
    // and _MultiDeviceReplicator copies both to the gradients' device. PyTorch 2.11 (the
    // harness's H100 trace, validation/measurements/h100-sxm/dlrm-amp.json.gz): two
    // torch.full for the fused dense step, reciprocal and torch.full for the sparse one.
    const auto unscale_prologue = [&](const std::string& who) {
      static const std::vector<std::string> dle = {"double",    "reciprocal",     "float",
                                                   "found_inf", "inv_scale_copy", "found_inf_copy"};
      const std::vector<std::string> torch2 =
          who == "mlp" ? std::vector<std::string>{"found_inf", "inv_scale"} : std::vector<std::string>{"reciprocal", "found_inf"};
      for (const std::string& op : c_.torch_embedding_bag ? torch2 : dle)
        launch("grad_scaler." + who + "." + op, pass_spec(1, 4, 4));
    };
    if (scaler) {
      unscale_prologue("mlp");
      launch("grad_scaler.unscale", multi_tensor(pass_spec(dense_params, 4, 4)));
      rank.device_sync("grad_scaler.found_inf");
    }
    launch("optimizer", optimizer_spec(dense_params));
    if (sparse_gradient()) {
      const auto values_of = [&](const LookupGroup& g) { return g.batch * g.tables * g.pooling * g.dim; };
      if (c_.torch_embedding_bag) {
        // GradScaler unscales every table's values in one multi-tensor pass; torch.optim.SGD then
        // adds each table's sparse gradient with index_add_(alpha = -lr). The harness's trace
        // reads one inf flag per iteration (the model's found_inf sync above).
        double values = 0;
        for (const LookupGroup& g : groups) values += values_of(g);
        if (scaler) {
          unscale_prologue("embedding");
          launch("embedding_grad_unscale", multi_tensor(pass_spec(values, 4, 4)));
        }
        for (std::size_t g = 0; g < groups.size(); ++g)
          for (double t = 0; t < groups[g].tables; ++t)
            launch("embedding_sgd" + suffix(g),
                   index_add_spec(groups[g].batch * groups[g].pooling, groups[g].dim, groups[g].hottest));
      } else {
        // NVIDIA DLE: scaler.unscale_(embedding_optimizer), then its step() without an inf check,
        // once for the rank's joint parameter (joint_sparse), else once per group.
        if (scaler) unscale_prologue("embedding");
        const auto update = [&](const std::string& tag, double values, double rows, int dim, double hottest) {
          if (scaler) {
            rank.cpu("grad_scaler.embedding.values" + tag, c_.cpu_op_gap);
            launch("embedding_grad_unscale" + tag, multi_tensor(pass_spec(values, 4, 4)));
          }
          // PyTorch 1.x's sparse add_ scaled the values by -lr first ("FIXME: at some point we can
          // wrap the scale into indexAdd"), then index_add_.
          launch("embedding_grad_scale_lr" + tag, pass_spec(values, 4, 4));
          launch("embedding_sgd" + tag, index_add_spec(rows, dim, hottest));
        };
        const auto rows_of = [&](const LookupGroup& g) { return g.batch * g.tables * g.pooling; };
        if (joint_sparse(groups)) {
          // One index_add over the joint parameter: its hottest row is the hottest of any table.
          double values = 0, rows = 0, hottest = 0;
          for (const LookupGroup& g : groups)
            values += values_of(g), rows += rows_of(g), hottest = std::max(hottest, g.hottest);
          update("", values, rows, groups.front().dim, hottest);
        } else {
          for (std::size_t g = 0; g < groups.size(); ++g)
            update(suffix(g), values_of(groups[g]), rows_of(groups[g]), groups[g].dim, groups[g].hottest);
        }
      }
    }
    if (scaler) {
      // GradScaler.update. PyTorch 1.10: each optimizer's found_inf moved to the scale's device
      // (no copy on one GPU, host ops only) and summed, then _amp_update_scale_ (the only op
      // of the update in the harness's PyTorch 2.11 trace).
      if (!c_.torch_embedding_bag) {
        for (const char* op : {"found_inf_to_mlp", "found_inf_to_embedding"})
          rank.cpu(std::string("grad_scaler.") + op, c_.cpu_op_gap);
        launch("grad_scaler.found_inf_sum", pass_spec(1, 8, 4));
      }
      launch("grad_scaler.update_scale", pass_spec(1, 12, 8));
    }
    if (eager) next_batch(r, groups, rank, launch);
  }

  /// The rest of NVIDIA DLE's loop (main.py, dlrm/data/utils.py prefetcher): `moving_loss +=
  /// loss`, then next(batch_iter) waits for the side stream, takes the next batch from the
  /// loader thread and copies each of its tensors to the GPU on a side stream (pageable memory, so
  /// each copy holds the CPU until it is done; one record_stream each; the dense features cast
  /// to fp32 there), then
  /// torch.cuda.synchronize(). A rank copies the labels of the global batch, its tables' int64
  /// indices for the global batch and, where the bottom MLP runs, the fp16 dense features.
  template <typename Launch>
  void next_batch(int r, const std::vector<LookupGroup>& groups, RankBuilder& rank, const Launch& launch) const {
    launch("moving_loss", pass_spec(1, 8, 4));
    if (c_.sync_each_step) rank.device_sync("step.synchronize");
    rank.cpu("prefetcher.wait_stream", c_.cpu_op_gap);
    rank.cpu("loader.next", c_.cpu_op_gap);
    const auto upload = [&](const std::string& name, Bytes bytes) {
      rank.cpu(name + ".launch", c_.cpu_op_gap + LaunchModel{}.cpu_launch);
      rank.upload("input", name, bytes);
      rank.cpu(name + ".record_stream", c_.cpu_op_gap);
    };
    upload("input.labels", c_.global_batch * 4.0);
    double indices = 0;
    for (const LookupGroup& g : groups) indices += g.batch * g.tables * g.pooling;
    if (indices > 0) upload("input.categorical", indices * 8);
    if (has_bottom(r)) {
      const double dense = bottom_batch() * c_.dense_features;
      upload("input.numerical", dense * 2);
      launch("input.numerical_cast", widening_cast(dense, 2, 4));
    }
    rank.device_sync("torch.cuda.synchronize");
  }

  /// The ReLU after a GEMM whose epilogue does not apply it (apex: with the bias add).
  void relu_forward(RankBuilder& rank, const std::string& layer, double elements) const {
    if (c_.mlp_epilogue != MlpEpilogue::fused) rank.kernel(layer + ".relu", pass_spec(elements, act_bytes_, act_bytes_));
  }
  /// Before a layer's GEMMs: the ReLU's gradient (output and its gradient read, input gradient
  /// written); apex's kernel also sums the bias gradient.
  // DCN v2's cross network as TorchRec's LowRankCrossNet runs it in eager PyTorch: x0 is the
  // concatenated bottom output and pooled embeddings (top_input() wide), and each layer l computes
  // x_{l+1} = x0 * (U (V x_l) + bias) + x_l: two GEMMs through the low rank r, then a bias add,
  // a product and a sum, each its own elementwise kernel. Wang et al. 2021, eq. 1 and section 5.2.
  template <typename Gemm>
  void cross_forward(RankBuilder& rank, const Gemm& gemm_op, double b) const {
    const double width = top_input(), r = c_.dcn_low_rank;
    rank.kernel("interaction.cat", pass_spec(b * width, act_bytes_, act_bytes_));
    for (int l = 0; l < c_.dcn_layers; ++l) {
      const std::string name = "interaction.cross" + std::to_string(l);
      gemm_op(name + ".v", Layout::nt, b, r, width);
      gemm_op(name + ".u", Layout::nt, b, width, r);
      rank.kernel(name + ".bias", pass_spec(b * width, act_bytes_, act_bytes_));
      rank.kernel(name + ".mul_x0", pass_spec(b * width, 2 * act_bytes_, act_bytes_));
      rank.kernel(name + ".residual", pass_spec(b * width, 2 * act_bytes_, act_bytes_));
    }
  }

  // Its backward, last layer first: the product's two input gradients (into U V x_l's and,
  // accumulated, into x0's), the bias gradient (a column sum), both GEMMs' input and weight
  // gradients, and the residual's sum into x_l's gradient; then x0's gradient gathers its last
  // term. Each layer's 2 d r + d parameters join DDP's buckets. Returns the parameters.
  template <typename Gemm>
  double cross_backward(RankBuilder& rank, const Gemm& gemm_op, double b, Buckets& buckets) const {
    const double width = top_input(), r = c_.dcn_low_rank;
    for (int l = c_.dcn_layers; l-- > 0;) {
      const std::string name = "interaction.cross" + std::to_string(l);
      rank.kernel(name + ".mul_x0.backward_input", pass_spec(b * width, 2 * act_bytes_, act_bytes_));
      rank.kernel(name + ".mul_x0.backward_x0", pass_spec(b * width, 3 * act_bytes_, act_bytes_));
      rank.kernel(name + ".bias_grad", KernelSpec{"column_sum", c_.dtype, {{"rows", b}, {"cols", width}}, {}});
      gemm_op(name + ".u.dgrad", Layout::nn, b, r, width);
      gemm_op(name + ".u.wgrad", Layout::tn, width, r, b);
      gemm_op(name + ".v.dgrad", Layout::nn, b, width, r);
      gemm_op(name + ".v.wgrad", Layout::tn, r, width, b);
      rank.kernel(name + ".residual.backward", pass_spec(b * width, 2 * act_bytes_, act_bytes_));
      if (torchrec_ops() && n_ > 1)  // DDP's copy of each of U, V and the bias into its bucket
        for (const double params : {width * r, r * width, width})
          rank.kernel(name + ".ddp_param_to_bucket", pass_spec(params, 4, 4));
      buckets.add((2 * width * r + width) * 4);
    }
    rank.kernel("interaction.x0_grad", pass_spec(b * width, 2 * act_bytes_, act_bytes_));
    return c_.dcn_layers * (2 * width * r + width);
  }

  void relu_backward(RankBuilder& rank, const std::string& layer, double rows, double cols) const {
    if (c_.mlp_epilogue == MlpEpilogue::torch)
      rank.kernel(layer + ".relu_backward", pass_spec(rows * cols, 2 * act_bytes_, act_bytes_));
    if (c_.mlp_epilogue == MlpEpilogue::apex)
      rank.kernel(layer + ".relu_backward",
                  KernelSpec{"apex_bias_backward", c_.dtype, {{"rows", rows}, {"cols", cols}, {"relu", 1}}, {}});
  }
  /// After a layer's GEMMs, nn.Linear's bias gradient: the output gradient summed over the batch
  /// (under apex only for the last top layer, DLE's plain nn.Linear `out`).
  void bias_grad(RankBuilder& rank, const std::string& layer, double rows, double cols, bool relu) const {
    if (c_.mlp_epilogue == MlpEpilogue::torch || (c_.mlp_epilogue == MlpEpilogue::apex && !relu))
      rank.kernel(layer + ".bias_grad", KernelSpec{"column_sum", c_.dtype, {{"rows", rows}, {"cols", cols}}, {}});
  }
  /// The sparse SGD step's index_add of `rows` gradient rows into the tables; `hottest`: the
  /// most of them that land on one row.
  KernelSpec index_add_spec(double rows, int dim, double hottest) const {
    return KernelSpec{"index_add", c_.embedding_dtype,
                      {{"rows", rows}, {"dim", static_cast<double>(dim)}, {"hottest_row_hits", hottest}}, {}};
  }
  /// An index_select of `rows` gradient rows of the tables' type (one per lookup).
  KernelSpec gather_spec(double rows, int dim) const {
    return KernelSpec{"gather", c_.embedding_dtype, {{"rows", rows}, {"dim", static_cast<double>(dim)}}, {}};
  }
  /// One table's nn.EmbeddingBag forward.
  KernelSpec torch_bag(const LookupGroup& g) const {
    return KernelSpec{"torch_embedding_bag", c_.embedding_dtype,
                      {{"batch", g.batch}, {"rows", g.rows}, {"dim", static_cast<double>(g.dim)},
                       {"pooling", g.pooling}},
                      {}};
  }

  /// One memory-bound pass over fp32 `elements` (a cast, copy, scale, unscale or SGD step).
  static KernelSpec pass_spec(double elements, double bytes_read, double bytes_written, double flops = 1) {
    return KernelSpec{"elementwise", Dtype::fp32,
                      {{"elements", elements}, {"bytes_read", bytes_read}, {"bytes_written", bytes_written},
                       {"flops", flops}},
                      {}};
  }

  /// A cast of `elements` to a wider type: PyTorch copies those with its unrolled,
  /// non-vectorized kernel (narrowing casts are vectorized; docs/fsdp.md).
  static KernelSpec widening_cast(double elements, double from_bytes, double to_bytes) {
    return strided(pass_spec(elements, from_bytes, to_bytes));
  }

  template <typename GemmOp>
  void bottom_backward(int r, const std::vector<Layer>& bottom, double bb, Buckets& buckets, double& dense_params,
                       const GemmOp& gemm_op, RankBuilder& rank) const {
    if (!has_bottom(r)) return;
    for (std::size_t i = bottom.size(); i-- > 0;) {
      const std::string layer = "bottom_mlp.fc" + std::to_string(i);
      relu_backward(rank, layer, bb, bottom[i].out);
      // The dense features need no gradient, so the first layer has no dgrad.
      if (i > 0) gemm_op(layer + ".dgrad", Layout::nn, bb, bottom[i].in, bottom[i].out);
      gemm_op(layer + ".wgrad", Layout::tn, bottom[i].out, bottom[i].in, bb);
      bias_grad(rank, layer, bb, bottom[i].out, true);
      cast_weight_grads(rank, layer, bottom[i]);
      if (!c_.bottom_on_rank0) ddp_copy_to_bucket(rank, layer, bottom[i]);
      const double params = static_cast<double>(bottom[i].in) * bottom[i].out + bottom[i].out;
      // On rank 0 alone (NVIDIA's placement) the bottom MLP is not replicated: no allreduce.
      if (!c_.bottom_on_rank0) buckets.add(params * 4);
      dense_params += params;
    }
  }

  // F.binary_cross_entropy_with_logits over the local samples as PyTorch 2 runs it
  // (aten/src/ATen/native/Loss.cpp: log_sigmoid(input), then (1 - target).mul_(input)
  // .sub_(log_sigmoid), then the mean), kernel by kernel as the harness's H100 trace shows it
  // (validation/measurements/h100-sxm/dlrm-eager-amp-8192.json.gz): under AMP the fp16 logits
  // are cast to fp32 first (autocast runs the loss in fp32) and GradScaler's scale multiplies the
  // loss. Backward: autograd's seed (ones_like), the scale's product, the loss's four elementwise
  // kernels (sigmoid, minus the target, times the gradient, over b) and the logits' gradient
  // cast back to fp16.
  void loss_forward(RankBuilder& rank, double b) const {
    if (act_bytes_ < 4) rank.kernel("loss.logits_to_fp32", widening_cast(b, act_bytes_, 4));
    rank.kernel("loss.log_sigmoid", pass_spec(b, 4, 8));  // the output and its buffer
    rank.kernel("loss.ones", pass_spec(b, 0, 4));
    rank.kernel("loss.one_minus_target", pass_spec(b, 8, 4));
    rank.kernel("loss.times_input", pass_spec(b, 8, 4));
    rank.kernel("loss.minus_log_sigmoid", pass_spec(b, 8, 4));
    rank.kernel("loss.mean", pass_spec(b, 4, 0));
    if (act_bytes_ < 4) rank.kernel("grad_scaler.scale", pass_spec(1, 8, 4));
  }
  void loss_backward(RankBuilder& rank, double b) const {
    rank.kernel("loss.grad_seed", pass_spec(1, 0, 4));
    if (act_bytes_ < 4) rank.kernel("grad_scaler.scale.backward", pass_spec(1, 8, 4));
    rank.kernel("loss.backward.sigmoid", pass_spec(b, 4, 4));
    rank.kernel("loss.backward.minus_target", pass_spec(b, 8, 4));
    rank.kernel("loss.backward.times_grad", pass_spec(b, 4, 4));
    rank.kernel("loss.backward.mean", pass_spec(b, 4, 4));
    if (act_bytes_ < 4) rank.kernel("loss.logits_grad_to_fp16", pass_spec(b, 4, act_bytes_));
  }

  /// PyTorch's nn.Linear under autocast (mlp_epilogue: torch with AMP): every forward casts the
  /// layer's fp32 weight and bias to fp16 (and the first layer its fp32 input), and backward
  /// casts their fp16 gradients back to fp32 (ToCopyBackward, a widening cast), as the
  /// harness's H100 trace shows: two copies per layer each way.
  bool autocast_casts() const { return act_bytes_ < 4 && c_.mlp_epilogue == MlpEpilogue::torch; }
  void cast_weights(RankBuilder& rank, const std::string& layer, const Layer& l) const {
    if (!autocast_casts()) return;
    rank.kernel(layer + ".weight_to_fp16", pass_spec(static_cast<double>(l.in) * l.out, 4, act_bytes_));
    rank.kernel(layer + ".bias_to_fp16", pass_spec(l.out, 4, act_bytes_));
  }
  void cast_weight_grads(RankBuilder& rank, const std::string& layer, const Layer& l) const {
    if (!autocast_casts()) return;
    rank.kernel(layer + ".weight_grad_to_fp32", widening_cast(static_cast<double>(l.in) * l.out, act_bytes_, 4));
    rank.kernel(layer + ".bias_grad_to_fp32", widening_cast(l.out, act_bytes_, 4));
  }
  /// The dense parameters' (fp32: AMP keeps fp32 master weights) fused multi-tensor step: SGD reads the weight and its gradient and
  /// writes the weight; Adagrad also reads and writes its accumulator, Adam both moments (fp32).
  KernelSpec optimizer_spec(double params) const {
    const double state = optimizer_state_bytes(c_.optimizer, 1);
    return multi_tensor(pass_spec(params, 8 + state, 4 + state, c_.optimizer == DlrmOptimizer::sgd ? 2 : 6));
  }

  void add_notes() {
    const std::optional<ShardingKind> kind = plan_.kind();
    std::string plan = "embeddings ";
    if (kind) {
      plan += to_string(*kind);
    } else {
      plan += c_.plan == "torchrec" ? "per table (TorchRec's planner):" : "per table (sharding.plan):";
      for (const Section& s : sections_)
        plan += fmt::format(" {}{} {}{}", s.tables.size(), s.sequence ? " sequence" : "", to_string(s.kind),
                            &s == &sections_.back() ? "" : ",");
      plan += ", each kind looked up and exchanged on its own";
    }
    if (kind == ShardingKind::table_wise) plan += " by planner " + plan_.planner;
    else if (find_node(doc_, "sharding.planner")) plan += " (sharding.planner unused: no whole tables)";
    if (c_.plan == "auto") plan += " (plan: auto picked it: " +
                                   std::string(kind == ShardingKind::table_wise ? "whole tables fit"
                                                                               : "whole tables do not fit") +
                                   ")";
    trace_.note(plan + "; per rank: " + describe_ranks());
    if (torchrec_ops())
      trace_.note("sharding.library torchrec: TorchRec's and FBGEMM's ops around the lookups and exchanges (KJT "
                  "permutes, blocking split-size copies and host reads of the splits and lengths, one TBE call per "
                  "section with its prologue and its backward's sort, the pooled all-to-all's fills, cats and "
                  "gradient pieces, DDP's copy of each parameter into its bucket; docs/dlrm.md)");
    const auto sequences = std::count_if(c_.tables.begin(), c_.tables.end(), [](const TableEntry& e) { return e.table.sequence; });
    if (sequences > 0)
      trace_.note(fmt::format("{} sequence table(s) (TorchRec's EmbeddingCollection): every lookup's row exchanged by "
                              "all-to-all whatever the sharding, then summed per sample before the interaction",
                              sequences));
    if (kind == ShardingKind::table_wise) trace_.note(describe_placement());
    else if (c_.plan == "torchrec") trace_.note(describe_table_plan());
    for (std::size_t s = 0; s < sections_.size(); ++s) {
      if (!exchanges(s) || (sections_[s].kind != ShardingKind::table_wise && sections_[s].kind != ShardingKind::column_wise))
        continue;
      const std::vector<Bytes> shares = a2a_shares(s);
      if (std::any_of(shares.begin(), shares.end(), [&](Bytes si) { return si != shares.front(); }))
        trace_.note("ranks send unequal pooled-embedding shares; " + std::string(sections_.size() > 1 ? "the " + tag(s) : "every ") +
                        "all-to-all uses Lin et al.'s \"max of max\" size " + mb(a2a_bytes(s)) +
                        " (n/(n-1) x the most bytes any rank sends or receives), so the busiest rank is timed");
    }
    if (has_kind(ShardingKind::row_wise))
      trace_.note("row-wise: every rank looks up its row block of every row-wise table for the whole batch; the "
                      "partial pooled sums are reduce-scattered forward and their gradients all-gathered backward");
    if (has_kind(ShardingKind::table_row_wise))
      trace_.note(fmt::format("table-row-wise (TorchRec's TwRw): the ranks of a table's node look up its row blocks for "
                              "the whole batch; the partial sums are reduce-scattered within the node, then exchanged "
                              "by an all-to-all among the {} ranks of each local index (the cross-node all-to-all "
                              "first, then the node's all-gather, backward)",
                              node_firsts_.size()));
    if (c_.bottom_on_rank0)
      trace_.note("bottom MLP on rank 0 over the global batch (NVIDIA DeepLearningExamples); its output joins "
                      "the all-to-all and its gradients are not allreduced");
    trace_.note(std::to_string(buckets_) + " DDP allreduce buckets of " + format_size(c_.ddp_bucket) +
                    " (fp32 gradients cut by bytes in reverse layer order; PyTorch's smaller first bucket and "
                    "parameter-boundary cuts are not modelled)");
    if (max_groups_ > 1)
      trace_.note("embedding lookups: one kernel per group of alike shards (up to " + std::to_string(max_groups_) +
                      " on a rank), where FBGEMM's table-batched kernel is one launch");
    if (c_.cuda_graphs)
      trace_.note(std::string("CUDA graphs: no CPU launch cost per kernel") +
                      (c_.graph_forward_backward
                           ? " of the forward and backward; the weight update runs after the graph, each kernel "
                             "launched by the CPU (" +
                                 fmt::format("{:.0f} us each: Lin et al.'s op gap T1 and launch call T4",
                                             (c_.cpu_op_gap + LaunchModel{}.cpu_launch) * 1e6) +
                                 ")" +
                                 (act_bytes_ < 4 ? ", after GradScaler's inf check syncs the CPU with the device" : "")
                           : "") +
                      "; the GPU-side gap between kernels stays Lin et al.'s 5 us (measured without graphs)");
    if (!c_.cuda_graphs)
      trace_.note(fmt::format("CPU: {:.0f} us before every launch (Lin et al.'s mean op gap T1) plus the launch "
                                  "model's cost",
                                  c_.cpu_op_gap * 1e6));
    const bool scaler = grad_scaler_outside_graph();
    if (sparse_gradient())
      trace_.note("embedding gradient: PyTorch's sparse COO gradient (one fp32 row per lookup), " +
                      std::string(c_.torch_embedding_bag ? "added by index_add_ with alpha -lr per table"
                                                         : "scaled by -lr and index_added into the rows") +
                      " by torch.optim.SGD (an atomic scatter-add at half the HBM roof)" +
                      std::string(scaler ? ", after GradScaler unscales it" : "") +
                      std::string(act_bytes_ < 4 ? "; the fp32 pooled rows and their gradient cast to and from fp16" : "") +
                      ", instead of one fused backward-and-update pass");
    if (c_.torch_embedding_bag)
      trace_.note("embedding lookups: PyTorch's nn.EmbeddingBag kernel, one launch per table, priced by its "
                      "dependent-load latency and the share of each table that misses L2 under uniform indices "
                      "(index_distribution is not used by this kernel model)");
    if (c_.mlp_epilogue != MlpEpilogue::fused)
      trace_.note(std::string("MLP layers: bias and ReLU as separate memory passes (") +
                      (c_.mlp_epilogue == MlpEpilogue::apex ? "NVIDIA apex MLP: bias+ReLU forward, ReLU gradient with "
                                                              "the bias reduction backward"
                                                            : "PyTorch nn.Linear + nn.ReLU: ReLU forward, ReLU gradient "
                                                              "and bias reduction backward") +
                      "; the bias reduction's last CTA adds its split's partial sums one after another, "
                      "which outweighs the bytes on a tall batch)");
    if (c_.interaction == "dot" && !c_.fused_interaction)
      trace_.note("dot interaction as PyTorch runs it: cat, bmm, index_select of the lower triangle and cat "
                      "forward; the index_select's index_add, both bmm gradients and their sums backward");
    if (c_.input_all_to_all && any_exchange()) {
      Bytes lengths = 0, indices = 0;
      for (std::size_t s = 0; s < sections_.size(); ++s)
        if (exchanges(s)) lengths += input_a2a_bytes(s, false), indices += input_a2a_bytes(s, true);
      trace_.note(fmt::format("input distribution: TorchRec's KJT all-to-alls of the splits ({}, read by the host), "
                              "lengths ({}) and int64 indices ({}{}) on the exchange's communicator, {}",
                              format_size(splits_a2a_bytes()), format_size(lengths), format_size(indices),
                              sections_.size() > 1 ? ", summed over the kinds' own all-to-alls" : "",
                              c_.pipelined ? "for the next batch (TrainPipelineSparseDist: the splits at the iteration's "
                                             "start, the rest after the forward; a later batch copied to the GPU from "
                                             "pinned memory meanwhile)"
                                           : "before the lookups, which wait for them"));
    }
    if (c_.optimizer != DlrmOptimizer::sgd || c_.embedding_optimizer != DlrmOptimizer::sgd)
      trace_.note(fmt::format("optimizers: {} for the MLPs (one fused multi-tensor step, fp32 state read and written), "
                              "{} for the tables (in FBGEMM's fused backward: each looked-up row's fp32 state read "
                              "and written beside it)",
                              to_string(c_.optimizer), to_string(c_.embedding_optimizer)));
    if (c_.interaction == "dcn_v2")
      trace_.note(fmt::format("DCN v2 interaction: {} low-rank cross layers (rank {}) over the {} concatenated values "
                              "of the bottom output and pooled embeddings, eager as TorchRec's LowRankCrossNet: two "
                              "GEMMs and three elementwise kernels per layer forward, four GEMMs, three elementwise "
                              "kernels and a bias reduction backward; {:.4g} parameters in DDP's buckets",
                              c_.dcn_layers, c_.dcn_low_rank, top_input(),
                              c_.dcn_layers * (2.0 * top_input() * c_.dcn_low_rank + top_input())));
    if (c_.interaction_pad_to > 1)
      trace_.note("interaction output zero-padded to a multiple of " + std::to_string(c_.interaction_pad_to) +
                      " values: the first top layer takes " + std::to_string(top_input()));
    if (c_.shared_process_group && n_ > 1)
      trace_.note("one process group: DDP's allreduces queue with the all-to-alls on the exchange's stream");
    if (c_.graph_forward_backward)
      trace_.note(fmt::format("each iteration starts after the previous one's device sync: {:.0f} us of CPU work "
                                  "(learning-rate scheduler, copies into the graph's inputs, graph launch); it ends "
                                  "with NVIDIA DLE's loop after the weight update: {}the loss sum, the next batch "
                                  "copied host-to-device (labels, int64 indices, dense features) and "
                                  "torch.cuda.synchronize",
                                  iteration_start_time() * 1e6,
                                  grad_scaler_outside_graph() ? "GradScaler's update, " : ""));
    if (c_.bottom_on_rank0 && any_exchange())
      trace_.note("NVIDIA DLE's exchange copies (one read and write each): a rank's vectors concatenated before the "
                      "all-to-all, the received ones after it, the gradient split into contiguous pieces before the "
                      "backward one");
    trace_.note(std::string("not modelled: ") +
                    (c_.input_all_to_all ? std::string()
                                         : "TorchRec's input all-to-all of indices (sharding.input_distribution: "
                                           "all_to_all adds it; NVIDIA's loader reads each GPU's indices directly), ") +
                    (scaler || act_bytes_ == 4 ? "AMP's casts of the MLP weights" : "AMP casts and loss scaling") +
                    (c_.graph_forward_backward ? ", the loader thread's reading of each batch" : ", the data loader and the host work between iterations"));
  }

  /// The rank of every table and each rank's embedding lookup bytes per iteration, in the
  /// fixed form tools/cli/rank_sharding.cpp reads ("placement: [...]; lookup bytes: [...]").
  std::string describe_placement() const {
    std::vector<int> rank_of(c_.tables.size());
    std::vector<double> lookup(static_cast<std::size_t>(n_), 0);
    for (int r = 0; r < n_; ++r)
      for (int t : plan_.tables_of_rank[static_cast<std::size_t>(r)]) {
        const EmbeddingTable& table = c_.tables[static_cast<std::size_t>(t)].table;
        rank_of[static_cast<std::size_t>(t)] = r;
        lookup[static_cast<std::size_t>(r)] += lookup_batch(t) * table.pooling * table.dim * table.element_bytes;
      }
    std::string ranks, bytes;
    for (std::size_t t = 0; t < rank_of.size(); ++t) ranks += (t ? "," : "") + std::to_string(rank_of[t]);
    for (std::size_t r = 0; r < lookup.size(); ++r) bytes += (r ? "," : "") + std::to_string(std::llround(lookup[r]));
    return "table placement (usable as sharding.placement): [" + ranks + "]; lookup bytes per rank: [" + bytes + "]";
  }

  /// Every table's sharding as a per-table sharding.plan would list it.
  std::string describe_table_plan() const {
    std::string out = "TorchRec's plan (usable as sharding.plan): [";
    for (std::size_t t = 0; t < plan_.tables.size(); ++t) {
      const TableSharding& s = plan_.tables[t];
      std::string ranks;
      for (int r : s.ranks) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      out += fmt::format("{}{{table: {}, type: {}, ranks: [{}]}}", t ? ", " : "", t, to_string(s.kind), ranks);
    }
    return out + "]";
  }

  std::string describe_ranks() const {
    const std::optional<ShardingKind> kind = plan_.kind();
    std::string out;
    for (int r = 0; r < n_; ++r) {
      if (n_ > 16 && r == 8) {
        out += ", ...";
        r = n_ - 4;
      }
      if (r > 0) out += ", ";
      out += std::to_string(r);
      const std::size_t held = plan_.tables_of_rank[static_cast<std::size_t>(r)].size();
      if (kind == ShardingKind::table_wise) out += ": " + std::to_string(held) + " tables ";
      else if (kind && held == c_.tables.size()) out += ": a shard of every table ";
      else out += ": " + std::to_string(held) + " tables or shards ";
      out += gb(plan_.bytes_of_rank[static_cast<std::size_t>(r)]);
    }
    return out;
  }

  const DlrmConfig& c_;
  const JobContext& job_;
  const int n_;
  const YamlReader& reader_;
  const YAML::Node& doc_;
  TraceBuilder trace_;
  ShardingPlan plan_;
  int batch_ = 0;
  std::vector<Section> sections_;
  std::vector<int> node_firsts_;                 // table_row_wise: the first rank of every node
  std::vector<std::vector<double>> histograms_;  // per table, for lookup_batch(t) samples
  std::vector<double> hottest_;                  // per table: lookups of its hottest row
  Bytes act_bytes_ = 4;
  int buckets_ = 0;
  std::size_t max_groups_ = 0;
};

class DlrmGenerator : public Generator {
 public:
  Trace generate(const YAML::Node& doc, const YamlReader& reader, const JobContext& job) const override {
    const DlrmConfig config = read_dlrm_config(doc, reader);
    // A dtype the GPU has no tensor cores for is refused, not priced at a fallback rate.
    if (const std::string why = models::unsupported_dtype(job.platform.gpu(), config.dtype); !why.empty())
      reader.fail_at(doc, "training.dtype",
                     fmt::format("{} math needs what the GPU lacks: {}", models::to_string(config.dtype), why),
                     "set training.dtype: fp16 (AMP) or fp32 on this GPU");
    return DlrmBuilder(config, job, reader.origin(), reader, doc).build();
  }
};

}  // namespace

STEPSIM_REGISTER_GENERATOR(DlrmGenerator, "dlrm",
                           "DLRM hybrid-parallel training: sharded embedding tables, data-parallel MLPs")

}  // namespace stepsim::workloads
