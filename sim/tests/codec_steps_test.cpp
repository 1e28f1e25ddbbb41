// Codec steps (compress / decompress) on both engines: each occupies its GPU for exactly its
// codec_time and no link, so hand-built compressed schedules match their closed forms on the
// analytical engine to 1e-12 and the event engine agrees to 0.1 % where no link is shared.
#include <gtest/gtest.h>

#include <algorithm>

#include "models/checker.hpp"
#include "platforms/config_error.hpp"
#include "sim/tests/fixtures.hpp"

namespace stepsim::sim::testing {
namespace {

models::Step codec(models::StepKind kind, int rank, int block, Seconds time) {
  models::Step s;
  s.kind = kind;
  s.src = s.dst = rank;
  s.block = block;
  s.codec_time = time;
  return s;
}

models::Step compressed_send(int src, int dst, int block, Bytes bytes) {
  models::Step s;
  s.src = src;
  s.dst = dst;
  s.block = block;
  s.compressed = true;
  s.wire_bytes = bytes;
  return s;
}

/// Zhou et al.'s compressed ring allgather in compact form: compress own block, send it,
/// then n-2 rounds each forwarding the last block received and decompressing it, then the
/// last decompression.
models::Schedule compressed_allgather(int n, Bytes block, double ratio, Seconds t_c, Seconds t_d) {
  models::Schedule s;
  s.spec = {models::CollectiveOp::allgather, n, block * n, 0};
  s.algorithm = "test-compressed-ring";
  s.num_blocks = n;
  s.block_bytes = block;
  s.compressed_piece_bytes = block / ratio;
  models::Round compress, first, middle, last;
  for (int i = 0; i < n; ++i) {
    compress.steps.push_back(codec(models::StepKind::compress, i, i, t_c));
    first.steps.push_back(compressed_send(i, (i + 1) % n, i, block / ratio));
    const int received = (i + n - 1) % n;
    middle.steps.push_back(compressed_send(i, (i + 1) % n, received, block / ratio));
    middle.steps.push_back(codec(models::StepKind::decompress, i, received, t_d));
    last.steps.push_back(codec(models::StepKind::decompress, i, (i + 1) % n, t_d));
  }
  middle.repeat = n - 2;
  middle.block_shift = n - 1;
  s.rounds = {compress, first, middle, last};
  return s;
}

void expect_closed_form(const models::Schedule& schedule, const platforms::Platform& platform, Seconds expected) {
  ASSERT_EQ(models::check_schedule(schedule), std::nullopt);
  const auto allocation = first_gpus(schedule.spec.ranks);
  const auto analytical = run_engine("analytical", schedule, platform, allocation);
  const auto event = run_engine("event", schedule, platform, allocation);
  EXPECT_NEAR(analytical.time, expected, 1e-12 * expected);
  EXPECT_NEAR(event.time, expected, 1e-3 * expected);
  ASSERT_EQ(event.rank_finish.size(), analytical.rank_finish.size());
  for (std::size_t r = 0; r < event.rank_finish.size(); ++r)
    EXPECT_NEAR(event.rank_finish[r], analytical.rank_finish[r], 1e-3 * expected) << "rank " << r;
}

TEST(CodecSteps, CompressSendDecompressIsSerial) {
  // One transfer: 2 ms compress, 25 MB compressed over 25 GB/s + 1 us, 3 ms decompress.
  models::Schedule s;
  s.spec = {models::CollectiveOp::broadcast, 2, 100e6, 0};
  s.algorithm = "test-p2p";
  s.block_bytes = 100e6;
  s.compressed_piece_bytes = 25e6;
  s.rounds = {{{codec(models::StepKind::compress, 0, 0, 2e-3)}}, {{compressed_send(0, 1, 0, 25e6)}},
              {{codec(models::StepKind::decompress, 1, 0, 3e-3)}}};
  s.launch_latency = 5e-6;
  expect_closed_form(s, two_gpus(25e9, 1e-6), 5e-6 + 2e-3 + (1e-6 + 25e6 / 25e9) + 3e-3);
}

TEST(CodecSteps, RingDecompressionHidesBehindTheForwardUntilItIsSlower) {
  const int n = 8;
  const Bytes block = 64e6;
  const double ratio = 4, bandwidth = 50e9, alpha = 0.8e-6;
  const Seconds t_c = 0.4e-3, send = alpha + block / ratio / bandwidth;   // 320.8 us
  for (Seconds t_d : {0.2e-3, 0.5e-3}) {
    const Seconds expected = t_c + send + (n - 2) * std::max(send, t_d) + t_d;
    expect_closed_form(compressed_allgather(n, block, ratio, t_c, t_d), nvlink_ring(n, bandwidth, alpha), expected);
  }
}

TEST(CodecSteps, CodecStepsCrossNoLink) {
  const int n = 4;
  const auto schedule = compressed_allgather(n, 1e6, 2, 1e-4, 1e-4);
  const auto result = run_engine("analytical", schedule, nvlink_ring(n, 50e9, 1e-6), first_gpus(n));
  Bytes forward = 0;
  for (const LinkUsage& usage : result.link_usage) forward += usage.bytes_forward + usage.bytes_backward;
  EXPECT_DOUBLE_EQ(forward, n * (n - 1) * 0.5e6);   // only compressed blocks travel
}

TEST(CodecSteps, CodecStepOnTwoEndpointsIsRejected) {
  auto schedule = compressed_allgather(4, 1e6, 2, 1e-4, 1e-4);
  schedule.rounds[0].steps[1].dst = 2;
  EXPECT_THROW(run_engine("analytical", schedule, nvlink_ring(4, 50e9, 1e-6), first_gpus(4)), ConfigError);
}

}  // namespace
}  // namespace stepsim::sim::testing
