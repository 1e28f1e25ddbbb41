#pragma once
/// @file One collective predicted on an engine: the part of `stepsim collective` that
/// `stepsim validate` (and any other caller) shares.
///
/// Contract: `collective_unsupported` says, without lowering, why an algorithm (or, for
/// "best", every algorithm) cannot run a spec on an allocation. `predict_collective` lowers the
/// spec with the named algorithm (or, for "best", every algorithm that supports it, keeping the
/// fastest), applying ctx.options.compression (models::lower_collective), optionally proves the
/// schedule's data movement, and runs it on the engine.
/// Asking for an unsupported case throws ConfigError naming --algo with the algorithm's reason.
/// The spec is taken as given: callers check sizes, ranks and roots against their own input.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "models/algorithm.hpp"
#include "sim/engine.hpp"

namespace stepsim::sim {

/// @brief What a prediction found: the chosen algorithm, its schedule and the engine's result.
struct CollectivePrediction {
  std::string algo;                                      ///< registry name (the winner for "best")
  models::Schedule schedule;
  CollectiveResult result;
  std::vector<std::pair<std::string, Seconds>> candidates;  ///< "best" only: every supporting algorithm

  /// @brief nccl-tests' algbw (size / time) in GB/s (1e9 B/s).
  double algbw_GBps() const { return schedule.spec.bytes / result.time / kGB; }
  /// @brief nccl-tests' busbw: algbw times the op's bus factor.
  double busbw_GBps() const { return algbw_GBps() * models::busbw_factor(schedule.spec.op, schedule.spec.ranks); }
};

/// @brief Adds `key=value` assignments (`--algo-param`) to `options.extra`; a later assignment
/// of a key replaces an earlier one. Throws ConfigError naming --algo-param for text without '='.
void add_algo_params(const std::vector<std::string>& assignments, models::AlgorithmOptions& options);

/// @brief Why `algo` ("best" = any registered algorithm) cannot run `spec` in `ctx`, or nullopt
/// when it can. Throws ConfigError listing the known names for an unknown algorithm.
std::optional<std::string> collective_unsupported(const std::string& algo, const models::CollectiveSpec& spec,
                                                  const models::CollectiveContext& ctx);

/// @brief Lowers and runs `spec` with `algo` (a registry name or "best") on `engine`; with
/// `check`, a schedule failing the data-movement checker is a std::logic_error (a model bug).
CollectivePrediction predict_collective(const std::string& algo, const models::CollectiveSpec& spec,
                                        const models::CollectiveContext& ctx, Engine& engine, bool check = false);

}  // namespace stepsim::sim
