/// @file Reading the DLRM workload description (dlrm_config.hpp), and the expected index-reuse
/// histogram of Zipf-distributed lookups.
#include "workloads/generators/dlrm_config.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "platforms/config_error.hpp"

namespace stepsim::workloads {
namespace {

using models::Dtype;
using platforms::find_node;
using platforms::YamlReader;

/// `prefix` followed by `i`; built by appending, since GCC 12 warns (-Wrestrict, a false
/// positive) on `"literal" + std::to_string(i)` once it is inlined here.
std::string numbered(const char* prefix, std::size_t i) {
  std::string text = prefix;
  text += std::to_string(i);
  return text;
}

// ---------------------------------------------------------------- index reuse



const models::KernelModel& embedding_model() {
  return models::KernelModelRegistry::instance().get("embedding_forward", "the dlrm generator");
}

/// Reuse bin of a row looked up `count` >= 1 times (embedding.cpp: 1, 2, 3-4, 5-8, ...,
/// the last bin open).
std::size_t reuse_bin(double count, std::size_t bins) {
  const auto j = static_cast<std::size_t>(std::ceil(std::log2(count) - 1e-9));
  return std::min(j, bins - 1);
}

/// Adds to `mass` what `rows` rows, each looked up Binomial(lookups, p) times, contribute to
/// the expected count of unique rows per reuse bin. The pmf is summed over mean +- 12 sd,
/// which holds all but a negligible tail.
void add_binomial(std::vector<double>& mass, double rows, double lookups, double p) {
  if (p <= 0) return;
  if (p >= 1) {
    mass[reuse_bin(lookups, mass.size())] += rows;
    return;
  }
  const double mean = lookups * p, sd = std::sqrt(mean * (1 - p));
  const double first = std::max(1.0, std::floor(mean - 12 * sd - 5));
  const double last = std::min(lookups, std::ceil(mean + 12 * sd + 5));
  const double log_norm = std::lgamma(lookups + 1);
  for (double k = first; k <= last; ++k) {
    const double log_pmf = log_norm - std::lgamma(k + 1) - std::lgamma(lookups - k + 1) + k * std::log(p) +
                           (lookups - k) * std::log1p(-p);
    mass[reuse_bin(k, mass.size())] += rows * std::exp(log_pmf);
  }
}

/// Rows of a Zipf(alpha) law over `rows` rows, in buckets: the 1024 hottest one by one, colder
/// ones in geometric buckets of ratio 2^(1/32) priced at the bucket's mean of r^-alpha (the
/// integral over it), so a 40M-row table costs about a thousand terms.
struct ZipfBucket {
  double rows, weight;  // rows in the bucket and the mean of r^-alpha over them
};

std::vector<ZipfBucket> zipf_buckets(double rows, double alpha) {
  std::vector<ZipfBucket> buckets;
  const double exact = std::min(rows, 1024.0);
  for (double r = 1; r <= exact; ++r) buckets.push_back({1, std::pow(r, -alpha)});
  const auto integral = [alpha](double a, double b) {  // of x^-alpha from a to b
    return alpha == 1 ? std::log(b / a) : (std::pow(b, 1 - alpha) - std::pow(a, 1 - alpha)) / (1 - alpha);
  };
  for (double lo = exact + 1; lo <= rows;) {
    const double hi = std::min(rows + 1, std::max(lo + 1, std::floor(lo * std::exp2(1.0 / 32))));
    buckets.push_back({hi - lo, integral(lo - 0.5, hi - 0.5) / (hi - lo)});
    lo = hi;
  }
  return buckets;
}

double zipf_norm(const std::vector<ZipfBucket>& buckets) {
  double norm = 0;
  for (const ZipfBucket& b : buckets) norm += b.rows * b.weight;
  return norm;
}

/// Expected reuse histogram (fractions of the unique rows per bin) of `lookups` draws from a
/// Zipf(alpha) law over `rows` rows. Rows are independent binomials (exact for the marginals).
std::vector<double> zipf_reuse_histogram(double rows, double alpha, double lookups, std::size_t bins) {
  const std::vector<ZipfBucket> buckets = zipf_buckets(rows, alpha);
  const double norm = zipf_norm(buckets);
  std::vector<double> mass(bins, 0);
  for (const ZipfBucket& b : buckets) add_binomial(mass, b.rows, lookups, b.weight / norm);
  const double unique = std::accumulate(mass.begin(), mass.end(), 0.0);
  for (double& m : mass) m /= unique;
  return mass;
}

const std::vector<std::string> kPlans = {"table_wise", "row_wise", "column_wise", "data_parallel", "auto", "torchrec"};

class ConfigReader {
 public:
  ConfigReader(const YAML::Node& doc, const YamlReader& reader) : doc_(doc), r_(reader) {}

