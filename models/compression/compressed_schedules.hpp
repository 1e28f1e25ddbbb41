#pragma once
/// @file Compression-assisted collectives (Zhou et al., IPDPS 2023, papers.md §2): a codec
/// applied to a collective's schedule point-to-point (every large message compressed by its
/// sender and decompressed by its receiver, MVAPICH2-GDR's on-the-fly compression) or at
/// collective level (Zhou et al.'s compressed ring).
///
/// Contract: every function returns a schedule that passes the data-movement checker and whose
/// codec steps are priced (price_codec_steps) on the platform's GPU. Compression is asked for
/// through AlgorithmOptions::compression; lower_collective is the one entry point that honours
/// it, so a caller lowering through it gets the same schedule whatever engine runs it.
#include <string>

#include "models/algorithm.hpp"
#include "models/compression/codec.hpp"

namespace stepsim::models {

/// @brief A pipeline chunk size the compressed reduce-scatter considers when options.chunk_bytes
/// is 0: big enough that a codec call's fixed cost (about 10 us, the codecs' `a`) stays small
/// beside its streaming time at tens of GB/s, small enough to pipeline MiB-sized blocks.
constexpr Bytes kCompressedChunkBytes = 4.0 * 1024 * 1024;

/// @brief `algorithm`'s schedule for `spec`, with ctx.options.compression applied: none, the
/// algorithm's own schedule; p2p, compress_transfers of it; collective, compressed_ring (only
/// for the ring algorithm, `name` "ring", and allgather / reduce-scatter / allreduce); then
/// priced as kernels on NCCL's primitives where the algorithm set no protocol of its own
/// (apply_primitives_runtime, models/collectives/primitives_runtime.hpp). Throws
/// ConfigError naming --compression / --compression-mode for a bad codec or combination.
Schedule lower_collective(const std::string& name, const Algorithm& algorithm, const CollectiveSpec& spec,
                          const CollectiveContext& ctx);

/// @brief Why lower_collective cannot apply `compression` to `op` lowered by `algorithm`, or ""
/// when it can: collective-level compression is the compressed ring's (algorithm "ring";
/// allgather, reduce-scatter, allreduce); p2p applies to any. For loaders that check a trace
/// before lowering and name the key in their own words; the codec text is parse_codec's to check.
std::string compression_unsupported(const CompressionOptions& compression, const std::string& algorithm,
                                    CollectiveOp op);

/// @brief Point-to-point compression: in every round with a transfer of at least `threshold`
/// bytes between two ranks, each such transfer becomes compress (at the sender) -> compressed
/// transfer -> decompress (at the receiver, accumulating when the transfer reduced), in three
/// rounds per repetition; smaller transfers stay raw in the middle round and rounds without a
/// large transfer stay as they are (compact). A cell compressed for several destinations in
/// one round is compressed once. Transfers that would land compressed in one cell that
/// another transfer of the same round also writes stay raw (the model keeps one compressed
/// buffer per cell, where MPI would post one receive buffer per message); a note counts them.
Schedule compress_transfers(const Schedule& schedule, const Codec& codec, Bytes threshold,
                            const CollectiveContext& ctx);

/// @brief Zhou et al.'s collective-level compression on the ring (one ring per channel,
/// channel_ring_orders; options.channels, default 1 as MVAPICH2-GDR's ring).
///  - allgather: each rank compresses its block once, the ring forwards compressed blocks
///    unchanged, and each rank decompresses every received block next to the forward of the
///    following step (another stream: exposed only where it is slower than that step) and the
///    last one at the end: t_c + (n-1)(alpha + s/(CR beta)) + t_d when t_d hides.
///  - reduce-scatter: each ring step compresses the partial sum, sends it compressed and the
///    receiver decompresses it into its own copy (reduction fused), pipelined over m chunks
///    of the block: with m >= 3 chunks, the sender compresses chunk j+1 while chunk j travels
///    and the receiver decompresses chunk j-1, so a step costs its slowest stage; with fewer,
///    the three stages run in turn. m follows options.chunk_bytes when set; otherwise it is
///    1, 3 or one per kCompressedChunkBytes, whichever the closed form prices lowest (small
///    blocks pay a codec call's fixed cost per chunk, large ones gain from the overlap).
///  - allreduce: the reduce-scatter, then the allgather of the reduced blocks.
Schedule compressed_ring(const CollectiveSpec& spec, const CollectiveContext& ctx, const Codec& codec);

/// @brief Sets every codec step's codec_time: on one GPU in one round, codec steps share the
/// GPU, so each lasts max a + sum(raw bytes / B) over that GPU's codec steps of the round
/// (exactly a + bytes / B for a lone one).
void price_codec_steps(Schedule& schedule, const Codec& codec, const platforms::GpuModel& gpu);

/// @brief Largest absolute error the schedule's lossy passes can leave in a promised cell,
/// every rank's input values lying in [-range, range]: replays the schedule tracking, per
/// endpoint and cell form, an error bound and a magnitude bound (a sum of k contributions has
/// magnitude k range); a compression adds codec.error_bound(magnitude).
double schedule_error_bound(const Schedule& schedule, const Codec& codec, double range);

}  // namespace stepsim::models
