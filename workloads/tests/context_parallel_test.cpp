// Context parallelism in the fsdp generator (parallelism.cp): the cp groups, the K/V
// all-gathers and gradient reduce-scatters per layer counted and sized by hand, SDPA's local
// queries against the whole sequence, and the token and GEMM shares.
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

TEST(ContextParallel, KeysAndValuesAreGatheredOverTheSequence) {
  testing::Llama8b job(4096, 1);
  const Trace t = job.load({"parallelism.cp=2"});
  const int cp = group_named(t, "cp");
  ASSERT_GE(cp, 0);
  EXPECT_EQ(t.groups[cp].subgroups.front(), (std::vector<int>{0, 1}));
  // FSDP shards over dp_shard x cp: all 8 ranks.
  EXPECT_EQ(t.groups[group_named(t, "fsdp")].subgroups.front().size(), 8u);
  // Per block: K and V gathered in forward and again in backward; their gradients reduce-scattered.
  EXPECT_EQ(testing::count(t, 0, cp, CollectiveOp::allgather, kKv), 4 * kLayers);
  EXPECT_EQ(testing::count(t, 0, cp, CollectiveOp::reduce_scatter, kKv), 2 * kLayers);
  bool checked = false;
  for (const models::KernelSpec& k : t.kernels)
    if (k.kind == "attention") {
      EXPECT_DOUBLE_EQ(k.param("seq_q"), kSequence / 2);
      EXPECT_DOUBLE_EQ(k.param("seq_kv"), kSequence);
      checked = true;
    }
  EXPECT_TRUE(checked);
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
