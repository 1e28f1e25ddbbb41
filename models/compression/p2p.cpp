/// @file Point-to-point compression, MVAPICH2-GDR's on-the-fly scheme that Zhou et al. improve
/// on (papers.md §2.1, the IPDPS 2021 design): every GPU message of at least the threshold
/// (MVAPICH-Plus default 1 MB) is compressed by its sender and decompressed by its receiver
/// inside the send / receive, so a ring step costs t_c + alpha + s / (CR beta) + t_d.
#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "models/collectives/lowering.hpp"
#include "models/compression/compressed_schedules.hpp"
#include "platforms/config_error.hpp"

namespace stepsim::models {
namespace {

/// One expanded repetition's steps: blocks rotated as Schedule::for_each_expanded does.
std::vector<Step> expanded(const Schedule& s, const Round& round, int rep) {
  std::vector<Step> steps = round.steps;
  for (Step& st : steps)
    st.block = static_cast<int>(((st.block + static_cast<std::int64_t>(rep) * round.block_shift) % s.num_blocks +
                                 s.num_blocks) %
                                s.num_blocks);
  return steps;
}

/// Which transfers of a round go compressed: large enough, between two ranks (switches run no
/// codec), not already a codec step, and the only write of their destination cells in the
/// round (see compress_transfers). Counts the large ones left raw for that last reason.
std::vector<char> eligible(const Schedule& s, const std::vector<Step>& steps, Bytes threshold, int& kept_raw) {
  const auto large = [&](const Step& st) {
    return !st.is_codec() && !st.compressed && st.src < s.spec.ranks && st.dst < s.spec.ranks &&
           st.block_count * s.piece_bytes() >= threshold;
  };
  std::map<std::tuple<int, int, int>, int> writers;   // (dst, block, piece) -> transfers writing it
  for (const Step& st : steps)
    if (!st.is_codec())
      for (int k = 0; k < st.block_count; ++k) ++writers[{st.dst, (st.block + k) % s.num_blocks, st.piece}];
  std::vector<char> out(steps.size(), 0);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (!large(steps[i])) continue;
    bool alone = true;
    for (int k = 0; k < steps[i].block_count; ++k)
      alone = alone && writers[{steps[i].dst, (steps[i].block + k) % s.num_blocks, steps[i].piece}] == 1;
    out[i] = alone;
    kept_raw += !alone;
  }
  return out;
}

}  // namespace

Schedule compress_transfers(const Schedule& schedule, const Codec& codec, Bytes threshold,
                            const CollectiveContext& ctx) {
  Schedule s = schedule;
  s.rounds.clear();
  s.algorithm = schedule.algorithm + "+p2p";
  s.compressed_piece_bytes = codec.compressed_bytes(schedule.piece_bytes());
  int kept_raw = 0;
  std::int64_t stored = 0, compressed = 0;
  for (const Round& round : schedule.rounds) {
    // Repetitions differ in blocks only, a bijection of the cells, so which transfers go
    // compressed is the same in each: a round with none stays compact.
    int kept_raw_per_rep = 0;
    const std::vector<char> large = eligible(schedule, round.steps, threshold, kept_raw_per_rep);
    kept_raw += kept_raw_per_rep * round.repeat;
    if (std::find(large.begin(), large.end(), 1) == large.end()) {
      s.rounds.push_back(round);
      stored += static_cast<std::int64_t>(round.steps.size());
      continue;
    }
    for (int rep = 0; rep < round.repeat; ++rep) {
      const std::vector<Step> steps = expanded(schedule, round, rep);
      Round c, t, d;
      std::set<std::tuple<int, int, int, int>> compressed_here;   // (src, block, count, piece)
      for (std::size_t i = 0; i < steps.size(); ++i) {
        Step st = steps[i];
        if (!large[i]) {
          t.steps.push_back(st);
          continue;
        }
        ++compressed;
        if (compressed_here.insert({st.src, st.block, st.block_count, st.piece}).second) {
          Step compress = st;
          compress.kind = StepKind::compress;
          compress.dst = st.src;
          compress.combine = Combine::replace;
          compress.wire_bytes = 0;
          c.steps.push_back(compress);
        }
        Step decompress = st;
        decompress.kind = StepKind::decompress;
        decompress.src = st.dst;
        decompress.wire_bytes = 0;
        d.steps.push_back(decompress);
        st.compressed = true;
        st.combine = Combine::replace;
        st.wire_bytes = st.block_count * s.compressed_piece_bytes;
        t.steps.push_back(st);
      }
      stored += static_cast<std::int64_t>(c.steps.size() + t.steps.size() + d.steps.size());
      if (stored > lowering::kMaxPipelineSteps)
        throw ConfigError("--compression-mode",
                          fmt::format("point-to-point compression of '{}' needs more than {} stored steps (every "
                                      "repetition of a round with a large message becomes three rounds)",
                                      schedule.algorithm, lowering::kMaxPipelineSteps),
                          "use fewer ranks, a larger --compression-threshold, or --compression-mode collective");
      s.rounds.insert(s.rounds.end(), {std::move(c), std::move(t), std::move(d)});
    }
  }
  s.notes.push_back(fmt::format("p2p compression {} of messages >= {:.0f} bytes: {} transfers compressed", codec.spec(),
                                threshold, compressed));
  if (kept_raw > 0)
    s.notes.push_back(fmt::format("{} large transfers kept raw: another transfer of their round writes the same "
                                  "cell (one compressed buffer per cell in this model)",
                                  kept_raw));
  price_codec_steps(s, codec, ctx.platform.gpu());
  return s;
}

}  // namespace stepsim::models
