// SM interference in the replay (workloads/trace.hpp): while collectives and send/recvs run
// on a GPU they hold one SM per channel, and kernels progress at (S - C) / S of their isolated
// rate. Golden cases on the dgx-a100 preset (S = 108, the A100 whitepaper), computed by hand;
// the numbers not written by hand are a collective's time (the analytical engine's, obtained
// separately) and whether a premise holds.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "models/algorithm.hpp"
#include "models/compression/compressed_schedules.hpp"
#include "platforms/config_error.hpp"
#include "platforms/loader.hpp"
#include "sim/analytical.hpp"
#include "sim/replay.hpp"
#include "sim/replay_core.hpp"
#include "sim/tests/replay_trace.hpp"

namespace stepsim::sim {
namespace {

using models::CollectiveOp;
using testing::TraceBuilder;

constexpr Seconds kLaunch = 4e-6;
constexpr Seconds kGap = 5e-6;
constexpr Bytes kGiB = 1024.0 * 1024 * 1024;
constexpr double kSms = 108;

class InterferenceTest : public ::testing::Test {
 protected:
  InterferenceTest() : platform_(platforms::load_platform("dgx-a100")) {}

  void SetUp() override { ASSERT_EQ(platform_.gpu().sm_count, 108); }

  Placement placement(int ranks) {
    allocation_.gpus.clear();
    for (int g = 0; g < ranks; ++g) allocation_.gpus.push_back(g);
    return Placement{platform_, allocation_};
  }

  /// Per member: when it finishes a 2-rank ring allreduce of `bytes` on `channels` channels,
  /// from its start (the analytical engine).
  std::vector<Seconds> allreduce_finish(Bytes bytes, int channels) {
    platforms::Allocation allocation{{0, 1}};
    models::AlgorithmOptions options;
    options.channels = channels;
    const models::CollectiveSpec spec{CollectiveOp::allreduce, 2, bytes, 0};
    const models::Schedule schedule =
        models::lower_collective("ring", *models::AlgorithmRegistry::instance().get("ring").make(), spec,
                                 {platform_, allocation, options});
    EXPECT_EQ(schedule.channels, channels);
    return AnalyticalEngine().run(schedule, Placement{platform_, allocation}).rank_finish;
  }

  /// End of every op, per rank, replayed by the core on the analytical backend.
  std::vector<std::vector<Seconds>> op_ends(workloads::Trace& trace) {
    const Placement p = placement(trace.ranks);
    ReplayPlan plan(trace, p);
    ReplayCore core(trace, p, plan);
    core.run(*make_replay_backend("analytical"));
    std::vector<std::vector<Seconds>> ends(static_cast<std::size_t>(trace.ranks));
    for (int r = 0; r < trace.ranks; ++r)
      for (int op = 0; op < static_cast<int>(trace.program(r).ops.size()); ++op)
        ends[static_cast<std::size_t>(r)].push_back(core.end(r, op));
    return ends;
  }

  Prediction run(workloads::Trace& trace, const std::string& engine) {
    ReplayOptions options;
    options.engine = engine;
    return replay(trace, placement(trace.ranks), options);
  }

