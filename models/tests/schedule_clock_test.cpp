// The dependency contract's clock (models/schedule_clock.hpp) against closed forms worked out
// by hand: pipelines overlap hop latencies, credits bound a connection, and a compact round
// with repeat extrapolates to exactly what its explicit repetitions give.
#include <gtest/gtest.h>

#include <vector>

#include "models/schedule_clock.hpp"

namespace stepsim::models {
namespace {

/// A chain of `hops` hops (pairs 0 .. hops) moving `chunks` chunks: chunk c crosses hop h in
/// round c + h, every transfer busy `tx` and landing `latency` later.
Seconds chain_makespan(int hops, int chunks, Seconds tx, Seconds latency) {
  ScheduleClock clock(hops + 1, 0, 0);
  for (int t = 0; t + 1 < chunks + hops; ++t) {
    std::vector<TimedStep> round;
    for (int h = 0; h < hops; ++h)
      if (t - h >= 0 && t - h < chunks) round.push_back({h, h + 1, tx, latency});
    clock.run_round(round, 1);
  }
  return clock.makespan();
}

TEST(ScheduleClock, PipelinePaysEachHopLatencyOnce) {
  // Start of chunk c at hop h: c tx + h (tx + latency) (the sender is free after tx, only the
  // receiver waits out the latency); the last chunk lands after the last hop.
  const Seconds tx = 2e-6, latency = 5e-6;
  for (int hops : {1, 3, 8})
    for (int chunks : {1, 4, 64}) {
      const Seconds expected = (chunks - 1) * tx + hops * (tx + latency);
      EXPECT_NEAR(chain_makespan(hops, chunks, tx, latency), expected, 1e-12 * expected) << hops << " x " << chunks;
    }
}

/// `transfers` transfers one after another on one connection (pair 0 -> pair 1), as one
/// compact round repeated or as explicit rounds.
Seconds connection_makespan(int transfers, int slots, Seconds tx, Seconds latency, bool compact) {
  ScheduleClock clock(2, slots, 0);
  const std::vector<TimedStep> round = {{0, 1, tx, latency}};
  if (compact) {
    clock.run_round(round, transfers);
  } else {
    for (int j = 0; j < transfers; ++j) clock.run_round(round, 1);
  }
  return clock.makespan();
}

TEST(ScheduleClock, CreditsBoundAConnection) {
  const Seconds tx = 1e-6, latency = 4e-6;
  const int k = 50;
  // Unbounded: back to back. One slot: each transfer waits for the previous one to land and
  // its credit to return, tx + 2 latency apart.
  EXPECT_NEAR(connection_makespan(k, 0, tx, latency, false), k * tx + latency, 1e-18);
  EXPECT_NEAR(connection_makespan(k, 1, tx, latency, false), (k - 1) * (tx + 2 * latency) + tx + latency, 1e-15);
  // Two slots with 2 latency > tx: transfers go in pairs, tx apart, pairs tx + 2 latency apart.
  const Seconds last_start = (k - 2) / 2 * (tx + 2 * latency) + tx;
  EXPECT_NEAR(connection_makespan(k, 2, tx, latency, false), last_start + tx + latency, 1e-15);
  // Enough slots to cover the round trip: the bound never binds.
  EXPECT_NEAR(connection_makespan(k, 9, tx, latency, false), k * tx + latency, 1e-15);
}

TEST(ScheduleClock, CompactRoundExtrapolatesExactlyWithCredits) {
  const Seconds tx = 1e-6, latency = 4e-6;
  for (int slots : {0, 1, 2, 3, 8})
    for (int k : {1, 2, 7, 300}) {
      const Seconds explicit_rounds = connection_makespan(k, slots, tx, latency, false);
      EXPECT_NEAR(connection_makespan(k, slots, tx, latency, true), explicit_rounds, 1e-12 * explicit_rounds)
          << slots << " slots, " << k << " transfers";
    }
}

TEST(ScheduleClock, CodecStepsOccupyTheirPairOnly) {
  // Pair 0 compresses (busy 3 us, no latency), then sends; pair 1 runs its own codec meanwhile.
  ScheduleClock clock(2, 0, 1e-6);
  clock.run_round({{0, 0, 3e-6, 0}, {1, 1, 1e-6, 0}}, 1);
  clock.run_round({{0, 1, 2e-6, 5e-6}}, 1);
  EXPECT_DOUBLE_EQ(clock.ready()[0], 1e-6 + 3e-6 + 2e-6);
  EXPECT_DOUBLE_EQ(clock.ready()[1], 1e-6 + 3e-6 + 2e-6 + 5e-6);
}

}  // namespace
}  // namespace stepsim::models
