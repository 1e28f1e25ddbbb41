// The data-movement checker on hand-written schedules: correct ones pass, and each kind of
// violation is caught with a message that says where.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "models/checker.hpp"

namespace stepsim::models {
namespace {

Step transfer(int src, int dst, int block, Combine combine = Combine::replace, int piece = 0, int channel = 0,
              int block_count = 1) {
  Step s;
  s.src = src;
  s.dst = dst;
  s.block = block;
  s.block_count = block_count;
  s.piece = piece;
  s.combine = combine;
  s.channel = channel;
  s.wire_bytes = 100.0 * block_count;   // block_bytes 100, one piece
  return s;
}

/// Race detection is on by default; these tests also look at what in-order rounds alone see.
CheckOptions with_races() { return CheckOptions{}; }

CheckOptions in_order_rounds_only() {
  CheckOptions options;
  options.check_races = false;
  return options;
}

Schedule base(CollectiveOp op, int ranks, int num_blocks) {
  Schedule s;
  s.spec = {op, ranks, 100.0 * num_blocks, 0};
  if (op == CollectiveOp::alltoall || op == CollectiveOp::sendrecv) s.spec.bytes = 100.0 * num_blocks / ranks;
  s.num_blocks = num_blocks;
  s.block_bytes = 100;
  return s;
}

/// Direct allgather over n ranks: one round, every rank sends its block to every other.
Schedule direct_allgather(int n) {
  Schedule s = base(CollectiveOp::allgather, n, n);
  Round r;
  for (int src = 0; src < n; ++src)
    for (int dst = 0; dst < n; ++dst)
      if (src != dst) r.steps.push_back(transfer(src, dst, src));
  s.rounds.push_back(r);
  return s;
}

/// Ring allgather in compact form: rank i sends block i - k to i + 1 in step k.
Schedule compact_ring_allgather(int n, int shift) {
  Schedule s = base(CollectiveOp::allgather, n, n);
  Round r;
  for (int i = 0; i < n; ++i) r.steps.push_back(transfer(i, (i + 1) % n, i));
  r.repeat = n - 1;
  r.block_shift = shift;
  s.rounds.push_back(r);
  return s;
}

/// Ring reduce-scatter then allgather (allreduce), compact, `pieces` pieces on as many channels.
Schedule compact_ring_allreduce(int n, int pieces) {
  Schedule s = base(CollectiveOp::allreduce, n, n);
  s.pieces = pieces;
  s.channels = pieces;
  s.block_bytes = 100.0 * pieces;
  s.spec.bytes = s.block_bytes * n;
  for (Combine combine : {Combine::reduce, Combine::replace}) {
    Round r;
    for (int p = 0; p < pieces; ++p)
      for (int i = 0; i < n; ++i)
        r.steps.push_back(transfer(i, (i + 1) % n, combine == Combine::reduce ? (i + n - 1) % n : i, combine, p, p));
    r.repeat = n - 1;
    r.block_shift = -1;
    s.rounds.push_back(r);
  }
  return s;
}

/// Ring `op` (allgather or reduce-scatter) along `order`, blocks indexed by ring position:
/// position p owns block p (block_owner = order), one compact round of shift -1.
Schedule positional_ring(CollectiveOp op, const std::vector<int>& order) {
  const int n = static_cast<int>(order.size());
  Schedule s = base(op, n, n);
  s.block_owner = {order};
  const bool gather = op == CollectiveOp::allgather;
  Round r;
  for (int i = 0; i < n; ++i)
    r.steps.push_back(transfer(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>((i + 1) % n)],
                               gather ? i : (i + n - 1) % n, gather ? Combine::replace : Combine::reduce));
  r.repeat = n - 1;
  r.block_shift = -1;
  s.rounds.push_back(r);
  return s;
}

TEST(Checker, AcceptsCorrectSchedules) {
  EXPECT_EQ(check_schedule(direct_allgather(1)), std::nullopt) << "one rank: nothing to move";
  for (int n : {2, 3, 5, 8}) {
    EXPECT_EQ(check_schedule(direct_allgather(n)), std::nullopt) << n;
    EXPECT_EQ(check_schedule(compact_ring_allreduce(n, 2)), std::nullopt) << n;
    // Race-free too: a ring's next writer of a cell learns of its reader's send through the
    // ring (exactness: a per-endpoint clock would report this).
    EXPECT_EQ(check_schedule(direct_allgather(n), with_races()), std::nullopt) << n;
    EXPECT_EQ(check_schedule(compact_ring_allreduce(n, 2), with_races()), std::nullopt) << n;
  }
}

TEST(Checker, CompactFormRotatesBlocks) {
  EXPECT_EQ(check_schedule(compact_ring_allgather(5, -1)), std::nullopt);
  EXPECT_EQ(check_schedule(compact_ring_allgather(5, 4)), std::nullopt) << "-1 and 4 are the same shift mod 5";
  const auto wrong = check_schedule(compact_ring_allgather(5, 1));
  ASSERT_TRUE(wrong);
  EXPECT_NE(wrong->find("repetition 1"), std::string::npos) << *wrong;
  EXPECT_NE(wrong->find("does not hold"), std::string::npos) << *wrong;
}

TEST(Checker, DroppedStepLeavesWrongFinalState) {
  Schedule s = direct_allgather(4);
  // Drop 2 -> 1 (block 2): rank 1 must end without block 2.
  auto& steps = s.rounds[0].steps;
  steps.erase(std::find_if(steps.begin(), steps.end(), [](const Step& st) { return st.src == 2 && st.dst == 1; }));
  const auto bad = check_schedule(s);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("final state: rank 1 cell (block 2, piece 0) holds {}"), std::string::npos) << *bad;
}