  DlrmConfig read() {
    r_.check_keys(doc_, "",
                  {"version", "kind", "description", "framework", "model", "training", "sharding", "index_distribution"});
    if (doc_["framework"]) apply_framework(r_.get_choice(doc_["framework"], "framework", {"dle", "torchrec"}));
    IndexDistribution distribution;
    if (doc_["index_distribution"]) distribution = read_distribution(doc_["index_distribution"], "index_distribution");
    read_model(r_.require(doc_, "", "model"), distribution);
    read_training(r_.require(doc_, "", "training"));
    if (doc_["sharding"]) read_sharding(doc_["sharding"]);
    check_framework_choices();
    const YAML::Node kernel = find_node(doc_, "model.embedding_kernel");
    if (c_.torch_embedding_bag && !c_.sparse_embedding_gradient)
      r_.fail("model.embedding_kernel", kernel,
              "embedding_kernel: torch trains nn.EmbeddingBag(sparse=True), whose gradient is sparse",
              "set training.embedding_gradient: sparse, or use embedding_kernel: fused");
    if (c_.torch_embedding_bag && c_.plan == "data_parallel")
      r_.fail("model.embedding_kernel", kernel, "embedding_kernel: torch models sharded tables, not replicated ones",
              "use embedding_kernel: fused, or another sharding.plan");
    // TorchRec's per-table plans run FBGEMM's fused kernels; PyTorch's own and DLE's sparse
    // gradients are modelled for one sharding type of sharded tables.
    // Without sharding.plan, framework: torchrec chose TorchRec's planner.
    const YAML::Node plan = find_node(doc_, "sharding.plan");
    if ((c_.plan == "per_table" || c_.plan == "torchrec") && !fused_kernels())
      fail_unfused(plan ? "sharding.plan" : "framework", plan ? plan : doc_["framework"],
                   std::string("a per-table plan") +
                       (c_.plan == "torchrec" ? " (TorchRec's planner)" : " of several sharding types") +
                       " is modelled with FBGEMM's fused kernels",
                   "one sharding type for every table");
    check_sequence_tables();
    if (c_.torchrec_library && !fused_kernels()) {
      const YAML::Node library = find_node(doc_, "sharding.library");
      fail_unfused(library ? "sharding.library" : "framework", library ? library : doc_["framework"],
                            "TorchRec's sharded modules run FBGEMM's fused TBE", "sharding.library: none");
    }
    return c_;
  }

  /// Whether the tables run FBGEMM's fused TBE (not PyTorch's nn.EmbeddingBag, not DLE's sparse
  /// gradient).
  bool fused_kernels() const { return !c_.torch_embedding_bag && !c_.sparse_embedding_gradient; }

  /// Fails at `path`: `what` is modelled on FBGEMM's fused TBE alone; names the key that chose
  /// otherwise, and `alternative` as the other fix.
  void fail_unfused(const std::string& path, const YAML::Node& node, const std::string& what,
                    const std::string& alternative) const {
    r_.fail(path, node,
            what + ", not " + (c_.torch_embedding_bag ? "model.embedding_kernel: torch" : "training.embedding_gradient: sparse"),
            "use model.embedding_kernel: fused and training.embedding_gradient: fused, or " + alternative);
  }

  /// Sequence tables are TorchRec's EmbeddingCollection: FBGEMM's fused kernels, an exchange of
  /// every lookup's row (sharded table-, column- or row-wise, or replicated), no DLE exchange.
  void check_sequence_tables() const {
    const auto sequence = std::find_if(c_.tables.begin(), c_.tables.end(), [](const TableEntry& e) { return e.table.sequence; });
    if (sequence == c_.tables.end()) return;
    const YAML::Node tables = find_node(doc_, "model.tables");
    const std::string which = "sequence table '" + sequence->table.name + "'";
    if (!fused_kernels())
      fail_unfused("model.tables", tables, which + " is TorchRec's EmbeddingCollection, modelled on FBGEMM's fused kernels",
                   "drop sequence");
    if (c_.bottom_on_rank0)
      r_.fail("model.tables", tables, which + ": NVIDIA DLE's exchange carries one pooled vector per table",
              "set sharding.bottom_mlp: data_parallel (or framework: torchrec), or drop sequence");
    for (std::size_t t = 0; t < c_.table_plan.size(); ++t)
      if (c_.tables[t].table.sequence && c_.table_plan[t].kind == ShardingKind::table_row_wise)
        r_.fail_at(doc_, "sharding.plan",
                   "table " + std::to_string(t) + " is a sequence table, which TorchRec does not shard table_row_wise",
                   "give it table_wise, row_wise, column_wise or data_parallel");
  }

 private:
  /// The defaults a framework's own code takes (docs/dlrm.md, "Frameworks"); keys given in the
  /// document override them. NVIDIA DLE: dlrm/scripts/main.py's defaults (optimized_mlp: apex's
  /// MLP; interaction_op cuda_dot: the fused dot kernel, padded to 8; the joint sparse embedding on
  /// several GPUs; hybrid parallel: the bottom MLP on GPU 0, its table placement, one process
  /// group). TorchRec: DistributedModelParallel's sharded EmbeddingBagCollection (FBGEMM's fused
  /// table-batched kernels and optimizer) on EmbeddingShardingPlanner's plan, KJT input
  /// distribution, TrainPipelineSparseDist, the DLRM model of torchrec/models/dlrm.py (nn.Linear +
  /// ReLU layers, torch.bmm interaction).
  void apply_framework(const std::string& framework) {
    c_.framework = framework;
    if (framework == "dle") {
      c_.fused_interaction = true;
      c_.interaction_pad_to = 8;
      c_.mlp_epilogue = MlpEpilogue::apex;
      c_.sparse_embedding_gradient = true;
      c_.bottom_on_rank0 = true;
      c_.planner = "nvidia_dle";
      c_.shared_process_group = true;
    } else {
      c_.mlp_epilogue = MlpEpilogue::torch;
      c_.input_all_to_all = true;
      c_.pipelined = true;
      c_.plan = "torchrec";  // DistributedModelParallel's plan from EmbeddingShardingPlanner
      c_.torchrec_library = true;
    }
  }

