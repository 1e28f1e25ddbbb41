/// @file Zhou et al.'s collective-level compression on the ring (IPDPS 2023; mechanism as
/// papers.md §2.1 reads it): allgather compresses each block once at its origin and forwards
/// it compressed; reduce-scatter decompresses, reduces and recompresses at every step,
/// pipelined over chunks; allreduce is the two in turn.
///
/// Blocks. Ring c (channel c) carries piece c. Each ring position's block is cut into m chunks
/// (m = 1 for allgather), block id = position x m + chunk, so that one ring position's data
/// is a run of m consecutive blocks and the reduce-scatter's pipeline visits blocks in a
/// constant shift (below), one compact Round for its steady state.
///
/// Reduce-scatter pipeline. Unit w = k m + q (ring step k, q-th chunk, chunks taken last
/// first) at the sender in position i moves block i m - 1 - w: position i - k - 1's chunk
/// m - 1 - q, the partial sum it forwards at ring step k, as a plain ring reduce-scatter does.
/// Unit w is compressed in slot s w, sent in slot s w + 1 and decompressed into the receiver's
/// copy in slot s w + 2, with stride s = ceil(3 / m): a unit's compression needs the
/// decompression of unit w - m (the same chunk, one ring step earlier) at the same rank, which
/// m >= 3 puts at least one slot before it. With s = 1 every middle slot holds the
/// compression of unit u, the transfer of unit u - 1 and the decompression of unit u - 2 on
/// every ring, and slot u + 1 is slot u with every block one lower: one Round repeated.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "models/collectives/lowering.hpp"
#include "models/collectives/ring_order.hpp"
#include "models/compression/compressed_schedules.hpp"
#include "platforms/config_error.hpp"

namespace stepsim::models {
namespace {

int wrap(std::int64_t value, int modulus) { return static_cast<int>((value % modulus + modulus) % modulus); }

Step codec_step(const Schedule& s, StepKind kind, int rank, int block, int count, int channel, Combine combine) {
  Step st = lowering::step(s, rank, rank, block, count, channel, combine, channel);
  st.kind = kind;
  st.wire_bytes = 0;
  return st;
}

Step compressed_transfer(const Schedule& s, int src, int dst, int block, int count, int channel) {
  Step st = lowering::step(s, src, dst, block, count, channel, Combine::replace, channel);
  st.compressed = true;
  st.wire_bytes = count * s.compressed_piece_bytes;
  return st;
}

class Builder {
 public:
  Builder(Schedule& s, const std::vector<std::vector<int>>& rings, int chunks)
      : s_(s), rings_(rings), n_(static_cast<int>(rings.front().size())), m_(chunks) {}

  /// The reduce-scatter pipeline (file comment): slots of compressions, transfers and
  /// decompressions, compact when the stride is 1.
  void reduce_scatter() {
    const std::int64_t units = static_cast<std::int64_t>(n_ - 1) * m_;
    const int stride = (3 + m_ - 1) / m_;
    if (stride == 1 && units >= 3) {
      const std::int64_t last = units + 1;   // slot of the last decompression
      s_.rounds.push_back({slot(0, stride), 1, 0});
      s_.rounds.push_back({slot(1, stride), 1, 0});
      s_.rounds.push_back({slot(2, stride), static_cast<int>(units - 2), s_.num_blocks - 1});
      s_.rounds.push_back({slot(last - 1, stride), 1, 0});
      s_.rounds.push_back({slot(last, stride), 1, 0});
      return;
    }
    for (std::int64_t u = 0; u <= stride * (units - 1) + 2; ++u) s_.rounds.push_back({slot(u, stride), 1, 0});
  }

  /// The allgather of each position's m blocks: compressed once, forwarded n - 1 times,
  /// decompressed one step after arriving (next to its forward) and the last at the end.
  void allgather() {
    Round compress, first, middle, last;
    for (int c = 0; c < static_cast<int>(rings_.size()); ++c)
      for (int i = 0; i < n_; ++i) {
        const int rank = rings_[c][i], next = rings_[c][(i + 1) % n_];
        compress.steps.push_back(codec_step(s_, StepKind::compress, rank, i * m_, m_, c, Combine::replace));
        first.steps.push_back(compressed_transfer(s_, rank, next, i * m_, m_, c));
        const int received = wrap(i - 1, n_) * m_;
        middle.steps.push_back(compressed_transfer(s_, rank, next, received, m_, c));
        middle.steps.push_back(codec_step(s_, StepKind::decompress, rank, received, m_, c, Combine::replace));
        last.steps.push_back(codec_step(s_, StepKind::decompress, rank, wrap(i + 1, n_) * m_, m_, c, Combine::replace));
      }
    middle.repeat = n_ - 2;
    middle.block_shift = s_.num_blocks - m_;
    s_.rounds.push_back(compress);
    s_.rounds.push_back(first);
    if (middle.repeat > 0) s_.rounds.push_back(middle);
    s_.rounds.push_back(last);
  }

 private:
  /// Steps of slot u: per ring and position, the compression of unit u / stride, the transfer
  /// of unit (u - 1) / stride and the decompression of unit (u - 2) / stride, where those
  /// divide and the unit exists.
  std::vector<Step> slot(std::int64_t u, int stride) const {
    const std::int64_t units = static_cast<std::int64_t>(n_ - 1) * m_;
    std::vector<Step> steps;
    for (int c = 0; c < static_cast<int>(rings_.size()); ++c)
      for (int i = 0; i < n_; ++i) {
        const int rank = rings_[c][i], next = rings_[c][(i + 1) % n_];
        auto unit_at = [&](int stage) -> std::int64_t {
          const std::int64_t offset = u - stage;
          if (offset < 0 || offset % stride != 0 || offset / stride >= units) return -1;
          return offset / stride;
        };
        auto block = [&](std::int64_t w) { return wrap(static_cast<std::int64_t>(i) * m_ - 1 - w, s_.num_blocks); };
        if (const std::int64_t w = unit_at(0); w >= 0)
          steps.push_back(codec_step(s_, StepKind::compress, rank, block(w), 1, c, Combine::replace));
        if (const std::int64_t w = unit_at(1); w >= 0) steps.push_back(compressed_transfer(s_, rank, next, block(w), 1, c));
        if (const std::int64_t w = unit_at(2); w >= 0)
          steps.push_back(codec_step(s_, StepKind::decompress, next, block(w), 1, c, Combine::reduce));
      }
    return steps;
  }

