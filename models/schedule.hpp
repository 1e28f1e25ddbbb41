#pragma once
/// @file The Schedule: what a collective does, as rounds of steps over endpoints.
///
/// Every collective algorithm lowers to a Schedule; every engine executes Schedules; the
/// checker (checker.hpp) proves a Schedule delivers what its collective promises.
///
/// Data model. The collective's data is cut into `num_blocks` blocks of `block_bytes` each,
/// every block into `pieces` equal pieces (the unit algorithms move: a channel's share, a
/// pipeline chunk). A step moves or combines the cells (block b .. b+block_count-1 mod
/// num_blocks, piece p). What a block means depends on the op (see CollectiveOp).
///
/// Endpoints. Endpoints [0, ranks) are the collective's ranks; endpoints ranks + i are the
/// in-network reduction switches `switch_vertices[i]` (NVLS NVSwitch, SHARP), which can hold
/// and combine data but only ever in transit.
///
/// Dependency contract (both engines and the checker use exactly this): rounds are ordered;
/// a step of round k issued by endpoint `src` on channel c and lane l starts when every step
/// of rounds < k that `src` sent or received on channel c and lane l has finished (dataflow per
/// endpoint, channel and lane, no global barrier). A lane is one of the independent thread
/// groups a channel's kernel runs on a GPU (NCCL's tree allreduce reduces up and broadcasts
/// down in two groups at once, runTreeSplit); a step names its lane at each end (src_lane,
/// dst_lane), so data handed from one group to another (the tree root's reduced chunk, sent
/// down) carries its ordering with it. One lane (the default) is one program per channel. A round with repeat = R stands for R consecutive rounds, the
/// i-th (0-based) with every step's block replaced by (block + i * block_shift) mod num_blocks:
/// the compact form that keeps a 16k-rank ring at one round of n steps.
///
/// Cost contract (models/schedule_clock.hpp states it exactly): a transfer occupies its
/// sender for `protocol.step_latency + wire_bytes / min(route.bandwidth *
/// protocol.efficiency share, protocol.per_step_bandwidth_cap)` and its data arrive
/// `route.latency` after that; the sender is free once it has transmitted, so consecutive
/// transfers of a pipeline overlap their latencies, up to `protocol.slots_in_flight` per
/// connection. "Finished" in the dependency contract means sent for a step's source and
/// arrived for its destination. The whole schedule starts after `launch_latency`.
/// Reductions on arrival are fused into the receive, as in NCCL, and add no time.
///
/// Compression (models/compression/). Every endpoint holds each cell in up to two forms: raw
/// and compressed (two buffers). A compress step (src == dst, the endpoint whose GPU runs it)
/// turns the raw form into the compressed one; a decompress step turns the compressed form
/// back into raw, replacing the raw cell or, with Combine::reduce, accumulating into it (the
/// reduction fused into the decompression kernel, as Zhou et al.'s reduce-scatter does). A
/// codec step occupies no link: it costs exactly `codec_time` (the lowering prices it from
/// the codec and the GPU, concurrent codec work on one GPU included), and it obeys the same
/// dependency contract as a transfer. A transfer with `compressed` set moves the compressed
/// form into the destination's compressed buffer: its wire bytes are the cells' compressed
/// size, block_count x Schedule::compressed_piece_bytes, and it cannot reduce.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "platforms/units.hpp"

namespace stepsim::models {

enum class CollectiveOp { allgather, reduce_scatter, allreduce, broadcast, reduce, alltoall, sendrecv };
const char* to_string(CollectiveOp op);
/// @brief Parses nccl-tests-like names: allgather/all_gather, reduce_scatter, allreduce/all_reduce, ...
/// @brief "allreduce", "all_reduce", "all_reduce_perf" ...; a ConfigError naming `where` (the flag
/// or key that gave it) for anything else.
CollectiveOp parse_op(const std::string& text, const std::string& where = "--op");
const std::vector<CollectiveOp>& all_ops();

/// @brief nccl-tests' bus-bandwidth factor: 2(n-1)/n allreduce, (n-1)/n AG/RS/alltoall, 1 else.
double busbw_factor(CollectiveOp op, int ranks);

/// @brief What is asked: the op over `ranks` ranks on `bytes` (nccl-tests `size`: the whole
/// buffer for allgather/reduce-scatter, the per-rank send buffer for alltoall).
///
/// Block meaning per op (num_blocks and block_bytes are chosen by the algorithm within these):
///  - allgather: block b originates at its owner; everybody must end with every block.
///  - reduce_scatter: block b must end, fully reduced, at its owner.
///  - allreduce: every rank starts with its own contribution to every block; all end reduced.
///  - broadcast: the root holds every block; everybody must end with every block.
///  - reduce: every rank contributes to every block; the root must end with all reduced.
///  - alltoall: block b = src * ranks + dst starts at src and must end at dst.
///  - sendrecv: block b starts at rank b and must end at rank (b + 1) % ranks.
/// The owner of allgather / reduce_scatter block b in piece p is Schedule::block_owner[p][b],
/// or rank b % ranks when block_owner is empty; the other ops' blocks have no owner.
struct CollectiveSpec {
  CollectiveOp op = CollectiveOp::allreduce;
  int ranks = 0;
  Bytes bytes = 0;
  int root = 0;
};

enum class Combine : std::uint8_t { replace, reduce };

/// @brief What a step does: move cells between endpoints, or (de)compress them in place.
enum class StepKind : std::uint8_t { transfer, compress, decompress };
const char* to_string(StepKind kind);

/// @brief One step: endpoint `src` sends cells to endpoint `dst`, or, for a codec step
/// (src == dst), that endpoint's GPU compresses or decompresses them.
struct Step {
  int src = 0;
  int dst = 0;
  int block = 0;
  int block_count = 1;
  int piece = 0;
  Combine combine = Combine::replace;
  int channel = 0;
  int src_lane = 0;          ///< thread group of `src` that issues it, in [0, Schedule::lanes)
  int dst_lane = 0;          ///< thread group of `dst` that receives it (== src_lane for codec steps)
  Bytes wire_bytes = 0;      ///< bytes on the wire (= cells' size unless compressed; 0 for codec steps)
  StepKind kind = StepKind::transfer;
  bool compressed = false;   ///< transfer of the cells' compressed form
  Seconds codec_time = 0;    ///< compress / decompress: how long the endpoint's GPU works on it
  /// A rank whose GPU memory relays the transfer, or -1: NCCL's P2P/indirect for GPUs with no
  /// NVLink between them but one to a common GPU (paths.cc PATH_NVB). The bytes cross the
  /// route src -> via, then via -> dst, pipelined through via's buffer: one flow over both
  /// routes. Data movement is src -> dst (the checker ignores `via`).
  int via = -1;

