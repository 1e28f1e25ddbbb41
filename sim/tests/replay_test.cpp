// Golden replays: small traces on the dgx-a100 preset whose iteration times, breakdowns and
// critical paths are computed by hand from the execution model of workloads/trace.hpp. The
// numbers not written down by hand, a collective's time and its channels, are the analytical
// engine's and the algorithm's for the same schedule, obtained separately. (SM interference
// has its own cases in replay_interference_test.cpp.)
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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

using testing::TraceBuilder;
using models::CollectiveOp;
using workloads::MemcpyKind;

constexpr Seconds kLaunch = 4e-6;
constexpr Seconds kGap = 5e-6;
constexpr Bytes kMiB = 1024.0 * 1024;

class ReplayTest : public ::testing::Test {
 protected:
  ReplayTest() : platform_(platforms::load_platform("dgx-a100")) {}

  Placement placement(int ranks) {
    allocation_.gpus.clear();
    for (int g = 0; g < ranks; ++g) allocation_.gpus.push_back(g);
    return Placement{platform_, allocation_};
  }

  models::Schedule lowered(CollectiveOp op, Bytes bytes, const std::string& algorithm, int ranks) {
    platforms::Allocation allocation;
    for (int g = 0; g < ranks; ++g) allocation.gpus.push_back(g);
    const models::CollectiveSpec spec{op, ranks, bytes, 0};
    const models::CollectiveContext context{platform_, allocation, {}};
    // The entry point the replay lowers through (kernels on NCCL's primitives included).
    return models::lower_collective(algorithm, *models::AlgorithmRegistry::instance().get(algorithm).make(), spec, context);
  }

  /// Per member: when it finishes the collective, from its start (the analytical engine).
  std::vector<Seconds> collective_finish(CollectiveOp op, Bytes bytes, const std::string& algorithm, int ranks) {
    platforms::Allocation allocation;
    for (int g = 0; g < ranks; ++g) allocation.gpus.push_back(g);
    return AnalyticalEngine().run(lowered(op, bytes, algorithm, ranks), Placement{platform_, allocation}).rank_finish;
  }

  /// How much longer a kernel gets while a collective of `op` holds its SMs for `held`:
  /// its work goes on at (S - C) / S (workloads/trace.hpp, SM interference).
  Seconds stretch(CollectiveOp op, Bytes bytes, Seconds held) {
    const int channels = lowered(op, bytes, "ring", 2).channels;
    return held * channels / platform_.gpu().sm_count;
  }

  Prediction run(workloads::Trace& trace, std::ostream* timeline = nullptr) {
    ReplayOptions options;
    options.timeline = timeline;
    return replay(trace, placement(trace.ranks), options);
  }

  platforms::Platform platform_;
  platforms::Allocation allocation_;
};

void expect_close(Seconds actual, Seconds expected) { EXPECT_NEAR(actual, expected, 1e-9 * expected); }

Seconds path_total(const Prediction& p) {
  Seconds total = 0;
  for (const CriticalPathEntry& e : p.critical_path) total += e.time;
  return total;
}

const CriticalPathEntry* entry(const Prediction& p, const std::string& name, const std::string& kind) {
  for (const CriticalPathEntry& e : p.critical_path)
    if (e.name == name && e.kind == kind) return &e;
  return nullptr;
}

// --- the cases -----------------------------------------------------------------------------

// Compute on one stream, the allreduce on another: the collective hides under the 10 ms kernel.
TraceBuilder overlap_trace() {
  TraceBuilder b(2, kLaunch, kGap);
  for (int r = 0; r < 2; ++r) {
    b.kernel(r, "compute", "matmul", 10e-3);
    b.collective(r, "comm", "grad_sync", CollectiveOp::allreduce, 64 * kMiB);
  }
  return b;
}

// Compute, then the collective after it (event), then compute after the collective (event).
TraceBuilder serial_trace() {
  TraceBuilder b(2, kLaunch, kGap);
  for (int r = 0; r < 2; ++r) {
    b.kernel(r, "compute", "forward", 10e-3);
    b.record(r, "compute", "grads_ready");
    b.wait(r, "comm", "grads_ready");
    b.collective(r, "comm", "grad_sync", CollectiveOp::allreduce, 64 * kMiB);
    b.record(r, "comm", "synced");
    b.wait(r, "compute", "synced");
    b.kernel(r, "compute", "update", 5e-3);
  }
  return b;
}

