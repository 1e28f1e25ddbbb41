// Mixture of experts and expert parallelism in the fsdp generator (model.moe, parallelism.ep):
// Mixtral's parameter counts against the paper, the dispatch and combine all-to-alls and the
// experts' FSDP unit counted and sized by hand, expert GEMM work, routing skew and capacity,
// and the bad-input cases.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "workloads/tests/parallel_layouts.hpp"

namespace stepsim::workloads {
namespace {

using models::CollectiveOp;
using testing::count;
using testing::group_named;

constexpr double kTokens = 2 * 4096.0;            // the preset: 2 x 4096 per rank
constexpr double kRouted = kTokens * 2 * 4096 * 2;   // top 2, hidden 4096, bf16
constexpr double kExperts = 8 * 3 * 4096.0 * 14336;

class MoeTest : public ::testing::Test {
 protected:
  Trace load(std::vector<std::string> overrides) { return job_.load(std::move(overrides)); }
  std::string error(std::vector<std::string> overrides) { return job_.error(std::move(overrides)); }
  testing::PresetJob job_{"mixtral-8x7b", {}};
};

// Expert GEMM FLOPs rank 0 runs.
double expert_flops(const Trace& t) {
  double flops = 0;
  for (const Op& o : t.program(0).ops)
    if (o.kind == OpKind::kernel && o.kernel >= 0 && t.names[o.name].find("moe.experts.w") != std::string::npos) {
      const models::KernelSpec& k = t.kernels[o.kernel];
      flops += 2 * k.param("m") * k.param("n") * k.param("k") * k.param("batch");
    }
  return flops;
}

TEST_F(MoeTest, MixtralCountsItsParametersAsThePaper) {
  // Jiang et al. 2024: 46.7e9 parameters, 12.9e9 active per token (rounded in the paper). The
  // MFU count (torchtitan's) leaves out the token embedding, 32000 x 4096.
  const Trace t = load({"fsdp.activation_checkpointing=none"});
  const double per_token = t.work.model_flops_per_rank / kTokens;
  const double attention = 12.0 * 32 * 32 * 128 * 4096;
  EXPECT_NEAR((per_token - attention) / 6 + 32000.0 * 4096, 12.9e9, 0.05e9);
  EXPECT_TRUE(std::any_of(t.notes.begin(), t.notes.end(),
                          [](const std::string& n) { return n.find("parameters: 4.67e+10 in all") != std::string::npos; }));
}

TEST_F(MoeTest, ExpertParallelRanksExchangeTokensWithAllToAlls) {
  const Trace t = load({"parallelism.ep=2", "fsdp.activation_checkpointing=none"});
  const int ep = group_named(t, "ep");
  ASSERT_GE(ep, 0);
  EXPECT_EQ(t.groups[ep].subgroups.front(), (std::vector<int>{0, 1}));
  // Dispatch and combine, forward and backward, per block.
  EXPECT_EQ(count(t, 0, ep, CollectiveOp::alltoall, kRouted), 4 * 32);
  // The experts' unit: the rank's 4 experts, gathered over the efsdp ranks holding the same ones,
  // every block in forward, all but the last again in backward.
  const int efsdp = group_named(t, "efsdp");
  EXPECT_EQ(t.groups[efsdp].subgroups.front(), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(count(t, 0, efsdp, CollectiveOp::allgather, kExperts / 2 * 2), 2 * 32 - 1);
  // Balanced routing: a rank's experts process its own share of the routed tokens, whatever ep:
  // 2 x rows x 3 x 4096 x 14336 per block forward, twice that backward.
  const double forward = 2 * (kTokens * 2) * 3 * 4096.0 * 14336;
  EXPECT_NEAR(expert_flops(t), 32 * 3 * forward, 1e-9 * forward);
  EXPECT_NEAR(expert_flops(load({"fsdp.activation_checkpointing=none"})), 32 * 3 * forward, 1e-9 * forward);
}

TEST_F(MoeTest, SkewLoadsTheBusiestRankAndCapacityCutsIt) {
  const Trace skewed = load({"parallelism.ep=2", "model.moe.routing_skew=1.5"});
  EXPECT_EQ(count(skewed, 0, group_named(skewed, "ep"), CollectiveOp::alltoall, 1.5 * kRouted), 4 * 32);
  const Trace capped = load({"parallelism.ep=2", "model.moe.routing_skew=1.5", "model.moe.capacity_factor=1.25"});
  EXPECT_EQ(count(capped, 0, group_named(capped, "ep"), CollectiveOp::alltoall, 1.25 * kRouted), 4 * 32);
  // The experts' GEMMs follow the busiest rank's rows.
  EXPECT_NEAR(expert_flops(skewed), 1.5 * expert_flops(load({"parallelism.ep=2"})), 1e-6 * expert_flops(skewed));
}

TEST_F(MoeTest, SharedExpertsRunOnEveryTokenAndCountAsActive) {
  const Trace plain = load({"fsdp.activation_checkpointing=none"});
  const Trace shared = load({"fsdp.activation_checkpointing=none", "model.moe.shared_experts=1"});
  // One more 4096 x 14336 SwiGLU per block, every token through it: 6 x its parameters per token.
  const double extra = 32 * 3 * 4096.0 * 14336;
  EXPECT_NEAR((shared.work.model_flops_per_rank - plain.work.model_flops_per_rank) / kTokens, 6 * extra, 1e-6 * extra);
  double gemm = 0;
  for (const Op& o : shared.program(0).ops)
    if (o.kind == OpKind::kernel && shared.names[o.name].find("moe.shared_experts.w") != std::string::npos) {
      const models::KernelSpec& k = shared.kernels[o.kernel];
      gemm += 2 * k.param("m") * k.param("n") * k.param("k") * k.param("batch");
    }
  EXPECT_NEAR(gemm, 6 * extra * kTokens, 1e-9 * gemm);
}

TEST_F(MoeTest, BadMixturesNameTheKeyAndTheFix) {
  EXPECT_NE(error({"model.moe.top_k=9"}).find("top_k (9) exceeds the 8 experts"), std::string::npos);
  EXPECT_NE(error({"model.moe.routing_skew=0.5"}).find("model.moe.routing_skew"), std::string::npos);
  EXPECT_NE(error({"parallelism.ep=3"}).find("ep (3) must divide"), std::string::npos);
  EXPECT_NE(error({"parallelism.tp=2"}).find("expert tensor parallelism"), std::string::npos);
  EXPECT_NE(error({"fsdp.wrap=model"}).find("use fsdp.wrap: layer"), std::string::npos);
}

TEST(MoeDense, ExpertParallelismNeedsExperts) {
  testing::Llama8b job(2048, 1);
  EXPECT_NE(job.error({"parallelism.ep=2"}).find("expert parallelism needs experts"), std::string::npos);
}

}  // namespace
}  // namespace stepsim::workloads
