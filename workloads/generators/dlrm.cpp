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
#include <sstream>

#include <fmt/format.h>

#include "platforms/config_error.hpp"
#include "workloads/generators/dlrm_sharding.hpp"
#include "workloads/workload.hpp"

namespace stepsim::workloads {
namespace {

using models::Dtype;
using models::KernelSpec;
using platforms::YamlReader;

constexpr int kCompute = 0;         // kernels
constexpr int kEmbeddingComm = 1;   // the all-to-all / reduce-scatter / all-gather of pooled embeddings
constexpr int kAllreduce = 2;       // DDP's gradient buckets
constexpr int kEmbeddingGroup = 0;  // process groups: TorchRec's sharding and DDP's are separate communicators,
constexpr int kDenseGroup = 1;      // so an all-to-all never queues behind a gradient bucket

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

// ---------------------------------------------------------------- index reuse

/// How a table's indices are drawn: `uniform` (the kernel model's own uniform-index hit rate),
/// `zipf` (row r of E drawn with probability r^-alpha / H), or a measured reuse `histogram`.
struct IndexDistribution {
  std::string kind = "uniform";
  double alpha = 0;
  std::vector<double> histogram;
};

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

/// Expected reuse histogram (fractions of the unique rows per bin) of `lookups` draws from a
/// Zipf(alpha) law over `rows` rows. Rows are independent binomials (exact for the marginals);
/// the 1024 hottest rows are summed one by one, colder ones in geometric buckets of ratio
/// 2^(1/32) priced at the bucket's mean probability (the integral of x^-alpha over it), so a
/// 40M-row table costs about a thousand terms.
std::vector<double> zipf_reuse_histogram(double rows, double alpha, double lookups, std::size_t bins) {
  struct Bucket {
    double rows, weight;  // rows in the bucket and the mean of r^-alpha over them
  };
  std::vector<Bucket> buckets;
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
  double norm = 0;
  for (const Bucket& b : buckets) norm += b.rows * b.weight;
  std::vector<double> mass(bins, 0);
  for (const Bucket& b : buckets) add_binomial(mass, b.rows, lookups, b.weight / norm);
  const double unique = std::accumulate(mass.begin(), mass.end(), 0.0);
  for (double& m : mass) m /= unique;
  return mass;
}

/// The histogram an embedding kernel gets for a table: empty for uniform indices (the model's
/// own hit rate), computed for Zipf, as given otherwise.
std::vector<double> reuse_histogram(const IndexDistribution& d, double rows, double lookups) {
  if (d.kind == "zipf") return zipf_reuse_histogram(rows, d.alpha, lookups, embedding_model().histogram_bins());
  return d.histogram;
}

// ---------------------------------------------------------------- the workload description

struct TableEntry {
  EmbeddingTable table;
  IndexDistribution distribution;
};

struct DlrmConfig {
  int dense_features = 0;
  std::vector<int> bottom_mlp;       // output widths; the input is dense_features
  std::vector<int> top_mlp;          // output widths; the input is the interaction's output
  int embedding_dim = 0;
  std::string interaction = "dot";
  bool fused_interaction = false;    // model.interaction_kernel: fused (NVIDIA's dot_based_interact)
  int interaction_pad_to = 1;        // model.interaction_pad_to: the dot output's width rounded up to it
  std::string mlp_epilogue = "fused";  // model.mlp_epilogue: fused | apex | torch
  bool torch_embedding_bag = false;  // model.embedding_kernel: torch (nn.EmbeddingBag per table)
  std::vector<TableEntry> tables;
  int global_batch = 0;
  Dtype dtype = Dtype::fp32;         // GEMM math; fp16 / bf16 = AMP
  Dtype embedding_dtype = Dtype::fp32;
  bool cuda_graphs = false;
  bool graph_forward_backward = false;     // training.graph_scope: forward_backward
  bool sparse_embedding_gradient = false;  // training.embedding_gradient: sparse
  Seconds cpu_op_gap = 21e-6;              // CPU time of a PyTorch op before its launch (Lin et al. T1)
  Bytes ddp_bucket = 25.0 * 1024 * 1024;
  std::string plan = "table_wise";
  std::string planner = "size_lookup_greedy";
  std::uint64_t seed = 0;
  std::vector<int> placement;        // table_wise: the rank of every table, instead of the planner
  bool bottom_on_rank0 = false;
  bool shared_process_group = false;  // sharding.process_groups: shared (NVIDIA DLE: one communicator)
  Bytes memory_reserve = 2.0 * 1024 * 1024 * 1024;
};

const std::vector<std::string> kPlans = {"table_wise", "row_wise", "column_wise", "data_parallel", "auto"};

class ConfigReader {
 public:
  ConfigReader(const YAML::Node& doc, const YamlReader& reader) : doc_(doc), r_(reader) {}

  DlrmConfig read() {
    r_.check_keys(doc_, "", {"version", "kind", "description", "model", "training", "sharding", "index_distribution"});
    IndexDistribution distribution;
    if (doc_["index_distribution"]) distribution = read_distribution(doc_["index_distribution"], "index_distribution");
    read_model(r_.require(doc_, "", "model"), distribution);
    read_training(r_.require(doc_, "", "training"));
    if (doc_["sharding"]) read_sharding(doc_["sharding"]);
    const YAML::Node kernel = doc_["model"]["embedding_kernel"];
    if (c_.torch_embedding_bag && !c_.sparse_embedding_gradient)
      r_.fail("model.embedding_kernel", kernel,
              "embedding_kernel: torch trains nn.EmbeddingBag(sparse=True), whose gradient is sparse",
              "set training.embedding_gradient: sparse, or use embedding_kernel: fused");
    if (c_.torch_embedding_bag && c_.plan == "data_parallel")
      r_.fail("model.embedding_kernel", kernel, "embedding_kernel: torch models sharded tables, not replicated ones",
              "use embedding_kernel: fused, or another sharding.plan");
    return c_;
  }

 private:
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