  /// Choices that need one another, whichever of the framework or the document made them.
  void check_framework_choices() const {
    const YAML::Node framework = doc_["framework"];
    const YAML::Node bottom = find_node(doc_, "sharding.bottom_mlp");
    if (c_.bottom_on_rank0 && c_.plan != "table_wise" && c_.plan != "column_wise") {
      const std::string lacking = ", whose output joins the one embedding all-to-all, which plan " + c_.plan +
                                  " does not have" + (c_.plan == "per_table" ? " (one exchange per sharding type)" : "");
      if (bottom)
        r_.fail("sharding.bottom_mlp", bottom, "bottom_mlp: rank0 puts the bottom MLP on rank 0" + lacking,
                "use plan: table_wise or column_wise, or bottom_mlp: data_parallel");
      r_.fail("framework", framework, "framework: dle puts the bottom MLP on rank 0" + lacking,
              "set sharding.bottom_mlp: data_parallel, or sharding.plan: table_wise or column_wise");
    }
    if (c_.pipelined && !c_.input_all_to_all) {
      const YAML::Node pipeline = find_node(doc_, "training.pipeline");
      r_.fail(pipeline ? "training.pipeline" : "framework", pipeline ? pipeline : framework,
              "TorchRec's sparse-dist pipeline overlaps the KJT input all-to-alls, which input_distribution: loader "
              "does not have",
              "set sharding.input_distribution: all_to_all, or training.pipeline: none");
    }
  }

  std::vector<int> read_widths(const YAML::Node& node, const std::string& path) const {
    if (!node.IsSequence() || node.size() == 0)
      r_.fail(path, node, "expected a non-empty list of layer widths", "write e.g. `" + path + ": [512, 256, 128]`");
    std::vector<int> widths;
    for (std::size_t i = 0; i < node.size(); ++i)
      widths.push_back(r_.get_int(node[i], path + "[" + std::to_string(i) + "]", 1));
    return widths;
  }

  // Row counts exceed int for industrial tables: read a number and require a whole one.
  double read_rows(const YAML::Node& node, const std::string& path) const {
    const double rows = r_.get_number(node, path);
    if (rows < 1 || rows != std::floor(rows))
      r_.fail(path, node, "rows must be a whole number >= 1, got " + node.Scalar(), "write the table's hash size, e.g. 40000000");
    if (rows > kMaxTableRows)
      r_.fail(path, node, fmt::format("{} rows is past the limit of {:.0e} rows per table", node.Scalar(), kMaxTableRows),
              "write the table's hash size, e.g. 40000000");
    return rows;
  }

  double read_pooling(const YAML::Node& node, const std::string& path) const {
    const double pooling = r_.get_number(node, path);
    if (!(pooling > 0))
      r_.fail(path, node, "pooling must be > 0, got " + node.Scalar(),
              "write the mean number of lookups per sample, e.g. 1 for one-hot features");
    return pooling;
  }

  IndexDistribution read_distribution(const YAML::Node& node, const std::string& path) const {
    r_.check_keys(node, path, {"kind", "alpha", "histogram"});
    IndexDistribution d;
    d.kind = node["kind"] ? r_.get_choice(node["kind"], path + ".kind", {"uniform", "zipf", "histogram"}) : "uniform";
    if (node["alpha"] && d.kind != "zipf")
      r_.fail(path + ".alpha", node["alpha"], "alpha applies only to kind: zipf", "remove alpha or write kind: zipf");
    if (node["histogram"] && d.kind != "histogram")
      r_.fail(path + ".histogram", node["histogram"], "a histogram applies only to kind: histogram",
              "remove histogram or write kind: histogram");
    if (d.kind == "zipf") {
      const YAML::Node alpha = r_.require(node, path, "alpha");
      d.alpha = r_.get_number(alpha, path + ".alpha");
      if (!(d.alpha > 0)) r_.fail(path + ".alpha", alpha, "alpha must be > 0", "write e.g. alpha: 1.05");
    }
    if (d.kind == "histogram") {
      const YAML::Node h = r_.require(node, path, "histogram");
      const std::size_t bins = embedding_model().histogram_bins();
      if (!h.IsSequence() || h.size() != bins)
        r_.fail(path + ".histogram", h, "expected a list of " + std::to_string(bins) + " fractions",
                "write the " + embedding_model().histogram_meaning());
      double sum = 0;
      for (std::size_t i = 0; i < bins; ++i) {
        d.histogram.push_back(r_.get_number(h[i], path + ".histogram[" + std::to_string(i) + "]"));
        sum += d.histogram.back();
      }
      if (std::abs(sum - 1) > 1e-3)
        r_.fail(path + ".histogram", h, "the fractions add up to " + std::to_string(sum) + ", not 1",
                "normalise the histogram so that its bins sum to 1");
    }
    return d;
  }

