#include "tools/sweep/tuner_table.hpp"

#include <fmt/format.h>

#include <memory>
#include <optional>

#include "platforms/config_error.hpp"
#include "sim/collective_prediction.hpp"

namespace stepsim::sweep {
namespace {

/// The winner at one size.
struct Choice {
  std::string algorithm, protocol, candidate;
  int channels = 0;
  double busbw_GBps = 0;
  bool same_as(const Choice& o) const {
    return algorithm == o.algorithm && protocol == o.protocol && channels == o.channels;
  }
};

/// "nccl:ring/LL128" -> "ring"; a non-NCCL schedule keeps its registry name, marked so that a
/// plugin (which can only apply NCCL's own algorithms) can tell it apart.
std::string algorithm_name(const sim::CollectivePrediction& p) {
  const std::string& s = p.schedule.algorithm;
  if (s.rfind("nccl:", 0) != 0) return "stepsim:" + p.algo;
  const std::size_t slash = s.find('/');
  return slash == std::string::npos ? s.substr(5) : s.substr(5, slash - 5);
}

Choice best_at(models::CollectiveOp op, Bytes bytes, const TunerRequest& request, const models::CollectiveContext& ctx,
               sim::Engine& engine) {
  models::CollectiveSpec spec;
  spec.op = op;
  spec.bytes = bytes;
  spec.ranks = ctx.ranks();
  std::optional<sim::CollectivePrediction> best;
  std::string best_label, reasons;
  for (const TunerCandidate& c : request.candidates) {
    models::AlgorithmOptions options = ctx.options;
    sim::add_algo_params(c.params, options);
    const models::CollectiveContext cctx{ctx.platform, ctx.allocation, options};
    if (auto why = sim::collective_unsupported(c.algo, spec, cctx)) {
      reasons += "; " + c.label() + ": " + *why;
      continue;
    }
    try {
      // A forced NCCL pair that NCCL disables for this case (e.g. tree for allgather) throws
      // ConfigError: that candidate simply does not run here.
      sim::CollectivePrediction p = sim::predict_collective(c.algo, spec, cctx, engine);
      if (!best || p.result.time < best->result.time) {
        best = std::move(p);
        best_label = c.label();
      }
    } catch (const ConfigError& e) {
      reasons += "; " + c.label() + ": " + e.what();
    }
  }
  if (!best)
    throw ConfigError(fmt::format("tuner table, {} of {}", models::to_string(op), format_size(bytes)),
                      "no candidate algorithm runs this case" + reasons,
                      "widen --algos or drop this op from --ops");
  return {algorithm_name(*best), best->schedule.protocol.name, best_label, best->schedule.channels, best->busbw_GBps()};
}

}  // namespace

std::string TunerCandidate::label() const {
  std::string out = algo;
  for (std::size_t i = 0; i < params.size(); ++i) out += (i == 0 ? "[" : ",") + params[i];
  return params.empty() ? out : out + "]";
}

std::vector<TunerCandidate> nccl_candidates() {
  std::vector<TunerCandidate> out;
  for (const char* algo : {"ring", "tree", "nvls", "nvls_tree", "collnet_direct", "collnet_chain"})
    for (const char* proto : {"LL", "LL128", "Simple"})
      out.push_back({"nccl", {std::string("algo=") + algo, std::string("proto=") + proto}});
  return out;
}

std::vector<Bytes> tuner_sizes(Bytes min_bytes, Bytes max_bytes) {
  std::vector<Bytes> sizes;
  for (Bytes s = min_bytes; s <= max_bytes; s *= 2) sizes.push_back(s);
  if (sizes.empty() || sizes.back() != max_bytes) sizes.push_back(max_bytes);
  return sizes;
}

std::vector<TunerRow> build_tuner_table(const TunerRequest& request, const models::CollectiveContext& ctx) {
  if (!(request.min_bytes >= 1) || request.min_bytes != static_cast<double>(static_cast<long long>(request.min_bytes)))
    throw ConfigError("--min", "the smallest size must be a whole number of bytes ≥ 1", "write e.g. --min 1KiB");
  if (!(request.max_bytes >= request.min_bytes) ||
      request.max_bytes != static_cast<double>(static_cast<long long>(request.max_bytes)))
    throw ConfigError("--max", "the largest size must be a whole number of bytes ≥ --min", "write e.g. --max 8GiB");
  if (request.ops.empty()) throw ConfigError("--ops", "no collective to tabulate", "name one, e.g. --ops allreduce");
  if (request.candidates.empty()) throw ConfigError("--algos", "no candidate algorithm", "name one, e.g. --algos nccl");
  if (ctx.ranks() < 2)
    throw ConfigError("--gpus", "a collective needs at least 2 ranks, got " + std::to_string(ctx.ranks()),
                      "select 2 or more GPUs");
  const std::unique_ptr<sim::Engine> engine = sim::make_engine("analytical");
  const std::vector<Bytes> sizes = tuner_sizes(request.min_bytes, request.max_bytes);
  std::vector<TunerRow> rows;
  for (models::CollectiveOp op : request.ops) {
    std::optional<Choice> open;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const Choice c = best_at(op, sizes[i], request, ctx, *engine);
      const Bytes range_end = i + 1 < sizes.size() ? sizes[i + 1] - 1 : request.max_bytes;
      if (open && open->same_as(c)) {
        rows.back().max_bytes = range_end;
        rows.back().busbw_GBps = c.busbw_GBps;
      } else {
        rows.push_back({op, sizes[i], range_end, c.algorithm, c.protocol, c.channels, c.busbw_GBps, c.candidate});
      }
      open = c;
    }
  }
  return rows;
}

std::string tuner_table_csv(const std::vector<TunerRow>& rows) {
  std::string out = "op,min_bytes,max_bytes,algorithm,protocol,channels,predicted_busbw_GBps\n";
  for (const TunerRow& r : rows)
    out += fmt::format("{},{:.0f},{:.0f},{},{},{},{:.3f}\n", models::to_string(r.op), r.min_bytes, r.max_bytes,
                       r.algorithm, r.protocol, r.channels, r.busbw_GBps);
  return out;
}

}  // namespace stepsim::sweep
