// validate() on traces a generator or importer could build: every structural fault is a
// ConfigError naming the origin, the rank, the op (index and name) and a fix.
#include <gtest/gtest.h>

#include <chrono>

#include "platforms/config_error.hpp"
#include "workloads/trace.hpp"

namespace stepsim::workloads {
namespace {

ProcessGroup group(const std::string& name, int ranks, std::vector<std::vector<int>> subgroups) {
  ProcessGroup g;
  g.name = name;
  g.subgroups = std::move(subgroups);
  g.subgroup_of_rank.assign(ranks, -1);
  for (std::size_t s = 0; s < g.subgroups.size(); ++s)
    for (int rank : g.subgroups[s]) g.subgroup_of_rank[rank] = static_cast<int>(s);
  return g;
}

Op make(OpKind kind, int stream, int name) {
  Op op;
  op.kind = kind;
  op.stream = stream;
  op.name = name;
  return op;
}

// Two ranks sharing one program: a kernel, a recorded event waited on, an allreduce on world.
Trace two_ranks() {
  Trace t;
  t.origin = "gen";
  t.ranks = 2;
  t.names = {"k", "ar", "ev"};
  t.groups = {group("world", 2, {{0, 1}})};
  CollectiveCall call;
  call.bytes = 1 << 20;
  t.collectives = {call};
  Program p;
  p.streams = {"compute", "comm"};
  p.events = {"e"};
  Op kernel = make(OpKind::kernel, 0, 0);
  kernel.duration = 1e-3;
  Op record = make(OpKind::record, 0, 2);
  record.event = 0;
  Op wait = make(OpKind::wait, 1, 2);
  wait.event = 0;
  Op allreduce = make(OpKind::collective, 1, 1);
  allreduce.collective = 0;
  p.ops = {kernel, record, wait, allreduce};
  t.programs = {p};
  t.program_of_rank = {0, 0};
  return t;
}

// One program per rank: rank 0 sends rank 1 one message.
Trace p2p() {
  Trace t;
  t.origin = "gen";
  t.ranks = 2;
  t.names = {"send", "recv"};
  Program sender, receiver;
  sender.streams = receiver.streams = {"comm"};
  Op send = make(OpKind::send, 0, 0);
  send.peer = 1;
  send.bytes = 1024;
  Op recv = make(OpKind::recv, 0, 1);
  recv.peer = 0;
  recv.bytes = 1024;
  sender.ops = {send};
  receiver.ops = {recv};
  t.programs = {sender, receiver};
  t.program_of_rank = {0, 1};
  return t;
}

void expect_error(const Trace& trace, const std::vector<std::string>& parts) {
  try {
    validate(trace);
    ADD_FAILURE() << "no ConfigError; expected " << parts.front();
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    for (const std::string& part : parts) EXPECT_NE(what.find(part), std::string::npos) << what;
    EXPECT_NE(what.find("(fix: "), std::string::npos) << what;
  }
}

TEST(TraceValidate, ValidTracesPass) {
  EXPECT_NO_THROW(validate(two_ranks()));
  EXPECT_NO_THROW(validate(p2p()));
}

TEST(TraceValidate, IndicesOutOfRange) {
  Trace t = two_ranks();
  t.program_of_rank = {0};
  expect_error(t, {"gen: program_of_rank", "1 entries for 2 ranks"});

  t = two_ranks();
  t.programs[0].ops[0].stream = 2;
  expect_error(t,
               {"gen: rank 0, programs[0].ops[0] (kernel 'k')", "stream 2 does not exist (the program has 2 streams)"});

  t = two_ranks();
  t.programs[0].ops[0].kernel = 0;
  expect_error(t, {"rank 0, programs[0].ops[0] (kernel 'k')", "kernel 0 does not exist (0 kernels)"});

  t = two_ranks();
  t.programs[0].ops[3].collective = 4;
  expect_error(t, {"programs[0].ops[3] (collective 'ar')", "collective 4 does not exist"});

  t = two_ranks();
  t.programs[0].ops[1].event = 1;
  expect_error(t, {"programs[0].ops[1] (record 'ev')", "event 1 does not exist (the program has 1 events)"});

  t = two_ranks();
  t.programs[0].ops[0].name = 7;
  expect_error(t, {"programs[0].ops[0] (kernel)", "name 7 does not exist (3 names)"});

  t = two_ranks();
  t.collectives[0].group = 3;
  expect_error(t, {"gen: collectives[0] (allreduce)", "group 3 does not exist (1 groups)"});
}

TEST(TraceValidate, OpKindSpecificFields) {
  Trace t = two_ranks();
  t.programs[0].ops[0].duration = -1;
  expect_error(t, {"programs[0].ops[0] (kernel 'k')", "is not a time"});

  t = two_ranks();
  t.collectives[0].bytes = 0;
  expect_error(t, {"gen: collectives[0] (allreduce)", "size must be > 0"});

  t = two_ranks();
  t.collectives[0].algorithm = "rings";
  expect_error(t, {"collectives[0]", "unknown algorithm 'rings'", "ring"});

  t = p2p();
  t.programs[1].ops[0].bytes = 0;
  expect_error(t, {"gen: rank 1, programs[1].ops[0] (recv 'recv')", "size must be > 0"});

  t = p2p();
  t.programs[0].ops[0].peer = 2;
  expect_error(t, {"gen: rank 0, programs[0].ops[0] (send 'send')", "peer 2 is outside the trace's ranks 0-1"});

  t = two_ranks();
  Op sync = make(OpKind::sync, 0, 0);
  sync.event = 0;
  t.programs[0].ops.push_back(sync);
  expect_error(t, {"programs[0].ops[4] (sync 'k')", "sync names both a stream and an event"});
}

TEST(TraceValidate, WaitBeforeRecord) {
  Trace t = two_ranks();
  std::swap(t.programs[0].ops[1], t.programs[0].ops[2]);
  expect_error(t, {"gen: rank 0, programs[0].ops[1] (wait 'ev')", "wait on event 'e' before any record of it",
                   "record the event earlier in CPU order"});

  t = two_ranks();
  Op sync = make(OpKind::sync, -1, 0);
  sync.event = 0;
  t.programs[0].ops.insert(t.programs[0].ops.begin(), sync);
  expect_error(t, {"programs[0].ops[0] (sync 'k')", "sync on event 'e' before any record of it"});
}

TEST(TraceValidate, Groups) {
  Trace t = two_ranks();
  t.groups[0].subgroups = {{0, 1}, {1}};
  expect_error(t, {"gen: group 'world'", "rank 1 is in subgroups 0 and 1", "must be disjoint"});

  t = two_ranks();
  t.groups[0].subgroup_of_rank = {0, -1};
  expect_error(t, {"gen: group 'world'", "subgroup_of_rank[1] is -1 but the subgroups put rank 1 in 0"});

  t = two_ranks();
  t.groups[0].subgroups = {{0, 2}};
  expect_error(t, {"gen: group 'world'", "subgroup 0 holds rank 2, outside the trace's ranks 0-1"});

  t = two_ranks();
  t.groups[0] = group("world", 2, {{0}});
  expect_error(t, {"gen: rank 1, programs[0].ops[3] (collective 'ar')",
                   "rank 1 issues a collective on group 'world' but is not a member", "add rank 1 to a subgroup"});

  t = two_ranks();
  t.collectives[0].op = models::CollectiveOp::broadcast;
  t.collectives[0].root = 2;
  expect_error(t, {"gen: rank 0, programs[0].ops[3] (collective 'ar')",
                   "root 2 is outside rank 0's subgroup of 'world' (2 ranks)", "0-1"});
}

TEST(TraceValidate, PointToPoint) {
  // A program shared by both ranks sends to rank 1: rank 1 would send to itself.
  Trace t = p2p();
  t.program_of_rank = {0, 0};
  expect_error(t, {"gen: rank 1, programs[0].ops[0] (send 'send')", "rank 1 sends to itself", "name another rank"});

  t = p2p();
  t.programs[0].ops.push_back(t.programs[0].ops[0]);
  expect_error(t, {"gen: ranks 0 -> 1", "rank 0 sends 2 messages to rank 1 but rank 1 posts 1 recvs from rank 0"});

  t = p2p();
  t.programs[1].ops[0].bytes = 2048;
  expect_error(t, {"gen: rank 1, programs[1].ops[0] (recv 'recv')",
                   "message #0 from rank 0 is 1KiB but the recv expects 2KiB", "(send 'send')"});
}

TEST(TraceValidate, CollectivesMatchAcrossMembers) {
  Trace t = two_ranks();
  t.programs.push_back(t.programs[0]);
  t.programs[1].ops.pop_back();
  t.program_of_rank = {0, 1};
  expect_error(t, {"gen: group 'world' subgroup 0", "rank 0 issues 1 collectives on it but rank 1 issues 0"});

  t = two_ranks();
  t.programs.push_back(t.programs[0]);
  CollectiveCall other = t.collectives[0];
  other.bytes = 2 << 20;
  t.collectives.push_back(other);
  t.programs[1].ops[3].collective = 1;
  t.program_of_rank = {0, 1};
  expect_error(t,
               {"gen: rank 1, programs[1].ops[3] (collective 'ar')",
                "collective #0 on group 'world' is allreduce of 2MiB (root 0, algo nccl) but rank 0 issues allreduce "
                "of 1MiB",
                "must agree on op, size, root and algo"});
}

TEST(TraceValidate, UnusedProgramsAreCheckedToo) {
  Trace t = two_ranks();
  t.programs.push_back(t.programs[0]);
  t.programs[1].ops[0].stream = 5;
  expect_error(t, {"gen: no rank, programs[1].ops[0] (kernel 'k')", "stream 5 does not exist"});
}

// The compact form stays cheap: 16384 ranks sharing one program of 20000 ops.
TEST(TraceValidate, CompactTraceAtScale) {
  const int ranks = 16384;
  Trace t;
  t.origin = "gen";
  t.ranks = ranks;
  t.names = {"k", "ar"};
  std::vector<int> all(ranks);
  for (int r = 0; r < ranks; ++r) all[r] = r;
  t.groups = {group("world", ranks, {all})};
  CollectiveCall call;
  call.bytes = 1 << 20;
  t.collectives = {call};
  Program p;
  p.streams = {"compute", "comm"};
  for (int i = 0; i < 10000; ++i) {
    Op kernel = make(OpKind::kernel, 0, 0);
    kernel.duration = 1e-6;
    Op allreduce = make(OpKind::collective, 1, 1);
    allreduce.collective = 0;
    p.ops.push_back(kernel);
    p.ops.push_back(allreduce);
  }
  t.programs = {p};
  t.program_of_rank.assign(ranks, 0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_NO_THROW(validate(t));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
}

}  // namespace
}  // namespace stepsim::workloads
