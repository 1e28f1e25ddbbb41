#pragma once
/// @file Replaying a Trace on a platform: the iteration-level simulation.
///
/// Contract: executes the model of workloads/trace.hpp. Collectives are lowered by their
/// algorithm (models::AlgorithmRegistry) with their options, compression included
/// (models::lower_collective), on the platform GPUs of their subgroup, and sends /
/// recvs as two-rank `direct` sendrecv schedules; the engine prices them: `analytical` runs each
/// distinct schedule once in isolation (no contention between concurrent collectives; fast
/// enough for 1024+ ranks), `event` runs every transfer of every collective in one SimGrid
/// network, so concurrent communication shares links max-min fairly. With no two transfers
/// on one link at the same time both give the same times (to 1e-9 relative). Kernels are
/// priced by models::kernel_cost on the platform's GPU model and run on the SMs that running
/// collectives leave them and that their codec steps do not take (SM interference,
/// workloads/trace.hpp); Prediction::compression reports the error bounds of the compressed
/// calls (sim/replay_compression.hpp). The same trace gives the same
/// prediction bit for bit. A trace that cannot finish (a collective some member never
/// reaches, mismatched collectives, a recv with no send, a wait that never fires) throws
/// ConfigError listing the blocked ranks and ops, never hangs.
#include <ostream>
#include <string>

#include "sim/engine.hpp"
#include "sim/prediction.hpp"
#include "workloads/trace.hpp"

namespace stepsim::sim {

struct ReplayOptions {
  std::string engine = "analytical";   ///< "analytical" or "event"
  /// When set, a Chrome-trace / Perfetto JSON timeline is written here: a process per rank,
  /// a thread per stream (plus one for the CPU), collectives linked across ranks by flow events.
  std::ostream* timeline = nullptr;
};

/// @brief Runs one iteration of `trace` on `placement` (trace.ranks == allocation ranks).
Prediction replay(const workloads::Trace& trace, const Placement& placement, const ReplayOptions& options = {});

}  // namespace stepsim::sim