  // DCN v2's cross network (Wang et al. 2021, "DCN V2", eq. 1 with the low-rank W = U V of its
  // section 5.2; TorchRec's LowRankCrossNet): `layers` and `low_rank` are the model's, stated.
  void read_dcn(const YAML::Node& m) {
    const YAML::Node dcn = m["dcn"];
    if (c_.interaction != "dcn_v2") {
      if (dcn)
        r_.fail("model.dcn", dcn, "model.dcn configures interaction: dcn_v2",
                "add interaction: dcn_v2, or drop the dcn: section");
      return;
    }
    if (!dcn || !dcn.IsMap())
      r_.fail("model.dcn", dcn ? dcn : m["interaction"], "interaction: dcn_v2 needs its cross network's shape",
              "add dcn: {layers: 3, low_rank: 512} (MLPerf DLRM-DCNv2's)");
    r_.check_keys(dcn, "model.dcn", {"layers", "low_rank"});
    c_.dcn_layers = r_.get_int(r_.require(dcn, "model.dcn", "layers"), "model.dcn.layers", 1);
    c_.dcn_low_rank = r_.get_int(r_.require(dcn, "model.dcn", "low_rank"), "model.dcn.low_rank", 1);
    // Stated limits, far above published cross networks (DCN V2: 1-4 layers, ranks up to 512).
    if (c_.dcn_layers > 64)
      r_.fail("model.dcn.layers", dcn["layers"], "at most 64 cross layers are modelled", "write e.g. layers: 3");
    if (c_.dcn_low_rank > 65536)
      r_.fail("model.dcn.low_rank", dcn["low_rank"], "a rank of at most 65536 is modelled", "write e.g. low_rank: 512");
  }

  void read_model(const YAML::Node& m, const IndexDistribution& distribution) {
    r_.check_keys(m, "model",
                  {"dense_features", "bottom_mlp", "top_mlp", "embedding_dim", "interaction", "interaction_kernel",
                   "interaction_pad_to", "mlp_epilogue", "embedding_kernel", "tables", "dcn"});
    c_.dense_features = r_.get_int(r_.require(m, "model", "dense_features"), "model.dense_features", 1);
    c_.bottom_mlp = read_widths(r_.require(m, "model", "bottom_mlp"), "model.bottom_mlp");
    c_.top_mlp = read_widths(r_.require(m, "model", "top_mlp"), "model.top_mlp");
    const YAML::Node dim = r_.require(m, "model", "embedding_dim");
    c_.embedding_dim = r_.get_int(dim, "model.embedding_dim", 1);
    if (m["interaction"]) c_.interaction = r_.get_choice(m["interaction"], "model.interaction", {"dot", "cat", "dcn_v2"});
    read_dcn(m);
    // How the dot interaction runs: a batched GEMM (torch.bmm), or one fused kernel.
    if (m["interaction_kernel"]) {
      c_.fused_interaction =
          r_.get_choice(m["interaction_kernel"], "model.interaction_kernel", {"gemm", "fused"}) == "fused";
      if (c_.interaction != "dot")
        r_.fail("model.interaction_kernel", m["interaction_kernel"], "interaction_kernel applies to interaction: dot",
                "drop interaction_kernel, or use interaction: dot");
    }
    // NVIDIA DLE zero-pads the dot interaction's output to a multiple of 8 values (dlrm/nn/
    // interactions.py padding_size), which keeps the first top layer's GEMM on aligned kernels.
    if (m["interaction_pad_to"]) {
      c_.interaction_pad_to = r_.get_int(m["interaction_pad_to"], "model.interaction_pad_to", 1);
      if (c_.interaction != "dot")
        r_.fail("model.interaction_pad_to", m["interaction_pad_to"], "interaction_pad_to applies to interaction: dot",
                "drop interaction_pad_to, or use interaction: dot");
    }
    // Where a linear layer's bias and ReLU go: into the GEMM (cuBLASLt epilogues), or separate
    // memory-bound kernels as NVIDIA apex's MLP and PyTorch's nn.Linear + nn.ReLU launch them.
    if (m["mlp_epilogue"]) {
      const std::string e = r_.get_choice(m["mlp_epilogue"], "model.mlp_epilogue", {"fused", "apex", "torch"});
      c_.mlp_epilogue = e == "apex" ? MlpEpilogue::apex : e == "torch" ? MlpEpilogue::torch : MlpEpilogue::fused;
    }
    // Which lookup kernel: a table-batched fused one (FBGEMM, NVIDIA DLE), or PyTorch's own
    // EmbeddingBag, one launch per table.
    if (m["embedding_kernel"])
      c_.torch_embedding_bag =
          r_.get_choice(m["embedding_kernel"], "model.embedding_kernel", {"fused", "torch"}) == "torch";
    read_tables(r_.require(m, "model", "tables"), distribution);
    // Dot products need one width: the bottom MLP's output is one of the interacting vectors.
    if (c_.interaction == "dot") {
      if (c_.bottom_mlp.back() != c_.embedding_dim)
        r_.fail("model.bottom_mlp", m["bottom_mlp"],
                "the dot interaction needs the bottom MLP to end in embedding_dim (" + std::to_string(c_.embedding_dim) +
                    "), it ends in " + std::to_string(c_.bottom_mlp.back()),
                "make the last bottom_mlp width " + std::to_string(c_.embedding_dim) + ", or use interaction: cat");
      for (const TableEntry& t : c_.tables)
        if (t.table.dim != c_.embedding_dim)
          r_.fail("model.tables", m["tables"],
                  "table '" + t.table.name + "' has dim " + std::to_string(t.table.dim) +
                      " but the dot interaction needs every table at embedding_dim " + std::to_string(c_.embedding_dim),
                  "drop the per-table dim, or use interaction: cat");
    }
  }

