#pragma once
/// @file What the compressed collectives of a replayed trace can do to its values: one
/// CompressionReport per kind of compressed collective (sim/prediction.hpp). Internal to sim/
/// (replay.cpp).
///
/// Contract: engine-independent (it depends on the schedules, not on their timing), so the
/// replay computes it once in the calling process whatever the engine. Deterministic.
#include <vector>

#include "sim/prediction.hpp"
#include "sim/replay_core.hpp"
#include "workloads/trace.hpp"

namespace stepsim::sim {

/// @brief The trace's compressed collectives, by (op, codec, mode, threshold) in that order,
/// with their error bounds from the schedules `plan` lowered (models::schedule_error_bound at
/// inputs of magnitude 1); empty when nothing is compressed.
std::vector<CompressionReport> compression_reports(const workloads::Trace& trace, ReplayPlan& plan);

}  // namespace stepsim::sim
