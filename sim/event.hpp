#pragma once
/// @file The event engine: the schedule's steps as flows in SimGrid's max-min network model.
///
/// Contract: the same dependency rule as the analytical engine (models/schedule.hpp), but
/// every step is a flow on the platform's links, sharing each direction of a link max-min
/// fairly with whatever else is in flight at that moment, so contention between steps of
/// different rounds, channels or collectives shows. Each run forks a child process (SimGrid
/// keeps one simulation per process), so an engine may be run any number of times.
#include "sim/engine.hpp"

namespace stepsim::sim {

class EventEngine : public Engine {
 public:
  std::string name() const override { return "event"; }
  CollectiveResult run(const models::Schedule& schedule, const Placement& placement) override;
};

}  // namespace stepsim::sim