  // Two forms: a map {rows: [...], dim, pooling, sequence} for tables that differ only in rows,
  // or a list of per-table maps {name, rows, dim, pooling, sequence, count, index_distribution}.
  void read_tables(const YAML::Node& node, const IndexDistribution& distribution) {
    const std::string path = "model.tables";
    if (node.IsMap()) {
      r_.check_keys(node, path, {"rows", "dim", "pooling", "sequence"});
      const bool sequence = node["sequence"] && r_.get_bool(node["sequence"], path + ".sequence");
      const YAML::Node rows = r_.require(node, path, "rows");
      if (!rows.IsSequence() || rows.size() == 0)
        r_.fail(path + ".rows", rows, "expected a non-empty list of row counts, one per table",
                "write e.g. `rows: [40000000, 39060, 17295]`");
      const int dim = node["dim"] ? r_.get_int(node["dim"], path + ".dim", 1) : c_.embedding_dim;
      const YAML::Node pooling = node["pooling"];
      if (pooling && pooling.IsSequence() && pooling.size() != rows.size())
        r_.fail(path + ".pooling", pooling,
                "lists " + std::to_string(pooling.size()) + " pooling factors for " + std::to_string(rows.size()) +
                    " tables",
                "give one pooling factor per table, or a single number for all");
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const std::string at = numbered("[", i) + "]";
        TableEntry t{{numbered("t", i), read_rows(rows[i], path + ".rows" + at), dim, 1, 0}, distribution};
        if (pooling)
          t.table.pooling = pooling.IsSequence() ? read_pooling(pooling[i], path + ".pooling" + at)
                                                 : read_pooling(pooling, path + ".pooling");
        t.table.sequence = sequence;
        c_.tables.push_back(t);
      }
      return;
    }
    if (!node.IsSequence() || node.size() == 0)
      r_.fail(path, node, "expected a list of tables or a map with a rows list",
              "write `tables: {rows: [...], pooling: 1}` or `tables: [{rows: 1000, pooling: 20}, ...]`");
    for (std::size_t i = 0; i < node.size(); ++i) {
      const std::string at = path + "[" + std::to_string(i) + "]";
      const YAML::Node entry = node[i];
      r_.check_keys(entry, at, {"name", "rows", "dim", "pooling", "sequence", "count", "index_distribution"});
      TableEntry t{{"", read_rows(r_.require(entry, at, "rows"), at + ".rows"),
                    entry["dim"] ? r_.get_int(entry["dim"], at + ".dim", 1) : c_.embedding_dim,
                    entry["pooling"] ? read_pooling(entry["pooling"], at + ".pooling") : 1.0, 0},
                   entry["index_distribution"] ? read_distribution(entry["index_distribution"], at + ".index_distribution")
                                               : distribution};
      t.table.sequence = entry["sequence"] && r_.get_bool(entry["sequence"], at + ".sequence");
      const std::string name = entry["name"] ? r_.get_string(entry["name"], at + ".name") : numbered("t", i);
      const int count = entry["count"] ? r_.get_int(entry["count"], at + ".count", 1, kMaxTables) : 1;
      if (c_.tables.size() + count > static_cast<std::size_t>(kMaxTables))
        r_.fail(at + ".count", entry["count"], "more than " + std::to_string(kMaxTables) + " tables in all",
                "stepsim's limit; model fewer, larger tables");
      for (int k = 0; k < count; ++k) {
        t.table.name = count == 1 ? name : name + "." + std::to_string(k);
        c_.tables.push_back(t);
      }
    }
  }

  // training.optimizer (the MLPs', and the tables' unless training.embedding_optimizer names
  // theirs): SGD (both references), Adagrad, Adam, or for tables FBGEMM's row-wise Adagrad.
  void read_optimizers(const YAML::Node& t, const std::string& path) {
    const auto read = [&](const char* key) {
      const std::string name =
          r_.get_choice(t[key], path + "." + key, {"sgd", "adagrad", "rowwise_adagrad", "adam"});
      return name == "adagrad"           ? DlrmOptimizer::adagrad
             : name == "rowwise_adagrad" ? DlrmOptimizer::rowwise_adagrad
             : name == "adam"            ? DlrmOptimizer::adam
                                         : DlrmOptimizer::sgd;
    };
    if (t["optimizer"]) {
      c_.optimizer = read("optimizer");
      if (c_.optimizer == DlrmOptimizer::rowwise_adagrad)
        r_.fail(path + ".optimizer", t["optimizer"], "row-wise Adagrad is FBGEMM's, for embedding tables only",
                "set training.embedding_optimizer: rowwise_adagrad and training.optimizer: adagrad (or sgd, adam) "
                "for the MLPs");
      c_.embedding_optimizer = c_.optimizer;
    }
    if (t["embedding_optimizer"]) c_.embedding_optimizer = read("embedding_optimizer");
  }

