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
#include "sim/engine.hpp"

namespace stepsim::sim {

class AnalyticalEngine : public Engine {
 public:
  std::string name() const override { return "analytical"; }
  CollectiveResult run(const models::Schedule& schedule, const Placement& placement) override;
};

}  // namespace stepsim::sim
