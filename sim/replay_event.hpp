#pragma once
/// @file The event replay backend (SimGrid), internal to sim/: replay.cpp picks it for
/// engine "event".
///
/// Contract: runs in the current process; the caller forks (sim::run_in_child), because
/// SimGrid keeps one simulation per process. Every schedule is declared before `run`; the
/// backend follows the ReplayBackend contract (sim/replay_backend.hpp): callbacks at equal
/// times come in request order, and `run` returns when nothing is pending.
#include <memory>

#include "sim/replay_backend.hpp"

namespace stepsim::sim {

/// @brief A fresh SimGrid-backed replay backend for one replay in this process.
std::unique_ptr<ReplayBackend> make_event_replay_backend();

}  // namespace stepsim::sim
