// Compressed collectives in the iteration replay: a collective call's compression is lowered
// (models::lower_collective), its codec steps take the whole GPU while they run, so a kernel
// beside them makes no progress then (workloads/trace.hpp, SM interference), and the replay
// reports the error bound the compressed calls leave. Hand-computed on a ring of V100s (80
// SMs; zfp on a V100: a = 10 us, B = 60 GB/s; rate 8: CR 4), on both backends.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "platforms/config_error.hpp"
#include "sim/analytical.hpp"
#include "sim/replay.hpp"
#include "sim/replay_core.hpp"
#include "sim/tests/fixtures.hpp"
#include "sim/tests/replay_trace.hpp"

namespace stepsim::sim::testing {
namespace {

using models::CollectiveOp;

constexpr Seconds kLaunch = 4e-6, kGap = 5e-6;
constexpr double kSms = 80;
constexpr double kA = 10e-6, kB = 60e9, kRatio = 4;
constexpr Seconds kAlpha = 1e-6;
constexpr BytesPerSecond kBeta = 25e9;
const std::string kCodec = "zfp:rate=8";

/// `n` V100s (80 SMs) on a ring of NVLinks of kBeta and kAlpha.
platforms::Platform v100_ring(int n) {
  platforms::NodeTemplate node;
  for (int g = 0; g < n; ++g) add_vertex(node, "gpu" + std::to_string(g), platforms::VertexKind::gpu);
  for (int g = 0; g < n; ++g) add_link(node, g, (g + 1) % n, platforms::LinkType::nvlink, kBeta, kAlpha);
  const int sw = add_vertex(node, "pcie_sw", platforms::VertexKind::pcie_switch);
  for (int g = 0; g < n; ++g) add_link(node, g, sw, platforms::LinkType::pcie, 1e9, 1e-6);
  platforms::GpuModel gpu;
  gpu.name = "V100";
  gpu.arch = platforms::GpuArch::volta;
  gpu.hbm_bandwidth = 900e9;
  gpu.sm_count = static_cast<int>(kSms);
  return platforms::Platform("v100-ring", gpu, std::move(node), 1, platforms::Fabric{});
}

Seconds codec(Bytes raw) { return kA + raw / kB; }

/// Zhou et al.'s compressed ring allgather of blocks `s` on `n` ranks (compressed_ring):
/// compress, send, n - 2 steps forwarding beside a decompression, the last decompression.
Seconds compressed_allgather(int n, Bytes s) {
  const Seconds step = kAlpha + s / kRatio / kBeta;
  return codec(s) + step + (n - 2) * std::max(step, codec(s)) + codec(s);
}

/// Issues a ring allgather of `bytes` on one channel, compressed with `mode` ("" = raw).
void allgather(TraceBuilder& b, int rank, const std::string& name, Bytes bytes, const std::string& mode) {
  b.collective(rank, "comm", name, CollectiveOp::allgather, bytes, "ring", 0, 1);
  b.trace().collectives.back().options.ideal_runtime = true;   // the closed forms price the schedule alone
  if (mode.empty()) return;
  models::CompressionOptions& compression = b.trace().collectives.back().options.compression;
  compression.codec = kCodec;
  compression.mode = mode == "p2p" ? models::CompressionMode::p2p : models::CompressionMode::collective;
}

class ReplayCompressionTest : public ::testing::Test {
 protected:
  Prediction run(workloads::Trace& trace, const std::string& engine) {
    platform_ = std::make_unique<platforms::Platform>(v100_ring(trace.ranks));
    allocation_ = first_gpus(trace.ranks);
    ReplayOptions options;
    options.engine = engine;
    return replay(trace, Placement{*platform_, allocation_}, options);
  }

  /// End of every op, per rank, replayed by the core on the analytical backend.
  std::vector<std::vector<Seconds>> op_ends(workloads::Trace& trace) {
    platform_ = std::make_unique<platforms::Platform>(v100_ring(trace.ranks));
    allocation_ = first_gpus(trace.ranks);
    const Placement p{*platform_, allocation_};
    ReplayPlan plan(trace, p);
    ReplayCore core(trace, p, plan);
    core.run(*make_replay_backend("analytical"));
    std::vector<std::vector<Seconds>> ends(static_cast<std::size_t>(trace.ranks));
    for (int r = 0; r < trace.ranks; ++r)
      for (int op = 0; op < static_cast<int>(trace.program(r).ops.size()); ++op)
        ends[static_cast<std::size_t>(r)].push_back(core.end(r, op));
    return ends;
  }

