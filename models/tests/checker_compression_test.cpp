// The data-movement checker on schedules that compress: raw and compressed forms tracked per
// cell, correct compressed rings (explicit and compact) pass, each misuse is caught and named.
#include <gtest/gtest.h>

#include <string>

#include "models/checker.hpp"

namespace stepsim::models {
namespace {

constexpr Bytes kBlock = 100;
constexpr Bytes kCompressed = 25;

Step transfer(int src, int dst, int block, bool compressed, Combine combine = Combine::replace) {
  Step s;
  s.src = src;
  s.dst = dst;
  s.block = block;
  s.combine = combine;
  s.compressed = compressed;
  s.wire_bytes = compressed ? kCompressed : kBlock;
  return s;
}

Step codec(StepKind kind, int rank, int block, Combine combine = Combine::replace) {
  Step s;
  s.kind = kind;
  s.src = s.dst = rank;
  s.block = block;
  s.combine = combine;
  s.codec_time = 1e-5;
  return s;
}

Schedule base(CollectiveOp op, int n) {
  Schedule s;
  s.spec = {op, n, kBlock * n, 0};
  s.num_blocks = n;
  s.block_bytes = kBlock;
  s.compressed_piece_bytes = kCompressed;
  return s;
}

/// Zhou et al.'s allgather, explicit: compress own block, forward compressed n-1 times,
/// decompress each received block one step later (next to the forward).
Schedule compressed_allgather(int n) {
  Schedule s = base(CollectiveOp::allgather, n);
  Round compress;
  for (int i = 0; i < n; ++i) compress.steps.push_back(codec(StepKind::compress, i, i));
  s.rounds.push_back(compress);
  for (int k = 0; k < n; ++k) {
    Round round;
    for (int i = 0; i < n; ++i) {
      const int held = ((i - k) % n + n) % n;
      if (k < n - 1) round.steps.push_back(transfer(i, (i + 1) % n, held, true));
      if (k > 0) round.steps.push_back(codec(StepKind::decompress, i, held));
    }
    s.rounds.push_back(round);
  }
  return s;
}

/// Reduce-scatter: per ring step compress the partial, send it compressed, decompress it into
/// the receiver's own copy (Combine::reduce). Rank i ends with block (i + 1) % n.
Schedule compressed_reduce_scatter(int n) {
  Schedule s = base(CollectiveOp::reduce_scatter, n);
  s.block_owner = {std::vector<int>(static_cast<std::size_t>(n))};
  for (int b = 0; b < n; ++b) s.block_owner[0][static_cast<std::size_t>(b)] = (b + n - 1) % n;
  for (int k = 0; k < n - 1; ++k) {
    Round c, t, d;
    for (int i = 0; i < n; ++i) {
      const int block = ((i - k) % n + n) % n;
      c.steps.push_back(codec(StepKind::compress, i, block));
      t.steps.push_back(transfer(i, (i + 1) % n, block, true));
      d.steps.push_back(codec(StepKind::decompress, (i + 1) % n, block, Combine::reduce));
    }
    s.rounds.insert(s.rounds.end(), {c, t, d});
  }
  return s;
}

TEST(CheckerCompression, ZhouAllgatherPasses) {
  for (int n : {2, 3, 5}) EXPECT_EQ(check_schedule(compressed_allgather(n)), std::nullopt) << n;
}

TEST(CheckerCompression, CompressedReduceScatterPasses) {
  for (int n : {2, 4}) EXPECT_EQ(check_schedule(compressed_reduce_scatter(n)), std::nullopt) << n;
}

TEST(CheckerCompression, CompactCompressedAllgatherPasses) {
  // Same schedule, the middle steps as one round repeated n-2 times with block shift -1.
  const int n = 6;
  Schedule s = base(CollectiveOp::allgather, n);
  Round compress, first, middle, last;
  for (int i = 0; i < n; ++i) {
    compress.steps.push_back(codec(StepKind::compress, i, i));
    first.steps.push_back(transfer(i, (i + 1) % n, i, true));
    const int received = (i + n - 1) % n;
    middle.steps.push_back(transfer(i, (i + 1) % n, received, true));
    middle.steps.push_back(codec(StepKind::decompress, i, received));
    last.steps.push_back(codec(StepKind::decompress, i, (i + 1) % n));
  }
  middle.repeat = n - 2;
  middle.block_shift = n - 1;
  s.rounds = {compress, first, middle, last};
  EXPECT_EQ(check_schedule(s), std::nullopt);
  EXPECT_EQ(s.expanded_step_count(), n + n + 2 * n * (n - 2) + n);
}

TEST(CheckerCompression, AReceivedBlockLeftCompressedIsNamed) {
  Schedule s = compressed_allgather(3);
  s.rounds.back().steps.pop_back();   // rank 2 never decompresses its last block
  const auto bad = check_schedule(s);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("final state: rank 2"), std::string::npos) << *bad;
  EXPECT_NE(bad->find("only compressed"), std::string::npos) << *bad;
}

TEST(CheckerCompression, SendingCompressedWithoutCompressingFails) {
  Schedule s = compressed_allgather(3);
  s.rounds.erase(s.rounds.begin());
  const auto bad = check_schedule(s);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("does not hold it compressed"), std::string::npos) << *bad;
}