TEST(Checker, DroppedRingStepIsCaughtDownstream) {
  Schedule s = compact_ring_allreduce(4, 1);
  s.rounds[0].steps.erase(s.rounds[0].steps.begin());
  EXPECT_TRUE(check_schedule(s));
}

TEST(Checker, SendingACellNotHeld) {
  Schedule s = base(CollectiveOp::broadcast, 3, 1);
  s.rounds.push_back({{transfer(1, 2, 0)}});   // rank 1 has nothing yet
  const auto bad = check_schedule(s);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("round 0 step 0 (rank 1 -> rank 2, channel 0) cell (block 0, piece 0): rank 1 does not hold it"),
            std::string::npos)
      << *bad;
}

TEST(Checker, DuplicatedReduceCountsTwice) {
  // Reduce to root 0 of 3 ranks, with 1 -> 0 sent twice in the same round.
  Schedule s = base(CollectiveOp::reduce, 3, 1);
  s.rounds.push_back({{transfer(1, 0, 0, Combine::reduce), transfer(2, 0, 0, Combine::reduce)}});
  EXPECT_EQ(check_schedule(s), std::nullopt);
  s.rounds[0].steps.push_back(transfer(1, 0, 0, Combine::reduce));
  auto bad = check_schedule(s);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("counts a contribution twice"), std::string::npos) << *bad;
  // ... and in a later round.
  s.rounds[0].steps.pop_back();
  s.rounds.push_back({{transfer(2, 0, 0, Combine::reduce)}});
  bad = check_schedule(s);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("round 1 step 0 (rank 2 -> rank 0"), std::string::npos) << *bad;
}

TEST(Checker, WrongWireBytes) {
  Schedule s = direct_allgather(3);
  s.rounds[0].steps[2].wire_bytes = 50;
  const auto bad = check_schedule(s);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("round 0 step 2: wire_bytes 50"), std::string::npos) << *bad;
}

TEST(Checker, ConflictingWritesInOneRound) {
  Schedule s = base(CollectiveOp::broadcast, 3, 1);
  s.rounds.push_back({{transfer(0, 1, 0)}});
  s.rounds.push_back({{transfer(0, 2, 0), transfer(1, 2, 0)}});   // two replaces of rank 2's cell
  auto bad = check_schedule(s);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("same round"), std::string::npos) << *bad;
  s.rounds[1].steps[1].combine = Combine::reduce;   // a replace next to a reduce
  bad = check_schedule(s);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("same round"), std::string::npos) << *bad;
}

TEST(Checker, PairwiseExchangeReadsBeforeWrites) {
  // Recursive-doubling allreduce of 2 ranks: both send and reduce in the same round.
  Schedule s = base(CollectiveOp::allreduce, 2, 1);
  s.rounds.push_back({{transfer(0, 1, 0, Combine::reduce), transfer(1, 0, 0, Combine::reduce)}});
  EXPECT_EQ(check_schedule(s), std::nullopt);
}

