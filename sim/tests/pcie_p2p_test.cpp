// GPU peer-to-peer on and off on the pcie-gen4-x4 preset (four GPUs under one PCIe switch):
// both engines price the routes the platform gives, so a ring turns inside the switch with
// P2P on and crosses the switch's uplink to the CPU twice per step with it off.
#include <gtest/gtest.h>

#include "platforms/loader.hpp"
#include "sim/tests/fixtures.hpp"

namespace stepsim::sim::testing {
namespace {

constexpr int kRanks = 4;
constexpr double kBytes = 1024.0 * 1024 * 1024;
constexpr double kWire = 31.5e9;   // Gen4 x16 per direction, every link of the preset
constexpr double kLink = 0.5e-6;   // latency of each link of the preset

platforms::Platform gen4_x4(bool p2p) {
  platforms::PlatformOptions options;
  if (!p2p) options.overrides = {"node.p2p.disabled=all"};
  return platforms::load_platform("pcie-gen4-x4", options);
}

TEST(PciePeerToPeer, RingTurnsInsideTheSwitch) {
  // Each step uses its sender's port up and its receiver's port down: nothing is shared.
  const double expected = (kRanks - 1) * (2 * kLink + kBytes / kRanks / kWire);
  for (const char* engine : {"analytical", "event"}) {
    const auto result = run_engine(engine, ring_allgather(kRanks, kBytes), gen4_x4(true), first_gpus(kRanks));
    EXPECT_NEAR(result.time, expected, 1e-6 * expected) << engine;
  }
}

TEST(PciePeerToPeer, WithoutItTheRingSharesTheUplinkBothWays) {
  // Each step goes GPU -> switch -> CPU -> switch -> GPU: all four steps of a round go up the
  // one uplink and back down it, a quarter of its rate each, and cross four links.
  const double expected = (kRanks - 1) * (4 * kLink + kBytes / kRanks / (kWire / kRanks));
  for (const char* engine : {"analytical", "event"}) {
    const auto result = run_engine(engine, ring_allgather(kRanks, kBytes), gen4_x4(false), first_gpus(kRanks));
    EXPECT_NEAR(result.time, expected, 1e-6 * expected) << engine;
  }
}

}  // namespace
}  // namespace stepsim::sim::testing
