#pragma once
/// @file The DLRM workload description (kind: dlrm) as the generator reads it from YAML: model,
/// training loop, sharding and index distributions, every key checked (docs/dlrm.md has the
/// schema). Contract: read_dlrm_config rejects unknown keys and bad values with a ConfigError
/// naming the file, YAML path, line and a fix; the returned config is complete (defaults filled).
#include <cstdint>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "models/compute/kernel.hpp"
#include "platforms/yaml_reader.hpp"
#include "workloads/generators/dlrm_sharding.hpp"

namespace stepsim::workloads {

/// @brief How a table's indices are drawn: `uniform` (the kernel model's own uniform-index hit rate),
/// `zipf` (row r of E drawn with probability r^-alpha / H), or a measured reuse `histogram`.
struct IndexDistribution {
  std::string kind = "uniform";
  double alpha = 0;
  std::vector<double> histogram;
};

/// @brief Where a linear layer's bias and ReLU run: in the GEMM's epilogue (cuBLASLt), in NVIDIA
/// apex MLP's bias-ReLU kernels, or as PyTorch's nn.Linear + nn.ReLU run them.
enum class MlpEpilogue : std::uint8_t { fused, apex, torch };

/// @brief The optimizers a DLRM trains with: row-wise Adagrad (one accumulator per row) is
/// FBGEMM's, for embeddings only.
enum class DlrmOptimizer : std::uint8_t { sgd, adagrad, rowwise_adagrad, adam };
const char* to_string(DlrmOptimizer o);
/// @brief fp32 optimizer state per parameter (row-wise Adagrad: per row of `dim`).
double optimizer_state_bytes(DlrmOptimizer o, int dim);

/// @brief One embedding table and how its indices are drawn.
struct TableEntry {
  EmbeddingTable table;
  IndexDistribution distribution;
};

/// @brief Everything a `kind: dlrm` document says, defaults filled in (docs/dlrm.md's schema).
/// The most embedding tables a DLRM workload may list (count included): production models hold
/// hundreds to ~1,000; each table adds ops and a planner dimension.
constexpr int kMaxTables = 10000;
/// The most rows one table may have: 1e12, a thousand times the billion-row tables of the
/// largest published recommenders, so byte and GPU counts stay exact in doubles and int64.
constexpr double kMaxTableRows = 1e12;

struct DlrmConfig {
  int dense_features = 0;
  std::vector<int> bottom_mlp;       // output widths; the input is dense_features
  std::vector<int> top_mlp;          // output widths; the input is the interaction's output
  int embedding_dim = 0;
  std::string interaction = "dot";   // dot, cat, or dcn_v2 (DCN v2's low-rank cross layers)
  int dcn_layers = 0;                // model.dcn.layers: cross layers of dcn_v2
  int dcn_low_rank = 0;              // model.dcn.low_rank: r of each layer's W = U V (U: d x r, V: r x d)
  bool fused_interaction = false;    // model.interaction_kernel: fused (NVIDIA's dot_based_interact)
  int interaction_pad_to = 1;        // model.interaction_pad_to: the dot output's width rounded up to it
  MlpEpilogue mlp_epilogue = MlpEpilogue::fused;  // model.mlp_epilogue
  bool torch_embedding_bag = false;  // model.embedding_kernel: torch (nn.EmbeddingBag per table)
  std::vector<TableEntry> tables;
  int global_batch = 0;
  models::Dtype dtype = models::Dtype::fp32;         // GEMM math; fp16 / bf16 = AMP
  models::Dtype embedding_dtype = models::Dtype::fp32;
  DlrmOptimizer optimizer = DlrmOptimizer::sgd;             // training.optimizer: the MLPs' (and replicated tables')
  DlrmOptimizer embedding_optimizer = DlrmOptimizer::sgd;   // training.embedding_optimizer: sharded tables'
  bool cuda_graphs = false;
  bool graph_forward_backward = false;     // training.graph_scope: forward_backward
  bool sync_each_step = false;             // training.sync_each_step: a device sync before next(batch_iter)
  bool sparse_embedding_gradient = false;  // training.embedding_gradient: sparse
  Seconds cpu_op_gap = 21e-6;              // CPU time of a PyTorch op before its launch (Lin et al. T1)
  Bytes ddp_bucket = 25.0 * 1024 * 1024;
  std::string plan = "table_wise";   // a kind for every table, auto, torchrec, or per_table (table_plan)
  bool torchrec_platform_topology = false;  // sharding.torchrec_topology: platform (else TorchRec's defaults)
  bool torchrec_library = false;      // sharding.library: torchrec (its ops around lookups and exchanges)
  std::vector<TableSharding> table_plan;  // sharding.plan listed per table (not all table_wise)
  std::string planner = "size_lookup_greedy";
  std::uint64_t seed = 0;
  std::vector<int> placement;        // table_wise: the rank of every table, instead of the planner
  bool bottom_on_rank0 = false;
  bool shared_process_group = false;  // sharding.process_groups: shared (NVIDIA DLE: one communicator)
  bool input_all_to_all = false;      // sharding.input_distribution: all_to_all (TorchRec's KJT all-to-all)
  bool pipelined = false;             // training.pipeline: sparse_dist (TorchRec's TrainPipelineSparseDist)
  std::string framework;              // framework: dle | torchrec (whose defaults the keys above took), or empty
  Bytes memory_reserve = 2.0 * 1024 * 1024 * 1024;
};

/// @brief Reads and checks the document of a `kind: dlrm` workload.
DlrmConfig read_dlrm_config(const YAML::Node& doc, const platforms::YamlReader& reader);

/// @brief The reuse histogram an embedding kernel gets for a table: empty for uniform indices
/// (the kernel model's own hit rate), the expected one for Zipf, as given otherwise.
std::vector<double> reuse_histogram(const IndexDistribution& d, double rows, double lookups);

/// @brief Expected lookups of a table's most-looked-up row among `lookups` draws: what collides
/// on one row when a sparse gradient is added into the table (models/compute/index_add.cpp).
double hottest_row_lookups(const IndexDistribution& d, double rows, double lookups);

}  // namespace stepsim::workloads
