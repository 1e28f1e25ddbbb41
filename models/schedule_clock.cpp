#include "models/schedule_clock.hpp"

#include <algorithm>
#include <cmath>

namespace stepsim::models {
namespace {

/// Finish times closer than this (relative to the time reached) count as equal when looking
/// for a uniform advance: a few hundred ulps, far below any modelled effect, but above the
/// rounding noise of sums of unequal step durations.
constexpr double kUniformTolerance = 1e-13;

}  // namespace

ScheduleClock::ScheduleClock(int pairs, int slots, Seconds start)
    : slots_(std::max(0, slots)), ready_(static_cast<std::size_t>(pairs), start), seen_(static_cast<std::size_t>(pairs), 0) {}

Seconds ScheduleClock::makespan() const {
  return ready_.empty() ? 0 : *std::max_element(ready_.begin(), ready_.end());
}

/// @brief The pairs a round touches, each once, in first-seen order.
std::vector<int> ScheduleClock::involved_pairs(const std::vector<TimedStep>& steps) {
  std::vector<int> pairs;
  for (const TimedStep& step : steps)
    for (int pair : {step.src_pair, step.dst_pair})
      if (!seen_[pair]) {
        seen_[pair] = 1;
        pairs.push_back(pair);
      }
  for (int pair : pairs) seen_[pair] = 0;
  return pairs;
}

/// @brief Per step, the index of its connection in connections_ (created on first use), -1
/// for a codec step.
std::vector<int> ScheduleClock::connections_of(const std::vector<TimedStep>& steps) {
  std::vector<int> out;
  out.reserve(steps.size());
  for (const TimedStep& step : steps) {
    if (step.src_pair == step.dst_pair) {
      out.push_back(-1);
      continue;
    }
    const auto [it, added] = connection_index_.try_emplace(
        connection_key(step.src_pair, step.dst_pair, static_cast<int>(ready_.size())), static_cast<int>(connections_.size()));
    if (added) connections_.emplace_back();
    out.push_back(it->second);
  }
  return out;
}

void ScheduleClock::run_once(const std::vector<TimedStep>& steps, const std::vector<int>& connections,
                             std::vector<Seconds>& starts) {
  // Every start reads the ready times of earlier rounds only, so all starts come first.
  for (std::size_t s = 0; s < steps.size(); ++s) {
    const TimedStep& step = steps[s];
    Seconds start = ready_[step.src_pair];
    if (!connections.empty() && connections[s] >= 0) {
      std::vector<Seconds>& credit = connections_[static_cast<std::size_t>(connections[s])].credit;
      if (static_cast<int>(credit.size()) == slots_) {
        start = std::max(start, credit.front());
        credit.erase(credit.begin());
      }
      credit.push_back(start + step.busy + 2 * step.latency);
    }
    starts[s] = start;
  }
  for (std::size_t s = 0; s < steps.size(); ++s) {
    const TimedStep& step = steps[s];
    const Seconds sent = starts[s] + step.busy;
    ready_[step.src_pair] = std::max(ready_[step.src_pair], sent);
    ready_[step.dst_pair] = std::max(ready_[step.dst_pair], sent + step.latency);
  }
}

void ScheduleClock::shift_credits(const std::vector<int>& connections, Seconds shift) {
  std::vector<char> shifted(connections_.size(), 0);
  for (int c : connections) {
    if (c < 0 || shifted[static_cast<std::size_t>(c)]) continue;
    shifted[static_cast<std::size_t>(c)] = 1;
    for (Seconds& t : connections_[static_cast<std::size_t>(c)].credit) t += shift;
  }
}

void ScheduleClock::run_round(const std::vector<TimedStep>& steps, int repeat, const StartObserver* observer) {
  if (steps.empty()) return;
  const std::vector<int> pairs = involved_pairs(steps);
  const std::vector<int> connections = slots_ > 0 ? connections_of(steps) : std::vector<int>();
  // With credits, the last `slots` transfers of a connection must come from uniform
  // repetitions too before the advance can be extrapolated.
  const int needed = slots_ > 0 ? slots_ + 2 : 2;
  std::vector<Seconds> starts(steps.size());
  std::vector<Seconds> previous(pairs.size());
  for (std::size_t k = 0; k < pairs.size(); ++k) previous[k] = ready_[pairs[k]];
  int uniform_run = 0;
  Seconds last_delta = 0;

  for (int rep = 0; rep < repeat; ++rep) {
    run_once(steps, connections, starts);
    if (observer) (*observer)(starts, 0);
    if (rep + 1 == repeat) break;

    Seconds low = INFINITY, high = -INFINITY, reached = 0;
    for (std::size_t k = 0; k < pairs.size(); ++k) {
      const Seconds delta = ready_[pairs[k]] - previous[k];
      low = std::min(low, delta);
      high = std::max(high, delta);
      reached = std::max(reached, ready_[pairs[k]]);
      previous[k] = ready_[pairs[k]];
    }
    const Seconds tolerance = kUniformTolerance * reached;
    if (high - low > tolerance)
      uniform_run = 0;
    else
      uniform_run = uniform_run > 0 && std::abs(high - last_delta) <= tolerance ? uniform_run + 1 : 1;
    last_delta = high;
    if (uniform_run < needed) continue;
    // The remaining repetitions run the same steps, each `high` later than the one before.
    const int remaining = repeat - 1 - rep;
    for (int pair : pairs) ready_[pair] += remaining * high;
    shift_credits(connections, remaining * high);
    if (observer)
      for (int k = 1; k <= remaining; ++k) (*observer)(starts, k * high);
    break;
  }
}

}  // namespace stepsim::models
