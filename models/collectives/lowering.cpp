#include "models/collectives/lowering.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "models/schedule_clock.hpp"
#include "platforms/config_error.hpp"

namespace stepsim::models::lowering {

int channel_count(const CollectiveContext& ctx) { return ctx.options.channels > 0 ? ctx.options.channels : 1; }

int chunk_count(const CollectiveContext& ctx, Bytes bytes, int lanes) {
  const Bytes chunk = ctx.options.chunk_bytes > 0 ? ctx.options.chunk_bytes : kDefaultChunkBytes;
  const double chunks = std::ceil(bytes / lanes / chunk);
  return static_cast<int>(std::clamp(chunks, 1.0, static_cast<double>(kMaxChunks)));
}

int pipeline_chunk_count(const CollectiveContext& ctx, Bytes bytes, int lanes, int links) {
  const int chunks = chunk_count(ctx, bytes, lanes);
  const std::int64_t per_chunk = static_cast<std::int64_t>(lanes) * std::max(links, 1);
  if (per_chunk * std::min(chunks, links) <= kMaxPipelineSteps) return chunks;
  return static_cast<int>(std::max<std::int64_t>(1, kMaxPipelineSteps / per_chunk));
}

Schedule start(const CollectiveSpec& spec, const std::string& algorithm, int num_blocks, int pieces,
               int channels) {
  Schedule s;
  s.spec = spec;
  s.algorithm = algorithm;
  s.num_blocks = num_blocks;
  s.pieces = pieces;
  s.channels = channels;
  const bool per_rank = spec.op == CollectiveOp::alltoall || spec.op == CollectiveOp::sendrecv;
  s.block_bytes = (per_rank ? spec.bytes * spec.ranks : spec.bytes) / num_blocks;
  return s;
}

Step step(const Schedule& s, int src, int dst, int block, int count, int piece, Combine combine, int channel) {
  Step st;
  st.src = src;
  st.dst = dst;
  st.block = block;
  st.block_count = count;
  st.piece = piece;
  st.combine = combine;
  st.channel = channel;
  st.wire_bytes = count * s.piece_bytes();
  return st;
}

void require(const Algorithm& algorithm, const std::string& name, const CollectiveSpec& spec,
             const CollectiveContext& ctx) {
  if (spec.ranks != ctx.ranks())
    throw ConfigError("--gpus", "the collective has " + std::to_string(spec.ranks) + " ranks but the allocation " +
                      std::to_string(ctx.ranks()) + " GPUs", "allocate one GPU per rank");
  if ((spec.op == CollectiveOp::broadcast || spec.op == CollectiveOp::reduce) &&
      (spec.root < 0 || spec.root >= spec.ranks))
    throw ConfigError("--root", "root " + std::to_string(spec.root) + " is not a rank",
                      "use a root in [0, " + std::to_string(spec.ranks) + ")");
  std::string why;
  if (!algorithm.supports(spec, ctx, &why))
    throw ConfigError("--algo", name + " cannot run " + to_string(spec.op) + ": " + why,
                      "pick another algorithm (stepsim collective --help lists them) or 'auto'");
}

std::vector<std::vector<int>> ranks_by_node(const CollectiveContext& ctx) {
  std::map<int, std::vector<int>> by_node;
  for (int r = 0; r < ctx.ranks(); ++r) by_node[ctx.node_of(r)].push_back(r);
  std::vector<std::vector<int>> out;
  for (auto& [node, ranks] : by_node) out.push_back(std::move(ranks));
  return out;
}

namespace {

int wrap(std::int64_t value, int modulus) { return static_cast<int>((value % modulus + modulus) % modulus); }

/// channels[r]: the channels ring (or chain) r carries.
using ChannelsOf = std::vector<std::vector<int>>;

ChannelsOf every_channel(const Schedule& s, std::size_t rings) {
  std::vector<int> all;
  for (int c = 0; c < s.channels; ++c) all.push_back(c);
  return ChannelsOf(rings, all);
}

ChannelsOf one_channel_each(std::size_t rings) {
  ChannelsOf out;
  for (std::size_t c = 0; c < rings; ++c) out.push_back({static_cast<int>(c)});
  return out;
}

/// The block distance d with owned(p - 1) = owned(p) + d for every ring, position and
/// channel it carries, if any.
std::optional<int> uniform_shift(const Schedule& s, const std::vector<std::vector<int>>& rings,
                                 const ChannelsOf& channels, const Owned& owned) {
  std::optional<int> shift;
  for (std::size_t r = 0; r < rings.size(); ++r) {
    const int len = static_cast<int>(rings[r].size());
    for (int p = 0; p < len; ++p)
      for (int c : channels[r]) {
        const std::vector<CellRun> here = owned(static_cast<int>(r), p, c);
        const std::vector<CellRun> before = owned(static_cast<int>(r), wrap(p - 1, len), c);
        if (here.size() != before.size() || here.empty()) return std::nullopt;
        for (std::size_t i = 0; i < here.size(); ++i) {
          if (here[i].count != before[i].count || here[i].piece != before[i].piece) return std::nullopt;
          const int d = wrap(before[i].block - here[i].block, s.num_blocks);
          if (shift && *shift != d) return std::nullopt;
          shift = d;
        }
      }
  }
  return shift;
}

void append_pass(Schedule& s, const std::vector<std::vector<int>>& rings, const ChannelsOf& channels,
                 const Owned& owned, Combine combine, int offset) {
  const int len = static_cast<int>(rings.front().size());
  if (len < 2) return;
  auto steps_at = [&](int k) {
    Round round;
    for (std::size_t r = 0; r < rings.size(); ++r)
      for (int i = 0; i < len; ++i)
        for (int c : channels[r])
          for (const CellRun& run : owned(static_cast<int>(r), wrap(i - k - offset, len), c))
            round.steps.push_back(step(s, rings[r][static_cast<std::size_t>(i)],
                                       rings[r][static_cast<std::size_t>((i + 1) % len)], run.block, run.count,
                                       run.piece, combine, c));
    return round;
  };
  if (std::optional<int> shift = uniform_shift(s, rings, channels, owned)) {
    Round round = steps_at(0);
    round.repeat = len - 1;
    round.block_shift = *shift;
    s.rounds.push_back(std::move(round));
    return;
  }
  for (int k = 0; k < len - 1; ++k) s.rounds.push_back(steps_at(k));
}

/// Round t of the pipeline sends chunk t - i over link i of every chain. Rounds
/// [links - 1, num_blocks - 1] keep every link busy and differ only by one chunk: one Round
/// repeated with block_shift 1 stands for them; fill and drain stay explicit.
void append_pipelines(Schedule& s, const std::vector<std::vector<int>>& chains, const ChannelsOf& channels,
                      Combine combine) {
  std::size_t longest = 0;
  for (const auto& chain : chains) longest = std::max(longest, chain.size());
  if (longest < 2) return;
  const int links = static_cast<int>(longest) - 1;
  auto round_at = [&](int t) {
    Round round;
    for (std::size_t k = 0; k < chains.size(); ++k) {
      const std::vector<int>& chain = chains[k];
      for (int i = 0; i + 1 < static_cast<int>(chain.size()); ++i) {
        const int chunk = t - i;
        if (chunk < 0 || chunk >= s.num_blocks) continue;
        for (int c : channels[k])
          round.steps.push_back(step(s, chain[static_cast<std::size_t>(i)], chain[static_cast<std::size_t>(i) + 1],
                                     chunk, 1, c, combine, c));
      }
    }
    return round;
  };
  const int steady_first = links - 1;
  const int steady_last = s.num_blocks - 1;
  for (int t = 0; t < s.num_blocks + links - 1; ++t) {
    Round round = round_at(t);
    if (t == steady_first && steady_last > steady_first) {
      round.repeat = steady_last - steady_first + 1;
      round.block_shift = 1;
      t = steady_last;
    }
    s.rounds.push_back(std::move(round));
  }
}

}  // namespace

void append_ring_pass(Schedule& s, const std::vector<std::vector<int>>& rings, const Owned& owned,
                      Combine combine, int offset) {
  append_pass(s, rings, every_channel(s, rings.size()), owned, combine, offset);
}

void append_channel_ring_pass(Schedule& s, const std::vector<std::vector<int>>& channel_rings,
                              const Owned& owned, Combine combine, int offset) {
  append_pass(s, channel_rings, one_channel_each(channel_rings.size()), owned, combine, offset);
}

Owned own_by_position(Schedule& s, const std::vector<std::vector<int>>& channel_rings) {
  if (s.spec.op == CollectiveOp::allgather || s.spec.op == CollectiveOp::reduce_scatter) s.block_owner = channel_rings;
  return [](int, int position, int channel) { return std::vector<CellRun>{{position, 1, channel}}; };
}

void append_chains(Schedule& s, const std::vector<std::vector<int>>& chains, Combine combine) {
  append_pipelines(s, chains, every_channel(s, chains.size()), combine);
}

void append_channel_chains(Schedule& s, const std::vector<std::vector<int>>& channel_chains, Combine combine) {
  append_pipelines(s, channel_chains, one_channel_each(channel_chains.size()), combine);
}

int endpoint_vertex(const Schedule& s, const CollectiveContext& ctx, int endpoint) {
  return endpoint < s.spec.ranks ? ctx.gpu_vertex(endpoint)
                                 : s.switch_vertices.at(static_cast<std::size_t>(endpoint - s.spec.ranks));
}

Seconds step_route_latency(const Schedule& s, const CollectiveContext& ctx, const Step& step) {
  if (step.is_codec()) return 0;
  const int src = endpoint_vertex(s, ctx, step.src), dst = endpoint_vertex(s, ctx, step.dst);
  if (step.via < 0) return ctx.platform.route(src, dst).latency;
  const int via = endpoint_vertex(s, ctx, step.via);   // a relay: src -> via -> dst, as the engines route it
  return ctx.platform.route(src, via).latency + ctx.platform.route(via, dst).latency;
}

Seconds uncontended_makespan(const Schedule& s, const CollectiveContext& ctx, const StepBusy& busy) {
  ScheduleClock clock(s.pairs(), 0, 0);
  for (std::size_t r = 0; r < s.rounds.size(); ++r) {
    const Round& round = s.rounds[r];
    std::vector<TimedStep> steps;
    steps.reserve(round.steps.size());
    for (std::size_t i = 0; i < round.steps.size(); ++i) {
      const Step& step = round.steps[i];
      const int src = s.pair_of(step.src, step.channel, step.src_lane);
      const int dst = s.pair_of(step.dst, step.channel, step.dst_lane);
      steps.push_back({src, dst, busy(r, i), step_route_latency(s, ctx, step)});
    }
    clock.run_round(steps, round.repeat);
  }
  return clock.makespan();
}

}  // namespace stepsim::models::lowering
