// Compression-assisted collectives priced end to end: baseline, point-to-point and Zhou et
// al.'s collective-level compression on a ring of V100s (hand-built, every hop its own NVLink
// of bandwidth beta and latency alpha), against closed forms derived by hand (1e-9), and the
// event engine against the analytical one (0.1 %: no link is shared).
#include <gtest/gtest.h>

#include <algorithm>

#include "models/checker.hpp"
#include "models/compression/compressed_schedules.hpp"
#include "sim/tests/fixtures.hpp"

namespace stepsim::sim::testing {
namespace {

// zfp on a V100 (models/compression/zfp.cpp): a = 10 us, B = 60 GB/s both ways; rate 8: CR 4.
constexpr double kA = 10e-6, kB = 60e9, kRatio = 4;
constexpr double kAlpha = 1e-6;

/// `n` V100s on a ring of NVLinks (the fixtures' nvlink_ring with a V100 for the codecs).
platforms::Platform v100_ring(int n, BytesPerSecond beta) {
  platforms::NodeTemplate node;
  for (int g = 0; g < n; ++g) add_vertex(node, "gpu" + std::to_string(g), platforms::VertexKind::gpu);
  for (int g = 0; g < n; ++g) add_link(node, g, (g + 1) % n, platforms::LinkType::nvlink, beta, kAlpha);
  // Every pair must be connected: a 1 GB/s PCIe switch, narrower than any ring hop.
  const int sw = add_vertex(node, "pcie_sw", platforms::VertexKind::pcie_switch);
  for (int g = 0; g < n; ++g) add_link(node, g, sw, platforms::LinkType::pcie, 1e9, 1e-6);
  platforms::GpuModel gpu;
  gpu.name = "V100";
  gpu.arch = platforms::GpuArch::volta;
  gpu.hbm_bandwidth = 900e9;
  return platforms::Platform("v100-ring", gpu, std::move(node), 1, platforms::Fabric{});
}

struct Priced {
  models::Schedule schedule;
  Seconds analytical = 0;
  Seconds event = 0;
};

Priced run(models::CollectiveOp op, int n, Bytes bytes, BytesPerSecond beta, const std::string& mode,
        Bytes chunk = 0) {
  const platforms::Platform platform = v100_ring(n, beta);
  const platforms::Allocation allocation = first_gpus(n);
  models::AlgorithmOptions options;
  options.chunk_bytes = chunk;
  options.ideal_runtime = true;   // Zhou et al.'s closed forms price the schedule alone
  if (!mode.empty()) {
    options.compression.codec = "zfp:rate=8";
    options.compression.mode = mode == "p2p" ? models::CompressionMode::p2p : models::CompressionMode::collective;
  }
  const models::CollectiveContext ctx{platform, allocation, options};
  const auto ring = models::AlgorithmRegistry::instance().get("ring").make();
  Priced r;
  r.schedule = models::lower_collective("ring", *ring, {op, n, bytes, 0}, ctx);
  EXPECT_EQ(models::check_schedule(r.schedule), std::nullopt);
  r.analytical = run_engine("analytical", r.schedule, platform, allocation).time;
  r.event = run_engine("event", r.schedule, platform, allocation).time;
  EXPECT_NEAR(r.event, r.analytical, 1e-3 * r.analytical);
  return r;
}

Seconds codec(Bytes raw) { return kA + raw / kB; }

TEST(CompressedCollectives, AllgatherBaselineP2pAndCollective) {
  const int n = 8;
  const Bytes s = 32e6;   // per-rank block
  for (BytesPerSecond beta : {12.5e9, 100e9}) {   // decompression hidden (slow link) or exposed (fast)
    const Seconds raw_step = kAlpha + s / beta;
    const Seconds step = kAlpha + s / kRatio / beta;
    EXPECT_NEAR(run(models::CollectiveOp::allgather, n, n * s, beta, "").analytical, (n - 1) * raw_step,
                1e-9 * (n - 1) * raw_step);
    // p2p: every ring step compresses, sends compressed, decompresses.
    const Seconds p2p = (n - 1) * (codec(s) + step + codec(s));
    EXPECT_NEAR(run(models::CollectiveOp::allgather, n, n * s, beta, "p2p").analytical, p2p, 1e-9 * p2p);
    // Collective: compress once, forward compressed, decompress beside the next forward.
    const Seconds collective = codec(s) + step + (n - 2) * std::max(step, codec(s)) + codec(s);
    EXPECT_NEAR(run(models::CollectiveOp::allgather, n, n * s, beta, "collective").analytical, collective,
                1e-9 * collective);
  }
}

TEST(CompressedCollectives, ReduceScatterPipelinedOverChunks) {
  // 4 ranks, 24 MB blocks in m = 6 chunks of 4 MB: slot 0 compresses, slot 1 compresses and
  // sends, the (n-1) m - 2 = 16 middle slots compress, send and decompress (two codec calls
  // share the GPU: a + 2c/B), then send + decompress, then the last decompression.
  const int n = 4, m = 6;
  const Bytes s = 24e6, c = s / m;
  const BytesPerSecond beta = 12.5e9;
  const Seconds x = kAlpha + c / kRatio / beta, one = codec(c), two = kA + 2 * c / kB;
  const Seconds expected = one + std::max(one, x) + ((n - 1) * m - 2) * std::max(two, x) + std::max(x, one) + one;
  const Priced r = run(models::CollectiveOp::reduce_scatter, n, n * s, beta, "collective", c);
  EXPECT_EQ(r.schedule.num_blocks, n * m);
  EXPECT_NEAR(r.analytical, expected, 1e-9 * expected);
  // The baseline ring: (n - 1) steps of the whole block, reductions fused into the receive.
  const Seconds baseline = (n - 1) * (kAlpha + s / beta);
  EXPECT_NEAR(run(models::CollectiveOp::reduce_scatter, n, n * s, beta, "").analytical, baseline, 1e-9 * baseline);
}

TEST(CompressedCollectives, ReduceScatterWithOneChunkIsThePointToPointChain) {
  // One chunk: compress, send and decompress-reduce run in turn at every ring step, exactly
  // what p2p compression of the ring reduce-scatter does.
  const int n = 4;
  const Bytes s = 4e6;
  const BytesPerSecond beta = 12.5e9;
  const Seconds expected = (n - 1) * (codec(s) + kAlpha + s / kRatio / beta + codec(s));
  EXPECT_NEAR(run(models::CollectiveOp::reduce_scatter, n, n * s, beta, "collective", s).analytical, expected,
              1e-9 * expected);
  EXPECT_NEAR(run(models::CollectiveOp::reduce_scatter, n, n * s, beta, "p2p").analytical, expected, 1e-9 * expected);
}

TEST(CompressedCollectives, AllreduceIsReduceScatterThenAllgather) {
  const int n = 4;
  const Bytes s = 4e6;   // one chunk per block (--chunk 4 MB)
  const BytesPerSecond beta = 12.5e9;
  const Seconds step = kAlpha + s / kRatio / beta;
  const Seconds reduce_scatter = (n - 1) * (codec(s) + step + codec(s));
  const Seconds allgather = codec(s) + step + (n - 2) * std::max(step, codec(s)) + codec(s);
  const Seconds expected = reduce_scatter + allgather;
  EXPECT_NEAR(run(models::CollectiveOp::allreduce, n, n * s, beta, "collective", s).analytical, expected,
              1e-9 * expected);
}

TEST(CompressedCollectives, ChunkingIsChosenByTheClosedForm) {
  // Unset chunk size: small blocks stay whole (a codec call's 10 us dominates), large ones are
  // pipelined over at least 3 chunks, and the choice is never slower than one chunk.
  const int n = 4;
  const BytesPerSecond beta = 12.5e9;
  EXPECT_EQ(run(models::CollectiveOp::reduce_scatter, n, n * 64e3, beta, "collective").schedule.num_blocks, n);
  const Priced chosen = run(models::CollectiveOp::reduce_scatter, n, n * 24e6, beta, "collective");
  EXPECT_GE(chosen.schedule.num_blocks, 3 * n);
  EXPECT_LT(chosen.analytical, run(models::CollectiveOp::reduce_scatter, n, n * 24e6, beta, "collective", 24e6).analytical);
}

TEST(CompressedCollectives, SmallMessagesStayRawUnderP2p) {
  // 512 KB blocks are below the 1 MiB threshold: p2p changes nothing.
  const int n = 8;
  const Priced plain = run(models::CollectiveOp::allgather, n, n * 512e3, 12.5e9, "");
  const Priced p2p = run(models::CollectiveOp::allgather, n, n * 512e3, 12.5e9, "p2p");
  EXPECT_DOUBLE_EQ(p2p.analytical, plain.analytical);
}

}  // namespace
}  // namespace stepsim::sim::testing
