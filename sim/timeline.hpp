#pragma once
/// @file The timeline of a replay as Chrome trace / Perfetto JSON.
///
/// Contract: one process per rank (process_name "rank N (gpu G, node K)"), one thread per
/// stream plus thread 0 "cpu" (thread_name); a complete event ("X", ts/dur in µs, rounded to
/// the nanosecond so slices of one thread still nest) for every kernel, memcpy, collective,
/// send and recv on its stream (collectives and p2p from when the stream reached them), and
/// on the cpu thread for every launch call, cpu op and sync. `args` carry the op's details
/// (bytes, algorithm, kernel FLOPs). The members of each collective or send/recv instance
/// are linked by one flow (one id per instance: "s" on the first member, "t" on the middle
/// ones, "f" on the last, at the instance's start, bound to the enclosing slice).
#include <ostream>

#include "sim/replay_core.hpp"

namespace stepsim::sim {

/// @brief Writes the timeline of a finished replay.
void write_timeline(std::ostream& out, const ReplayCore& core);

}  // namespace stepsim::sim