// Races: rounds need not complete in order (schedule.hpp's dependency contract), so a write
// must be ordered after the cell's earlier sends and writes at its destination.

TEST(Checker, LateWriteOvertakingAPendingSendRaces) {
  // Reduce to rank 0 of 3 ranks. Rank 2 adds into rank 1's cell in round 1, but rank 2 has
  // heard nothing of rank 1's round-0 send to rank 0: the add can land before that send reads
  // the cell, and rank 0 would count rank 2 twice (once more by the direct round-2 send).
  Schedule racy = base(CollectiveOp::reduce, 3, 1);
  racy.rounds = {{{transfer(1, 0, 0, Combine::reduce)}},
                 {{transfer(2, 1, 0, Combine::reduce)}},
                 {{transfer(2, 0, 0, Combine::reduce)}}};
  EXPECT_EQ(check_schedule(racy, in_order_rounds_only()), std::nullopt) << "in-order rounds hide the race";
  EXPECT_EQ(check_schedule(racy, with_races()).value_or(""),
            "round 1 step 0 (rank 2 -> rank 1, channel 0) cell (block 0, piece 0): write-after-read race: writes "
            "into rank 1 with nothing in the dependency contract ordering it after the send of that cell in round 0 "
            "step 0 (rank 1 -> rank 0, channel 0)");
  // Fixed by ordering the rounds the other way: rank 1 forwards only after rank 2's add, which
  // its send waits for.
  Schedule fixed = base(CollectiveOp::reduce, 3, 1);
  fixed.rounds = {{{transfer(2, 1, 0, Combine::reduce)}}, {{transfer(1, 0, 0, Combine::reduce)}}};
  EXPECT_EQ(check_schedule(fixed, with_races()), std::nullopt);
}

TEST(Checker, UnorderedWritesOfOneCellRace) {
  // Broadcast from rank 0: rank 1's round-2 write into rank 2 is not ordered after rank 0's
  // round-1 write there (rank 1 only heard of round 0).
  Schedule s = base(CollectiveOp::broadcast, 3, 1);
  s.rounds = {{{transfer(0, 1, 0)}}, {{transfer(0, 2, 0)}}, {{transfer(1, 2, 0)}}};
  EXPECT_NE(check_schedule(s, with_races()).value_or("").find("round 2 step 0 (rank 1 -> rank 2, channel 0) cell (block 0, piece 0): "
                                                "write-after-write race: writes into rank 2 with nothing in the "
                                                "dependency contract ordering it after the write of that cell in "
                                                "round 1 step 0 (rank 0 -> rank 2, channel 0)"),
            std::string::npos)
      << check_schedule(s, with_races()).value_or("");
  // Rank 2 writing back into rank 1 is ordered: it heard, through rank 0, of round 0.
  s.rounds[2].steps[0] = transfer(2, 1, 0);
  EXPECT_EQ(check_schedule(s, with_races()), std::nullopt);
}

TEST(Checker, UnorderedReductionsCommute) {
  // Rank 2's add into rank 0 is not ordered after rank 1's, but sums commute and the
  // double-count check keeps their contributions disjoint.
  Schedule s = base(CollectiveOp::reduce, 3, 1);
  s.rounds = {{{transfer(1, 0, 0, Combine::reduce)}}, {{transfer(2, 0, 0, Combine::reduce)}}};
  EXPECT_EQ(check_schedule(s, with_races()), std::nullopt);
}

TEST(Checker, CellOnTwoChannels) {
  Schedule s = compact_ring_allreduce(4, 2);
  s.rounds[1].steps[0].channel = 1;   // piece 0 belongs to channel 0
  const auto bad = check_schedule(s);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("already moved on channel 0"), std::string::npos) << *bad;
}

TEST(Checker, WrongFinalPlacement) {
  // Reduce-scatter sending block b to rank b + 1 instead of rank b.
  const int n = 4;
  Schedule s = base(CollectiveOp::reduce_scatter, n, n);
  Round r;
  for (int src = 0; src < n; ++src)
    for (int b = 0; b < n; ++b)
      if ((b + 1) % n != src) r.steps.push_back(transfer(src, (b + 1) % n, b, Combine::reduce));
  s.rounds.push_back(r);
  const auto bad = check_schedule(s);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("final state: rank 0 cell (block 0, piece 0)"), std::string::npos) << *bad;
  EXPECT_NE(bad->find("promises {0,1,2,3}"), std::string::npos) << *bad;
}

