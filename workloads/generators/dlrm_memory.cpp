#include "workloads/generators/dlrm_memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

namespace stepsim::workloads {
namespace {

using models::MemoryTerm;

// Weights of an MLP over `input` features with these output widths (weights and biases).
double mlp_params(int input, const std::vector<int>& widths) {
  double params = 0;
  for (int w : widths) {
    params += double(input) * w + w;
    input = w;
  }
  return params;
}

// Each layer keeps its GEMM output and its ReLU output for the backward (a fused epilogue
// keeps one of the two, which this does not tell apart).
double mlp_saved_values(const std::vector<int>& widths) {
  return 2.0 * std::accumulate(widths.begin(), widths.end(), 0.0);
}

models::MemoryWalk walk_rank(const DlrmConfig& c, const DlrmRankShape& r, double batch, double bottom_batch,
                             int top_input, int ranks) {
  const double act = models::bytes_of(c.dtype);
  const double table = models::bytes_of(c.embedding_dtype);
  const double cross_params =
      c.interaction == "dcn_v2" ? c.dcn_layers * (2.0 * top_input * c.dcn_low_rank + top_input) : 0;
  const double dense =
      mlp_params(top_input, c.top_mlp) + (r.bottom ? mlp_params(c.dense_features, c.bottom_mlp) : 0) + cross_params;
  models::MemoryWalk w;
  w.allocate(MemoryTerm::parameters, r.table_bytes + 4 * dense);
  // Optimizer state, fp32: the tables' (as the planners placed it) and the dense parameters'.
  w.allocate(MemoryTerm::optimizer, r.table_state + optimizer_state_bytes(c.optimizer, 1) * dense);
  // fp32 dense gradients, and DDP's bucket copy of them across ranks (gradient_as_bucket_view off).
  w.allocate(MemoryTerm::gradients, 4 * dense * (ranks > 1 ? 2 : 1));
  // Inputs: the rank's int64 indices and the dense features (fp32).
  w.allocate(MemoryTerm::buffers, 8 * r.lookups + (r.bottom ? 4.0 * bottom_batch * c.dense_features : 0));
  // Forward: the pooled lookups (under AMP only their cast to the math dtype stays: the cast's
  // backward needs no input); the exchange's received values; the MLPs' outputs; the
  // interaction's concatenated vectors and output.
  w.allocate(MemoryTerm::activations, r.lookup_values * std::min(act, table));
  if (ranks > 1) w.allocate(MemoryTerm::buffers, r.exchanged_values * act);
  if (r.bottom) w.allocate(MemoryTerm::activations, bottom_batch * mlp_saved_values(c.bottom_mlp) * act);
  const double vectors = c.tables.size() + 1.0;
  // DCN v2 keeps x0 and, per cross layer, V x_l (r wide), U V x_l + bias and x_{l+1}.
  const double cross = c.interaction == "dcn_v2" ? c.dcn_layers * (2.0 * top_input + c.dcn_low_rank) : 0;
  const double interaction =
      batch * (vectors * c.embedding_dim + (c.interaction == "dot" ? vectors * vectors : 0) + top_input + cross) * act;
  w.allocate(MemoryTerm::activations, interaction);
  const double top = batch * mlp_saved_values(c.top_mlp) * act;
  w.allocate(MemoryTerm::activations, top);
  // The top MLP's backward: the gradient of its widest layer's output and input.
  models::MemoryTerms momentary;
  const int widest = *std::max_element(c.top_mlp.begin(), c.top_mlp.end());
  momentary[MemoryTerm::activations] = 2.0 * batch * std::max(widest, top_input) * act;
  w.peak_at({"top MLP backward"}, momentary);
  // The embeddings' backward: the top MLP's activations are gone; the interaction's input
  // gradient and the embeddings' gradient are live. Sparse: one row per lookup, in the math dtype
  // and cast to the tables' dtype under AMP, with its int64 indices. Fused (FBGEMM's backward with
  // the optimizer in it): no table-sized gradient, only the pooled gradient and the sort of the
  // lookups by row (fbgemm_gpu transpose_embedding_input: linear indices, their sorted copy and
  // sample positions, int64 each, and the runs' ids and lengths, 8 B more: 32 B per lookup).
  // Replicated tables get a whole-table dense gradient either way (DDP reduces it).
  w.release(MemoryTerm::activations, top);
  momentary = {};
  momentary[MemoryTerm::activations] = batch * vectors * c.embedding_dim * act;
  momentary[MemoryTerm::gradients] =
      r.replicated_bytes + (c.sparse_embedding_gradient ? r.lookup_values * (table + (act < table ? act : 0)) + 8 * r.lookups
                                                        : r.lookup_values * act + 32 * r.lookups);
  w.peak_at({"embedding backward"}, momentary);
  return w;
}

}  // namespace

models::MemoryReport dlrm_memory(const DlrmConfig& config, const std::vector<DlrmRankShape>& ranks, double local_batch,
                                 double bottom_batch, int top_input, const platforms::GpuModel& gpu) {
  models::MemoryReport report;
  report.capacity = gpu.memory;
  const int n = static_cast<int>(ranks.size());
  // DLE's and the generator's two communicators (embedding exchange, dense all-reduce).
  const models::RuntimeMemory runtime = models::runtime_memory(gpu, n > 1 ? 2 : 0);
  std::map<std::tuple<double, double, double, double, double, bool, double>, int> group_of_shape;
  report.group_of_rank.resize(ranks.size());
  for (int r = 0; r < n; ++r) {
    const DlrmRankShape& s = ranks[static_cast<std::size_t>(r)];
    const auto key =
        std::make_tuple(s.table_bytes, s.table_state, s.lookup_values, s.lookups, s.exchanged_values, s.bottom,
                        s.replicated_bytes);
    auto [it, fresh] = group_of_shape.emplace(key, static_cast<int>(report.groups.size()));
    if (fresh) {
      const double batch_of_bottom = s.bottom ? bottom_batch : 0;
      report.groups.push_back(models::finish(
          fmt::format("rank {}", r), {}, walk_rank(config, s, local_batch, batch_of_bottom, top_input, n), runtime));
    }
    report.group_of_rank[static_cast<std::size_t>(r)] = it->second;
    report.groups[static_cast<std::size_t>(it->second)].ranks.push_back(r);
  }
  for (models::RankMemory& g : report.groups)
    if (g.ranks.size() > 1) g.label = fmt::format("{} ranks like rank {}", g.ranks.size(), g.ranks.front());
  return report;
}

}  // namespace stepsim::workloads
