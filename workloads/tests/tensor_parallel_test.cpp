// Tensor and sequence parallelism in the fsdp generator (parallelism.tp, tensor_parallel): the
// per-layer collectives counted and sized by hand, the groups the mesh gives, the local
// parameter and GEMM shares, tp = 1 equal to no parallelism section, and the bad-input cases.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "workloads/tests/parallel_layouts.hpp"

namespace stepsim::workloads {
namespace {

using models::CollectiveOp;

constexpr int kLayers = 32;
constexpr double kTokens = 2048;                              // micro_batch 1 x sequence 2048
constexpr double kActivation = kTokens * 4096 * 2;            // a T x hidden bf16 tensor
constexpr double kLinears = 2 * 4096.0 * 4096 + 2 * 4096.0 * 1024 + 3 * 4096.0 * 14336;   // Llama 3.1 8B block

class TensorParallelTest : public ::testing::Test {
 protected:
  Trace load(std::vector<std::string> overrides, int nodes = 1) { return job_.load(std::move(overrides), nodes); }
  std::string error(std::vector<std::string> overrides, int nodes = 1) { return job_.error(std::move(overrides), nodes); }
  testing::Llama8b job_{2048, 1};
};

int count(const Trace& t, int group, CollectiveOp op, double bytes) { return testing::count(t, 0, group, op, bytes); }
double gemm_flops(const Trace& t) { return testing::gemm_flops(t, 0); }
using testing::group_named;

TEST_F(TensorParallelTest, SequenceParallelLayersGatherAndScatterTheirActivations) {
  const Trace t = load({"parallelism.tp=2"});
  const int tp = group_named(t, "tp");
  ASSERT_GE(tp, 0);
  EXPECT_EQ(t.groups[tp].subgroups, (std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(t.groups[group_named(t, "fsdp")].subgroups, (std::vector<std::vector<int>>{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  // Per block: forward all-gathers before wq/wk/wv and w1/w3, reduce-scatters after wo and w2;
  // backward the reverse. Plus the embedding's reduce-scatter (backward: all-gather) and the
  // output projection's all-gather (backward: reduce-scatter).
  EXPECT_EQ(count(t, tp, CollectiveOp::allgather, kActivation), 2 * (2 * kLayers + 1));
  EXPECT_EQ(count(t, tp, CollectiveOp::reduce_scatter, kActivation), 2 * (2 * kLayers + 1));
  EXPECT_EQ(count(t, tp, CollectiveOp::allreduce, kActivation), 0);
  // loss_parallel: max, sum of exponentials and target logit, one fp32 per token each; and the
  // gradient norm's one fp32.
  EXPECT_EQ(count(t, tp, CollectiveOp::allreduce, kTokens * 4), 3);
  EXPECT_EQ(count(t, tp, CollectiveOp::allreduce, 4), 1);
  // FSDP all-gathers a block's local half of the linears plus both norms, in bf16: every block
  // in forward, all but the last (kept unsharded) again in backward.
  EXPECT_EQ(count(t, group_named(t, "fsdp"), CollectiveOp::allgather, (kLinears / 2 + 2 * 4096) * 2), 2 * kLayers - 1);
}

TEST_F(TensorParallelTest, WithoutSequenceParallelismRowOutputsAndColumnInputGradientsAreAllReduced) {
  const Trace t = load({"parallelism.tp=4", "tensor_parallel.sequence_parallel=false"});
  const int tp = group_named(t, "tp");
  // Forward: after wo, w2 and the embedding; backward: the gradients into wq/wk/wv, w1/w3 and
  // the output projection.
  EXPECT_EQ(count(t, tp, CollectiveOp::allreduce, kActivation), 2 * (2 * kLayers + 1));
  EXPECT_EQ(count(t, tp, CollectiveOp::allgather, kActivation), 0);
  EXPECT_EQ(count(t, tp, CollectiveOp::reduce_scatter, kActivation), 0);
}

// Bytes rank 0 moves on `group`, summed over its collectives.
double bytes_on(const Trace& t, int group) {
  double total = 0;
  for (const Op& o : t.program(0).ops)
    if (o.kind == OpKind::collective && t.collectives[o.collective].group == group) total += t.collectives[o.collective].bytes;
  return total;
}

TEST_F(TensorParallelTest, AsyncTpSplitsGatherMatmulAndMatmulScatterIntoChunks) {
  // torchtitan runs async TP under torch.compile only.
  const Trace sync = load({"parallelism.tp=2", "training.compile=true"});
  const Trace async = load({"parallelism.tp=2", "training.compile=true", "tensor_parallel.async=true"});
  const int tp = group_named(async, "tp");
  // Per block, forward: the attention and MLP inputs' all-gathers feed wq/wk/wv and w1/w3, wo
  // and w2 feed reduce-scatters: 2 + 2 sites of 2 chunks. Backward: the gradients gathered for
  // wo's and w2's data gradients: 2 sites of 2 chunks; the column groups' input-gradient
  // reduce-scatters follow weight gradients, which the pass leaves alone (2 whole ones).
  EXPECT_EQ(count(async, tp, CollectiveOp::allgather, kActivation / 2), 2 * 2 * kLayers * 2);
  EXPECT_EQ(count(async, tp, CollectiveOp::reduce_scatter, kActivation / 2), 2 * 2 * kLayers);
  EXPECT_EQ(count(async, tp, CollectiveOp::reduce_scatter, kActivation), 2 * kLayers + 2);
  EXPECT_EQ(count(async, tp, CollectiveOp::allgather, kActivation), 2);   // embedding backward, output forward
  // The same bytes and GEMM work as without async TP, in chunks.
  EXPECT_DOUBLE_EQ(bytes_on(async, tp), bytes_on(sync, group_named(sync, "tp")));
  EXPECT_NEAR(gemm_flops(async), gemm_flops(sync), 1e-9 * gemm_flops(sync));
}

TEST_F(TensorParallelTest, EveryGemmIsSplitOverTheGroup) {
  const double whole = gemm_flops(load({}));
  EXPECT_NEAR(gemm_flops(load({"parallelism.tp=2"})), whole / 2, 1e-9 * whole);
  EXPECT_NEAR(gemm_flops(load({"parallelism.tp=8"})), whole / 8, 1e-9 * whole);
  const Trace t = load({"parallelism.tp=8"});
  EXPECT_DOUBLE_EQ(t.work.items_per_rank, kTokens / 8);
}

TEST_F(TensorParallelTest, OneRankOfTensorParallelismIsTheOneDimensionalTrace) {
  const Trace plain = load({});
  const Trace mesh = load({"parallelism.tp=1", "parallelism.pp=1", "parallelism.cp=1", "parallelism.ep=1",
                           "parallelism.dp_shard=-1"});
  ASSERT_EQ(plain.programs.size(), mesh.programs.size());
  ASSERT_EQ(plain.program(0).ops.size(), mesh.program(0).ops.size());
  for (std::size_t i = 0; i < plain.program(0).ops.size(); ++i) {
    const Op& a = plain.program(0).ops[i];
    const Op& b = mesh.program(0).ops[i];
    ASSERT_TRUE(a.kind == b.kind && a.stream == b.stream && a.name == b.name && a.kernel == b.kernel &&
                a.duration == b.duration && a.collective == b.collective && a.event == b.event)
        << "op " << i;
  }
  EXPECT_EQ(plain.names, mesh.names);
  EXPECT_EQ(plain.program(0).streams, mesh.program(0).streams);
  EXPECT_EQ(plain.program(0).events, mesh.program(0).events);
  EXPECT_EQ(plain.collectives, mesh.collectives);
  EXPECT_EQ(plain.kernels, mesh.kernels);
  EXPECT_EQ(plain.groups.size(), mesh.groups.size());
  EXPECT_EQ(plain.groups[0].subgroups, mesh.groups[0].subgroups);
}

TEST_F(TensorParallelTest, BadLayoutsNameTheKeyAndTheFix) {
  EXPECT_NE(error({"parallelism.tp=16"}, 2).find("tp (16) must divide model.kv_heads (8)"), std::string::npos);
  EXPECT_NE(error({"parallelism.dp_replicate=2"}).find("use fsdp.strategy: HYBRID_SHARD"), std::string::npos);
  EXPECT_NE(error({"parallelism.tp=3"}).find("does not divide the job's 8 ranks"), std::string::npos);
  EXPECT_NE(error({"tensor_parallel.overlap=true"}).find("allowed keys here: sequence_parallel, async"),
            std::string::npos);
  EXPECT_NE(error({"parallelism.tp=2", "tensor_parallel.sequence_parallel=false", "tensor_parallel.async=true"})
                .find("set tensor_parallel.sequence_parallel: true"),
            std::string::npos);
  EXPECT_NE(error({"parallelism.tp=2", "tensor_parallel.async=true"}).find("training.compile"), std::string::npos);
}

TEST_F(TensorParallelTest, HybridShardingTakesItsGroupsFromTheMesh) {
  const Trace t = load({"fsdp.strategy=HYBRID_SHARD", "parallelism.dp_replicate=2", "parallelism.tp=2"}, 2);
  EXPECT_EQ(t.groups[group_named(t, "replicate")].subgroups.front(), (std::vector<int>{0, 8}));
  EXPECT_EQ(t.groups[group_named(t, "fsdp")].subgroups.front(), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(t.groups[group_named(t, "tp")].subgroups.front(), (std::vector<int>{0, 1}));
}

}  // namespace
}  // namespace stepsim::workloads