  platforms::Platform platform_;
  platforms::Allocation allocation_;
};

void expect_close(Seconds actual, Seconds expected) { EXPECT_NEAR(actual, expected, 1e-9 * expected); }

TEST_F(InterferenceTest, KernelUnderACollectiveRunsOnTheSmsLeft) {
  // The allreduce (4 channels) is issued first and starts at L on both ranks; the kernel,
  // issued at 2L, runs entirely under it on 104 of the 108 SMs.
  constexpr Seconds kKernel = 1e-3;
  const std::vector<Seconds> finish = allreduce_finish(kGiB, 4);
  const Seconds end = 2 * kLaunch + kKernel * kSms / (kSms - 4);
  TraceBuilder b(2, kLaunch, kGap);
  for (int r = 0; r < 2; ++r) {
    ASSERT_LT(end, kLaunch + finish[static_cast<std::size_t>(r)]);   // the premise: fully overlapped
    b.collective(r, "comm", "sync", CollectiveOp::allreduce, kGiB, "ring", 0, 4);
    b.kernel(r, "compute", "gemm", kKernel);
  }
  const auto ends = op_ends(b.trace());
  for (int r = 0; r < 2; ++r) expect_close(ends[static_cast<std::size_t>(r)][1], end);
}

TEST_F(InterferenceTest, KernelAcrossACollectiveIsSlowedOnlyWhileItRuns) {
  // The kernel starts at L, the allreduce at 2L and holds 4 SMs for T; the kernel does L of
  // work before, T * 104/108 during and the rest after: it ends at L + D + T * 4/108.
  constexpr Seconds kKernel = 20e-3;
  const std::vector<Seconds> finish = allreduce_finish(kGiB, 4);
  TraceBuilder b(2, kLaunch, kGap);
  for (int r = 0; r < 2; ++r) {
    ASSERT_LT(2 * kLaunch + finish[static_cast<std::size_t>(r)], kKernel);   // the premise: it ends inside
    b.kernel(r, "compute", "gemm", kKernel);
    b.collective(r, "comm", "sync", CollectiveOp::allreduce, kGiB, "ring", 0, 4);
  }
  const auto ends = op_ends(b.trace());
  for (int r = 0; r < 2; ++r) {
    const Seconds held = finish[static_cast<std::size_t>(r)];
    expect_close(ends[static_cast<std::size_t>(r)][0], kLaunch + kKernel + held * 4 / kSms);
    expect_close(ends[static_cast<std::size_t>(r)][1], 2 * kLaunch + held);   // collectives are not slowed
  }
}

TEST_F(InterferenceTest, KernelsBeforeAndAfterACollectiveKeepTheirTimeToTheBit) {
  // forward, then the allreduce after it (event), then update after the allreduce (event):
  // nothing overlaps, so every time is the plain max-plus sum, bit for bit.
  const std::vector<Seconds> finish = allreduce_finish(kGiB, 4);
  TraceBuilder b(2, kLaunch, kGap);
  for (int r = 0; r < 2; ++r) {
    b.kernel(r, "compute", "forward", 2e-3);
    b.record(r, "compute", "grads");
    b.wait(r, "comm", "grads");
    b.collective(r, "comm", "sync", CollectiveOp::allreduce, kGiB, "ring", 0, 4);
    b.record(r, "comm", "synced");
    b.wait(r, "compute", "synced");
    b.kernel(r, "compute", "update", 3e-3);
  }
  const auto ends = op_ends(b.trace());
  for (int r = 0; r < 2; ++r) {
    const Seconds forward = kLaunch + 2e-3;
    const Seconds synced = forward + finish[static_cast<std::size_t>(r)];
    EXPECT_EQ(ends[static_cast<std::size_t>(r)][0], forward);
    EXPECT_EQ(ends[static_cast<std::size_t>(r)][3], synced);
    EXPECT_EQ(ends[static_cast<std::size_t>(r)][6], synced + kGap + 3e-3);
  }
}

TEST_F(InterferenceTest, ConcurrentCollectivesAddTheirChannels) {
  // Allreduces of 4 and 8 channels on two streams start at L and 2L; the kernel, issued at
  // 3L, runs under both: on 108 - 12 SMs.
  constexpr Seconds kKernel = 1e-3;
  const std::vector<Seconds> first = allreduce_finish(kGiB, 4), second = allreduce_finish(kGiB, 8);
  const Seconds end = 3 * kLaunch + kKernel * kSms / (kSms - 12);
  TraceBuilder b(2, kLaunch, kGap);
  for (int r = 0; r < 2; ++r) {
    ASSERT_LT(end, kLaunch + first[static_cast<std::size_t>(r)]);
    ASSERT_LT(end, 2 * kLaunch + second[static_cast<std::size_t>(r)]);
    b.collective(r, "comm_a", "sync_a", CollectiveOp::allreduce, kGiB, "ring", 0, 4);
    b.collective(r, "comm_b", "sync_b", CollectiveOp::allreduce, kGiB, "ring", 0, 8);
    b.kernel(r, "compute", "gemm", kKernel);
  }
  const auto ends = op_ends(b.trace());
  for (int r = 0; r < 2; ++r) expect_close(ends[static_cast<std::size_t>(r)][2], end);
}

TEST_F(InterferenceTest, HeldSmsAreCappedSoAKernelKeepsOne) {
  // 64 + 64 channels would take every SM; the kernel keeps one of the 108 and runs 108 times
  // slower.
  constexpr Seconds kKernel = 10e-6;
  const std::vector<Seconds> finish = allreduce_finish(kGiB, 64);
  const Seconds end = 3 * kLaunch + kKernel * kSms;
  TraceBuilder b(2, kLaunch, kGap);
  for (int r = 0; r < 2; ++r) {
    ASSERT_LT(end, kLaunch + finish[static_cast<std::size_t>(r)]);
    b.collective(r, "comm_a", "sync_a", CollectiveOp::allreduce, kGiB, "ring", 0, 64);
    b.collective(r, "comm_b", "sync_b", CollectiveOp::allreduce, kGiB, "ring", 0, 64);
    b.kernel(r, "compute", "gemm", kKernel);
  }
  const auto ends = op_ends(b.trace());
  for (int r = 0; r < 2; ++r) expect_close(ends[static_cast<std::size_t>(r)][2], end);
}

TEST_F(InterferenceTest, SendRecvHoldsItsChannel) {
  // The replay's send/recv schedule has one channel (ReplayPlan::p2p): a kernel under it runs
  // on 107 SMs. Both sides reach it at L; the kernels start at 2L.
  constexpr Seconds kKernel = 100e-6;
  const platforms::Route& route = platform_.route(platform_.gpu_vertex(0), platform_.gpu_vertex(1));
  const Bytes bytes = 1 * kGiB;
  const Seconds end = 2 * kLaunch + kKernel * kSms / (kSms - 1);
  ASSERT_LT(end, kLaunch + route.latency + bytes / route.bandwidth);
  TraceBuilder b(2, kLaunch, kGap);
  b.send(0, "p2p", "activations", 1, bytes);
  b.recv(1, "p2p", "activations", 0, bytes);
  for (int r = 0; r < 2; ++r) b.kernel(r, "compute", "gemm", kKernel);
  const auto ends = op_ends(b.trace());
  for (int r = 0; r < 2; ++r) expect_close(ends[static_cast<std::size_t>(r)][1], end);
}

// k1 runs under the allreduce; k2 starts under it and ends after it. On the event backend
// the allreduce's end is known only when it comes (member_done), so both kernels are timed
// tentatively and re-timed: the times must still be those of the analytical backend.
TEST_F(InterferenceTest, EventEngineAgreesWithoutLinkSharing) {
  constexpr Seconds kFirst = 1e-3, kSecond = 20e-3;
  const std::vector<Seconds> finish = allreduce_finish(kGiB, 4);
  TraceBuilder b(2, kLaunch, kGap);
  Seconds latest = 0;
  for (int r = 0; r < 2; ++r) {
    const Seconds released = kLaunch + finish[static_cast<std::size_t>(r)];
    const Seconds first_end = 2 * kLaunch + kFirst * kSms / (kSms - 4);
    const Seconds second_begin = first_end + kGap;
    ASSERT_LT(second_begin, released);
    const Seconds second_end = released + (kSecond - (released - second_begin) * (kSms - 4) / kSms);
    ASSERT_GT(second_end, released);
    latest = std::max(latest, second_end);
    b.collective(r, "comm", "sync", CollectiveOp::allreduce, kGiB, "ring", 0, 4);
    b.kernel(r, "compute", "k1", kFirst);
    b.kernel(r, "compute", "k2", kSecond);
  }
  const Prediction analytical = run(b.trace(), "analytical");
  const Prediction event = run(b.trace(), "event");
  expect_close(analytical.iteration_time, latest);
  expect_close(event.iteration_time, latest);
  EXPECT_EQ(run(b.trace(), "analytical").iteration_time, analytical.iteration_time);   // deterministic
}

TEST_F(InterferenceTest, KernelBesideACollectiveThatNeverStartsStillFinishes) {
  // Rank 0 issues x (group g1) then y (g2), rank 1 y then x: neither starts. Rank 0's kernel
  // cannot know that x will never start, so it waits for its end time to come, finishes, and
  // the deadlock is reported on the collectives' streams only.
  TraceBuilder b(2, kLaunch, kGap);
  const int g1 = b.add_group("g1", {{0, 1}}), g2 = b.add_group("g2", {{0, 1}});
  b.collective(0, "comm", "x", CollectiveOp::allreduce, kGiB, "ring", g1, 4);
  b.collective(0, "comm", "y", CollectiveOp::allreduce, kGiB, "ring", g2, 4);
  b.kernel(0, "compute", "gemm", 1e-3);
  b.collective(1, "comm", "y", CollectiveOp::allreduce, kGiB, "ring", g2, 4);
  b.collective(1, "comm", "x", CollectiveOp::allreduce, kGiB, "ring", g1, 4);
  for (const std::string engine : {"analytical", "event"}) {
    try {
      run(b.trace(), engine);
      ADD_FAILURE() << engine << ": the deadlock was not reported";
    } catch (const ConfigError& e) {
      const std::string text = e.what();
      EXPECT_NE(text.find("rank 0: stream 'comm': waiting for rank 1 to reach allreduce 'x'"), std::string::npos)
          << text;
      EXPECT_NE(text.find("rank 1: stream 'comm': waiting for rank 0 to reach allreduce 'y'"), std::string::npos)
          << text;
      EXPECT_EQ(text.find("compute"), std::string::npos) << text;
    }
  }
}

}  // namespace
}  // namespace stepsim::sim
