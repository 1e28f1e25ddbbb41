// Bad schedules, platforms and engine names end in a ConfigError that says what is wrong,
// on both engines, before any simulation starts.
#include <gtest/gtest.h>

#include "platforms/config_error.hpp"
#include "sim/tests/fixtures.hpp"

namespace stepsim::sim::testing {
namespace {

// Runs `schedule` on both engines and returns the message both threw (they must match).
std::string config_error(const models::Schedule& schedule, const platforms::Platform& platform,
                         const platforms::Allocation& allocation) {
  std::string messages[2];
  const char* engines[2] = {"analytical", "event"};
  for (int e = 0; e < 2; ++e) {
    try {
      run_engine(engines[e], schedule, platform, allocation);
      ADD_FAILURE() << engines[e] << " accepted a bad schedule";
    } catch (const ConfigError& error) {
      messages[e] = error.what();
    }
  }
  EXPECT_EQ(messages[0], messages[1]);
  return messages[0];
}

const platforms::Platform& node4() {
  static const platforms::Platform platform = nvswitch_node(4, 100e9, 1e-6);
  return platform;
}

TEST(BadInput, EmptySchedule) {
  models::Schedule schedule = ring_allgather(4, 1e6);
  schedule.rounds.clear();
  EXPECT_NE(config_error(schedule, node4(), first_gpus(4)).find("empty"), std::string::npos);
}

TEST(BadInput, TransferToItself) {
  models::Schedule schedule = ring_allgather(4, 1e6);
  schedule.rounds[0].steps[2].dst = 2;
  const std::string message = config_error(schedule, node4(), first_gpus(4));
  EXPECT_NE(message.find("rounds[0].steps[2]"), std::string::npos) << message;
  EXPECT_NE(message.find("to itself"), std::string::npos) << message;
}

TEST(BadInput, EndpointChannelAndRankCountOutOfRange) {
  models::Schedule schedule = ring_allgather(4, 1e6);
  schedule.rounds[0].steps[1].dst = 9;
  EXPECT_NE(config_error(schedule, node4(), first_gpus(4)).find("outside"), std::string::npos);

  schedule = ring_allgather(4, 1e6);
  schedule.rounds[0].steps[0].channel = 1;
  EXPECT_NE(config_error(schedule, node4(), first_gpus(4)).find("channel 1 of 1"), std::string::npos);

  EXPECT_NE(config_error(ring_allgather(4, 1e6), node4(), first_gpus(3)).find("allocation has 3"),
            std::string::npos);
}

TEST(BadInput, ProtocolWithoutBandwidth) {
  models::Schedule schedule = ring_allgather(4, 1e6);
  schedule.protocol.efficiency = 0;
  EXPECT_NE(config_error(schedule, node4(), first_gpus(4)).find("efficiency"), std::string::npos);
  schedule = ring_allgather(4, 1e6);
  schedule.protocol.per_step_bandwidth_cap = 0;
  EXPECT_NE(config_error(schedule, node4(), first_gpus(4)).find("caps a step"), std::string::npos);
}

TEST(BadInput, ZeroBandwidthLinkIsRejected) {
  // The platform refuses it before any engine sees it; either way a ConfigError names it.
  EXPECT_THROW(
      {
        const auto platform = two_gpus(0, 1e-6);
        run_engine("event", single_transfer(1e6), platform, first_gpus(2));
      },
      ConfigError);
}

TEST(BadInput, NegativeBytesAndRepeat) {
  models::Schedule schedule = ring_allgather(4, 1e6);
  schedule.rounds[0].steps[0].wire_bytes = -1;
  EXPECT_NE(config_error(schedule, node4(), first_gpus(4)).find("moves -1 bytes"), std::string::npos);
  schedule = ring_allgather(4, 1e6);
  schedule.rounds[0].repeat = 0;
  EXPECT_NE(config_error(schedule, node4(), first_gpus(4)).find("repeat 0"), std::string::npos);
}

TEST(BadInput, UnknownEngine) {
  try {
    make_engine("fluid");
    FAIL() << "accepted an unknown engine";
  } catch (const ConfigError& error) {
    EXPECT_EQ(error.where(), "--engine");
  }
}

}  // namespace
}  // namespace stepsim::sim::testing
