/// @file The entry point of compression-assisted lowering, the pricing of codec steps on a GPU
/// and the error bound a compressed schedule leaves (compressed_schedules.hpp).
#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "models/collectives/lowering.hpp"
#include "models/collectives/primitives_runtime.hpp"
#include "models/compression/compressed_schedules.hpp"
#include "platforms/config_error.hpp"

namespace stepsim::models {

namespace {

/// Error replay state above this many (endpoint, cell) entries is not worth its memory.
constexpr double kMaxErrorReplayCells = 1 << 24;

/// Notes the error bound the schedule leaves, relative to the inputs' largest magnitude.
Schedule with_error_note(Schedule s, const Codec& codec) {
  if (codec.lossless()) {
    s.notes.push_back("error bound 0 (lossless codec)");
  } else if (static_cast<double>(s.endpoints()) * s.num_blocks * s.pieces <= kMaxErrorReplayCells) {
    s.notes.push_back(fmt::format("error bound {:.3g} x the inputs' largest magnitude (worst case over the "
                                  "schedule's compressions)",
                                  schedule_error_bound(s, codec, 1.0)));
  }
  return s;
}

Schedule lower_uncosted(const std::string& name, const Algorithm& algorithm, const CollectiveSpec& spec,
                        const CollectiveContext& ctx) {
  const CompressionOptions& asked = ctx.options.compression;
  if (asked.codec.empty()) return algorithm.lower(spec, ctx);
  const std::unique_ptr<Codec> codec = parse_codec(asked.codec, "--compression");
  if (asked.mode == CompressionMode::p2p)
    return with_error_note(compress_transfers(algorithm.lower(spec, ctx), *codec, asked.threshold, ctx), *codec);
  if (name != "ring")
    throw ConfigError("--compression-mode", "collective-level compression is Zhou et al.'s compressed ring; '" + name +
                                                "' has no compressed form",
                      "use --algo ring, or --compression-mode p2p to compress any algorithm's large messages");
  if (spec.op != CollectiveOp::allgather && spec.op != CollectiveOp::reduce_scatter &&
      spec.op != CollectiveOp::allreduce)
    throw ConfigError("--compression-mode",
                      std::string("collective-level compression covers allgather, reduce_scatter and allreduce, not ") +
                          to_string(spec.op),
                      "use --compression-mode p2p");
  lowering::require(algorithm, name, spec, ctx);
  return with_error_note(compressed_ring(spec, ctx, *codec), *codec);
}

}  // namespace

std::string compression_unsupported(const CompressionOptions& compression, const std::string& algorithm,
                                    CollectiveOp op) {
  if (compression.codec.empty() || compression.mode == CompressionMode::p2p) return "";
  if (algorithm != "ring")
    return "collective-level compression is Zhou et al.'s compressed ring; '" + algorithm + "' has no compressed form";
  if (op != CollectiveOp::allgather && op != CollectiveOp::reduce_scatter && op != CollectiveOp::allreduce)
    return std::string("collective-level compression covers allgather, reduce_scatter and allreduce, not ") +
           to_string(op);
  return "";
}

Schedule lower_collective(const std::string& name, const Algorithm& algorithm, const CollectiveSpec& spec,
                          const CollectiveContext& ctx) {
  AlgorithmRegistry::instance().get(name).check_params(ctx.options);
  Schedule s = lower_uncosted(name, algorithm, spec, ctx);
  apply_primitives_runtime(s, ctx);
  return s;
}

void price_codec_steps(Schedule& schedule, const Codec& codec, const platforms::GpuModel& gpu) {
  const CodecCost compress = codec.compress_cost(gpu);
  const CodecCost decompress = codec.decompress_cost(gpu);
  for (Round& round : schedule.rounds) {
    std::map<int, std::pair<Seconds, Seconds>> gpu_work;   // rank -> (largest a, sum of bytes / B)
    for (const Step& st : round.steps) {
      if (!st.is_codec()) continue;
      const CodecCost& cost = st.kind == StepKind::compress ? compress : decompress;
      auto& [latency, streaming] = gpu_work[st.src];
      latency = std::max(latency, cost.latency);
      streaming += st.block_count * schedule.piece_bytes() / cost.throughput;
    }
    for (Step& st : round.steps)
      if (st.is_codec()) st.codec_time = gpu_work[st.src].first + gpu_work[st.src].second;
  }
}

namespace {

/// What one endpoint holds of one cell in one form, for the error replay.
struct Held {
  bool held = false;
  double error = 0;       ///< bound on the absolute error of every value
  double magnitude = 0;   ///< bound on the absolute value (contributions x range)
};

}  // namespace

double schedule_error_bound(const Schedule& s, const Codec& codec, double range) {
  const std::int64_t cells = static_cast<std::int64_t>(s.num_blocks) * s.pieces;
  std::vector<Held> state(static_cast<std::size_t>(s.endpoints() * cells * 2));
  auto at = [&](int endpoint, int block, int piece, bool compressed) -> Held& {
    return state[static_cast<std::size_t>(((endpoint * cells) + static_cast<std::int64_t>(block) * s.pieces + piece) * 2 +
                                          compressed)];
  };
  const int n = s.spec.ranks;
  for (int b = 0; b < s.num_blocks; ++b)
    for (int p = 0; p < s.pieces; ++p) {
      auto own = [&](int rank) { at(rank, b, p, false) = {true, 0, range}; };
      switch (s.spec.op) {
        case CollectiveOp::allgather: own(s.owner_of(b, p)); break;
        case CollectiveOp::broadcast: own(s.spec.root); break;
        case CollectiveOp::alltoall: own(b / n); break;
        case CollectiveOp::sendrecv: own(b); break;
        case CollectiveOp::reduce_scatter:
        case CollectiveOp::allreduce:
        case CollectiveOp::reduce:
          for (int r = 0; r < n; ++r) own(r);
          break;
      }
    }
  // Rounds read the state before them (the checker's execution model): writes land after.
  for (const Round& round : s.rounds)
    for (int rep = 0; rep < round.repeat; ++rep) {
      std::vector<std::pair<Held*, std::pair<Held, Combine>>> writes;
      for (const Step& st : round.steps) {
        const bool from_compressed = st.kind == StepKind::decompress || st.compressed;
        const bool to_compressed = st.kind == StepKind::compress || st.compressed;
        const int first = static_cast<int>(
            ((st.block + static_cast<std::int64_t>(rep) * round.block_shift) % s.num_blocks + s.num_blocks) % s.num_blocks);
        for (int k = 0; k < st.block_count; ++k) {
          const int block = (first + k) % s.num_blocks;
          Held value = at(st.src, block, st.piece, from_compressed);
          if (st.kind == StepKind::compress) value.error += codec.error_bound(value.magnitude);
          writes.push_back({&at(st.dst, block, st.piece, to_compressed), {value, st.combine}});
        }
      }
      for (auto& [target, write] : writes) {
        const auto& [value, combine] = write;
        if (combine == Combine::replace || !target->held) {
          *target = value;
        } else {
          target->error += value.error;
          target->magnitude += value.magnitude;
        }
      }
    }
  double worst = 0;
  for (int r = 0; r < n; ++r)
    for (int b = 0; b < s.num_blocks; ++b)
      for (int p = 0; p < s.pieces; ++p)
        if (const Held& h = at(r, b, p, false); h.held) worst = std::max(worst, h.error);
  return worst;
}

}  // namespace stepsim::models
