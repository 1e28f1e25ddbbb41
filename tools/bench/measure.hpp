#pragma once
// What the benchmarks measure of each case: wall time and peak resident memory.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>

namespace stepsim::bench {

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Peak resident memory of this process and of its largest waited-for child (the event engine
/// simulates in a forked child), in MiB.
inline double peak_rss_mib() {
  rusage self{}, children{};
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  return std::max(self.ru_maxrss, children.ru_maxrss) / 1024.0;
}

}  // namespace stepsim::bench