  void read_model(const YAML::Node& m, const IndexDistribution& distribution) {
    r_.check_keys(m, "model",
                  {"dense_features", "bottom_mlp", "top_mlp", "embedding_dim", "interaction", "interaction_kernel",
                   "interaction_pad_to", "mlp_epilogue", "embedding_kernel", "tables"});
    c_.dense_features = r_.get_int(r_.require(m, "model", "dense_features"), "model.dense_features", 1);
    c_.bottom_mlp = read_widths(r_.require(m, "model", "bottom_mlp"), "model.bottom_mlp");
    c_.top_mlp = read_widths(r_.require(m, "model", "top_mlp"), "model.top_mlp");
    const YAML::Node dim = r_.require(m, "model", "embedding_dim");
    c_.embedding_dim = r_.get_int(dim, "model.embedding_dim", 1);
    if (m["interaction"]) c_.interaction = r_.get_choice(m["interaction"], "model.interaction", {"dot", "cat"});
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
    if (m["mlp_epilogue"])
      c_.mlp_epilogue = r_.get_choice(m["mlp_epilogue"], "model.mlp_epilogue", {"fused", "apex", "torch"});
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

  // Two forms: a map {rows: [...], dim, pooling} for tables that differ only in rows, or a
  // list of per-table maps {name, rows, dim, pooling, count, index_distribution}.
  void read_tables(const YAML::Node& node, const IndexDistribution& distribution) {
    const std::string path = "model.tables";
    if (node.IsMap()) {
      r_.check_keys(node, path, {"rows", "dim", "pooling"});
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
        const std::string at = "[" + std::to_string(i) + "]";
        TableEntry t{{"t" + std::to_string(i), read_rows(rows[i], path + ".rows" + at), dim, 1, 0}, distribution};
        if (pooling)
          t.table.pooling = pooling.IsSequence() ? read_pooling(pooling[i], path + ".pooling" + at)
                                                 : read_pooling(pooling, path + ".pooling");
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
      r_.check_keys(entry, at, {"name", "rows", "dim", "pooling", "count", "index_distribution"});
      TableEntry t{{"", read_rows(r_.require(entry, at, "rows"), at + ".rows"),
                    entry["dim"] ? r_.get_int(entry["dim"], at + ".dim", 1) : c_.embedding_dim,
                    entry["pooling"] ? read_pooling(entry["pooling"], at + ".pooling") : 1.0, 0},
                   entry["index_distribution"] ? read_distribution(entry["index_distribution"], at + ".index_distribution")
                                               : distribution};
      const std::string name = entry["name"] ? r_.get_string(entry["name"], at + ".name") : "t" + std::to_string(i);
      const int count = entry["count"] ? r_.get_int(entry["count"], at + ".count", 1) : 1;
      for (int k = 0; k < count; ++k) {
        t.table.name = count == 1 ? name : name + "." + std::to_string(k);
        c_.tables.push_back(t);
      }
    }
  }

  void read_training(const YAML::Node& t) {
    const std::string path = "training";
    r_.check_keys(t, path, {"global_batch", "dtype", "embedding_dtype", "optimizer", "cuda_graphs", "graph_scope",
                            "embedding_gradient", "cpu_op_gap", "ddp_bucket"});
    c_.global_batch = r_.get_int(r_.require(t, path, "global_batch"), path + ".global_batch", 1);
    if (t["dtype"])
      c_.dtype = models::parse_dtype(r_.get_choice(t["dtype"], path + ".dtype", {"fp32", "tf32", "fp16", "bf16"}),
                                     r_.where(path + ".dtype", t["dtype"]));
    if (t["embedding_dtype"])
      c_.embedding_dtype = models::parse_dtype(
          r_.get_choice(t["embedding_dtype"], path + ".embedding_dtype", {"fp32", "fp16", "bf16"}),
          r_.where(path + ".embedding_dtype", t["embedding_dtype"]));
    // SGD is what both references train with (embeddings: FBGEMM's / NVIDIA's fused sparse SGD
    // update; MLPs: fused SGD); other optimizers would add state memory and update traffic.
    if (t["optimizer"]) r_.get_choice(t["optimizer"], path + ".optimizer", {"sgd"});
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
    if (t["cpu_op_gap"]) c_.cpu_op_gap = r_.get_duration(t["cpu_op_gap"], path + ".cpu_op_gap");
    // How the embeddings' gradient reaches their rows: one fused backward-and-SGD pass (FBGEMM,
    // TorchRec), or PyTorch's sparse COO gradient that the optimizer applies (DLE joint_sparse).
    if (t["embedding_gradient"])
      c_.sparse_embedding_gradient =
          r_.get_choice(t["embedding_gradient"], path + ".embedding_gradient", {"fused", "sparse"}) == "sparse";
    if (t["ddp_bucket"]) {
      c_.ddp_bucket = r_.get_size(t["ddp_bucket"], path + ".ddp_bucket");
      if (!(c_.ddp_bucket > 0))
        r_.fail(path + ".ddp_bucket", t["ddp_bucket"], "the bucket size must be > 0", "write e.g. 25MiB (PyTorch's default)");
    }
    for (TableEntry& e : c_.tables) e.table.element_bytes = models::bytes_of(c_.embedding_dtype);
  }

  void read_sharding(const YAML::Node& s) {
    const std::string path = "sharding";
    r_.check_keys(s, path, {"plan", "planner", "seed", "placement", "bottom_mlp", "process_groups", "memory_reserve"});
    if (s["plan"]) c_.plan = r_.get_choice(s["plan"], path + ".plan", kPlans);
    std::vector<std::string> planners;
    for (const PlannerInfo& p : sharding_planners()) planners.push_back(p.name);
    // Checked whatever the plan, used only where whole tables are placed (a sweep over
    // `sharding.plan` keeps one planner); the notes say when it is unused.
    if (s["planner"]) c_.planner = r_.get_choice(s["planner"], path + ".planner", planners);
    if (s["seed"]) c_.seed = static_cast<std::uint64_t>(r_.get_int(s["seed"], path + ".seed", 0));
    if (s["bottom_mlp"]) {
      c_.bottom_on_rank0 = r_.get_choice(s["bottom_mlp"], path + ".bottom_mlp", {"data_parallel", "rank0"}) == "rank0";
      if (c_.bottom_on_rank0 && c_.plan != "table_wise" && c_.plan != "column_wise")
        r_.fail(path + ".bottom_mlp", s["bottom_mlp"],
                "bottom_mlp: rank0 sends the bottom MLP's output through the embedding all-to-all, which plan " +
                    c_.plan + " does not have",
                "use plan: table_wise or column_wise, or bottom_mlp: data_parallel");
    }
    // Whether the exchange and DDP's allreduce have communicators of their own (TorchRec), or share
    // the default group (NVIDIA DLE: all_to_all_single and apex DDP on one communicator, whose
    // operations run one after another in the order they were issued).
    if (s["process_groups"])
      c_.shared_process_group =
          r_.get_choice(s["process_groups"], path + ".process_groups", {"separate", "shared"}) == "shared";
    if (s["memory_reserve"]) c_.memory_reserve = r_.get_size(s["memory_reserve"], path + ".memory_reserve");
    if (s["placement"]) read_placement(s["placement"], path + ".placement");
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

// ---------------------------------------------------------------- building the trace

/// Interns names, kernels and collectives of the trace and shares identical programs.
class TraceBuilder {
 public:
  explicit TraceBuilder(Trace& trace) : t_(trace) {}

  int name(const std::string& text) {
    auto [it, added] = names_.emplace(text, static_cast<int>(t_.names.size()));
    if (added) t_.names.push_back(text);
    return it->second;
  }
  int kernel(KernelSpec spec, const std::string& label) {
    models::complete_kernel(spec, t_.origin + ": generated kernel '" + label + "'");
    return intern(t_.kernels, std::move(spec));
  }
  int collective(const CollectiveCall& added) {
    // Our calls differ only in these fields (options stay default).
    for (std::size_t i = 0; i < t_.collectives.size(); ++i) {
      const CollectiveCall& c = t_.collectives[i];
      if (c.op == added.op && c.bytes == added.bytes && c.group == added.group && c.root == added.root &&
          c.algorithm == added.algorithm)
        return static_cast<int>(i);
    }
    t_.collectives.push_back(added);
    return static_cast<int>(t_.collectives.size()) - 1;
  }
  int program(Program program) {
    for (std::size_t p = 0; p < t_.programs.size(); ++p)
      if (same(t_.programs[p], program)) return static_cast<int>(p);
    t_.programs.push_back(std::move(program));
    return static_cast<int>(t_.programs.size()) - 1;
  }

 private:
  static int intern(std::vector<KernelSpec>& items, KernelSpec item) {
    for (std::size_t i = 0; i < items.size(); ++i)
      if (items[i] == item) return static_cast<int>(i);
    items.push_back(std::move(item));
    return static_cast<int>(items.size()) - 1;
  }
  static bool same(const Program& a, const Program& b) {
    if (a.streams != b.streams || a.events != b.events || a.ops.size() != b.ops.size()) return false;
    for (std::size_t i = 0; i < a.ops.size(); ++i) {
      const Op& x = a.ops[i];
      const Op& y = b.ops[i];
      if (x.kind != y.kind || x.stream != y.stream || x.name != y.name || x.kernel != y.kernel ||
          x.duration != y.duration || x.collective != y.collective || x.peer != y.peer || x.bytes != y.bytes ||
          x.memcpy != y.memcpy || x.event != y.event)
        return false;
    }
    return true;
  }

  Trace& t_;
  std::map<std::string, int> names_;
};

/// One rank's program under construction.
class RankBuilder {
 public:
  /// @param op_gap  CPU time before every kernel and collective (eager PyTorch: Lin et al.'s
  /// T1; 0 under a CUDA graph).
  RankBuilder(TraceBuilder& trace, Seconds op_gap) : tb_(trace), op_gap_(op_gap) {
    p_.streams = {"compute", "embedding_comm", "allreduce"};
  }

  void kernel(const std::string& name, KernelSpec spec) {
    gap();
    Op op;
    op.kind = OpKind::kernel;
    op.stream = kCompute;
    op.name = tb_.name(name);
    op.kernel = tb_.kernel(std::move(spec), name);
    p_.ops.push_back(op);
  }
  /// `stream` records a fresh event that `waiter` then waits for.
  void handoff(int stream, int waiter, const std::string& event) {
    p_.events.push_back(event);
    const int e = static_cast<int>(p_.events.size()) - 1;
    p_.ops.push_back(Op{.kind = OpKind::record, .stream = stream, .event = e});
    p_.ops.push_back(Op{.kind = OpKind::wait, .stream = waiter, .event = e});
  }
  void collective(int stream, const std::string& name, const CollectiveCall& call) {
    gap();
    Op op;
    op.kind = OpKind::collective;
    op.stream = stream;
    op.name = tb_.name(name);
    op.collective = tb_.collective(call);
    p_.ops.push_back(op);
  }
  /// CPU time before the next op (a kernel launched outside the CUDA graph).
  void cpu(const std::string& name, Seconds duration) {
    p_.ops.push_back(Op{.kind = OpKind::cpu, .name = tb_.name(name), .duration = duration});
  }
  /// The CPU waits for the whole device (a GPU value read on the host).
  void device_sync(const std::string& name) {
    p_.ops.push_back(Op{.kind = OpKind::sync, .stream = -1, .name = tb_.name(name), .event = -1});
  }
  Program take() { return std::move(p_); }

 private:
  void gap() {
    if (op_gap_ > 0) p_.ops.push_back(Op{.kind = OpKind::cpu, .name = tb_.name("cpu.op_gap"), .duration = op_gap_});
  }

  TraceBuilder& tb_;
  Seconds op_gap_;
  Program p_;
};

CollectiveCall call(models::CollectiveOp op, Bytes bytes, int group) {
  CollectiveCall c;
  c.op = op;
  c.bytes = bytes;
  c.group = group;
  return c;
}

/// Which operand of a product is stored transposed: a linear layer's forward multiplies by its
/// weight's transpose (NT), its data gradient by the weight (NN), its weight gradient by the
/// input's transpose (TN).
enum class Layout : std::uint8_t { nn, nt, tn };

KernelSpec gemm(Dtype dtype, double m, double n, double k, double batch, Layout layout) {
  return KernelSpec{"gemm",
                    dtype,
                    {{"m", m},
                     {"n", n},
                     {"k", k},
                     {"batch", batch},
                     {"transpose_a", layout == Layout::tn ? 1.0 : 0.0},
                     {"transpose_b", layout == Layout::nt ? 1.0 : 0.0}},
                    {}};
}

/// A rank's lookups of one kind of shard: `tables` shards alike in rows, dim, pooling and
/// index reuse, looked up by one multi-table kernel (FBGEMM's table-batched embedding).
struct LookupGroup {
  double tables = 0;
  double rows = 0;
  int dim = 0;
  double pooling = 0;
  std::vector<double> histogram;
  /// Alike: everything but the count.
  bool operator==(const LookupGroup& o) const {
    return rows == o.rows && dim == o.dim && pooling == o.pooling && histogram == o.histogram;
  }
};

class DlrmBuilder {
 public:
  DlrmBuilder(const DlrmConfig& config, const JobContext& job, const std::string& origin, const YamlReader& reader,
              const YAML::Node& doc)
      : c_(config), job_(job), n_(job.ranks()), reader_(reader), doc_(doc) {
    trace_.origin = origin;
    trace_.ranks = n_;
  }

  Trace build() {
    check_batch();
    plan_ = make_plan();
    act_bytes_ = c_.dtype == Dtype::fp16 || c_.dtype == Dtype::bf16 ? 2 : 4;
    // Sharded tables are looked up for the global batch, replicated ones for the local one.
    lookup_batch_ = plan_.kind == ShardingKind::data_parallel ? batch_ : c_.global_batch;
    for (const TableEntry& t : c_.tables)
      histograms_.push_back(reuse_histogram(t.distribution, t.table.rows, lookup_batch_ * t.table.pooling));
    TraceBuilder tb(trace_);
    for (const char* group : {"embedding", "dense"}) {
      std::vector<int> all(static_cast<std::size_t>(n_));
      std::iota(all.begin(), all.end(), 0);
      trace_.groups.push_back(ProcessGroup{group, {all}, std::vector<int>(static_cast<std::size_t>(n_), 0)});
    }
    double flops = 0;
    for (int r = 0; r < n_; ++r) {
      RankBuilder rank(tb, c_.cuda_graphs ? 0 : c_.cpu_op_gap);
      flops += build_rank(r, rank);
      trace_.program_of_rank.push_back(tb.program(rank.take()));
    }
    // CUDA graphs replay the whole iteration from one CPU call, so no per-kernel CPU launch.
    if (c_.cuda_graphs) trace_.launch.cpu_launch = 0;
    trace_.work = Work{static_cast<double>(batch_), "samples", flops / n_};
    add_notes();
    return std::move(trace_);
  }

 private:
  void check_batch() {
    const YAML::Node node = doc_["training"]["global_batch"];
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
    const YAML::Node sharding = doc_["sharding"];
    request.where = reader_.where("sharding", sharding ? sharding : YAML::Node());
    const std::map<std::string, ShardingKind> kinds = {{"table_wise", ShardingKind::table_wise},
                                                       {"row_wise", ShardingKind::row_wise},
                                                       {"column_wise", ShardingKind::column_wise},
                                                       {"data_parallel", ShardingKind::data_parallel}};
    if (c_.plan != "auto") {
      request.kind = kinds.at(c_.plan);
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

  /// Pooled-embedding values per sample that `rank` produces for the all-to-all.
  double a2a_width(int rank) const {
    double width = c_.bottom_on_rank0 && rank == 0 ? c_.bottom_mlp.back() : 0;
    for (int t : plan_.tables_of_rank[static_cast<std::size_t>(rank)])
      width += plan_.dim_of(c_.tables[static_cast<std::size_t>(t)].table, rank);
    return width;
  }

  /// The all-to-all's nccl-tests size. Rank i sends s_i = width_i x (B/n) x bytes to each
  /// peer. With equal shards that is a per-rank buffer of n s. With unequal ones every member
  /// must agree on one size, so we take Lin et al.'s "max of max" (papers.md §3.1): the largest
  /// of any rank's bytes sent, (n-1) s_i, or received, sum_{j!=i} s_j, scaled by n/(n-1) so
  /// that the uniform collective moves exactly that much through the busiest rank.
  Bytes a2a_bytes() const {
    const std::vector<Bytes> s = a2a_shares();
    const double total = std::accumulate(s.begin(), s.end(), 0.0);
    double busiest = 0;
    for (double si : s) busiest = std::max({busiest, (n_ - 1) * si, total - si});
    return busiest * n_ / (n_ - 1);
  }
  /// s_i per rank: what it sends to each peer.
  std::vector<Bytes> a2a_shares() const {
    std::vector<Bytes> s;
    for (int r = 0; r < n_; ++r) s.push_back(a2a_width(r) * batch_ * act_bytes_);
    return s;
  }

  /// Row-wise: every rank's partial pooled sums of every table for the whole batch.
  Bytes reduce_scatter_bytes() const {
    double width = 0;
    for (const TableEntry& t : c_.tables) width += t.table.dim;
    return width * c_.global_batch * act_bytes_;
  }

  std::vector<LookupGroup> lookups(int rank) const {
    std::vector<LookupGroup> groups;
    for (int t : plan_.tables_of_rank[static_cast<std::size_t>(rank)]) {
      const TableEntry& entry = c_.tables[static_cast<std::size_t>(t)];
      const double rows = plan_.rows_of(entry.table, rank);
      const int dim = plan_.dim_of(entry.table, rank);
      if (rows <= 0 || dim <= 0) continue;  // the last blocks of a small table may be empty
      // A row-wise shard receives the share of the lookups that hit its rows; indices are
      // assumed spread over the rows (hashed), so the shard's reuse is the whole table's.
      LookupGroup g{1, rows, dim, entry.table.pooling * rows / entry.table.rows, histograms_[static_cast<std::size_t>(t)]};
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

    // NVIDIA DLE's loop (main.py) ends each iteration with torch.cuda.synchronize(); the GPU then
    // waits while the CPU steps the learning-rate scheduler, copies the batch into the graph's
    // three static inputs (copy_) and calls graph.replay(): one op gap, then four launched ops.
    if (c_.graph_forward_backward)
      rank.cpu("iteration_start", c_.cpu_op_gap + 4 * (c_.cpu_op_gap + LaunchModel{}.cpu_launch));

    // Forward. Every bottom layer and all top layers but the last end in a ReLU; with
    // mlp_epilogue fused, bias and ReLU are in the GEMM's epilogue.
    if (has_bottom(r))
      for (std::size_t i = 0; i < bottom.size(); ++i) {
        gemm_op("bottom_mlp.fc" + std::to_string(i), Layout::nt, bb, bottom[i].out, bottom[i].in);
        relu_forward(rank, "bottom_mlp.fc" + std::to_string(i), bb * bottom[i].out);
      }
    const double embedding_bytes = models::bytes_of(c_.embedding_dtype);
    double local_values = 0;  // pooled values of this rank's tables for the lookup batch
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const double values = lookup_batch_ * groups[g].tables * groups[g].dim;
      local_values += values;
      if (c_.torch_embedding_bag) {
        for (double t = 0; t < groups[g].tables; ++t) rank.kernel("embedding_forward" + suffix(g), torch_bag(groups[g]));
        continue;
      }
      rank.kernel("embedding_forward" + suffix(g), embedding("embedding_forward", groups[g], lookup_batch_));
      // PyTorch's embedding ops return the weights' fp32; under AMP the pooled rows are cast to
      // fp16 for the all-to-all (fused kernels such as FBGEMM's write fp16 directly).
      if (sparse_gradient() && act_bytes_ < 4)
        rank.kernel("embedding_output_cast" + suffix(g), pass_spec(values, 4, act_bytes_));
    }
    // PyTorch's per-table outputs are stacked into one tensor (a copy), then cast under AMP.
    if (c_.torch_embedding_bag && local_values > 0) {
      if (plan_.tables_of_rank[static_cast<std::size_t>(r)].size() > 1)
        rank.kernel("embedding_stack", pass_spec(local_values, embedding_bytes, embedding_bytes));
      if (act_bytes_ < embedding_bytes)
        rank.kernel("embedding_output_cast", pass_spec(local_values, embedding_bytes, act_bytes_));
    }
    const std::string exchange = plan_.kind == ShardingKind::row_wise ? "reduce_scatter" : "alltoall";
    const bool exchanges = n_ > 1 && plan_.kind != ShardingKind::data_parallel;
    const CollectiveCall forward_call =
        plan_.kind == ShardingKind::row_wise
            ? call(models::CollectiveOp::reduce_scatter, reduce_scatter_bytes(), kEmbeddingGroup)
            : call(models::CollectiveOp::alltoall, n_ > 1 ? a2a_bytes() : 0, kEmbeddingGroup);
    // NVIDIA DLE's hybrid parallel moves tensors with PyTorch ops around its all-to-all
    // (dlrm/nn/parts.py DlrmBottom, dlrm/model/distributed.py BottomToTop): the rank's vectors
    // are concatenated before it, the received ones after it, and the gradient is split into
    // contiguous pieces before the backward one; each is a copy (read and write).
    const bool dle_exchange = exchanges && c_.bottom_on_rank0;
    const double sent_values = lookup_batch_ * a2a_width(r);
    const double received_values = b * (features() + 1) * c_.embedding_dim;
    if (dle_exchange && a2a_width(r) > c_.embedding_dim)
      rank.kernel("exchange_input_cat", pass_spec(sent_values, act_bytes_, act_bytes_));
    if (exchanges) {
      rank.handoff(kCompute, kEmbeddingComm, "pooled_embeddings_ready");
      rank.collective(kEmbeddingComm, exchange + "_forward", forward_call);
      rank.handoff(kEmbeddingComm, kCompute, exchange + "_forward_done");
    }
    if (dle_exchange) rank.kernel("exchange_output_cat", pass_spec(received_values, act_bytes_, act_bytes_));
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
    for (std::size_t i = 0; i < top.size(); ++i) {
      gemm_op("top_mlp.fc" + std::to_string(i), Layout::nt, b, top[i].out, top[i].in);
      if (i + 1 < top.size()) relu_forward(rank, "top_mlp.fc" + std::to_string(i), b * top[i].out);
    }
    rank.kernel("loss", loss_forward(b));

    // Backward: gradient buckets fill from the last layer back.
    const int allreduce_stream = c_.shared_process_group ? kEmbeddingComm : kAllreduce;
    Buckets buckets(rank, c_.ddp_bucket, n_ > 1, allreduce_stream,
                    c_.shared_process_group ? kEmbeddingGroup : kDenseGroup);
    double dense_params = 0;  // parameters the optimizer updates, all fp32
    rank.kernel("loss_backward", loss_backward(b));
    for (std::size_t i = top.size(); i-- > 0;) {
      const std::string layer = "top_mlp.fc" + std::to_string(i);
      epilogue_backward(rank, layer, b * top[i].out, i + 1 < top.size());
      gemm_op(layer + ".dgrad", Layout::nn, b, top[i].in, top[i].out);
      gemm_op(layer + ".wgrad", Layout::tn, top[i].out, top[i].in, b);
      bias_grad(rank, layer, b * top[i].out);
      const double params = static_cast<double>(top[i].in) * top[i].out + top[i].out;
      buckets.add(params * 4);
      dense_params += params;
    }
    // DDP launches a bucket once its last gradient is ready: without the bottom MLP in DDP
    // (rank0), the top MLP's last partial bucket is complete here.
    if (c_.bottom_on_rank0) buckets.flush();
    if (c_.interaction == "dot") {
      if (c_.fused_interaction) {
        fused_interaction("interaction.backward", true);
      } else {
        rank.kernel("interaction.pairs.zero", pass_spec(b * vectors * vectors, 0, act_bytes_));
        rank.kernel("interaction.pairs.backward", pass_spec(b * pairs, 2 * act_bytes_, act_bytes_));
        gemm_op("interaction.backward", Layout::nn, vectors, dim, vectors, b);
        gemm_op("interaction.backward_transposed", Layout::tn, dim, vectors, vectors, b);
        rank.kernel("interaction.grad_add", pass_spec(b * vectors * dim, 2 * act_bytes_, act_bytes_));
        rank.kernel("bottom_output.grad_add", pass_spec(b * dim, 2 * act_bytes_, act_bytes_));
      }
    }
    if (exchanges) {
      const CollectiveCall backward_call =
          plan_.kind == ShardingKind::row_wise
              ? call(models::CollectiveOp::allgather, forward_call.bytes, kEmbeddingGroup)
              : forward_call;
      const std::string back = plan_.kind == ShardingKind::row_wise ? "allgather" : "alltoall";
      if (dle_exchange) rank.kernel("exchange_grad_split", pass_spec(received_values, act_bytes_, act_bytes_));
      rank.handoff(kCompute, kEmbeddingComm, "embedding_grads_ready");
      rank.collective(kEmbeddingComm, back + "_backward", backward_call);
      // A data-parallel bottom MLP needs nothing from the exchange, so its backward overlaps
      // it; on rank 0 alone (NVIDIA) its output gradient arrives through the exchange.
      if (!c_.bottom_on_rank0) bottom_backward(r, bottom, bb, buckets, dense_params, gemm_op, rank);
      rank.handoff(kEmbeddingComm, kCompute, back + "_backward_done");
      if (c_.bottom_on_rank0) bottom_backward(r, bottom, bb, buckets, dense_params, gemm_op, rank);
    } else {
      bottom_backward(r, bottom, bb, buckets, dense_params, gemm_op, rank);
    }
    if (plan_.kind != ShardingKind::data_parallel) buckets.flush();  // the bottom MLP's were the last
    const bool sparse = sparse_gradient();
    for (std::size_t g = 0; g < groups.size(); ++g) {
      if (c_.torch_embedding_bag) {
        // The stacked gradient cast back to fp32 once, then nn.EmbeddingBag's sparse backward
        // per table: an index_select of the pooled gradient by offset2bag, one row per lookup.
        const double per_table = lookup_batch_ * groups[g].dim;
        if (g == 0 && act_bytes_ < embedding_bytes)
          rank.kernel("embedding_grad_cast", pass_spec(local_values, act_bytes_, embedding_bytes));
        for (double t = 0; t < groups[g].tables; ++t)
          rank.kernel("embedding_grad_rows" + suffix(g),
                      pass_spec(per_table * groups[g].pooling, embedding_bytes, embedding_bytes));
      } else if (sparse) {
        // PyTorch's sparse COO gradient: the pooled gradient (cast back to the fp32 weights'
        // type under AMP), one row per lookup (a view for one-hot features, a copy for bags).
        const double pooled = lookup_batch_ * groups[g].tables * groups[g].dim;
        if (act_bytes_ < 4) rank.kernel("embedding_grad_cast" + suffix(g), pass_spec(pooled, act_bytes_, 4));
        if (groups[g].pooling > 1)
          rank.kernel("embedding_grad_rows" + suffix(g), pass_spec(pooled * groups[g].pooling, 4, 4));
      } else {
        // FBGEMM's / NVIDIA's fused backward applies SGD to the looked-up rows in the same kernel.
        rank.kernel("embedding_backward" + suffix(g), embedding("embedding_backward", groups[g], lookup_batch_));
      }
      // Replicated tables (TorchRec's data_parallel) get dense gradients that DDP allreduces
      // with the MLPs' and a separate optimizer step.
      if (plan_.kind == ShardingKind::data_parallel) {
        const double params = groups[g].tables * groups[g].rows * groups[g].dim;
        buckets.add(params * models::bytes_of(c_.embedding_dtype));
        dense_params += params;
      }
    }
    buckets.flush();
    buckets_ = buckets.count();
    if (buckets.count() > 0) rank.handoff(allreduce_stream, kCompute, "gradients_reduced");
    weight_update(rank, groups, dense_params, suffix);
    return flops;
  }

  bool sparse_gradient() const {
    return c_.sparse_embedding_gradient && plan_.kind != ShardingKind::data_parallel;
  }

  /// The optimizer steps. Inside the graph, or (graph_scope forward_backward, NVIDIA DLE's
  /// main.py) launched one by one afterwards: under AMP, GradScaler.step unscales the MLP
  /// gradients and reads their inf flag on the CPU (a device sync) before FusedSGD; then
  /// GradScaler.unscale_ and torch.optim.SGD treat the embeddings' sparse gradient (values
  /// scaled by -lr, then index_add into the rows).
  template <typename Suffix>
  void weight_update(RankBuilder& rank, const std::vector<LookupGroup>& groups, double dense_params,
                     const Suffix& suffix) const {
    const bool eager = c_.graph_forward_backward;
    const bool amp = act_bytes_ < 4;
    // GradScaler's unscale and host-read inf check cannot be captured in a CUDA graph.
    const bool scaler = amp && (!c_.cuda_graphs || c_.graph_forward_backward);
    const auto launch = [&](const std::string& name, KernelSpec spec) {
      if (eager) rank.cpu(name + ".launch", c_.cpu_op_gap + LaunchModel{}.cpu_launch);
      rank.kernel(name, std::move(spec));
    };
    if (scaler) {
      launch("grad_scaler.unscale", pass_spec(dense_params, 4, 4));
      rank.device_sync("grad_scaler.found_inf");
    }
    launch("optimizer", sgd_spec(dense_params));
    if (!sparse_gradient()) return;
    const auto values_of = [&](const LookupGroup& g) { return lookup_batch_ * g.tables * g.pooling * g.dim; };
    if (c_.torch_embedding_bag) {
      // GradScaler unscales every table's values in one multi-tensor pass; torch.optim.SGD then
      // adds each table's sparse gradient with index_add_(alpha = -lr).
      double values = 0;
      for (const LookupGroup& g : groups) values += values_of(g);
      if (scaler) launch("embedding_grad_unscale", pass_spec(values, 4, 4));
      for (std::size_t g = 0; g < groups.size(); ++g)
        for (double t = 0; t < groups[g].tables; ++t)
          launch("embedding_sgd" + suffix(g), index_add_spec(lookup_batch_ * groups[g].pooling, groups[g]));
      return;
    }
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const double values = values_of(groups[g]);
      if (scaler) launch("embedding_grad_unscale" + suffix(g), pass_spec(values, 4, 4));
      // PyTorch 1.x's sparse add_ scaled the values by -lr first ("FIXME: at some point we can
      // wrap the scale into indexAdd"), then index_add_.
      launch("embedding_grad_scale_lr" + suffix(g), pass_spec(values, 4, 4));
      launch("embedding_sgd" + suffix(g), index_add_spec(lookup_batch_ * groups[g].tables * groups[g].pooling, groups[g]));
    }
  }

  /// The ReLU after a GEMM whose epilogue does not apply it (apex: with the bias add).
  void relu_forward(RankBuilder& rank, const std::string& layer, double elements) const {
    if (c_.mlp_epilogue != "fused") rank.kernel(layer + ".relu", pass_spec(elements, act_bytes_, act_bytes_));
  }
  /// Before a layer's GEMMs: the ReLU's gradient (output and its gradient read, input gradient
  /// written); apex folds the bias gradient's reduction into it.
  void epilogue_backward(RankBuilder& rank, const std::string& layer, double elements, bool relu) const {
    if (c_.mlp_epilogue == "fused") return;
    if (relu) rank.kernel(layer + ".relu_backward", pass_spec(elements, 2 * act_bytes_, act_bytes_));
    else if (c_.mlp_epilogue == "apex") rank.kernel(layer + ".bias_grad", pass_spec(elements, act_bytes_, 0));
  }
  /// PyTorch's bias gradient: a reduction of the output gradient over the batch.
  void bias_grad(RankBuilder& rank, const std::string& layer, double elements) const {
    if (c_.mlp_epilogue == "torch") rank.kernel(layer + ".bias_grad", pass_spec(elements, act_bytes_, 0));
  }
  /// The sparse SGD step's index_add of `rows` gradient rows into the tables.
  KernelSpec index_add_spec(double rows, const LookupGroup& g) const {
    return KernelSpec{"index_add", c_.embedding_dtype, {{"rows", rows}, {"dim", static_cast<double>(g.dim)}}, {}};
  }
  /// One table's nn.EmbeddingBag forward.
  KernelSpec torch_bag(const LookupGroup& g) const {
    return KernelSpec{"torch_embedding_bag", c_.embedding_dtype,
                      {{"batch", lookup_batch_}, {"rows", g.rows}, {"dim", static_cast<double>(g.dim)},
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

  template <typename GemmOp>
  void bottom_backward(int r, const std::vector<Layer>& bottom, double bb, Buckets& buckets, double& dense_params,
                       const GemmOp& gemm_op, RankBuilder& rank) const {
    if (!has_bottom(r)) return;
    for (std::size_t i = bottom.size(); i-- > 0;) {
      const std::string layer = "bottom_mlp.fc" + std::to_string(i);
      epilogue_backward(rank, layer, bb * bottom[i].out, true);
      // The dense features need no gradient, so the first layer has no dgrad.
      if (i > 0) gemm_op(layer + ".dgrad", Layout::nn, bb, bottom[i].in, bottom[i].out);
      gemm_op(layer + ".wgrad", Layout::tn, bottom[i].out, bottom[i].in, bb);
      bias_grad(rank, layer, bb * bottom[i].out);
      const double params = static_cast<double>(bottom[i].in) * bottom[i].out + bottom[i].out;
      // On rank 0 alone (NVIDIA's placement) the bottom MLP is not replicated: no allreduce.
      if (!c_.bottom_on_rank0) buckets.add(params * 4);
      dense_params += params;
    }
  }

  // Binary cross-entropy with logits over the local samples (fp32 labels and loss), priced
  // with Lin et al.'s per-element FLOPs (papers.md §3.1): sigmoid 4 + BCE 7 forward; the
  // backward is the sigmoid, a subtraction and the scale of the mean.
  KernelSpec loss_forward(double samples) const {
    return KernelSpec{"elementwise", c_.dtype,
                      {{"elements", samples}, {"bytes_read", act_bytes_ + 4}, {"bytes_written", 4}, {"flops", 11}}, {}};
  }
  KernelSpec loss_backward(double samples) const {
    return KernelSpec{"elementwise", c_.dtype,
                      {{"elements", samples}, {"bytes_read", act_bytes_ + 4}, {"bytes_written", act_bytes_}, {"flops", 6}},
                      {}};
  }
  // Plain SGD on fp32 dense parameters (AMP keeps fp32 master weights): read weight and
  // gradient, write the weight, one multiply-add; one fused multi-tensor kernel (apex FusedSGD).
  static KernelSpec sgd_spec(double params) { return pass_spec(params, 8, 4, 2); }

  void add_notes() {
    auto& notes = trace_.notes;
    std::string plan = std::string("embeddings ") + to_string(plan_.kind);
    if (plan_.kind == ShardingKind::table_wise) plan += " by planner " + plan_.planner;
    else if (doc_["sharding"] && doc_["sharding"]["planner"]) plan += " (sharding.planner unused: no whole tables)";
    if (c_.plan == "auto") plan += " (plan: auto picked it: " +
                                   std::string(plan_.kind == ShardingKind::table_wise ? "whole tables fit"
                                                                                      : "whole tables do not fit") +
                                   ")";
    notes.push_back(plan + "; per rank: " + describe_ranks());
    if (plan_.kind == ShardingKind::table_wise) notes.push_back(describe_placement());
    if (n_ > 1 && (plan_.kind == ShardingKind::table_wise || plan_.kind == ShardingKind::column_wise)) {
      const std::vector<Bytes> s = a2a_shares();
      if (std::any_of(s.begin(), s.end(), [&](Bytes si) { return si != s.front(); }))
        notes.push_back("ranks send unequal pooled-embedding shares; every all-to-all uses Lin et al.'s \"max of "
                        "max\" size " + mb(a2a_bytes()) +
                        " (n/(n-1) x the most bytes any rank sends or receives), so the busiest rank is timed");
    }
    if (plan_.kind == ShardingKind::row_wise)
      notes.push_back("row-wise: every rank looks up its row block of every table for the whole batch; the partial "
                      "pooled sums are reduce-scattered forward and their gradients all-gathered backward");
    if (c_.bottom_on_rank0)
      notes.push_back("bottom MLP on rank 0 over the global batch (NVIDIA DeepLearningExamples); its output joins "
                      "the all-to-all and its gradients are not allreduced");
    notes.push_back(std::to_string(buckets_) + " DDP allreduce buckets of " + format_size(c_.ddp_bucket) +
                    " (fp32 gradients cut by bytes in reverse layer order; PyTorch's smaller first bucket and "
                    "parameter-boundary cuts are not modelled)");
    if (max_groups_ > 1)
      notes.push_back("embedding lookups: one kernel per group of alike shards (up to " + std::to_string(max_groups_) +
                      " on a rank), where FBGEMM's table-batched kernel is one launch");
    if (c_.cuda_graphs)
      notes.push_back(std::string("CUDA graphs: no CPU launch cost per kernel") +
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
      notes.push_back(fmt::format("CPU: {:.0f} us before every launch (Lin et al.'s mean op gap T1) plus the launch "
                                  "model's cost",
                                  c_.cpu_op_gap * 1e6));
    if (sparse_gradient())
      notes.push_back("embedding gradient: PyTorch's sparse COO gradient (one fp32 row per lookup), scaled by -lr and "
                      "index_added into the rows by torch.optim.SGD" +
                      std::string(act_bytes_ < 4 && c_.graph_forward_backward ? ", after GradScaler unscales it" : "") +
                      std::string(act_bytes_ < 4 ? "; the fp32 pooled rows and their gradient cast to and from fp16" : "") +
                      ", instead of one fused backward-and-update pass");
    if (c_.bottom_on_rank0 && n_ > 1 && plan_.kind != ShardingKind::data_parallel)
      notes.push_back("NVIDIA DLE's exchange copies (one read and write each): a rank's vectors concatenated before the "
                      "all-to-all, the received ones after it, the gradient split into contiguous pieces before the "
                      "backward one");
    notes.push_back(std::string("not modelled: TorchRec's input all-to-all of indices (its pipeline overlaps it with the "
                                "previous iteration; NVIDIA's loader reads each GPU's indices directly), ") +
                    (c_.graph_forward_backward ? "AMP's casts of the MLP weights" : "AMP casts and loss scaling") +
                    ", the data loader and the host work between iterations");
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
        lookup[static_cast<std::size_t>(r)] += lookup_batch_ * table.pooling * table.dim * table.element_bytes;
      }
    std::string ranks, bytes;
    for (std::size_t t = 0; t < rank_of.size(); ++t) ranks += (t ? "," : "") + std::to_string(rank_of[t]);
    for (std::size_t r = 0; r < lookup.size(); ++r) bytes += (r ? "," : "") + std::to_string(std::llround(lookup[r]));
    return "table placement (usable as sharding.placement): [" + ranks + "]; lookup bytes per rank: [" + bytes + "]";
  }

  std::string describe_ranks() const {
    std::string out;
    for (int r = 0; r < n_; ++r) {
      if (n_ > 16 && r == 8) {
        out += ", ...";
        r = n_ - 4;
      }
      if (r > 0) out += ", ";
      out += std::to_string(r);
      out += plan_.kind == ShardingKind::table_wise
                 ? ": " + std::to_string(plan_.tables_of_rank[static_cast<std::size_t>(r)].size()) + " tables "
                 : std::string(": a shard of every table ");
      out += gb(plan_.bytes_of_rank[static_cast<std::size_t>(r)]);
    }
    return out;
  }

  const DlrmConfig& c_;
  const JobContext& job_;
  const int n_;
  const YamlReader& reader_;
  const YAML::Node& doc_;
  Trace trace_;
  ShardingPlan plan_;
  int batch_ = 0;
  double lookup_batch_ = 0;
  std::vector<std::vector<double>> histograms_;  // per table, for lookup_batch_ samples
  Bytes act_bytes_ = 4;
  int buckets_ = 0;
  std::size_t max_groups_ = 0;
};

class DlrmGenerator : public Generator {
 public:
  Trace generate(const YAML::Node& doc, const YamlReader& reader, const JobContext& job) const override {
    const DlrmConfig config = ConfigReader(doc, reader).read();
    return DlrmBuilder(config, job, reader.origin(), reader, doc).build();
  }
};

}  // namespace

STEPSIM_REGISTER_GENERATOR(DlrmGenerator, "dlrm",
                           "DLRM hybrid-parallel training: sharded embedding tables, data-parallel MLPs")

}  // namespace stepsim::workloads