// Rank 1 runs an extra 5 ms kernel before the collective on the same stream.
TraceBuilder straggler_trace() {
  TraceBuilder b(2, kLaunch, kGap);
  for (int r = 0; r < 2; ++r) {
    b.kernel(r, "compute", "forward", 10e-3);
    if (r == 1) b.kernel(r, "compute", "extra", 5e-3);
    b.collective(r, "compute", "grad_sync", CollectiveOp::allreduce, 64 * kMiB);
    b.kernel(r, "compute", "update", 1e-3);
  }
  return b;
}

TEST_F(ReplayTest, PerfectOverlapHidesTheCollective) {
  const std::vector<Seconds> finish = collective_finish(CollectiveOp::allreduce, 64 * kMiB, "ring", 2);
  ASSERT_LT(2 * kLaunch + finish[0], 10e-3);   // the premise: it fits under the kernel
  TraceBuilder b = overlap_trace();
  const Prediction p = run(b.trace());
  // The kernel is issued after one launch and starts at once (first op of its stream); the
  // collective, issued at 2L, holds its channels' SMs meanwhile, which stretches the kernel.
  for (int r = 0; r < 2; ++r)
    expect_close(p.rank_time[static_cast<std::size_t>(r)],
                 kLaunch + 10e-3 + stretch(CollectiveOp::allreduce, 64 * kMiB, finish[static_cast<std::size_t>(r)]));
  expect_close(p.iteration_time, std::max(p.rank_time[0], p.rank_time[1]));
  EXPECT_EQ(p.ops_replayed, 4);
  EXPECT_EQ(p.engine, "analytical");
}

TEST_F(ReplayTest, NoOverlapAddsEveryPhase) {
  const Seconds collective = collective_finish(CollectiveOp::allreduce, 64 * kMiB, "ring", 2)[0];
  TraceBuilder b = serial_trace();
  const Prediction p = run(b.trace());
  // forward [L, L+10ms]; the collective starts when grads_ready fires (both ranks alike) and
  // lasts `collective`; update waits for synced, then the kernel gap, then 5 ms.
  expect_close(p.iteration_time, kLaunch + 10e-3 + collective + kGap + 5e-3);
}

TEST_F(ReplayTest, StragglerDelaysTheCollectiveOnEveryRank) {
  const std::vector<Seconds> finish = collective_finish(CollectiveOp::allreduce, 64 * kMiB, "ring", 2);
  TraceBuilder b = straggler_trace();
  const Prediction p = run(b.trace());
  // Rank 1 reaches the collective at L + 10ms + gap + 5ms; rank 0 waits for it there.
  const Seconds begin = kLaunch + 10e-3 + kGap + 5e-3;
  expect_close(p.rank_time[0], begin + finish[0] + kGap + 1e-3);
  expect_close(p.rank_time[1], begin + finish[1] + kGap + 1e-3);
  expect_close(p.iteration_time, std::max(p.rank_time[0], p.rank_time[1]));
}

TEST_F(ReplayTest, WaitHoldsAStreamUntilTheMostRecentRecordBeforeIt) {
  TraceBuilder b(1, kLaunch, kGap);
  b.kernel(0, "a", "first", 3e-3);
  b.record(0, "a", "e");
  b.kernel(0, "b", "side", 1e-3);
  b.wait(0, "b", "e");           // the record above, not the one below
  b.kernel(0, "b", "after_wait", 2e-3);
  b.kernel(0, "a", "long", 20e-3);
  b.record(0, "a", "e");
  const Prediction p = run(b.trace());
  // a: first [L, L+3ms], long issued at 4L starts at L+3ms+gap, ends L+23ms+gap.
  // b: side [2L, 2L+1ms]; the wait fires at L+3ms; after_wait starts at L+3ms+gap, ends L+5ms+gap.
  expect_close(p.iteration_time, kLaunch + 23e-3 + kGap);
  std::ostringstream timeline;
  run(b.trace(), &timeline);
  const nlohmann::json json = nlohmann::json::parse(timeline.str());
  bool seen = false;
  for (const nlohmann::json& e : json["traceEvents"])
    if (e["ph"] == "X" && e["name"] == "after_wait" && e["tid"] != 0) {   // not its launch
      seen = true;
      EXPECT_NEAR(e["ts"].get<double>(), (kLaunch + 3e-3 + kGap) * 1e6, 1e-3);
      EXPECT_NEAR(e["dur"].get<double>(), 2e-3 * 1e6, 1e-3);
    }
  EXPECT_TRUE(seen);
}