  void read_training(const YAML::Node& t) {
    const std::string path = "training";
    r_.check_keys(t, path, {"global_batch", "dtype", "embedding_dtype", "optimizer", "embedding_optimizer", "cuda_graphs", "graph_scope",
                            "sync_each_step", "embedding_gradient", "cpu_op_gap", "ddp_bucket", "pipeline"});
    if (t["pipeline"])
      c_.pipelined = r_.get_choice(t["pipeline"], path + ".pipeline", {"none", "sparse_dist"}) == "sparse_dist";
    c_.global_batch = r_.get_int(r_.require(t, path, "global_batch"), path + ".global_batch", 1);
    if (t["dtype"])
      c_.dtype = models::parse_dtype(r_.get_choice(t["dtype"], path + ".dtype", {"fp32", "tf32", "fp16", "bf16"}),
                                     r_.where(path + ".dtype", t["dtype"]));
    if (t["embedding_dtype"])
      c_.embedding_dtype = models::parse_dtype(
          r_.get_choice(t["embedding_dtype"], path + ".embedding_dtype", {"fp32", "fp16", "bf16"}),
          r_.where(path + ".embedding_dtype", t["embedding_dtype"]));
    read_optimizers(t, path);
    if (t["cuda_graphs"]) c_.cuda_graphs = r_.get_bool(t["cuda_graphs"], path + ".cuda_graphs");
    // What the graph holds: the whole iteration, or (NVIDIA DLE's CudaGraphWrapper) forward and
    // backward only, the weight update then launched kernel by kernel.
    if (t["graph_scope"]) {
      c_.graph_forward_backward =
          r_.get_choice(t["graph_scope"], path + ".graph_scope", {"iteration", "forward_backward"}) == "forward_backward";
      if (!c_.cuda_graphs)
        r_.fail(path + ".graph_scope", t["graph_scope"], "graph_scope needs cuda_graphs: true",
                "set training.cuda_graphs: true, or drop graph_scope");
    }
    // A benchmark loop that synchronizes the device between the steps it times (the harness's
    // torch_runtime.time_steps) before the loop's next(batch_iter), so the prefetch copies cannot
    // overlap the previous step's weight update as they do in DLE's own loop.
    if (t["sync_each_step"]) {
      c_.sync_each_step = r_.get_bool(t["sync_each_step"], path + ".sync_each_step");
      if (c_.sync_each_step && !c_.graph_forward_backward)
        r_.fail(path + ".sync_each_step", t["sync_each_step"],
                "sync_each_step applies to NVIDIA DLE's loop, whose next(batch_iter) follows the graph",
                "set training.graph_scope: forward_backward, or drop sync_each_step");
    }
    if (t["cpu_op_gap"]) c_.cpu_op_gap = r_.get_duration(t["cpu_op_gap"], path + ".cpu_op_gap");
    // How the embeddings' gradient reaches their rows: one fused backward-and-SGD pass (FBGEMM,
    // TorchRec), or PyTorch's sparse COO gradient that the optimizer applies (DLE joint_sparse).
    if (t["embedding_gradient"])
      c_.sparse_embedding_gradient =
          r_.get_choice(t["embedding_gradient"], path + ".embedding_gradient", {"fused", "sparse"}) == "sparse";
    if (c_.sparse_embedding_gradient && c_.embedding_optimizer != DlrmOptimizer::sgd)
      r_.fail(path + ".embedding_optimizer", t["embedding_optimizer"] ? t["embedding_optimizer"] : t["optimizer"],
              std::string("PyTorch's sparse ") + to_string(c_.embedding_optimizer) +
                  " (a coalescing sort of the gradient's rows, then gathers and scatters of its state) is not modelled",
              "use training.embedding_gradient: fused (FBGEMM applies the optimizer in its backward), or "
              "embedding_optimizer: sgd");
    if (t["ddp_bucket"]) {
      c_.ddp_bucket = r_.get_size(t["ddp_bucket"], path + ".ddp_bucket");
      if (!(c_.ddp_bucket > 0))
        r_.fail(path + ".ddp_bucket", t["ddp_bucket"], "the bucket size must be > 0", "write e.g. 25MiB (PyTorch's default)");
    }
    // What a table takes on its GPUs: its values and its optimizer's fp32 state (the planners
    // and the memory check place both).
    for (TableEntry& e : c_.tables) {
      e.table.element_bytes = models::bytes_of(c_.embedding_dtype);
      const bool per_row = c_.embedding_optimizer == DlrmOptimizer::rowwise_adagrad;
      e.table.state_per_value = per_row ? 0 : optimizer_state_bytes(c_.embedding_optimizer, 1);
      e.table.state_per_row = per_row ? optimizer_state_bytes(c_.embedding_optimizer, 1) : 0;
    }
  }

