#pragma once
/// @file The analytical engine: closed-form step costs, dataflow critical path.
///
/// Contract (models/schedule.hpp): a step of an expanded round starts when its source
/// (endpoint, channel) has finished every step of earlier rounds; it lasts
/// `step_latency + route.latency + wire_bytes / min(efficiency * min over the route's links
/// of (bandwidth / steps of the same round crossing that link in that direction), cap)`; a
/// codec step (compress / decompress) lasts its codec_time and crosses no link.
/// Repetitions of a round are iterated until two consecutive ones advance every involved
/// (endpoint, channel) by the same delta; the rest are then extrapolated, which max-plus
/// linearity makes exact (a uniform shift of the ready times shifts the next repetition's
/// finish times by the same amount).
#include <vector>

#include "sim/engine.hpp"

namespace stepsim::sim {

class AnalyticalEngine : public Engine {
 public:
  std::string name() const override { return "analytical"; }
  CollectiveResult run(const models::Schedule& schedule, const Placement& placement) override;
  /// @brief run(), also giving per rank the intervals, from the schedule's start (launch
  /// latency included), in which its GPU runs codec steps (compress / decompress): merged
  /// where they touch or overlap, in time order, empty for a rank without any. Extrapolated
  /// repetitions contribute their intervals shifted by the uniform advance, as their finish
  /// times are. What the replay makes compute kernels yield to (sim/replay_core.hpp).
  CollectiveResult run(const models::Schedule& schedule, const Placement& placement,
                       std::vector<std::vector<BusyInterval>>& codec_busy);
};

}  // namespace stepsim::sim