TEST_F(ReplayTest, LaunchBoundTinyKernelsFollowTheCpu) {
  constexpr int kKernels = 1000;
  constexpr Seconds kLaunchSlow = 10e-6, kGapSmall = 1e-6, kTiny = 2e-6;
  TraceBuilder b(1, kLaunchSlow, kGapSmall);
  for (int i = 0; i < kKernels; ++i) b.kernel(0, "compute", "tiny", kTiny);
  const Prediction p = run(b.trace());
  // Kernel i is issued at (i+1) L; the GPU finishes each in gap + 2 us < L, so it always waits
  // for the CPU: the last one starts at N L.
  expect_close(p.iteration_time, kKernels * kLaunchSlow + kTiny);
  const CriticalPathEntry* launch = entry(p, "tiny", "launch");
  ASSERT_NE(launch, nullptr);
  EXPECT_EQ(launch->count, kKernels);
  expect_close(launch->time, kKernels * kLaunchSlow);
  EXPECT_EQ(p.critical_path.front().kind, "launch");
  const CriticalPathEntry* kernel = entry(p, "tiny", "kernel");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->count, 1);
  expect_close(path_total(p), p.iteration_time);
}

TEST_F(ReplayTest, StreamSyncBlocksTheCpuUntilTheStreamDrains) {
  TraceBuilder b(1, kLaunch, kGap);
  b.kernel(0, "s", "k1", 5e-3);
  b.sync(0, "s", "");
  b.cpu(0, "host_work", 1e-3);
  b.kernel(0, "s", "k2", 1e-3);
  const Prediction p = run(b.trace());
  // The CPU leaves the sync at L+5ms, works 1 ms, launches k2 at 2L+6ms (long after k1 + gap).
  expect_close(p.iteration_time, 2 * kLaunch + 7e-3);
  EXPECT_EQ(p.critical_path.front().name, "k1");
  ASSERT_NE(entry(p, "host_work", "cpu"), nullptr);
  expect_close(path_total(p), p.iteration_time);
}

TEST_F(ReplayTest, EventSyncWaitsForItsRecordOnly) {
  TraceBuilder b(1, kLaunch, kGap);
  b.kernel(0, "s1", "k1", 5e-3);
  b.record(0, "s1", "e");
  b.kernel(0, "s1", "k2", 10e-3);
  b.sync(0, "", "e");
  b.cpu(0, "host_work", 1e-3);
  b.kernel(0, "s2", "k3", 20e-3);
  const Prediction p = run(b.trace());
  // e fires when k1 ends (L+5ms), not after k2: k3 is launched at L+6ms+L.
  expect_close(p.iteration_time, 2 * kLaunch + 26e-3);
}

TEST_F(ReplayTest, DeviceSyncWaitsForEveryStream) {
  TraceBuilder b(1, kLaunch, kGap);
  b.kernel(0, "s1", "k1", 5e-3);
  b.kernel(0, "s2", "k2", 8e-3);
  b.sync(0, "", "");
  b.kernel(0, "s1", "k3", 1e-3);
  const Prediction p = run(b.trace());
  // The device is idle at 2L+8ms (k2 was issued at 2L); k3 is launched at 3L+8ms.
  expect_close(p.iteration_time, 3 * kLaunch + 9e-3);
}

