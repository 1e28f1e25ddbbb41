// The shared trace builder (workloads/trace_builder.hpp): interning of names, kernels and
// collectives, program sharing, the CPU op gap, and the every-rank-has-a-program check.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "platforms/config_error.hpp"
#include "workloads/trace_builder.hpp"

namespace stepsim::workloads {
namespace {

models::KernelSpec gemm(double m) {
  return {"gemm", models::Dtype::bf16, {{"m", m}, {"n", 1024}, {"k", 1024}}, {}};
}

ProcessGroup world(int ranks) {
  ProcessGroup g{"world", {{}}, std::vector<int>(static_cast<std::size_t>(ranks), 0)};
  for (int r = 0; r < ranks; ++r) g.subgroups[0].push_back(r);
  return g;
}

TEST(TraceBuilder, KernelsThatCompleteAlikeShareOneIndex) {
  TraceBuilder b("test", 1);
  const int plain = b.kernel(gemm(512), "a");
  EXPECT_EQ(b.kernel(gemm(512), "again"), plain);
  // `batch` defaults to 1: written out, it completes to the same kernel.
  models::KernelSpec explicit_batch = gemm(512);
  explicit_batch.params["batch"] = 1;
  EXPECT_EQ(b.kernel(explicit_batch, "b"), plain);
  EXPECT_NE(b.kernel(gemm(1024), "c"), plain);
  b.assign_all({});
  const Trace t = b.finish();
  EXPECT_EQ(t.kernels.size(), 2u);
  EXPECT_EQ(t.kernels[0].params.at("batch"), 1);   // stored completed
}

TEST(TraceBuilder, CollectivesAreInternedOnEveryField) {
  TraceBuilder b("test", 2);
  CollectiveCall call;
  call.op = models::CollectiveOp::allgather;
  call.bytes = 1 << 20;
  const int first = b.collective(call);
  EXPECT_EQ(b.collective(call), first);
  CollectiveCall channels = call;
  channels.options.channels = 4;
  CollectiveCall out_of_place = call;
  out_of_place.in_place = false;
  CollectiveCall forced = call;
  forced.options.extra = {{"algo", "ring"}};
  EXPECT_NE(b.collective(channels), first);
  EXPECT_NE(b.collective(out_of_place), first);
  EXPECT_NE(b.collective(forced), first);
  EXPECT_NE(b.collective(forced), b.collective(channels));
}

TEST(TraceBuilder, IdenticalProgramsAreStoredOnce) {
  TraceBuilder b("test", 4);
  const int g = b.group(world(4));
  auto write = [&](double m) {
    ProgramWriter w(b, 0);
    const int s = w.stream("compute");
    w.kernel(s, "fc", gemm(m));
    CollectiveCall call;
    call.bytes = 4096;
    call.group = g;
    w.collective(s, "allreduce", call);
    return w.take();
  };
  b.assign({0, 2}, write(64));
  b.assign({1}, write(64));
  b.assign({3}, write(128));
  const Trace t = b.finish();
  ASSERT_EQ(t.programs.size(), 2u);
  EXPECT_EQ(t.program_of_rank, (std::vector<int>{0, 0, 0, 1}));
  EXPECT_EQ(t.collectives.size(), 1u);
  EXPECT_EQ(t.kernels.size(), 2u);
  EXPECT_NO_THROW(validate(t));
}

TEST(TraceBuilder, EveryIssuedGpuOpFollowsTheCpuGap) {
  TraceBuilder b("test", 2);
  ProgramWriter w(b, 21e-6);
  const int s = w.stream("compute");
  const int e = w.event("done");
  w.kernel(s, "fc", gemm(64));
  w.send(s, "to1", 1, 100);
  w.record(s, e);
  w.sync_event(e);
  w.memcpy(s, "h2d", MemcpyKind::host_to_device, 64, HostMemory::pinned);
  EXPECT_EQ(w.new_event("done"), 1);   // a fresh event of the same name
  const Program p = w.take();
  // gap, kernel, gap, send, record, sync, gap, memcpy: events cost the CPU nothing.
  ASSERT_EQ(p.ops.size(), 8u);
  for (std::size_t i : {0u, 2u, 6u}) {
    EXPECT_EQ(p.ops[i].kind, OpKind::cpu);
    EXPECT_DOUBLE_EQ(p.ops[i].duration, 21e-6);
  }
  EXPECT_EQ(p.ops[1].kind, OpKind::kernel);
  EXPECT_EQ(p.ops[3].kind, OpKind::send);
  EXPECT_EQ(p.ops[3].peer, 1);
  EXPECT_EQ(p.ops[4].kind, OpKind::record);
  EXPECT_EQ(p.ops[5].kind, OpKind::sync);
  EXPECT_EQ(p.ops[7].memcpy, MemcpyKind::host_to_device);
}

TEST(TraceBuilder, PeersWithinAGroupLetReplicasShareAProgram) {
  // Two pipeline stages of two replicas: stage 0 is ranks {0, 1}, stage 1 ranks {2, 3}; the
  // "pp" group pairs 0-2 and 1-3, so each stage's program names its peer as pp rank 0 or 1.
  TraceBuilder b("test", 4);
  const int pp = b.group(ProcessGroup{"pp", {{0, 2}, {1, 3}}, {0, 1, 0, 1}});
  auto stage = [&](bool first, int peer) {
    ProgramWriter w(b, 0);
    const int s = w.stream("p2p");
    if (first) w.send(s, "activation", peer, 1024, pp);
    else w.recv(s, "activation", peer, 1024, pp);
    return w.take();
  };
  b.assign({0, 1}, stage(true, 1));
  b.assign({2, 3}, stage(false, 0));
  const Trace t = b.finish();
  EXPECT_EQ(t.programs.size(), 2u);
  EXPECT_NO_THROW(validate(t));
  EXPECT_EQ(peer_rank(t, 1, t.program(1).ops[0]), 3);
  EXPECT_EQ(peer_rank(t, 3, t.program(3).ops[0]), 1);

  TraceBuilder bad("test", 4);
  bad.group(ProcessGroup{"pp", {{0, 2}, {1, 3}}, {0, 1, 0, 1}});
  ProgramWriter w(bad, 0);
  w.send(w.stream("p2p"), "activation", 2, 1024, 0);   // a group of 2 has no rank 2
  bad.assign_all(w.take());
  try {
    validate(bad.finish());
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("peer 2 of group 'pp' is not a rank of rank 0's subgroup"), std::string::npos)
        << e.what();
  }
}

TEST(TraceBuilder, ARankWithoutAProgramIsAGeneratorBug) {
  TraceBuilder b("gen", 3);
  b.assign({0, 1}, {});
  EXPECT_THROW(b.finish(), std::logic_error);
}

TEST(TraceBuilder, AProgramStopsAtItsOpLimitNamingTheOrigin) {
  TraceBuilder b("w.yaml", 1, 3);
  ProgramWriter w(b, 0);   // no CPU gap: one op per call
  const int compute = w.stream("compute");
  w.timed_kernel(compute, "a", 1e-6);
  w.timed_kernel(compute, "b", 1e-6);
  w.timed_kernel(compute, "c", 1e-6);
  EXPECT_EQ(w.program().ops.size(), 3u);
  try {
    w.timed_kernel(compute, "d", 1e-6);
    FAIL() << "a fourth op passed a limit of 3";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("w.yaml: a rank's program passes 3 ops"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fix: "), std::string::npos);
  }
  EXPECT_EQ(w.program().ops.size(), 3u);
}

}  // namespace
}  // namespace stepsim::workloads
