#pragma once
/// @file Summary of timed repetitions: the `time_s` and `spread` of a measurement.
#include <vector>

namespace stepsim::harness {

/// @brief Mean, extremes and sample standard deviation of repetition times (seconds).
struct SampleStats {
  int repetitions = 0;
  double mean_s = 0;
  double min_s = 0;
  double max_s = 0;
  double stdev_s = 0;  ///< sample (n - 1) standard deviation; 0 for one repetition
};

/// @brief Summarises `samples` (std::logic_error when empty).
SampleStats summarize(const std::vector<double>& samples);

}  // namespace stepsim::harness
