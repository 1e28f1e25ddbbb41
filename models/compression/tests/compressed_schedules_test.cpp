// Compression-assisted schedules on a modelled V100 + EDR cluster (the dgx1-v100 preset, 4 GPUs
// per node as in Zhou et al.'s setting): every op, mode, chunking and channel count passes the
// data-movement checker; the error replay matches the hand-derived accumulation; misuse is a
// ConfigError naming the option.
#include <gtest/gtest.h>

#include <memory>

#include "models/checker.hpp"
#include "models/compression/compressed_schedules.hpp"
#include "platforms/config_error.hpp"
#include "platforms/loader.hpp"

namespace stepsim::models {
namespace {

struct Cluster {
  explicit Cluster(int nodes)
      : platform(platforms::load_platform("dgx1-v100", {nodes, "", {}})),
        allocation(platforms::parse_allocation(gpus(nodes), platform)) {}
  static std::string gpus(int nodes) {
    std::string text = "n0:0-3";
    for (int n = 1; n < nodes; ++n) text += ",n" + std::to_string(n) + ":0-3";
    return text;
  }
  CollectiveContext context(AlgorithmOptions options) const { return {platform, allocation, options}; }
  platforms::Platform platform;
  platforms::Allocation allocation;
};

Schedule lower(const Cluster& cluster, CollectiveOp op, Bytes bytes, AlgorithmOptions options,
               const std::string& algo = "ring") {
  const CollectiveSpec spec{op, cluster.allocation.ranks(), bytes, 0};
  const auto algorithm = AlgorithmRegistry::instance().get(algo).make();
  return lower_collective(algo, *algorithm, spec, cluster.context(options));
}

AlgorithmOptions compressed(const std::string& codec, CompressionMode mode, Bytes chunk = 0, int channels = 0) {
  AlgorithmOptions options;
  options.compression.codec = codec;
  options.compression.mode = mode;
  options.chunk_bytes = chunk;
  options.channels = channels;
  return options;
}

bool has_codec_steps(const Schedule& s) {
  for (const Round& r : s.rounds)
    for (const Step& st : r.steps)
      if (st.is_codec()) return true;
  return false;
}

TEST(CompressedSchedules, EveryOpModeAndChunkingPassesTheChecker) {
  const Cluster cluster(2);   // 8 ranks, 4 per node
  for (CollectiveOp op : {CollectiveOp::allgather, CollectiveOp::reduce_scatter, CollectiveOp::allreduce})
    for (Bytes chunk : {0.0, 64e6, 16e6, 2e6})   // m chosen, 1, 2 (or 1) and >= 3 chunks of a 32 MB block
      for (int channels : {1, 2}) {
        const Schedule s = lower(cluster, op, 256e6, compressed("zfp:rate=8", CompressionMode::collective, chunk, channels));
        EXPECT_EQ(check_schedule(s), std::nullopt) << to_string(op) << " chunk " << chunk << " channels " << channels;
        EXPECT_TRUE(has_codec_steps(s));
        EXPECT_EQ(s.algorithm, "compressed_ring");
      }
  for (CollectiveOp op : {CollectiveOp::allgather, CollectiveOp::reduce_scatter, CollectiveOp::allreduce,
                          CollectiveOp::broadcast, CollectiveOp::reduce})
    for (const std::string algo : {"ring", "tree", "rhd", "direct"}) {
      const auto algorithm = AlgorithmRegistry::instance().get(algo).make();
      const CollectiveSpec spec{op, 8, 256e6, 0};
      if (!algorithm->supports(spec, cluster.context({}), nullptr)) continue;
      const Schedule s = lower(cluster, op, 256e6, compressed("zfp:rate=4", CompressionMode::p2p), algo);
      EXPECT_EQ(check_schedule(s), std::nullopt) << algo << " " << to_string(op);
    }
}

TEST(CompressedSchedules, CompressedReduceScatterPipelineIsCompact) {
  // 8 ranks, 32 MiB blocks in 8 chunks of 4 MiB: five rounds, the steady one repeated
  // (n - 1) m - 2 = 54 times.
  const Cluster cluster(2);
  const Schedule s = lower(cluster, CollectiveOp::reduce_scatter, 8 * 32.0 * 1024 * 1024,
                           compressed("zfp:rate=8", CompressionMode::collective, 4.0 * 1024 * 1024, 1));
  ASSERT_EQ(s.rounds.size(), 5u);
  EXPECT_EQ(s.rounds[2].repeat, 7 * 8 - 2);
  EXPECT_EQ(s.num_blocks, 64);
  EXPECT_EQ(check_schedule(s), std::nullopt);
}

TEST(CompressedSchedules, P2pLeavesSmallMessagesAndCompactRoundsAlone) {
  const Cluster cluster(2);
  AlgorithmOptions one_ring;
  one_ring.channels = 1;
  const Schedule plain = lower(cluster, CollectiveOp::allgather, 4e6, one_ring);
  AlgorithmOptions options = compressed("zfp:rate=8", CompressionMode::p2p, 0, 1);   // 0.5 MB blocks < 1 MiB
  const Schedule small = lower(cluster, CollectiveOp::allgather, 4e6, options);
  EXPECT_FALSE(has_codec_steps(small));
  EXPECT_EQ(small.rounds.size(), plain.rounds.size());
  options.compression.threshold = 0;
  const Schedule all = lower(cluster, CollectiveOp::allgather, 4e6, options);
  EXPECT_TRUE(has_codec_steps(all));
  EXPECT_EQ(all.rounds.size(), 3 * 7u);   // every ring step: compress, send, decompress
  EXPECT_EQ(check_schedule(all), std::nullopt);
  for (const Round& r : all.rounds)
    for (const Step& st : r.steps)
      if (st.kind == StepKind::transfer) {
        EXPECT_DOUBLE_EQ(st.wire_bytes, 0.5e6 / 4);
      }
}

TEST(CompressedSchedules, ErrorBoundAccumulatesAsDerived) {
  // cast to bf16: error range x 2^-8, linear in the range, so a sum of j contributions adds j b.
  const Cluster cluster(2);
  const int n = 8;
  const auto cast = parse_codec("cast");
  const double b = cast->error_bound(1.0);
  auto bound = [&](CollectiveOp op, CompressionMode mode) {
    AlgorithmOptions options = compressed("cast", mode, 8e6);
    options.compression.threshold = 0;
    return schedule_error_bound(lower(cluster, op, 256e6, options), *cast, 1.0);
  };
  // Allgather: once at the origin (collective), once per hop (p2p).
  EXPECT_NEAR(bound(CollectiveOp::allgather, CompressionMode::collective), b, 1e-15);
  EXPECT_NEAR(bound(CollectiveOp::allgather, CompressionMode::p2p), (n - 1) * b, 1e-15);
  // Reduce-scatter: the partial of j contributions is compressed at ring step j: sum_j j b.
  EXPECT_NEAR(bound(CollectiveOp::reduce_scatter, CompressionMode::collective), b * n * (n - 1) / 2, 1e-14);
  EXPECT_NEAR(bound(CollectiveOp::reduce_scatter, CompressionMode::p2p), b * n * (n - 1) / 2, 1e-14);
  // Allreduce: the reduced block (n contributions) compressed once more for the allgather.
  EXPECT_NEAR(bound(CollectiveOp::allreduce, CompressionMode::collective), b * n * (n + 1) / 2, 1e-14);
  // A lossless codec leaves none.
  EXPECT_EQ(schedule_error_bound(lower(cluster, CollectiveOp::allreduce, 256e6,
                                       compressed("mpc", CompressionMode::collective)),
                                 *parse_codec("mpc"), 1.0),
            0.0);
}

TEST(CompressedSchedules, CodecStepsArePricedOnTheGpu) {
  // zfp on a V100: a = 10 us, B = 60 GB/s; an allgather compresses its 32 MB block alone.
  const Cluster cluster(2);
  const Schedule s = lower(cluster, CollectiveOp::allgather, 256e6, compressed("zfp:rate=8", CompressionMode::collective));
  const Step& compress = s.rounds.front().steps.front();
  ASSERT_EQ(compress.kind, StepKind::compress);
  EXPECT_NEAR(compress.codec_time, 10e-6 + 32e6 / 60e9, 1e-15);
  EXPECT_DOUBLE_EQ(s.compressed_piece_bytes, 8e6);
}

TEST(CompressedSchedules, MisuseIsAConfigErrorNamingTheOption) {
  const Cluster cluster(2);
  auto error = [&](CollectiveOp op, AlgorithmOptions options, const std::string& algo) -> std::string {
    try {
      lower(cluster, op, 64e6, options, algo);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error(CollectiveOp::allgather, compressed("zfp", CompressionMode::collective), "tree").find("--compression-mode"),
            std::string::npos);
  EXPECT_NE(error(CollectiveOp::broadcast, compressed("zfp", CompressionMode::collective), "ring").find("broadcast"),
            std::string::npos);
  EXPECT_NE(error(CollectiveOp::allgather, compressed("zfp:rate=99", CompressionMode::p2p), "ring").find("--compression"),
            std::string::npos);
  EXPECT_EQ(error(CollectiveOp::allgather, compressed("zfp", CompressionMode::p2p), "direct"), "");
}

}  // namespace
}  // namespace stepsim::models
