#pragma once
/// @file The timing half of the Schedule contract (models/schedule.hpp) as one clock: when
/// each step starts, when its sender is free again and when its data have arrived, given what
/// every step costs. The analytical engine prices steps (link shares) and runs them through
/// it; the NCCL lowering runs it on latencies alone to find what its schedule already charges
/// on the critical path. The event engine implements the same rule with SimGrid flows
/// (sim/schedule_flows.hpp).
///
/// Rule, per step of an expanded round:
///  - start = max(ready(src pair), credit), where ready(pair) is the latest of the pair's
///    earlier rounds' sender-free times (its sends) and arrival times (its receives);
///  - the sender is free `busy` after the start (protocol handover + transmission: a sender
///    does not wait for its bytes to land, as NCCL keeps NCCL_STEPS slots in flight);
///  - the data arrive `latency` after the sender is free (the route's latency);
///  - credit: when the schedule bounds each connection (source pair -> destination pair) to
///    `slots` transfers in flight, a transfer waits until the one `slots` earlier on its
///    connection has arrived and its slot's credit has travelled back (that transfer's
///    latency again); 0 slots = unbounded. A codec step (source pair == destination pair)
///    has no latency and no connection.
/// Repetitions of a compact round are iterated until every involved pair has advanced by the
/// same delta for enough consecutive repetitions (2, or slots + 2 when credits bind, so the
/// credit history is uniform too), then extrapolated: exact by max-plus linearity.
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "platforms/units.hpp"

namespace stepsim::models {

/// @brief What one step of a round costs; the same in every repetition of the round.
struct TimedStep {
  int src_pair = 0;        ///< (endpoint, channel) index: endpoint * channels + channel
  int dst_pair = 0;        ///< == src_pair for a codec step
  Seconds busy = 0;        ///< sender occupancy (handover + bytes / rate; codec time)
  Seconds latency = 0;     ///< sender free -> data arrived
};

/// @brief A connection (source pair -> destination pair) as one number, `pairs` the pair count:
/// what both engines key credits by.
inline std::int64_t connection_key(int src_pair, int dst_pair, int pairs) {
  return static_cast<std::int64_t>(src_pair) * pairs + dst_pair;
}

class ScheduleClock {
 public:
  /// @param slots  transfers in flight per connection, 0 = unbounded.
  ScheduleClock(int pairs, int slots, Seconds start);

  /// @brief Called once per repetition with each step's start time, and once more per
  /// extrapolated repetition with the last computed starts and the shift to add.
  using StartObserver = std::function<void(const std::vector<Seconds>& starts, Seconds shift)>;

  /// @brief Runs `repeat` repetitions of a round whose steps cost `steps`.
  void run_round(const std::vector<TimedStep>& steps, int repeat, const StartObserver* observer = nullptr);

  /// @brief Per pair, when its last step so far finished (sent or arrived).
  const std::vector<Seconds>& ready() const { return ready_; }
  /// @brief The latest ready time: the schedule's end so far.
  Seconds makespan() const;

 private:
  /// A connection's credits: when the slots of its last `slots_` transfers are free again
  /// (arrival + latency), oldest first.
  struct Connection {
    std::vector<Seconds> credit;
  };

  std::vector<int> involved_pairs(const std::vector<TimedStep>& steps);
  std::vector<int> connections_of(const std::vector<TimedStep>& steps);
  /// @brief One repetition: fills `starts`, advances ready_ and the credits.
  void run_once(const std::vector<TimedStep>& steps, const std::vector<int>& connections,
                std::vector<Seconds>& starts);
  void shift_credits(const std::vector<int>& connections, Seconds shift);

  int slots_;
  std::vector<Seconds> ready_;
  std::vector<char> seen_;
  std::unordered_map<std::int64_t, int> connection_index_;
  std::vector<Connection> connections_;
};

}  // namespace stepsim::models
