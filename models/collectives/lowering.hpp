#pragma once
/// @file Building blocks the collective algorithms share: schedule set-up, steps with the
/// right wire bytes, ring passes (compact when symmetric) and pipelined chains.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "models/algorithm.hpp"

namespace stepsim::models::lowering {

/// @brief Pipeline chunk used when options.chunk_bytes is 0: NCCL's Simple protocol moves
/// 4 MiB buffers in NCCL_STEPS = 8 slots, i.e. 512 KiB per pipeline step (papers.md §4).
constexpr Bytes kDefaultChunkBytes = 512.0 * 1024;
/// @brief Upper bound on pipeline chunks, so schedules of huge buffers stay small; beyond it
/// the fill/drain share of the time is already below 1 / kMaxChunks.
constexpr int kMaxChunks = 256;

/// @brief options.channels, or 1 when unset.
int channel_count(const CollectiveContext& ctx);
/// @brief Chunks each of `lanes` parallel pipelines cuts `bytes` into: ceil(bytes / lanes /
/// chunk_bytes) clamped to [1, kMaxChunks].
int chunk_count(const CollectiveContext& ctx, Bytes bytes, int lanes);

/// @brief Bound on the steps a pipelined chain stores (about 80 MiB of Steps). Fill and drain
/// cannot be compact (each round adds or drops a link), so chains of `links` hops with B
/// chunks store about links * min(B, links) steps per lane.
constexpr std::int64_t kMaxPipelineSteps = std::int64_t{1} << 21;
/// @brief chunk_count, lowered where `lanes` chains of `links` hops would store more than
/// kMaxPipelineSteps steps (e.g. 8 channels of 1024 ranks get 256, 16384 ranks 16): fewer
/// chunks lengthen the fill, so such predictions err slow.
int pipeline_chunk_count(const CollectiveContext& ctx, Bytes bytes, int lanes, int links);

/// @brief A schedule with its data cut as asked; `block_bytes` follows from the op's
/// buffer size (per-rank buffers for alltoall and sendrecv, the whole buffer otherwise).
Schedule start(const CollectiveSpec& spec, const std::string& algorithm, int num_blocks, int pieces,
               int channels);

/// @brief A transfer of `count` blocks from `block` of one piece, wire bytes = cells' size.
Step step(const Schedule& s, int src, int dst, int block, int count, int piece, Combine combine, int channel);

/// @brief Throws ConfigError naming --algo when `algorithm` does not support the request.
void require(const Algorithm& algorithm, const std::string& name, const CollectiveSpec& spec,
             const CollectiveContext& ctx);

/// @brief Ranks grouped by node, nodes ascending, ranks ascending within a node.
std::vector<std::vector<int>> ranks_by_node(const CollectiveContext& ctx);

/// @brief Cells a ring position owns in a pass, for one channel: a run of blocks of a piece.
struct CellRun {
  int block = 0;
  int count = 1;
  int piece = 0;
};
using Owned = std::function<std::vector<CellRun>(int ring, int position, int channel)>;

/// @brief Appends a ring pass over every ring at once (all rings equally long, len >= 2):
/// len-1 steps in which position i sends to i+1 the cells owned by position i - k - offset
/// (k the step). offset 0 with replace is an allgather pass, offset 1 with reduce a
/// reduce-scatter pass (Patarasuk & Yuan 2009; NCCL's ring). When every position's cells
/// are its predecessor's shifted by one block distance the pass is one Round with
/// repeat = len-1 (the compact form); otherwise it is len-1 explicit rounds.
void append_ring_pass(Schedule& s, const std::vector<std::vector<int>>& rings, const Owned& owned,
                      Combine combine, int offset);

/// @brief Like append_ring_pass, but ring c carries channel c only (NCCL builds one ring per
/// channel): owned(c, position, c) gives its cells. All rings equally long; one compact Round
/// with repeat = len-1 when the uniform-shift condition holds over every channel's ring.
void append_channel_ring_pass(Schedule& s, const std::vector<std::vector<int>>& channel_rings,
                              const Owned& owned, Combine combine, int offset);

/// @brief Blocks indexed by ring position, for one ring per channel (ring c carries piece c
/// on channel c, num_blocks = ring length): position p of ring c owns block p of piece c, so
/// every channel's pass moves blocks by one position whatever its order, one compact Round
/// per append_channel_ring_pass. Allgather and reduce-scatter record it as
/// s.block_owner[c][p] = channel_rings[c][p] (that rank's input / output); allreduce blocks
/// have no owner. Returns the Owned to pass to append_channel_ring_pass.
Owned own_by_position(Schedule& s, const std::vector<std::vector<int>>& channel_rings);

/// @brief Appends pipelined chains: chain[0] -> chain[1] -> ... carries every block (a
/// pipeline chunk) of every channel's piece (piece c on channel c); link i sends chunk t - i in round t, so chunks
/// flow down the chain back to back. Chains run side by side, rounds aligned. Compact: the
/// fill and drain rounds are explicit, the steady state (every link busy, when there are at
/// least as many chunks as links) is one Round repeated with block_shift 1.
void append_chains(Schedule& s, const std::vector<std::vector<int>>& chains, Combine combine);

/// @brief Like append_chains, but chain c carries piece c on channel c only (one chain per
/// channel, e.g. each channel's ring cut at the root).
void append_channel_chains(Schedule& s, const std::vector<std::vector<int>>& channel_chains, Combine combine);

/// @brief The platform vertex of a schedule endpoint: a rank's GPU or a switch vertex.
int endpoint_vertex(const Schedule& s, const CollectiveContext& ctx, int endpoint);

/// @brief The latency a step's data take to arrive: its route's, or both legs' for a relayed
/// step (Step::via), none for a codec step.
Seconds step_route_latency(const Schedule& s, const CollectiveContext& ctx, const Step& step);

/// @brief The schedule's makespan on an uncontended platform: every step runs through the
/// dependency clock (models/schedule_clock.hpp, no credits) occupying its sender `busy`
/// and arriving step_route_latency later.
/// `busy(round, step)` indexes Schedule::rounds and that round's steps.
using StepBusy = std::function<Seconds(std::size_t round, std::size_t step)>;
Seconds uncontended_makespan(const Schedule& s, const CollectiveContext& ctx, const StepBusy& busy);

}  // namespace stepsim::models::lowering