TEST_F(ReplayTest, BreakdownWithoutOverlap) {
  const Seconds collective = collective_finish(CollectiveOp::allreduce, 64 * kMiB, "ring", 2)[0];
  TraceBuilder b = serial_trace();
  const Prediction p = run(b.trace());
  // compute: forward + update; communication: the allreduce, all of it exposed; idle: the
  // first launch and the kernel gap before update.
  for (const Breakdown& d : {p.breakdown, p.slowest_rank_breakdown}) {
    expect_close(d.compute, 15e-3);
    expect_close(d.communication, collective);
    expect_close(d.exposed_communication, collective);
    expect_close(d.idle, kLaunch + kGap);
  }
}

TEST_F(ReplayTest, BreakdownWithFullOverlap) {
  const std::vector<Seconds> finish = collective_finish(CollectiveOp::allreduce, 64 * kMiB, "ring", 2);
  ASSERT_EQ(finish[0], finish[1]);   // the premise: both ranks alike
  TraceBuilder b = overlap_trace();
  const Prediction p = run(b.trace());
  // The kernel (stretched by the collective's SM hold) covers the collective; before it, the
  // first launch is idle.
  const Seconds kernel = 10e-3 + stretch(CollectiveOp::allreduce, 64 * kMiB, finish[0]);
  expect_close(p.breakdown.compute, kernel);
  expect_close(p.breakdown.communication, finish[0]);
  EXPECT_NEAR(p.breakdown.exposed_communication, 0, 1e-15);
  expect_close(p.breakdown.idle, kLaunch);
}

TEST_F(ReplayTest, BreakdownCountsWaitingForALatePeerAsCommunication) {
  const std::vector<Seconds> finish = collective_finish(CollectiveOp::allreduce, 64 * kMiB, "ring", 2);
  TraceBuilder b = straggler_trace();
  const Prediction p = run(b.trace());
  // Rank 0 reaches the collective at L+10ms and waits 5ms + gap for rank 1 inside it.
  const Seconds begin = kLaunch + 10e-3 + kGap + 5e-3;
  const Seconds rank0_comm = begin + finish[0] - (kLaunch + 10e-3);
  const Seconds rank1_comm = finish[1];
  expect_close(p.breakdown.communication, (rank0_comm + rank1_comm) / 2);
  expect_close(p.breakdown.compute, (11e-3 + 16e-3) / 2);
  expect_close(p.breakdown.exposed_communication, (rank0_comm + rank1_comm) / 2);
}

TEST_F(ReplayTest, CriticalPathGoesThroughTheStraggler) {
  const std::vector<Seconds> finish = collective_finish(CollectiveOp::allreduce, 64 * kMiB, "ring", 2);
  TraceBuilder b = straggler_trace();
  const Prediction p = run(b.trace());
  // Back from update: the collective (from its start), then rank 1's extra kernel it waited
  // for, rank 1's forward, and the first launch.
  const CriticalPathEntry* extra = entry(p, "extra", "kernel");
  ASSERT_NE(extra, nullptr);
  expect_close(extra->time, 5e-3 + kGap);
  const CriticalPathEntry* sync = entry(p, "grad_sync", "collective");
  ASSERT_NE(sync, nullptr);
  expect_close(sync->time, finish[static_cast<std::size_t>(p.slowest_rank)]);
  const CriticalPathEntry* forward = entry(p, "forward", "kernel");
  ASSERT_NE(forward, nullptr);
  EXPECT_EQ(forward->count, 1);
  expect_close(forward->time, 10e-3);
  const CriticalPathEntry* update = entry(p, "update", "kernel");
  ASSERT_NE(update, nullptr);
  expect_close(update->time, kGap + 1e-3);
  const CriticalPathEntry* launch = entry(p, "forward", "launch");
  ASSERT_NE(launch, nullptr);
  expect_close(launch->time, kLaunch);
  EXPECT_EQ(p.critical_path.size(), 5u);
  EXPECT_EQ(p.critical_path.front().name, "forward");
  expect_close(path_total(p), p.iteration_time);
}