TEST(Checker, BadIndices) {
  const Schedule good = direct_allgather(3);
  auto with = [&](auto mutate) {
    Schedule s = good;
    mutate(s.rounds[0].steps[1]);
    return check_schedule(s).value_or("");
  };
  EXPECT_NE(with([](Step& st) { st.dst = 7; }).find("outside [0, 3)"), std::string::npos);
  EXPECT_NE(with([](Step& st) { st.dst = st.src; }).find("itself"), std::string::npos);
  EXPECT_NE(with([](Step& st) { st.block = 3; }).find("block 3 outside"), std::string::npos);
  EXPECT_NE(with([](Step& st) { st.block_count = 0; }).find("block_count 0"), std::string::npos);
  EXPECT_NE(with([](Step& st) { st.piece = 1; }).find("piece 1 outside"), std::string::npos);
  EXPECT_NE(with([](Step& st) { st.channel = 2; }).find("channel 2 outside"), std::string::npos);
}

TEST(Checker, BlocksMustCoverTheBuffer) {
  Schedule s = direct_allgather(3);
  s.spec.bytes = 1000;
  EXPECT_NE(check_schedule(s).value_or("").find("blocks cover 300 bytes"), std::string::npos);
}

TEST(Checker, SwitchEndpointsReduceInTransit) {
  // NVLS-style allreduce: every rank reduces into the switch (endpoint n), which multicasts.
  const int n = 4;
  Schedule s = base(CollectiveOp::allreduce, n, 1);
  s.switch_vertices = {42};
  Round up, down;
  for (int r = 0; r < n; ++r) {
    up.steps.push_back(transfer(r, n, 0, Combine::reduce));
    down.steps.push_back(transfer(n, r, 0, Combine::replace));
  }
  s.rounds = {up, down};
  EXPECT_EQ(check_schedule(s), std::nullopt);
  s.rounds[0].steps.pop_back();   // rank 3 never contributes
  const auto bad = check_schedule(s);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("holds {0,1,2}"), std::string::npos) << *bad;
  s.rounds[0].steps.push_back(transfer(0, n, 0, Combine::reduce));   // rank 0 twice instead
  EXPECT_NE(check_schedule(s).value_or("").find("counts a contribution twice"), std::string::npos);
}

TEST(Checker, AlltoallAndSendrecvPromises) {
  const int n = 3;
  Schedule a2a = base(CollectiveOp::alltoall, n, n * n);
  Round r;
  for (int src = 0; src < n; ++src)
    for (int dst = 0; dst < n; ++dst)
      if (src != dst) r.steps.push_back(transfer(src, dst, src * n + dst));
  a2a.rounds.push_back(r);
  EXPECT_EQ(check_schedule(a2a), std::nullopt);
  a2a.rounds[0].steps.pop_back();
  EXPECT_TRUE(check_schedule(a2a));

  Schedule sr = base(CollectiveOp::sendrecv, n, n);
  sr.rounds.push_back({{transfer(0, 1, 0), transfer(1, 2, 1), transfer(2, 0, 2)}});
  EXPECT_EQ(check_schedule(sr), std::nullopt);
  sr.rounds[0].steps[2].dst = 1;
  EXPECT_NE(check_schedule(sr).value_or("").find("final state: rank 0 cell (block 2"), std::string::npos);
}

TEST(Checker, ManyRanksUseSeveralWords) {
  // 130 ranks need three 64-bit words per contribution set.
  EXPECT_EQ(check_schedule(compact_ring_allreduce(130, 1)), std::nullopt);
  Schedule s = compact_ring_allreduce(130, 1);
  s.rounds[0].repeat = 128;   // one reduce step short: block 0 never reaches rank 0 summed
  EXPECT_NE(check_schedule(s, in_order_rounds_only())
                .value_or("")
                .find("rank 0 cell (block 0, piece 0) holds {0}, allreduce promises {130 ranks}"),
            std::string::npos)
      << check_schedule(s, in_order_rounds_only()).value_or("");
  // Shortened, the allgather's first write into rank 1 comes one round before rank 1's first
  // send can be known finished: the chain 1 -> 2 -> ... -> 129 -> 0 needs 129 rounds.
  EXPECT_NE(check_schedule(s, with_races()).value_or("").find("round 1 repetition 0 step 0 (rank 0 -> rank 1, channel 0) "
                                                              "cell (block 0, piece 0): write-after-read race"),
            std::string::npos)
      << check_schedule(s, with_races()).value_or("");
}

