// Traces that cannot finish, and traces that do not fit the job: the replay throws ConfigError
// naming the blocked ranks, their ops and why, and never hangs. Some cases pass
// workloads::validate (cycles only the run can find) and go through replay(); the others are
// rejected by validate first, so they run the core directly to check that it stands on its own.
#include <gtest/gtest.h>

#include <string>

#include "platforms/config_error.hpp"
#include "platforms/loader.hpp"
#include "sim/replay.hpp"
#include "sim/replay_core.hpp"
#include "sim/tests/fixtures.hpp"
#include "sim/tests/replay_trace.hpp"

namespace stepsim::sim {
namespace {

using models::CollectiveOp;
using testing::TraceBuilder;

constexpr Bytes kMiB = 1024.0 * 1024;

class ReplayDeadlockTest : public ::testing::Test {
 protected:
  ReplayDeadlockTest() : platform_(platforms::load_platform("dgx-a100", {2, "", {}})) {}

  Placement placement(int ranks) {
    allocation_.gpus.clear();
    for (int g = 0; g < ranks; ++g) allocation_.gpus.push_back(g);
    return Placement{platform_, allocation_};
  }

  /// The ConfigError message of replay(), or "" when it succeeds.
  std::string replay_error(workloads::Trace& trace, const std::string& engine = "analytical") {
    ReplayOptions options;
    options.engine = engine;
    try {
      replay(trace, placement(trace.ranks), options);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }

  /// The ConfigError message of the core alone (no workloads::validate), or "".
  std::string core_error(workloads::Trace& trace) {
    const Placement p = placement(trace.ranks);
    try {
      ReplayPlan plan(trace, p);
      ReplayCore core(trace, p, plan);
      core.run(*make_replay_backend("analytical"));
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }

  platforms::Platform platform_;
  platforms::Allocation allocation_;
};

#define EXPECT_MENTIONS(message, text) EXPECT_NE((message).find(text), std::string::npos) << (message)

// --- cycles that pass validate: found by the run ---------------------------------------------

TEST_F(ReplayDeadlockTest, RecvBeforeSendOnBothRanks) {
  TraceBuilder b(2);
  b.recv(0, "p2p", "recv_from_1", 1, kMiB);
  b.send(0, "p2p", "send_to_1", 1, kMiB);
  b.recv(1, "p2p", "recv_from_0", 0, kMiB);
  b.send(1, "p2p", "send_to_0", 0, kMiB);
  const std::string m = replay_error(b.trace());
  EXPECT_MENTIONS(m, "test-trace");
  EXPECT_MENTIONS(m, "2 ranks are blocked");
  EXPECT_MENTIONS(m, "rank 0: stream 'p2p': recv 'recv_from_1' from rank 1 (#0) is waiting for rank 1 to reach its send 'send_to_0'");
  EXPECT_MENTIONS(m, "rank 1: stream 'p2p': recv 'recv_from_0' from rank 0 (#0) is waiting for rank 0 to reach its send 'send_to_1'");
}

TEST_F(ReplayDeadlockTest, CircularEventWaitsAcrossStreamsAndRanks) {
  // Rank 0 issues x (group g1) then y (g2) behind it; rank 1 issues y then x behind it.
  TraceBuilder b(2);
  const int g1 = b.add_group("g1", {{0, 1}});
  const int g2 = b.add_group("g2", {{0, 1}});
  b.collective(0, "a", "x", CollectiveOp::allreduce, kMiB, "ring", g1);
  b.record(0, "a", "e");
  b.wait(0, "b", "e");
  b.collective(0, "b", "y", CollectiveOp::allreduce, kMiB, "ring", g2);
  b.collective(1, "a", "y", CollectiveOp::allreduce, kMiB, "ring", g2);
  b.record(1, "a", "e");
  b.wait(1, "b", "e");
  b.collective(1, "b", "x", CollectiveOp::allreduce, kMiB, "ring", g1);
  const std::string m = replay_error(b.trace());
  EXPECT_MENTIONS(m, "rank 0: stream 'a': waiting for rank 1 to reach allreduce 'x' of 1MiB with ring (#0 on group 'g1')");
  EXPECT_MENTIONS(m, "stream 'b': wait 'wait e' on event 'e' waits for record 'record e' on stream 'a', which never completes");
  EXPECT_MENTIONS(m, "rank 1: stream 'a': waiting for rank 0 to reach allreduce 'y' of 1MiB with ring (#0 on group 'g2')");
}

TEST_F(ReplayDeadlockTest, WaitOnARecordBehindACollectiveThatNeverStarts) {
  // Rank 0's send is behind a wait for its allreduce; rank 1 reaches the allreduce only
  // after receiving that send.
  TraceBuilder b(2);
  b.collective(0, "comm", "grad_sync", CollectiveOp::allreduce, kMiB);
  b.record(0, "comm", "synced");
  b.wait(0, "compute", "synced");
  b.send(0, "compute", "act", 1, kMiB);
  b.recv(1, "comm", "act", 0, kMiB);
  b.collective(1, "comm", "grad_sync", CollectiveOp::allreduce, kMiB);
  const std::string m = replay_error(b.trace());
  EXPECT_MENTIONS(m, "rank 0: stream 'comm': waiting for rank 1 to reach allreduce 'grad_sync'");
  EXPECT_MENTIONS(m, "stream 'compute': wait 'wait synced' on event 'synced' waits for record 'record synced'");
  EXPECT_MENTIONS(m, "rank 1: stream 'comm': recv 'act' from rank 0 (#0) is waiting for rank 0 to reach its send 'act'");
}

TEST_F(ReplayDeadlockTest, SyncOnAStreamBlockedForever) {
  TraceBuilder b(2);
  b.collective(0, "comm", "grad_sync", CollectiveOp::allreduce, kMiB);
  b.sync(0, "comm", "", "wait_for_grads");
  b.send(0, "comm", "act", 1, kMiB);
  b.recv(1, "compute", "act", 0, kMiB);
  b.sync(1, "compute", "", "wait_for_act");
  b.collective(1, "comm", "grad_sync", CollectiveOp::allreduce, kMiB);
  const std::string m = replay_error(b.trace());
  EXPECT_MENTIONS(m, "rank 0: stream 'comm': waiting for rank 1 to reach allreduce 'grad_sync'");
  EXPECT_MENTIONS(m, "cpu: sync 'wait_for_grads' waits for stream 'comm', which never drains");
  EXPECT_MENTIONS(m, "rank 1: stream 'compute': recv 'act' from rank 0 (#0) is waiting for rank 0 to reach its send 'act'");
  EXPECT_MENTIONS(m, "cpu: sync 'wait_for_act' waits for stream 'compute', which never drains");
}

TEST_F(ReplayDeadlockTest, EventSyncAndDeviceSyncBlockedForever) {
  TraceBuilder b(2);
  b.collective(0, "comm", "grad_sync", CollectiveOp::allreduce, kMiB);
  b.record(0, "comm", "done");
  b.sync(0, "", "done", "host_wait");
  b.send(0, "comm", "act", 1, kMiB);
  b.recv(1, "comm", "act", 0, kMiB);
  b.sync(1, "", "", "device_wait");
  b.collective(1, "comm", "grad_sync", CollectiveOp::allreduce, kMiB);
  const std::string m = replay_error(b.trace());
  EXPECT_MENTIONS(m, "rank 0: stream 'comm': waiting for rank 1");
  EXPECT_MENTIONS(m, "cpu: sync 'host_wait' on event 'done' waits for record 'record done' on stream 'comm', which never completes");
  EXPECT_MENTIONS(m, "rank 1: stream 'comm': recv 'act' from rank 0");
  EXPECT_MENTIONS(m, "cpu: sync 'device_wait' waits for the whole device");
}

TEST_F(ReplayDeadlockTest, ManyBlockedRanksAreCapped) {
  // 12 ranks wait for each other in a ring of recvs.
  TraceBuilder b(12);
  for (int r = 0; r < 12; ++r) {
    b.recv(r, "p2p", "in", (r + 11) % 12, kMiB);
    b.send(r, "p2p", "out", (r + 1) % 12, kMiB);
  }
  const std::string m = replay_error(b.trace());
  EXPECT_MENTIONS(m, "12 ranks are blocked");
  EXPECT_MENTIONS(m, "rank 7: stream 'p2p'");
  EXPECT_EQ(m.find("rank 8: stream"), std::string::npos) << m;
  EXPECT_MENTIONS(m, "and 4 more blocked ranks");
}

TEST_F(ReplayDeadlockTest, MatchedCollectivesWithDifferentOptions) {
  // validate compares op, size, root and algorithm; the core compares the whole call.
  TraceBuilder b(2);
  b.collective(0, "comm", "grad_sync", CollectiveOp::allreduce, kMiB, "ring", 0, 2);
  b.collective(1, "comm", "grad_sync", CollectiveOp::allreduce, kMiB, "ring", 0, 4);
  const std::string m = replay_error(b.trace());
  EXPECT_MENTIONS(m, "mismatched collectives: #0 on group 'world' is allreduce 'grad_sync' of 1MiB with ring on rank 0 "
                     "but allreduce 'grad_sync' of 1MiB with ring on rank 1");
}

TEST_F(ReplayDeadlockTest, EventEngineKeepsTheConfigError) {
  TraceBuilder b(2);
  b.recv(0, "p2p", "recv_from_1", 1, kMiB);
  b.send(0, "p2p", "send_to_1", 1, kMiB);
  b.recv(1, "p2p", "recv_from_0", 0, kMiB);
  b.send(1, "p2p", "send_to_0", 0, kMiB);
  EXPECT_EQ(replay_error(b.trace(), "event"), replay_error(b.trace(), "analytical"));
}

// --- traces validate rejects: the core alone still explains them -----------------------------

TEST_F(ReplayDeadlockTest, CollectiveOneMemberNeverReaches) {
  TraceBuilder b(3);
  for (int r = 0; r < 2; ++r) b.collective(r, "comm", "grad_sync", CollectiveOp::allreduce, kMiB);
  b.kernel(2, "compute", "busy", 1e-3);
  EXPECT_NE(replay_error(b.trace()), "");   // validate: rank 2 issues fewer collectives
  const std::string m = core_error(b.trace());
  EXPECT_MENTIONS(m, "2 ranks are blocked");
  EXPECT_MENTIONS(m, "rank 0: stream 'comm': waiting for rank 2 to reach allreduce 'grad_sync' of 1MiB with ring "
                     "(#0 on group 'world'); rank 2 never issues it");
  EXPECT_MENTIONS(m, "rank 1: stream 'comm': waiting for rank 2");
}

TEST_F(ReplayDeadlockTest, MismatchedCollectiveOp) {
  TraceBuilder b(2);
  b.collective(0, "comm", "grad_sync", CollectiveOp::allreduce, 64 * kMiB);
  b.collective(1, "comm", "gather", CollectiveOp::allgather, 64 * kMiB);
  const std::string v = replay_error(b.trace());
  EXPECT_MENTIONS(v, "rank 1");
  EXPECT_MENTIONS(v, "rank 0");
  const std::string m = core_error(b.trace());
  EXPECT_MENTIONS(m, "mismatched collectives: #0 on group 'world' is allreduce 'grad_sync' of 64MiB with ring on rank 0 "
                     "but allgather 'gather' of 64MiB with ring on rank 1");
}

TEST_F(ReplayDeadlockTest, MismatchedCollectiveSize) {
  TraceBuilder b(2);
  b.collective(0, "comm", "grad_sync", CollectiveOp::allreduce, 64 * kMiB);
  b.collective(1, "comm", "grad_sync", CollectiveOp::allreduce, 32 * kMiB);
  const std::string m = core_error(b.trace());
  EXPECT_MENTIONS(m, "is allreduce 'grad_sync' of 64MiB with ring on rank 0 but allreduce 'grad_sync' of 32MiB with ring on rank 1");
}

TEST_F(ReplayDeadlockTest, RecvWithoutSend) {
  TraceBuilder b(2);
  b.recv(1, "p2p", "act", 0, kMiB);
  b.kernel(0, "compute", "busy", 1e-3);
  EXPECT_NE(replay_error(b.trace()), "");
  const std::string m = core_error(b.trace());
  EXPECT_MENTIONS(m, "1 rank is blocked");
  EXPECT_MENTIONS(m, "rank 1: stream 'p2p': recv 'act' from rank 0 (#0) has no matching send");
}

TEST_F(ReplayDeadlockTest, SendWithoutRecv) {
  TraceBuilder b(2);
  b.send(0, "p2p", "act", 1, kMiB);
  b.send(0, "p2p", "act", 1, kMiB);
  b.recv(1, "p2p", "act", 0, kMiB);
  const std::string m = core_error(b.trace());
  EXPECT_MENTIONS(m, "rank 0: stream 'p2p': send 'act' to rank 1 (#1) has no matching recv");
}

TEST_F(ReplayDeadlockTest, MismatchedSendRecvSize) {
  TraceBuilder b(2);
  b.send(0, "p2p", "act", 1, 2 * kMiB);
  b.recv(1, "p2p", "grad", 0, kMiB);
  const std::string m = core_error(b.trace());
  EXPECT_MENTIONS(m, "mismatched send/recv: message #0 from rank 0 to rank 1 is 2MiB in send 'act' but 1MiB in recv 'grad'");
}

// --- traces that do not fit the job ---------------------------------------------------------

TEST_F(ReplayDeadlockTest, RanksDifferFromTheAllocation) {
  TraceBuilder b(4);
  for (int r = 0; r < 4; ++r) b.kernel(r, "compute", "k", 1e-3);
  ReplayOptions options;
  try {
    replay(b.trace(), placement(2), options);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_MENTIONS(std::string(e.what()), "the trace has 4 ranks but the allocation has 2 GPUs");
  }
}

TEST_F(ReplayDeadlockTest, UnknownEngine) {
  TraceBuilder b(1);
  b.kernel(0, "compute", "k", 1e-3);
  const std::string m = replay_error(b.trace(), "fluid");
  EXPECT_MENTIONS(m, "--engine");
  EXPECT_MENTIONS(m, "fluid");
}

TEST_F(ReplayDeadlockTest, HostCopyOnAPlatformWithoutHost) {
  const platforms::Platform bare = testing::two_gpus(100e9, 1e-6);
  platforms::Allocation allocation{{0, 1}};
  TraceBuilder b(2);
  b.memcpy(1, "copy", "upload", workloads::MemcpyKind::host_to_device, kMiB);
  try {
    replay(b.trace(), Placement{bare, allocation});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_MENTIONS(std::string(e.what()), "has no host (a vertex of kind cpu)");
  }
}

}  // namespace
}  // namespace stepsim::sim
