#pragma once
/// @file Timing of GPU work with CUDA events, the same way for every subcommand.
///
/// Contract: `time_calls` makes `warmup` untimed calls, one probe call that sizes the batch, then
/// `repetitions` timed repetitions. A repetition records a start event on every stream, makes
/// `batch` back-to-back calls, records a stop event on every stream and waits; its time is the
/// longest start->stop interval over the streams divided by `batch`. The batch is the smallest
/// number of calls (>= 1, <= max_batch) whose probe time reaches `target_s`, so short operations
/// are timed over many calls (like nccl-tests' iterations) while long ones are timed one by one.
/// A wait longer than `timeout_s` throws (a hung collective must not hang the harness).
#include <functional>
#include <vector>

#include "validation/harness/device_support.hpp"

namespace stepsim::harness {

/// @brief How to time one case.
struct TimingPlan {
  int warmup = 5;
  int repetitions = 20;
  double target_s = 1e-3;
  int max_batch = 1000;
  double timeout_s = 300;
};

/// @brief Seconds per call for each repetition; `launch` enqueues one call on `streams`.
std::vector<double> time_calls(const std::vector<const Stream*>& streams, const std::function<void()>& launch,
                               const TimingPlan& plan);

/// @brief Waits for all work queued on `streams` (throws after plan.timeout_s).
void wait_streams(const std::vector<const Stream*>& streams, double timeout_s);

}  // namespace stepsim::harness