TEST_F(ReplayTest, SendRecvMovesBytesOneWayOverTheRoute) {
  TraceBuilder b(2, kLaunch, kGap);
  b.send(0, "p2p", "activations", 1, 64 * kMiB);
  b.recv(1, "p2p", "activations", 0, 64 * kMiB);
  const Prediction p = run(b.trace());
  const platforms::Route& route = platform_.route(platform_.gpu_vertex(0), platform_.gpu_vertex(1));
  expect_close(p.iteration_time, kLaunch + route.latency + 64 * kMiB / route.bandwidth);
  // Every link of the route carried the bytes once, in the direction of the transfer only.
  ASSERT_EQ(p.links.size(), route.hops.size());
  for (const LinkReport& link : p.links) {
    const bool forward = link.bytes_forward > 0;
    EXPECT_EQ(forward ? link.bytes_forward : link.bytes_backward, 64 * kMiB) << link.name;
    EXPECT_EQ(forward ? link.bytes_backward : link.bytes_forward, 0) << link.name;
    expect_close(link.utilisation, 64 * kMiB / (platform_.link(link.link).bandwidth() * p.iteration_time));
    EXPECT_EQ(link.type, "nvlink");
  }
}

TEST_F(ReplayTest, LinkBytesCountEveryInstance) {
  TraceBuilder b = serial_trace();
  for (int r = 0; r < 2; ++r) b.collective(r, "comm", "grad_sync", CollectiveOp::allreduce, 64 * kMiB);
  const Prediction p = run(b.trace());
  // Two instances of the same allreduce: each link carries twice one instance's bytes.
  TraceBuilder once = serial_trace();
  const Prediction q = run(once.trace());
  ASSERT_EQ(p.links.size(), q.links.size());
  for (std::size_t i = 0; i < p.links.size(); ++i) {
    EXPECT_EQ(p.links[i].bytes_forward, 2 * q.links[i].bytes_forward);
    EXPECT_EQ(p.links[i].bytes_backward, 2 * q.links[i].bytes_backward);
  }
}

TEST_F(ReplayTest, MemcpyCosts) {
  TraceBuilder b(1, kLaunch, kGap);
  b.memcpy(0, "copy", "d2d", MemcpyKind::device_to_device, 1e9);
  b.memcpy(0, "copy", "h2d", MemcpyKind::host_to_device, 1e9);
  const Prediction p = run(b.trace());
  // Device copy: read + write at HBM bandwidth. Host copy: the route from GPU 0's CPU (socket 0).
  int cpu0 = -1;
  for (int v = 0; v < platform_.vertex_count(); ++v)
    if (platform_.vertex(v).name == "cpu0" && platform_.node_of_vertex(v) == 0) cpu0 = v;
  const platforms::Route& route = platform_.route(cpu0, platform_.gpu_vertex(0));
  const Seconds d2d = 2e9 / platform_.gpu().hbm_bandwidth;
  expect_close(p.iteration_time, kLaunch + d2d + route.latency + 1e9 / route.bandwidth);
}

// A copy of pageable memory runs at the CPU's staging rate (below dgx-a100's PCIe route) and
// holds the CPU: the sync after it ends with the copy, so the next launch comes after it.
TEST_F(ReplayTest, PageableCopyHoldsTheCpuAtTheHostsStagingRate) {
  TraceBuilder b(1, kLaunch, kGap);
  b.memcpy(0, "input", "upload", MemcpyKind::host_to_device, 1e9);
  b.trace().programs[0].ops.back().host_memory = workloads::HostMemory::pageable;
  b.sync(0, "input", "", "upload.staged");
  b.kernel(0, "compute", "k", 1e-3);
  const Prediction p = run(b.trace());
  int cpu0 = -1;
  for (int v = 0; v < platform_.vertex_count(); ++v)
    if (platform_.vertex(v).name == "cpu0" && platform_.node_of_vertex(v) == 0) cpu0 = v;
  const platforms::Route& route = platform_.route(cpu0, platform_.gpu_vertex(0));
  const BytesPerSecond staging = platform_.vertex(cpu0).pageable_copy_bandwidth;
  ASSERT_GT(staging, 0);
  ASSERT_LT(staging, route.bandwidth);
  expect_close(p.iteration_time, kLaunch + route.latency + 1e9 / staging + kLaunch + 1e-3);

  // A host without the figure cannot price the copy: an error naming the op and the key.
  std::string yaml = platforms::platform_text("dgx-a100").text;
  for (std::size_t at; (at = yaml.find(", pageable_copy_bandwidth: 10.98GBps")) != std::string::npos;)
    yaml.erase(at, std::string(", pageable_copy_bandwidth: 10.98GBps").size());
  const platforms::Platform bare = platforms::parse_platform(yaml, "bare.yaml");
  platforms::Allocation one = platforms::parse_allocation("0", bare);
  try {
    replay(b.trace(), Placement{bare, one}, {});
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("rank 0, op 0 (memcpy 'upload')"), std::string::npos) << message;
    EXPECT_NE(message.find("no pageable_copy_bandwidth"), std::string::npos) << message;
    EXPECT_NE(message.find("add pageable_copy_bandwidth to the platform's cpu vertices"), std::string::npos) << message;
  }
}

