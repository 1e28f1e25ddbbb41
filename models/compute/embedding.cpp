/// @file DLRM embedding-bag lookups (FBGEMM's pooled multi-table kernel): forward, and backward
/// with the fused SGD row update. Lin et al.'s heuristic model, papers.md §3.1; code:
/// github.com/owensgroup/ml_perf_model analysis/inference.py (get_cached_row_count,
/// embedding_forward_predictor, embedding_backward_sgd_predictor). Shape: T tables of E rows of
/// D elements, batch B, pooling L (average lookups per sample and table; may be fractional).
///
/// Forward. W = sm_count * floor(max_warps_per_sm * 0.71) warps run at once (FBGEMM's average
/// achieved occupancy 0.71; 64 x 0.71 = 45 in the source), so ceil(W / B) tables are looked up
/// at once and each keeps X = min(floor(0.9 L2 / ceil(W/B) / (e D)), E, B L) rows in L2
/// (e = element bytes). With u = (1 - 1/E)^(B L) the chance a row is never touched, the batch
/// touches E (1 - u) unique rows; the hit rate is
///     1 - E (1 - u) / (B L)                          when they fit (only cold misses),
///     1 - (X + (B L - X)(E - X)/E) / (B L)           otherwise.
/// Bytes per (table, sample): 32 table offsets + 64 offsets + r(4 L) indices + r(e D) output
/// from DRAM, L r(e D) of rows split between L2 (hits) and DRAM (misses), r = round up to 32 B.
/// time = max(DRAM time, L2 bytes / l2_bandwidth) * (1 if D > 64, 1.1 if D > 32, else 1.55);
/// the factor is the source's empirical penalty for narrow rows (warp divergence). A kernel that
/// casts as it pools (`output_bytes`, e.g. NVIDIA DLE's joint_fused gather writing fp16 rows of an
/// fp32 table under AMP) writes r(o D) per output instead of r(e D) (an extension of the source).
///
/// Backward (SGD). Warps per SM start at 32 and halve while warps * 512 B * ceil(D/128) reach
/// 2/3 of the SM's shared memory; tables at once = ceil(sm_count * warps / B); each table's L2
/// share is S = min(floor(L2 / tables), E D e) bytes, X = floor(S / (e D)) rows. The hit rate is
/// C(X, L) / C(E, L), the chance that all L rows of a bag are resident (1 when the whole table
/// is). Every looked-up row is read and written back (2 L r(e D) per sample); S of it are cold
/// loads from DRAM, the rest splits by the hit rate; offsets (96 B) come from L2, indices and
/// output gradients from DRAM. time = max(DRAM time, L2 time, B T L 4 floor(D/4) MACs / fp32
/// peak), the source's compute term.
///
/// Fused optimizers (`state_bytes`, default 0: SGD, the source's model). FBGEMM's table-batched
/// backward applies other optimizers in the same kernel (fbgemm_gpu's split_embedding backward
/// templates): each looked-up row's optimizer state, `state_bytes` per row (row-wise Adagrad: one
/// fp32; Adagrad: D fp32; Adam: 2 D fp32), is read and written back beside the row. The state
/// lives in arrays of its own, counted as DRAM traffic in 32-byte sectors (an extension of Lin et
/// al.'s SGD model, not part of it).
///
/// Index-reuse histogram (both passes, replaces the uniform-index hit rate). Lin et al.'s 17
/// reuse factors (merge_dlrm_datasets.get_reuse_factor): fractions f_j of a batch's unique
/// indices of one table that occur 1, 2, 3-4, 5-8, ..., 2^14+1..2^15 and more than 2^15 times.
/// Derivation: give bin j the mean of its integers, c_0 = 1, c_j = (2^(j-1) + 1 + 2^j) / 2 (the
/// open last bin as if it ended at 2^16). The mean reuse is c = sum f_j c_j, so the batch's
/// N = B L lookups touch U = N / c unique rows, U f_j of them c_j times each. The L2 keeps the X
/// most reused rows (frequently reused rows stay recently used, so LRU keeps them): filling X
/// from the highest bin down, every access to a resident row but its first (cold) one hits;
/// every access to a non-resident row misses. hit rate = sum over resident rows (c_j - 1) / N.
/// When all U rows fit this is 1 - U / N, the same form as the uniform heuristic's, with U
/// measured instead of derived from E; all-unique indices (f_0 = 1) give 0. An all-zero
/// histogram (the source's encoding of a batch without lookups) gives 0.
///
/// Departures from the Python, each because stepsim's inputs differ: DRAM time is bytes over
/// datasheet HBM bandwidth times the architecture's achievable fraction (roofline.cpp), not a
/// fitted curve; the L2 roof is gpus.yaml's l2_bandwidth; rows are e bytes per element (fp32 in
/// the source, identical for fp32 tables); warps and shared memory per SM come from the CUDA
/// guide's limits by compute capability; the backward cold-load term is capped at the row
/// traffic it is part of (the source's total can go negative for tiny batches).
#include <algorithm>
#include <cmath>

