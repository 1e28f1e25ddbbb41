#include "validation/harness/spread_stats.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace stepsim::harness {

SampleStats summarize(const std::vector<double>& samples) {
  if (samples.empty()) throw std::logic_error("summarize: no samples");
  SampleStats stats;
  stats.repetitions = static_cast<int>(samples.size());
  double sum = 0;
  for (double s : samples) sum += s;
  stats.mean_s = sum / static_cast<double>(samples.size());
  stats.min_s = *std::min_element(samples.begin(), samples.end());
  stats.max_s = *std::max_element(samples.begin(), samples.end());
  if (samples.size() > 1) {
    // Two-pass variance: the samples are close to each other, where the one-pass formula cancels.
    double squares = 0;
    for (double s : samples) squares += (s - stats.mean_s) * (s - stats.mean_s);
    stats.stdev_s = std::sqrt(squares / static_cast<double>(samples.size() - 1));
  }
  return stats;
}

}  // namespace stepsim::harness