  bool is_codec() const { return kind != StepKind::transfer; }
};

struct Round {
  std::vector<Step> steps;
  int repeat = 1;
  int block_shift = 0;
};

/// @brief Protocol effects on every step (NCCL's LL / LL128 / Simple; "ideal" = none).
struct Protocol {
  std::string name = "ideal";
  double efficiency = 1.0;                    ///< fraction of link bandwidth usable
  Seconds step_latency = 0;                   ///< sender time every transfer adds (a handover)
  BytesPerSecond per_step_bandwidth_cap = std::numeric_limits<double>::infinity();
  /// Transfers a connection (source -> destination, one channel) may have in flight before
  /// the oldest one's slot is credited back (NCCL: NCCL_STEPS buffer slots over the steps a
  /// pipeline chunk takes); 0 = unbounded.
  int slots_in_flight = 0;
};

struct Schedule {
  CollectiveSpec spec;
  std::string algorithm;          ///< e.g. "ring", "nccl:ring/LL128"
  int num_blocks = 1;
  int pieces = 1;
  Bytes block_bytes = 0;
  int channels = 1;
  int lanes = 1;                      ///< thread groups per channel and endpoint (dependency contract)
  std::vector<int> switch_vertices;   ///< global platform vertex of endpoint ranks + i
  /// Allgather / reduce-scatter only (the checker rejects it elsewhere): empty, or
  /// block_owner[piece][block] = the rank owning that cell (allgather origin, reduce-scatter
  /// destination), pieces x num_blocks entries with every rank owning num_blocks / ranks
  /// blocks of each piece (a permutation of the ranks when num_blocks == ranks). Why: blocks
  /// can then follow ring positions, not ranks, so a ring whose order is not rank order (one
  /// per channel, each leaving a node through its own NIC) is still a constant block shift,
  /// one compact Round, as an allreduce's is.
  std::vector<std::vector<int>> block_owner;
  std::vector<Round> rounds;
  Protocol protocol;
  Seconds launch_latency = 0;
  /// Back-to-back benchmark loops (nccl-tests) issue the next call while this one runs, so a
  /// call takes at least the CPU time that issues it: the loop's time per call is
  /// max(makespan, issue_period), which collective predictions report. 0: the issuing CPU
  /// never bounds the call. Engines execute the schedule alone and ignore it.
  Seconds issue_period = 0;
  /// Compressed size of one cell (piece) when the schedule compresses (compression-assisted
  /// collectives, models/compression/); 0 when it has no codec step.
  Bytes compressed_piece_bytes = 0;
  std::vector<std::string> notes;     ///< why the algorithm chose what it chose

  Bytes piece_bytes() const { return block_bytes / pieces; }
  /// @brief The rank owning cell (block, piece) of an allgather / reduce-scatter.
  int owner_of(int block, int piece) const {
    return block_owner.empty() ? block % spec.ranks
                               : block_owner[static_cast<std::size_t>(piece)][static_cast<std::size_t>(block)];
  }
  int endpoints() const { return spec.ranks + static_cast<int>(switch_vertices.size()); }
  /// @brief What the dependency contract orders by: (endpoint, channel, lane), numbered densely.
  int pairs() const { return endpoints() * channels * lanes; }
  int pair_of(int endpoint, int channel, int lane) const { return (endpoint * channels + channel) * lanes + lane; }
  /// @brief The endpoint a pair belongs to.
  int endpoint_of_pair(int pair) const { return pair / (channels * lanes); }
  /// @brief Steps counted with repeats (what an explicit form would hold).
  std::int64_t expanded_step_count() const;
  /// @brief Calls f(round_index, step) for every expanded step in order, blocks rotated.
  template <class F>
  void for_each_expanded(F&& f) const {
    std::int64_t index = 0;
    for (const Round& round : rounds) {
      for (int i = 0; i < round.repeat; ++i, ++index) {
        for (Step step : round.steps) {
          step.block = static_cast<int>(((static_cast<std::int64_t>(step.block) +
                                          static_cast<std::int64_t>(i) * round.block_shift) %
                                             num_blocks +
                                         num_blocks) %
                                        num_blocks);
          f(index, step);
        }
      }
    }
  }
};

/// @brief Two ranks, one step moving `bytes` from rank 0 to rank 1: a send. (nccl-tests'
/// sendrecv is a ring shift, which on two ranks moves the bytes both ways, so the checker's
/// sendrecv promise does not apply to it.)
Schedule single_transfer(Bytes bytes, std::string algorithm);

}  // namespace stepsim::models
