#pragma once
/// @file Runs a piece of work in a forked child and brings its result back through a pipe.
///
/// Why: SimGrid keeps one simulation per process (its clock and platform survive an engine),
/// so every event simulation runs in a fresh child; tests and `--algo best` can then run many.
#include <functional>
#include <string>

namespace stepsim::sim {

/// @brief Forks, runs `work` in the child and returns the bytes it returned. A ConfigError in
/// the child is rethrown as one in the parent; another exception, or the child dying (SimGrid
/// aborts on internal errors), as std::runtime_error with the child's message or its exit
/// status. The child dies with the parent (PR_SET_PDEATHSIG).
std::string run_in_child(const std::function<std::string()>& work);

}  // namespace stepsim::sim