  std::unique_ptr<platforms::Platform> platform_;
  platforms::Allocation allocation_;
};

void expect_close(Seconds actual, Seconds expected) { EXPECT_NEAR(actual, expected, 1e-9 * expected); }

TEST_F(ReplayCompressionTest, ReplayLowersTheCallsCompression) {
  // The allgather alone, issued at L: it ends at L + the compressed ring's closed form, far
  // below the raw ring's (n - 1)(alpha + s / beta).
  const int n = 4;
  const Bytes s = 64.0 * 1024 * 1024;
  for (const std::string mode : {"", "collective"}) {
    TraceBuilder b(n, kLaunch, kGap);
    for (int r = 0; r < n; ++r) allgather(b, r, "gather", n * s, mode);
    const Seconds expected = kLaunch + (mode.empty() ? (n - 1) * (kAlpha + s / kBeta) : compressed_allgather(n, s));
    expect_close(run(b.trace(), "analytical").iteration_time, expected);
  }
}

TEST_F(ReplayCompressionTest, KernelWaitsWhileCodecStepsRun) {
  // The kernel (D) starts at L, the allgather at 2L and lasts F on every rank, of which the
  // rank's GPU spends C = t_c + (n - 1) t_d in codec steps. Under the allgather's hold the
  // kernel runs on 79 of the 80 SMs except during codec steps, when it waits:
  // end = L + D + C + (F - C) / 80.
  const int n = 4;
  const Bytes s = 64.0 * 1024 * 1024;
  constexpr Seconds kKernel = 20e-3;
  const Seconds f = compressed_allgather(n, s);
  const Seconds c = codec(s) + (n - 1) * codec(s);
  ASSERT_LT(2 * kLaunch + f, kLaunch + kKernel);   // the premise: the kernel spans the allgather
  TraceBuilder b(n, kLaunch, kGap);
  for (int r = 0; r < n; ++r) {
    b.kernel(r, "compute", "gemm", kKernel);
    allgather(b, r, "gather", n * s, "collective");
  }
  const auto ends = op_ends(b.trace());
  for (int r = 0; r < n; ++r) {
    expect_close(ends[static_cast<std::size_t>(r)][0], kLaunch + kKernel + c + (f - c) / kSms);
    expect_close(ends[static_cast<std::size_t>(r)][1], 2 * kLaunch + f);   // collectives are not slowed
  }
}

TEST_F(ReplayCompressionTest, KernelStartedDuringACompressionWaitsForIt) {
  // The allgather starts at L and compresses until L + t_c; the kernel, issued at 2L, waits
  // for that, runs at 79/80 until the decompressions, waits for each, and ends after the
  // allgather: at L + F + D - (F - C) * 79/80, with C = t_c + (n - 1) t_d.
  const int n = 4;
  const Bytes s = 64.0 * 1024 * 1024;
  constexpr Seconds kKernel = 20e-3;
  const Seconds f = compressed_allgather(n, s);
  const Seconds c = n * codec(s);
  TraceBuilder b(n, kLaunch, kGap);
  for (int r = 0; r < n; ++r) {
    allgather(b, r, "gather", n * s, "collective");
    b.kernel(r, "compute", "gemm", kKernel);
  }
  const Seconds expected = kLaunch + f + kKernel - (f - c) * (kSms - 1) / kSms;
  const auto ends = op_ends(b.trace());
  for (int r = 0; r < n; ++r) expect_close(ends[static_cast<std::size_t>(r)][1], expected);
}

TEST_F(ReplayCompressionTest, EventEngineAgreesAndRunsAreIdentical) {
  // Two kernels per rank around a compressed and a raw allgather, p2p compression on one of
  // them: the event backend reports codec steps as they become ready; with no link shared it
  // must give the analytical times, and replays repeat bit for bit.
  const int n = 3;
  const Bytes s = 32.0 * 1024 * 1024;
  TraceBuilder b(n, kLaunch, kGap);
  for (int r = 0; r < n; ++r) {
    b.kernel(r, "compute", "k1", 3e-3);
    allgather(b, r, "collective", n * s, "collective");
    b.kernel(r, "compute", "k2", 1e-3);
    allgather(b, r, "p2p", n * s, "p2p");
    b.kernel(r, "compute", "k3", 4e-3);
    allgather(b, r, "raw", n * s, "");
  }
  const Prediction analytical = run(b.trace(), "analytical");
  const Prediction event = run(b.trace(), "event");
  expect_close(event.iteration_time, analytical.iteration_time);
  ASSERT_EQ(event.rank_time.size(), analytical.rank_time.size());
  for (std::size_t r = 0; r < analytical.rank_time.size(); ++r)
    expect_close(event.rank_time[r], analytical.rank_time[r]);
  expect_close(event.breakdown.compute, analytical.breakdown.compute);
  EXPECT_EQ(run(b.trace(), "analytical").iteration_time, analytical.iteration_time);
  EXPECT_EQ(run(b.trace(), "event").iteration_time, event.iteration_time);
  // The codec steps cost the kernels time: compute ends later than without compression.
  TraceBuilder raw(n, kLaunch, kGap);
  for (int r = 0; r < n; ++r) {
    raw.kernel(r, "compute", "k1", 3e-3);
    allgather(raw, r, "collective", n * s, "");
    raw.kernel(r, "compute", "k2", 1e-3);
    allgather(raw, r, "p2p", n * s, "");
    raw.kernel(r, "compute", "k3", 4e-3);
    allgather(raw, r, "raw", n * s, "");
  }
  EXPECT_GT(analytical.breakdown.compute, run(raw.trace(), "analytical").breakdown.compute);
}

TEST_F(ReplayCompressionTest, ReportsTheErrorBoundPerCallAndPerIteration) {
  // zfp rate 8 adds b = 0.5 R per pass (zfp.cpp: 2^(3 - p), p = 4 planes). Allgather: b per
  // call, and a gathered buffer is replaced by the next gather. Reduce-scatter on n ranks:
  // b n (n - 1) / 2 = 3 b for n = 3, and two calls named "grads" add into one buffer: 6 b.
  const int n = 3;
  const Bytes bytes = 3.0 * 8 * 1024 * 1024;
  TraceBuilder b(n, kLaunch, kGap);
  for (int r = 0; r < n; ++r) {
    allgather(b, r, "params", bytes, "collective");
    allgather(b, r, "params", bytes, "collective");
    for (int k = 0; k < 2; ++k) {
      b.collective(r, "comm", "grads", CollectiveOp::reduce_scatter, bytes, "ring", 0, 1);
      b.trace().collectives.back().options.compression.codec = kCodec;
    }
    b.collective(r, "comm", "other", CollectiveOp::reduce_scatter, bytes, "ring", 0, 1);
  }
  for (const std::string engine : {"analytical", "event"}) {
    const Prediction p = run(b.trace(), engine);
    ASSERT_EQ(p.compression.size(), 2u) << engine;
    const CompressionReport& gather = p.compression[0];
    EXPECT_EQ(gather.op, "allgather");
    EXPECT_EQ(gather.codec, "zfp:rate=8,dtype=fp32,throughput=60");
    EXPECT_EQ(gather.mode, "collective");
    EXPECT_EQ(gather.calls, 2);
    EXPECT_EQ(gather.bytes, 2 * bytes);
    EXPECT_DOUBLE_EQ(gather.error_bound_per_call, 0.5);
    EXPECT_DOUBLE_EQ(gather.error_bound, 0.5);
    const CompressionReport& reduce = p.compression[1];
    EXPECT_EQ(reduce.op, "reduce_scatter");
    EXPECT_EQ(reduce.calls, 2);   // the raw one is not counted
    EXPECT_DOUBLE_EQ(reduce.error_bound_per_call, 3 * 0.5);
    EXPECT_DOUBLE_EQ(reduce.error_bound, 6 * 0.5);
  }
  TraceBuilder raw(n, kLaunch, kGap);
  for (int r = 0; r < n; ++r) allgather(raw, r, "params", bytes, "");
  EXPECT_TRUE(run(raw.trace(), "analytical").compression.empty());
}

TEST_F(ReplayCompressionTest, CompressionTheAlgorithmCannotTakeIsAConfigError) {
  // Collective-level compression is the compressed ring's: `direct` has none.
  TraceBuilder b(2, kLaunch, kGap);
  for (int r = 0; r < 2; ++r) {
    b.collective(r, "comm", "gather", CollectiveOp::allgather, 1e6, "direct", 0, 1);
    b.trace().collectives.back().options.compression.codec = kCodec;
  }
  try {
    run(b.trace(), "analytical");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("collectives[0]"), std::string::npos) << text;
    EXPECT_NE(text.find("compressed ring"), std::string::npos) << text;
  }
  for (int r = 0; r < 2; ++r) b.trace().collectives[static_cast<std::size_t>(r)].options.compression.codec = "zfp:rate=99";
  EXPECT_THROW(run(b.trace(), "analytical"), ConfigError);
}

}  // namespace
}  // namespace stepsim::sim::testing
