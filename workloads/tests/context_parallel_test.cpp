// Context parallelism in the fsdp generator (parallelism.cp, context_parallel): the cp groups,
// the ring attention's K/V and gradient exchanges per layer counted and sized by hand for both
// rotate methods, its steps' share of the causal work, and the token and GEMM shares.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "workloads/tests/parallel_layouts.hpp"

namespace stepsim::workloads {
namespace {

using models::CollectiveOp;

constexpr int kLayers = 32;
constexpr double kSequence = 4096;
constexpr double kKv = kSequence * 4096 * 2;   // K or V of the whole sequence, 32 heads x 128, bf16

using testing::gemm_flops;
using testing::group_named;

// The attention work a rank's SDPA kernels do, in query x key pairs (a causal block counts half).
double attention_pairs(const Trace& t, int rank, bool backward) {
  double pairs = 0;
  for (const Op& o : t.program(rank).ops)
    if (o.kind == OpKind::kernel && o.kernel >= 0 && t.kernels[o.kernel].kind == "attention") {
      const models::KernelSpec& k = t.kernels[o.kernel];
      if ((k.param("backward") > 0) == backward)
        pairs += k.param("seq_q") * k.param("seq_kv") * (k.param("causal") > 0 ? 0.5 : 1);
    }
  return pairs;
}

TEST(ContextParallel, KeysAndValuesAreGatheredOnceAndTheirGradientsPassedOn) {
  testing::Llama8b job(4096, 1);
  const Trace t = job.load({"parallelism.cp=2"});
  const int cp = group_named(t, "cp");
  ASSERT_GE(cp, 0);
  EXPECT_EQ(t.groups[cp].subgroups.front(), (std::vector<int>{0, 1}));
  // FSDP shards over dp_shard x cp: all 8 ranks.
  EXPECT_EQ(t.groups[group_named(t, "fsdp")].subgroups.front().size(), 8u);
  // Per block: the local K and V (kKv together) all-gathered in forward and again in backward;
  // their fp32 gradients passed to the next rank at each of the cp steps.
  EXPECT_EQ(testing::count(t, 0, cp, CollectiveOp::allgather, 2 * kKv), 2 * kLayers);
  EXPECT_EQ(testing::count(t, 0, cp, CollectiveOp::sendrecv, 2 * kKv), 2 * kLayers);
  EXPECT_EQ(testing::count(t, 0, cp, CollectiveOp::reduce_scatter), 0);
  // The ring's steps do the rank's 1/cp of the causal work: S^2 / (2 cp) pairs per block.
  EXPECT_DOUBLE_EQ(attention_pairs(t, 0, false), kLayers * kSequence * kSequence / 4);
  EXPECT_DOUBLE_EQ(attention_pairs(t, 0, true), kLayers * kSequence * kSequence / 4);
}

TEST(ContextParallel, AllToAllRotationPassesKeysAndValuesRankToRank) {
  testing::Llama8b job(4096, 1);
  const Trace t = job.load({"parallelism.cp=4", "context_parallel.rotate_method=alltoall"});
  const int cp = group_named(t, "cp");
  const double kv = kKv / 2;   // K and V of the rank's 1024 tokens
  // cp - 1 K/V passes in forward and again in backward, cp fp32 gradient passes.
  EXPECT_EQ(testing::count(t, 0, cp, CollectiveOp::sendrecv, kv), 2 * 3 * kLayers);
  EXPECT_EQ(testing::count(t, 0, cp, CollectiveOp::sendrecv, 2 * kv), 4 * kLayers);
  EXPECT_EQ(testing::count(t, 0, cp, CollectiveOp::allgather), 0);
  EXPECT_DOUBLE_EQ(attention_pairs(t, 0, false), kLayers * kSequence * kSequence / 8);
  EXPECT_NE(job.error({"context_parallel.rotate_method=ring", "parallelism.cp=2"}).find("context_parallel.rotate_method"),
            std::string::npos);
  EXPECT_NE(job.error({"context_parallel.rotate_method=alltoall"}).find("context_parallel"), std::string::npos);
  // The load balancer cuts a sequence into 2 x cp equal chunks: 4100 tokens do not split 8 ways.
  EXPECT_NE(job.error({"parallelism.cp=4", "training.sequence=4100"}).find("training.sequence"), std::string::npos);
}

TEST(ContextParallel, EveryTokenWiseOpRunsOnTheRanksShare) {
  testing::Llama8b job(4096, 1);
  const double whole = gemm_flops(job.load({}), 0);
  const Trace t = job.load({"parallelism.cp=4"});
  EXPECT_NEAR(gemm_flops(t, 0), whole / 4, 1e-9 * whole);
  EXPECT_DOUBLE_EQ(t.work.items_per_rank, kSequence / 4);
}

}  // namespace
}  // namespace stepsim::workloads