TEST_F(ReplayTest, KernelSpecsArePricedByTheKernelModels) {
  models::KernelSpec spec;
  spec.kind = "gemm";
  spec.params = {{"m", 8192}, {"n", 8192}, {"k", 8192}};
  models::complete_kernel(spec, "test");
  TraceBuilder b(1, kLaunch, kGap);
  b.kernel_spec(0, "compute", "gemm", spec);
  b.kernel_spec(0, "compute", "gemm", spec);
  const Prediction p = run(b.trace());
  const Seconds kernel = models::kernel_cost(spec, platform_.gpu()).time;
  expect_close(p.iteration_time, kLaunch + kernel + kGap + kernel);
}

TEST_F(ReplayTest, TimelineIsChromeTraceJson) {
  TraceBuilder b = serial_trace();
  std::ostringstream out;
  run(b.trace(), &out);
  const nlohmann::json json = nlohmann::json::parse(out.str());
  std::map<std::pair<int, int>, int> slices;            // (pid, tid) -> X events
  std::map<std::string, std::map<std::string, int>> flows;   // id -> phase -> count
  std::set<int> processes;
  std::map<std::pair<int, int>, std::string> threads;
  for (const nlohmann::json& e : json.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "X") {
      ++slices[{e.at("pid").get<int>(), e.at("tid").get<int>()}];
      EXPECT_GE(e.at("dur").get<double>(), 0);
    } else if (ph == "s" || ph == "t" || ph == "f") {
      ++flows[e.at("id").dump()][ph];
    } else if (ph == "M" && e.at("name") == "process_name") {
      processes.insert(e.at("pid").get<int>());
      EXPECT_EQ(e.at("args").at("name").get<std::string>().rfind("rank " + std::to_string(e.at("pid").get<int>()) + " (gpu ", 0), 0u);
    } else if (ph == "M" && e.at("name") == "thread_name") {
      threads[{e.at("pid").get<int>(), e.at("tid").get<int>()}] = e.at("args").at("name");
    }
  }
  EXPECT_EQ(processes, (std::set<int>{0, 1}));
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ((threads[{rank, 0}]), "cpu");
    EXPECT_EQ((threads[{rank, 1}]), "compute");
    EXPECT_EQ((threads[{rank, 2}]), "comm");
    EXPECT_EQ((slices[{rank, 0}]), 3);   // launches of forward, grad_sync, update
    EXPECT_EQ((slices[{rank, 1}]), 2);   // forward, update
    EXPECT_EQ((slices[{rank, 2}]), 1);   // grad_sync
  }
  ASSERT_EQ(flows.size(), 1u);           // one collective instance
  for (const auto& [id, phases] : flows) {
    EXPECT_EQ(phases.at("s"), 1);
    EXPECT_EQ(phases.at("f"), 1);
  }
}

TEST_F(ReplayTest, TimelineSlicesOfAThreadNest) {
  TraceBuilder b(1, 1e-6, 0);
  for (int i = 0; i < 200; ++i) b.kernel(0, "compute", "k", 1.0 / 3 * 1e-6 * (i % 7 + 1));
  std::ostringstream out;
  run(b.trace(), &out);
  const nlohmann::json json = nlohmann::json::parse(out.str());
  double previous_end = -1;
  for (const nlohmann::json& e : json.at("traceEvents")) {
    if (e.at("ph") != "X" || e.at("tid") != 1) continue;
    const double ts = e.at("ts").get<double>();
    EXPECT_GE(ts + 1e-9, previous_end);
    previous_end = ts + e.at("dur").get<double>();
  }
}