  Schedule& s_;
  const std::vector<std::vector<int>>& rings_;
  int n_;
  int m_;
};

/// Chunks per block of the reduce-scatter when options.chunk_bytes is unset: of one chunk (the
/// three stages in turn), three, and one per kCompressedChunkBytes, the one the closed form
/// prices lowest. A ring step is priced on ring 0's slowest hop (route latency + compressed
/// bytes / route bandwidth), a pipelined slot at its slowest stage (the GPU runs one
/// compression and one decompression: max a + c / B_c + c / B_d), and the pipeline takes
/// (n - 1) m + 2 slots; unpipelined, (n - 1) (t_c + hop + t_d).
int reduce_scatter_chunks(const CollectiveContext& ctx, const std::vector<int>& ring, Bytes block, const Codec& codec) {
  const int n = static_cast<int>(ring.size());
  const CodecCost compress = codec.compress_cost(ctx.platform.gpu());
  const CodecCost decompress = codec.decompress_cost(ctx.platform.gpu());
  auto hop = [&](Bytes raw) {
    Seconds slowest = 0;
    for (int i = 0; i < n; ++i) {
      const platforms::Route& route = ctx.route(ring[i], ring[(i + 1) % n]);
      slowest = std::max(slowest, route.latency + codec.compressed_bytes(raw) / route.bandwidth);
    }
    return slowest;
  };
  auto estimate = [&](int m) {
    if (m == 1) return (n - 1) * (compress.time(block) + hop(block) + decompress.time(block));
    const Bytes c = block / m;
    const Seconds gpu = std::max(compress.latency, decompress.latency) + c / compress.throughput + c / decompress.throughput;
    return (static_cast<double>(n - 1) * m + 2) * std::max(gpu, hop(c));
  };
  const int by_size = static_cast<int>(std::min<double>(std::ceil(block / kCompressedChunkBytes), lowering::kMaxChunks));
  int best = 1;
  for (int m : {3, std::max(3, by_size)})
    if (estimate(m) < estimate(best)) best = m;
  return best;
}

}  // namespace

Schedule compressed_ring(const CollectiveSpec& spec, const CollectiveContext& ctx, const Codec& codec) {
  const int n = spec.ranks;
  const int channels = lowering::channel_count(ctx);
  const std::vector<std::vector<int>> rings = channel_ring_orders(ctx, channels);
  const bool reduces = spec.op != CollectiveOp::allgather;
  int chunks = 1;
  const Bytes block = spec.bytes / n / channels;   // one ring position's share of one channel
  if (reduces && ctx.options.chunk_bytes > 0)
    chunks = static_cast<int>(
        std::clamp(std::ceil(block / ctx.options.chunk_bytes), 1.0, static_cast<double>(lowering::kMaxChunks)));
  else if (reduces && n > 1)
    chunks = reduce_scatter_chunks(ctx, rings.front(), block, codec);
  // Fewer than 3 chunks store every slot (about 3 (n - 1) m of them, n x channels steps each);
  // 3 or more are compact whatever n.
  const double explicit_steps = 3.0 * (n - 1) * chunks * n * channels;
  if (reduces && chunks < 3 && explicit_steps > lowering::kMaxPipelineSteps) {
    if (ctx.options.chunk_bytes > 0)
      throw ConfigError("--chunk",
                        fmt::format("{} chunk(s) per block make the compressed reduce-scatter of {} ranks store about "
                                    "{:.0f} steps (more than {})",
                                    chunks, n, explicit_steps, lowering::kMaxPipelineSteps),
                        "use a chunk of at most a third of the block, which keeps the pipeline compact");
    chunks = 3;
  }
  Schedule s = lowering::start(spec, "compressed_ring", n * chunks, channels, channels);
  s.compressed_piece_bytes = codec.compressed_bytes(s.piece_bytes());
  s.notes.push_back(fmt::format("codec {}: {:.0f} -> {:.0f} bytes per cell", codec.spec(), s.piece_bytes(),
                                s.compressed_piece_bytes));
  if (spec.op == CollectiveOp::allgather || spec.op == CollectiveOp::reduce_scatter) {
    s.block_owner.assign(static_cast<std::size_t>(channels), std::vector<int>(static_cast<std::size_t>(n * chunks)));
    for (int c = 0; c < channels; ++c)
      for (int b = 0; b < n * chunks; ++b) s.block_owner[c][b] = rings[c][b / chunks];
  }
  if (n < 2) return s;
  Builder build(s, rings, chunks);
  if (reduces) {
    const int stride = (3 + chunks - 1) / chunks;
    s.notes.push_back("reduce-scatter pipelined over " + std::to_string(chunks) + " chunk(s) per block" +
                      (stride == 1 ? "" : " (fewer than 3: compress, send and decompress run in turn)"));
    build.reduce_scatter();
  }
  if (spec.op != CollectiveOp::reduce_scatter) build.allgather();
  price_codec_steps(s, codec, ctx.platform.gpu());
  return s;
}

}  // namespace stepsim::models