TEST(CheckerCompression, ForwardingRawWhatArrivedCompressedFails) {
  Schedule s = compressed_allgather(3);
  // Round 2 (ring step 1): rank 0 forwards block 2 raw, which it holds compressed only (its
  // decompression runs in the same round, and a round reads the state before it).
  for (Step& st : s.rounds[2].steps)
    if (st.kind == StepKind::transfer && st.src == 0) {
      st.compressed = false;
      st.wire_bytes = kBlock;
    }
  const auto bad = check_schedule(s);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("only compressed (decompress it first)"), std::string::npos) << *bad;
}

TEST(CheckerCompression, AReduceNeedsRawDataOnBothSides) {
  // Reducing compressed data: structural.
  Schedule s = compressed_reduce_scatter(3);
  s.rounds[1].steps[0].combine = Combine::reduce;
  auto bad = check_schedule(s);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("round 1 step 0: reduces compressed data"), std::string::npos) << *bad;

  // A raw reduction into a cell that the destination holds only compressed.
  Schedule t = base(CollectiveOp::allgather, 2);
  t.rounds.push_back({{codec(StepKind::compress, 0, 0)}});
  t.rounds.push_back({{transfer(0, 1, 0, true)}});
  t.rounds.push_back({{transfer(0, 1, 0, false, Combine::reduce)}});
  bad = check_schedule(t);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("round 2 step 0 (rank 0 -> rank 1, channel 0) cell (block 0, piece 0): reduces into rank 1, "
                      "which holds that cell only compressed"),
            std::string::npos)
      << *bad;
}

TEST(CheckerCompression, CompressedTransferCarriesTheCompressedSize) {
  Schedule s = compressed_allgather(3);
  s.rounds[1].steps[0].wire_bytes = kBlock;
  const auto bad = check_schedule(s);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("round 1 step 0: wire_bytes 100 but its 1 cell(s) hold 25 bytes compressed"), std::string::npos)
      << *bad;
  s = compressed_allgather(3);
  s.compressed_piece_bytes = 0;
  ASSERT_TRUE(check_schedule(s));
}

TEST(CheckerCompression, CodecStepsRunOnOneRank) {
  Schedule s = compressed_allgather(3);
  s.rounds[0].steps[1].dst = 2;
  auto bad = check_schedule(s);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("compress step names two endpoints"), std::string::npos) << *bad;

  s = compressed_allgather(3);
  s.rounds[0].steps[1].combine = Combine::reduce;
  bad = check_schedule(s);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("compress step reduces"), std::string::npos) << *bad;

  s = compressed_allgather(3);
  s.switch_vertices = {7};
  s.rounds[0].steps[1].src = s.rounds[0].steps[1].dst = 3;   // the switch endpoint
  bad = check_schedule(s);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("only ranks' GPUs run codecs"), std::string::npos) << *bad;

  s = compressed_allgather(3);
  s.rounds[0].steps[1].codec_time = -1;
  ASSERT_TRUE(check_schedule(s));
}

TEST(CheckerCompression, ADecompressionRacesWithAnUnorderedRawWrite) {
  // Broadcast from rank 0, compressed. Rank 2 then sends its raw copy into rank 1's raw cell,
  // which rank 1's decompression writes: nothing orders rank 2's send after that write.
  Schedule s = base(CollectiveOp::broadcast, 3);
  s.num_blocks = 1;
  s.spec.bytes = kBlock;
  s.rounds.push_back({{codec(StepKind::compress, 0, 0)}});
  s.rounds.push_back({{transfer(0, 1, 0, true), transfer(0, 2, 0, true)}});
  s.rounds.push_back({{codec(StepKind::decompress, 1, 0), codec(StepKind::decompress, 2, 0)}});
  EXPECT_EQ(check_schedule(s), std::nullopt);
  s.rounds.push_back({{transfer(2, 1, 0, false)}});
  const auto bad = check_schedule(s);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("write-after-write race"), std::string::npos) << *bad;
  EXPECT_NE(bad->find("round 2 step 0 (rank 1 -> rank 1"), std::string::npos) << *bad;
}

TEST(CheckerCompression, ACompressedMessageLandsInItsOwnReceiveBuffer) {
  // The same, but rank 2 sends compressed: the message does not overwrite the compressed form
  // rank 1 decompressed (a separate receive), and rank 1 decompresses it again afterwards.
  Schedule s = base(CollectiveOp::broadcast, 3);
  s.num_blocks = 1;
  s.spec.bytes = kBlock;
  s.rounds.push_back({{codec(StepKind::compress, 0, 0)}});
  s.rounds.push_back({{transfer(0, 1, 0, true), transfer(0, 2, 0, true)}});
  s.rounds.push_back({{codec(StepKind::decompress, 1, 0), codec(StepKind::decompress, 2, 0)}});
  s.rounds.push_back({{transfer(2, 1, 0, true)}});
  s.rounds.push_back({{codec(StepKind::decompress, 1, 0)}});
  EXPECT_EQ(check_schedule(s), std::nullopt);
}

}  // namespace
}  // namespace stepsim::models