  void read_sharding(const YAML::Node& s) {
    const std::string path = "sharding";
    r_.check_keys(s, path,
                  {"plan", "planner", "seed", "placement", "bottom_mlp", "process_groups", "memory_reserve",
                   "input_distribution", "torchrec_topology", "library"});
    if (s["plan"] && s["plan"].IsSequence())
      read_table_plans(s["plan"], path + ".plan", s["placement"]);
    else if (s["plan"])
      c_.plan = r_.get_choice(s["plan"], path + ".plan", kPlans);
    std::vector<std::string> planners;
    for (const PlannerInfo& p : sharding_planners()) planners.push_back(p.name);
    // Checked whatever the plan, used only where whole tables are placed (a sweep over
    // `sharding.plan` keeps one planner); the notes say when it is unused.
    if (s["planner"]) c_.planner = r_.get_choice(s["planner"], path + ".planner", planners);
    if (s["seed"]) c_.seed = static_cast<std::uint64_t>(r_.get_int(s["seed"], path + ".seed", 0));
    if (s["bottom_mlp"]) {
      c_.bottom_on_rank0 = r_.get_choice(s["bottom_mlp"], path + ".bottom_mlp", {"data_parallel", "rank0"}) == "rank0";
    }
    // Whether the exchange and DDP's allreduce have communicators of their own (TorchRec), or share
    // the default group (NVIDIA DLE: all_to_all_single and apex DDP on one communicator, whose
    // operations run one after another in the order they were issued).
    if (s["process_groups"])
      c_.shared_process_group =
          r_.get_choice(s["process_groups"], path + ".process_groups", {"separate", "shared"}) == "shared";
    if (s["memory_reserve"]) c_.memory_reserve = r_.get_size(s["memory_reserve"], path + ".memory_reserve");
    // What TorchRec's planner believes of the hardware: Topology's defaults, as dlrm_main.py
    // builds it (world sizes only), or the platform's own figures.
    // Whose ops run around the lookups and exchanges: TorchRec's sharded modules (KJT permutes,
    // split sizes, the TBE's prologue and sort, the pooled all-to-all's copies), or none modelled.
    if (s["library"])
      c_.torchrec_library = r_.get_choice(s["library"], path + ".library", {"none", "torchrec"}) == "torchrec";
    if (s["torchrec_topology"])
      c_.torchrec_platform_topology =
          r_.get_choice(s["torchrec_topology"], path + ".torchrec_topology", {"defaults", "platform"}) == "platform";
    // How a rank's tables get their indices: from the loader, for every sample (NVIDIA DLE reads
    // each GPU's indices directly), or by TorchRec's KJT all-to-all of each rank's local batch.
    if (s["input_distribution"])
      c_.input_all_to_all = r_.get_choice(s["input_distribution"], path + ".input_distribution",
                                          {"loader", "all_to_all"}) == "all_to_all";
    if (s["placement"]) read_placement(s["placement"], path + ".placement");
  }

  /// A plan listed per table as TorchRec prints one: `[{table: I, type: table_wise, ranks: [r]},
  /// ...]`, every table once. A plan of whole tables only becomes the placement; any other is
  /// kept per table (`ranks` may be left out for row_wise and data_parallel: every rank), and its
  /// ranks are checked against the job by plan_sharding.
  void read_table_plans(const YAML::Node& list, const std::string& path, const YAML::Node& placement) {
    if (placement)
      r_.fail(path, list, "a per-table plan already places every table", "drop sharding.placement");
    std::vector<std::string> names;
    for (ShardingKind kind : sharding_kinds()) names.push_back(to_string(kind));
    std::vector<std::optional<TableSharding>> plan(c_.tables.size());
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string at = path + "[" + std::to_string(i) + "]";
      const YAML::Node entry = list[i];
      if (!entry.IsMap()) r_.fail(at, entry, "expected {table, type, ranks}", "write e.g. {table: 0, type: table_wise, ranks: [1]}");
      r_.check_keys(entry, at, {"table", "type", "ranks"});
      const int table = r_.get_int(r_.require(entry, at, "table"), at + ".table", 0);
      if (table >= static_cast<int>(c_.tables.size()))
        r_.fail(at + ".table", entry["table"],
                "table " + std::to_string(table) + " is not one of the model's " + std::to_string(c_.tables.size()),
                "number tables from 0 in model.tables order");
      if (plan[static_cast<std::size_t>(table)])
        r_.fail(at + ".table", entry["table"], "table " + std::to_string(table) + " is planned twice",
                "list every table once");
      TableSharding sharding;
      sharding.kind = *sharding_kind(r_.get_choice(r_.require(entry, at, "type"), at + ".type", names));
      const bool spans_job = sharding.kind == ShardingKind::row_wise || sharding.kind == ShardingKind::data_parallel;
      const YAML::Node ranks = spans_job ? entry["ranks"] : r_.require(entry, at, "ranks");
      if (ranks && (!ranks.IsSequence() || ranks.size() == 0))
        r_.fail(at + ".ranks", ranks, "expected a non-empty list of ranks", "write e.g. ranks: [0, 1]");
      for (std::size_t k = 0; ranks && k < ranks.size(); ++k)
        sharding.ranks.push_back(r_.get_int(ranks[k], at + ".ranks[" + std::to_string(k) + "]", 0));
      if (sharding.kind == ShardingKind::table_wise && sharding.ranks.size() != 1)
        r_.fail(at + ".ranks", ranks, "a table_wise table lives on exactly one rank", "write e.g. ranks: [1]");
      plan[static_cast<std::size_t>(table)] = sharding;
    }
    for (std::size_t t = 0; t < plan.size(); ++t)
      if (!plan[t])
        r_.fail(path, list, "table " + std::to_string(t) + " (" + c_.tables[t].table.name + ") is not planned",
                "add {table: " + std::to_string(t) + ", type: table_wise, ranks: [R]}");
    const bool whole = std::all_of(plan.begin(), plan.end(), [](const auto& p) { return p->kind == ShardingKind::table_wise; });
    for (const auto& p : plan) {
      if (whole) c_.placement.push_back(p->ranks.front());
      else c_.table_plan.push_back(*p);
    }
    c_.plan = whole ? "table_wise" : "per_table";
  }