#include "models/compute/roofline.hpp"

namespace stepsim::models {
namespace {

constexpr std::size_t kReuseBins = 17;

constexpr const char* kHistogramMeaning =
    "17 fractions of a batch's unique indices (one table) that occur 1, 2, 3-4, 5-8, ..., 16385-32768 and "
    "more than 32768 times (Lin et al.'s reuse factors)";

double round_up_32(Bytes bytes) { return std::ceil(bytes / 32) * 32; }

struct Lookup {
  double tables, rows, dim, pooling, batch;
  Bytes element;
  double lookups() const { return batch * pooling; }  // per table
};

Lookup lookup_of(const KernelSpec& spec) {
  return {spec.param("tables"), spec.param("rows"),  spec.param("dim"),
          spec.param("pooling"), spec.param("batch"), bytes_of(spec.dtype)};
}

std::vector<KernelParam> embedding_params() {
  return {{"tables", "T: embedding tables looked up by the kernel", std::nullopt, 1},
          {"rows", "E: rows per table", std::nullopt, 1},
          {"dim", "D: elements per row", std::nullopt, 1},
          {"pooling", "L: average lookups per sample and table (pooling factor)", std::nullopt, 0},
          {"batch", "B: samples", std::nullopt, 1}};
}

// Mean of the integers in reuse bin j: 1, 2, 3.5, 6.5, ..., the open last bin as (2^15, 2^16].
double bin_reuse(std::size_t j) {
  if (j == 0) return 1;
  const double high = std::ldexp(1.0, static_cast<int>(j));
  return (high / 2 + 1 + high) / 2;
}

double histogram_hit_rate(const std::vector<double>& histogram, double lookups, double resident) {
  double total = 0, mean_reuse = 0;
  for (std::size_t j = 0; j < histogram.size(); ++j) {
    total += histogram[j];
    mean_reuse += histogram[j] * bin_reuse(j);
  }
  if (total <= 0 || lookups <= 0) return 0;
  mean_reuse /= total;
  const double unique = lookups / mean_reuse;
  double hits = 0, room = resident;
  for (std::size_t j = histogram.size(); j-- > 0 && room > 0;) {
    const double kept = std::min(unique * histogram[j] / total, room);
    hits += kept * (bin_reuse(j) - 1);
    room -= kept;
  }
  return hits / lookups;
}

double uniform_forward_hit_rate(double rows, double lookups, double resident) {
  if (lookups <= 0) return 0;
  const double untouched = std::exp(lookups * std::log1p(-1 / rows));  // (1 - 1/E)^(B L)
  const double unique = rows * (1 - untouched);
  if (unique > resident) return 1 - (resident + (lookups - resident) * (rows - resident) / rows) / lookups;
  return 1 - unique / lookups;
}

// C(X, L) / C(E, L) through log-gamma, so that fractional L and large E stay exact enough.
double bag_hit_rate(double resident, double rows, double pooling) {
  if (resident >= rows) return 1;
  if (resident < pooling) return 0;
  return std::exp(std::lgamma(resident + 1) - std::lgamma(resident - pooling + 1) - std::lgamma(rows + 1) +
                  std::lgamma(rows - pooling + 1));
}

/// @brief What forward and backward lookups share: their parameters and reuse histogram.
class EmbeddingModel : public KernelModel {
 public:
  std::vector<KernelParam> params() const override { return embedding_params(); }
  std::string histogram_meaning() const override { return kHistogramMeaning; }
  std::size_t histogram_bins() const override { return kReuseBins; }
};

class EmbeddingForward : public EmbeddingModel {
 public:
  std::vector<KernelParam> params() const override {
    std::vector<KernelParam> p = embedding_params();
    p.push_back({"output_bytes", "bytes per output element when the kernel casts as it pools (0: the rows' own)", 0.0, 0});
    return p;
  }
  KernelCost cost(const KernelSpec& spec, const platforms::GpuModel& gpu) const override {
    const Lookup s = lookup_of(spec);
    const double warps = gpu.sm_count * std::floor(sm_limits(gpu.sm_version).warps * 0.71);
    const double tables_at_once = std::ceil(warps / s.batch);
    const double resident = std::min(
        {std::floor(0.9 * gpu.l2_size / tables_at_once / (s.element * s.dim)), s.rows, s.lookups()});
    const double hit_rate = spec.histogram.empty() ? uniform_forward_hit_rate(s.rows, s.lookups(), resident)
                                                   : histogram_hit_rate(spec.histogram, s.lookups(), resident);

    const Bytes row = round_up_32(s.element * s.dim);
    const double output_element = spec.param("output_bytes") > 0 ? spec.param("output_bytes") : s.element;
    const Bytes per_sample = 32 + 64 + round_up_32(4 * s.pooling) + round_up_32(output_element * s.dim);
    const Bytes l2 = s.tables * s.batch * hit_rate * s.pooling * row;
    const Bytes dram = s.tables * s.batch * (per_sample + (1 - hit_rate) * s.pooling * row);
    const double narrow_rows = s.dim > 64 ? 1 : s.dim > 32 ? 1.1 : 1.55;
    const Seconds dram_time = hbm_time(dram, gpu), l2_time = l2 / gpu.l2_bandwidth;

    KernelCost cost;
    cost.time = std::max(dram_time, l2_time) * narrow_rows;
    cost.flops = s.tables * s.batch * s.pooling * s.dim;  // the pooling sums
    cost.bytes = dram;
    cost.bound = dram_time >= l2_time ? "memory" : "l2";
    return cost;
  }
};

class EmbeddingBackward : public EmbeddingModel {
 public:
  std::vector<KernelParam> params() const override {
    std::vector<KernelParam> p = embedding_params();
    p.push_back({"state_bytes", "bytes of optimizer state per row, read and written with it (0: SGD)", 0.0, 0});
    return p;
  }
  KernelCost cost(const KernelSpec& spec, const platforms::GpuModel& gpu) const override {
    const Lookup s = lookup_of(spec);
    const Bytes usable_shared = std::floor(sm_limits(gpu.sm_version).shared_memory * 2 / 3 / 16) * 16;
    double warps_per_sm = 32;
    while (warps_per_sm > 1 && warps_per_sm * 512 * std::ceil(s.dim / 128) >= usable_shared)
      warps_per_sm = std::floor(warps_per_sm / 2);
    const double tables_at_once = std::ceil(gpu.sm_count * warps_per_sm / s.batch);
    const Bytes table_share = std::min(std::floor(gpu.l2_size / tables_at_once), s.rows * s.dim * s.element);
    const double resident = std::floor(table_share / s.element / s.dim);
    const double hit_rate = spec.histogram.empty() ? bag_hit_rate(resident, s.rows, s.pooling)
                                                   : histogram_hit_rate(spec.histogram, s.lookups(), resident);

    const Bytes row = round_up_32(s.element * s.dim);
    const Bytes row_traffic = s.batch * 2 * s.pooling * row;  // read and write back every row
    const Bytes cold = std::min(table_share, row_traffic);
    const Bytes l2 = s.tables * (s.batch * (32 + 64) + hit_rate * (row_traffic - cold));
    const Bytes state = spec.param("state_bytes") > 0 ? round_up_32(spec.param("state_bytes")) : 0;
    const Bytes dram = s.tables * (s.batch * (round_up_32(4 * s.pooling) + row + 2 * s.pooling * state) +
                                   (1 - hit_rate) * (row_traffic - cold) + cold);
    const double macs = s.batch * s.tables * s.pooling * 4 * std::floor(s.dim / 4);
    const Seconds dram_time = hbm_time(dram, gpu), l2_time = l2 / gpu.l2_bandwidth;
    const Seconds compute_time = macs / gpu.fp32_flops;

    KernelCost cost;
    cost.time = std::max({dram_time, l2_time, compute_time});
    cost.flops = macs;
    cost.bytes = dram;
    cost.bound = cost.time == compute_time ? "compute" : cost.time == dram_time ? "memory" : "l2";
    return cost;
  }
};

}  // namespace

STEPSIM_REGISTER_KERNEL_MODEL(EmbeddingForward, "embedding_forward",
                              "DLRM pooled embedding lookup (FBGEMM), Lin et al.'s L2 hit-rate model")
STEPSIM_REGISTER_KERNEL_MODEL(EmbeddingBackward, "embedding_backward",
                              "DLRM embedding backward with fused SGD update, Lin et al.'s model")

}  // namespace stepsim::models
