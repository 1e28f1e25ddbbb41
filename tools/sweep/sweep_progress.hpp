#pragma once
/// @file The sweep's progress bar: points done, rate and ETA on one terminal line.
#include <chrono>
#include <cstdio>

namespace stepsim::sweep {

/// @brief Redraws one stderr line at most ten times a second; draws nothing when disabled.
class ProgressBar {
 public:
  ProgressBar(bool enabled, int total) : enabled_(enabled), total_(total) {}
  /// @brief Shows `done` of the total (redrawn only when 100 ms passed, or when `force`).
  void update(int done, bool force = false);
  /// @brief Ends the line so later output starts on a fresh one.
  void finish(int done);

 private:
  bool enabled_;
  int total_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_{};
  int first_done_ = -1;   ///< done at the first update: resumed rows do not count towards the rate
};

}  // namespace stepsim::sweep