TEST_F(ReplayTest, SameTraceSamePredictionBitForBit) {
  TraceBuilder b = straggler_trace();
  std::ostringstream first_timeline, second_timeline;
  const Prediction first = run(b.trace(), &first_timeline);
  const Prediction second = run(b.trace(), &second_timeline);
  EXPECT_EQ(first.iteration_time, second.iteration_time);
  EXPECT_EQ(first.rank_time, second.rank_time);
  EXPECT_EQ(first.breakdown.compute, second.breakdown.compute);
  EXPECT_EQ(first.breakdown.exposed_communication, second.breakdown.exposed_communication);
  ASSERT_EQ(first.critical_path.size(), second.critical_path.size());
  for (std::size_t i = 0; i < first.critical_path.size(); ++i) {
    EXPECT_EQ(first.critical_path[i].name, second.critical_path[i].name);
    EXPECT_EQ(first.critical_path[i].time, second.critical_path[i].time);
  }
  EXPECT_EQ(first_timeline.str(), second_timeline.str());
}

TEST_F(ReplayTest, SharedProgramsAndManySubgroups) {
  // 8 ranks in 4 pairs, one Program shared by all: each pair's allreduce runs on its own GPUs.
  TraceBuilder b(8, kLaunch, kGap);
  workloads::Trace& t = b.trace();
  const int pairs = b.add_group("pairs", {{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  b.kernel(0, "compute", "forward", 1e-3);
  b.collective(0, "compute", "pair_sync", CollectiveOp::allreduce, 16 * kMiB, "ring", pairs);
  t.programs.resize(1);
  t.program_of_rank.assign(8, 0);
  const Prediction p = run(t);
  const Seconds collective = collective_finish(CollectiveOp::allreduce, 16 * kMiB, "ring", 2)[0];
  for (int r = 0; r < 8; ++r) expect_close(p.rank_time[static_cast<std::size_t>(r)], kLaunch + 1e-3 + collective);
  EXPECT_EQ(p.ops_replayed, 16);
}

TEST_F(ReplayTest, EventEngineAgreesWithoutContention) {
  TraceBuilder b = serial_trace();
  const Prediction analytical = run(b.trace());
  ReplayOptions options;
  options.engine = "event";
  std::ostringstream timeline;
  options.timeline = &timeline;
  const Prediction event = replay(b.trace(), placement(2), options);
  EXPECT_EQ(event.engine, "event");
  EXPECT_NEAR(event.iteration_time, analytical.iteration_time, 1e-9 * analytical.iteration_time);
  ASSERT_EQ(event.critical_path.size(), analytical.critical_path.size());
  EXPECT_EQ(event.links.size(), analytical.links.size());
  EXPECT_TRUE(nlohmann::json::accept(timeline.str()));
}

TEST_F(ReplayTest, EqualCallsAreLoweredOncePerSubgroup) {
  // One CollectiveCall per layer, as a generator writes them, three distinct sizes.
  TraceBuilder b(8, kLaunch, kGap);
  const int halves = b.add_group("halves", {{0, 1, 2, 3}, {4, 5, 6, 7}});
  for (int r = 0; r < 8; ++r)
    for (int layer = 0; layer < 40; ++layer) {
      b.collective(r, "comm", "gather", CollectiveOp::allgather, (1 + layer % 3) * kMiB, "ring");
      b.collective(r, "comm", "shard_sync", CollectiveOp::reduce_scatter, kMiB, "ring", halves);
    }
  ASSERT_EQ(b.trace().collectives.size(), 8u * 80);
  const Placement p = placement(8);
  ReplayPlan plan(b.trace(), p);
  ReplayCore core(b.trace(), p, plan);
  // world: 3 sizes x 1 subgroup; halves: 1 size x 2 subgroups.
  EXPECT_EQ(plan.schedules().size(), 5u);
  core.run(*make_replay_backend("analytical"));
  std::int64_t starts = 0;
  for (std::int64_t n : core.schedule_starts()) starts += n;
  EXPECT_EQ(starts, 40 + 2 * 40);
}

TEST_F(ReplayTest, SingleRankSubgroupCollectiveCompletes) {
  TraceBuilder b(2, kLaunch, kGap);
  const int alone = b.add_group("alone", {{0}, {1}});
  for (int r = 0; r < 2; ++r) {
    b.collective(r, "comm", "local", CollectiveOp::allreduce, kMiB, "ring", alone);
    b.kernel(r, "comm", "after", 1e-3);
  }
  std::ostringstream timeline;
  const Prediction p = run(b.trace(), &timeline);
  // Nothing to move: the collective ends when reached (L); the kernel, issued at 2L, starts
  // a kernel gap after it.
  expect_close(p.iteration_time, std::max(2 * kLaunch, kLaunch + kGap) + 1e-3);
  EXPECT_TRUE(p.links.empty());
  EXPECT_TRUE(nlohmann::json::accept(timeline.str()));
}

// Out of place on a one-rank subgroup, NCCL copies the buffer within the GPU: a read and a
// write of its bytes at the HBM bandwidth, then the kernel a gap later.
TEST_F(ReplayTest, SingleRankOutOfPlaceCollectiveCopiesItsBuffer) {
  TraceBuilder b(2, kLaunch, kGap);
  const int alone = b.add_group("alone", {{0}, {1}});
  for (int r = 0; r < 2; ++r) {
    b.collective(r, "comm", "local", CollectiveOp::reduce_scatter, 64 * kMiB, "ring", alone, 0, false);
    b.kernel(r, "comm", "after", 1e-3);
  }
  const Prediction p = run(b.trace());
  const Seconds copy = 2 * 64 * kMiB / platform_.gpu().hbm_bandwidth;
  expect_close(p.iteration_time, std::max(2 * kLaunch, kLaunch + copy + kGap) + 1e-3);
  EXPECT_TRUE(p.links.empty());
}

// The analytical backend's contract (sim/replay_backend.hpp), which the replay relies on.
TEST_F(ReplayTest, AnalyticalBackendOrdersByTimeThenRequest) {
  platforms::Allocation allocation{{0, 1}};
  const Placement where{platform_, allocation};
  const models::CollectiveSpec spec{CollectiveOp::allreduce, 2, 64 * kMiB, 0};
  const models::Schedule schedule =
      models::AlgorithmRegistry::instance().get("ring").make()->lower(spec, {platform_, allocation, {}});
  const std::vector<Seconds> finish = AnalyticalEngine().run(schedule, where).rank_finish;
  const std::unique_ptr<ReplayBackend> backend = make_replay_backend("analytical");
  backend->declare(schedule, where);
  // It fixes every member's end at the start, and says so before any start.
  const std::vector<Seconds>* offsets = backend->finish_offsets(schedule);
  ASSERT_NE(offsets, nullptr);
  EXPECT_EQ(*offsets, finish);
  backend->wake_at(5, 1);
  backend->wake_at(5, 2);
  backend->wake_at(1, 3);
  std::vector<std::string> calls;
  ReplayBackend::Callbacks callbacks;
  callbacks.woken = [&](ReplayBackend::Token token, Seconds now) {
    calls.push_back(fmt::format("wake {} at {}", token, now));
    if (token == 3) backend->start_collective(2, schedule, 9);
    if (token == 2) {
      EXPECT_THROW(backend->wake_at(4, 7), std::logic_error);
    }
  };
  callbacks.member_done = [&](ReplayBackend::Token token, int member, Seconds now) {
    calls.push_back(fmt::format("done {}.{} at {}", token, member, now));
  };
  backend->run(callbacks);
  EXPECT_EQ(calls, (std::vector<std::string>{"wake 3 at 1", fmt::format("done 9.0 at {}", 2 + finish[0]),
                                             fmt::format("done 9.1 at {}", 2 + finish[1]), "wake 1 at 5",
                                             "wake 2 at 5"}));
}

}  // namespace
}  // namespace stepsim::sim