TEST(Checker, BlockOwnerFollowsRingPositions) {
  // A ring in non-rank order is one compact round once blocks follow positions, not ranks.
  const std::vector<int> order = {0, 3, 1, 4, 2};
  for (CollectiveOp op : {CollectiveOp::allgather, CollectiveOp::reduce_scatter}) {
    EXPECT_EQ(check_schedule(positional_ring(op, order)), std::nullopt) << to_string(op);
    // Without the table the same steps mean blocks at rank b: rank 3 does not hold block 1.
    Schedule s = positional_ring(op, order);
    s.block_owner.clear();
    EXPECT_TRUE(check_schedule(s)) << to_string(op);
  }
}

TEST(Checker, WrongBlockOwnerIsCaught) {
  // Swapping the owners of blocks 1 and 2 (ranks 3 and 1) on steps written for the true
  // table. Allgather: position 1 (rank 3) forwards block 1 first, but block 1 now starts at rank 1.
  Schedule gather = positional_ring(CollectiveOp::allgather, {0, 3, 1, 4, 2});
  std::swap(gather.block_owner[0][1], gather.block_owner[0][2]);
  const auto bad = check_schedule(gather);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("(rank 3 -> rank 1, channel 0) cell (block 1, piece 0): rank 3 does not hold it"), std::string::npos)
      << *bad;
  // Reduce-scatter: block 1 ends reduced at position 1 (rank 3), its owner is now rank 1.
  Schedule scatter = positional_ring(CollectiveOp::reduce_scatter, {0, 3, 1, 4, 2});
  std::swap(scatter.block_owner[0][1], scatter.block_owner[0][2]);
  const auto wrong = check_schedule(scatter);
  ASSERT_TRUE(wrong);
  EXPECT_NE(wrong->find("final state: rank 1 cell (block 1, piece 0)"), std::string::npos) << *wrong;
}

TEST(Checker, BlockOwnerMustBeWellFormed) {
  const Schedule good = positional_ring(CollectiveOp::allgather, {0, 3, 1, 4, 2});
  auto with = [&](auto mutate) {
    Schedule s = good;
    mutate(s);
    return check_schedule(s).value_or("");
  };
  EXPECT_NE(with([](Schedule& s) { s.block_owner[0][1] = 0; })
                .find("block_owner of piece 0: rank 0 owns 2 blocks, every rank must own num_blocks / ranks = 1 "
                      "(the row must be a permutation of the ranks)"),
            std::string::npos);
  EXPECT_NE(with([](Schedule& s) { s.block_owner[0][1] = 5; }).find("block 1 owned by 5, not a rank"),
            std::string::npos);
  EXPECT_NE(with([](Schedule& s) { s.block_owner[0].pop_back(); }).find("4 entries, num_blocks is 5"),
            std::string::npos);
  EXPECT_NE(with([](Schedule& s) { s.block_owner.push_back(s.block_owner[0]); }).find("2 rows, one per piece needs 1"),
            std::string::npos);
  // Only allgather and reduce-scatter blocks have an owner.
  Schedule allreduce = compact_ring_allreduce(5, 1);
  allreduce.block_owner = good.block_owner;
  EXPECT_NE(check_schedule(allreduce).value_or("").find("allreduce blocks have no owner"), std::string::npos);
  // With two blocks per rank every rank must own two of each piece.
  Schedule doubled = base(CollectiveOp::allgather, 2, 4);
  doubled.block_owner = {{0, 1, 1, 0}};
  doubled.rounds.push_back({{transfer(0, 1, 0, Combine::replace, 0, 0, 1), transfer(0, 1, 3),
                             transfer(1, 0, 1, Combine::replace, 0, 0, 2)}});
  EXPECT_EQ(check_schedule(doubled), std::nullopt);
  doubled.block_owner = {{0, 1, 1, 1}};
  EXPECT_NE(check_schedule(doubled).value_or("").find("rank 0 owns 1 blocks, every rank must own num_blocks / ranks = 2"),
            std::string::npos);
}

}  // namespace
}  // namespace stepsim::models