  /// A YAML list of ranks, or (as `-p workload.sharding.placement=[0,1,1,0]` sets it) one
  /// string of comma-separated ranks, optionally in brackets. Ranks are checked against the
  /// job by plan_sharding.
  void read_placement(const YAML::Node& node, const std::string& path) {
    const std::string fix = "give one rank per table in model.tables order, e.g. placement: [0, 1, 1, 0]";
    if (node.IsSequence()) {
      for (std::size_t i = 0; i < node.size(); ++i)
        c_.placement.push_back(r_.get_int(node[i], path + "[" + std::to_string(i) + "]", 0));
    } else if (node.IsScalar()) {
      std::string text = node.Scalar();
      if (text.size() >= 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
      std::stringstream in(text);
      for (std::string item; std::getline(in, item, ',');) {
        try {
          std::size_t used = 0;
          const int rank = std::stoi(item, &used);
          if (item.find_first_not_of(" ", used) != std::string::npos || rank < 0) throw std::invalid_argument(item);
          c_.placement.push_back(rank);
        } catch (const std::exception&) {
          r_.fail(path, node, "'" + item + "' is not a rank (a whole number >= 0)", fix);
        }
      }
    } else {
      r_.fail(path, node, "expected a list of ranks", fix);
    }
    if (c_.placement.size() != c_.tables.size())
      r_.fail(path, node,
              std::to_string(c_.placement.size()) + " ranks for " + std::to_string(c_.tables.size()) + " tables",
              fix);
    if (c_.plan != "table_wise")
      r_.fail(path, node, "a placement puts whole tables on ranks, but the plan is " + c_.plan,
              "use plan: table_wise, or drop the placement");
  }

  const YAML::Node& doc_;
  const YamlReader& r_;
  DlrmConfig c_;
};

}  // namespace

const char* to_string(DlrmOptimizer o) {
  switch (o) {
    case DlrmOptimizer::sgd: return "SGD";
    case DlrmOptimizer::adagrad: return "Adagrad";
    case DlrmOptimizer::rowwise_adagrad: return "row-wise Adagrad";
    case DlrmOptimizer::adam: return "Adam";
  }
  return "?";
}

double optimizer_state_bytes(DlrmOptimizer o, int dim) {
  switch (o) {
    case DlrmOptimizer::sgd: return 0;
    case DlrmOptimizer::adagrad: return 4.0 * dim;             // the squared gradients' sum
    case DlrmOptimizer::rowwise_adagrad: return 4;             // their mean over the row
    case DlrmOptimizer::adam: return 8.0 * dim;                // first and second moments
  }
  return 0;
}

DlrmConfig read_dlrm_config(const YAML::Node& doc, const YamlReader& reader) { return ConfigReader(doc, reader).read(); }

/// The histogram an embedding kernel gets for a table: empty for uniform indices (the model's
/// own hit rate), computed for Zipf, as given otherwise.
std::vector<double> reuse_histogram(const IndexDistribution& d, double rows, double lookups) {
  if (d.kind == "zipf") return zipf_reuse_histogram(rows, d.alpha, lookups, embedding_model().histogram_bins());
  return d.histogram;
}

/// Lookups of the hottest row: its expected share of the draws for uniform and Zipf indices; for
/// a given histogram, the least count of its highest occupied bin (bin j holds counts in
/// (2^(j-1), 2^j]), which is what that histogram guarantees.
double hottest_row_lookups(const IndexDistribution& d, double rows, double lookups) {
  if (d.kind == "zipf") return lookups / zipf_norm(zipf_buckets(rows, d.alpha));
  if (d.kind == "histogram") {
    for (std::size_t j = d.histogram.size(); j-- > 0;)
      if (d.histogram[j] > 0) return j == 0 ? 1 : std::exp2(static_cast<double>(j) - 1) + 1;
    return 1;
  }
  return lookups / rows;
}

}  // namespace stepsim::workloads
