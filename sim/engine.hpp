#pragma once
/// @file Engines execute Schedules on a platform and say how long they take.
///
/// Contract: both engines follow the dependency and cost contract of models/schedule.hpp.
/// `analytical` prices each step in closed form, sharing a link's bandwidth equally among
/// the steps of the same (expanded) round that cross it in the same direction, and takes
/// the critical path; a repeated round is extrapolated once its per-endpoint finish times
/// advance by the same amount (exact for the symmetric schedules that use repeat). `event`
/// runs SimGrid's flow-level max-min sharing (CM02, no TCP factors, no cross-traffic) on
/// the platform's links. With no link shared they agree to 0.1 %; with sharing the event
/// engine shows the contention that the round-local count misses.
#include <memory>
#include <string>
#include <vector>

#include "models/schedule.hpp"
#include "platforms/platform.hpp"

namespace stepsim::sim {

/// @brief Ranks of a schedule placed on a platform.
struct Placement {
  const platforms::Platform& platform;
  const platforms::Allocation& allocation;
};

struct LinkUsage {
  int link = -1;
  Bytes bytes_forward = 0;
  Bytes bytes_backward = 0;
};

/// @brief A stretch of time [begin, end), e.g. when a rank's GPU runs a schedule's codec steps.
struct BusyInterval {
  Seconds begin = 0;
  Seconds end = 0;
};

struct CollectiveResult {
  Seconds time = 0;                       ///< launch to last step finished
  std::vector<Seconds> rank_finish;       ///< per rank, when its last step finished
  std::vector<LinkUsage> link_usage;      ///< links that carried bytes, ascending id
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::string name() const = 0;
  virtual CollectiveResult run(const models::Schedule& schedule, const Placement& placement) = 0;
};

/// @brief "analytical" or "event"; throws ConfigError naming --engine otherwise.
std::unique_ptr<Engine> make_engine(const std::string& name);

}  // namespace stepsim::sim
