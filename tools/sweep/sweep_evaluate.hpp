#pragma once
/// @file Evaluating one sweep point: the prediction `stepsim collective` or `stepsim simulate`
/// would make for the same settings, as result columns.
///
/// Contract: `evaluate` returns the values of result_columns(kind) followed by an error text
/// ("" on success). User errors of the point (an algorithm that cannot run the op on the
/// allocation, a size of 0, an unknown platform key) become the error text, never an
/// exception: one bad point must not stop a sweep. The evaluator keeps what points share
/// (each distinct platform loaded once, engines) for the life of the process, so it is meant
/// to live in one worker process. Results are deterministic: the same settings give the same
/// text on every run.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "platforms/platform.hpp"
#include "sim/engine.hpp"
#include "tools/sweep/sweep_points.hpp"

namespace stepsim::sweep {

/// @brief Evaluates points of one sweep in the current process.
class PointEvaluator {
 public:
  explicit PointEvaluator(const Sweep& sweep) : sweep_(sweep) {}

  /// @brief result_columns(kind) values, then the error text.
  std::vector<std::string> evaluate(const Point& point);

 private:
  using Settings = std::map<std::string, std::string>;
  const platforms::Platform& platform_for(const Settings& settings);
  sim::Engine& engine_for(const std::string& name);
  std::vector<std::string> collective(const Settings& settings);
  std::vector<std::string> simulate(const Settings& settings);

  const Sweep& sweep_;
  std::map<std::string, std::unique_ptr<platforms::Platform>> platforms_;   ///< by load options
  std::map<std::string, std::unique_ptr<sim::Engine>> engines_;
};

/// @brief Whether a point runs in a process of its own: SimGrid keeps one simulation per
/// process, and an iteration replay is large enough that isolation costs nothing.
bool needs_own_process(const Sweep& sweep, const Point& point);

}  // namespace stepsim::sweep
