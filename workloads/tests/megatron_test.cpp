// framework: megatron: Transformer Engine's block kernels counted and compared with torchtitan's
// (same GEMM FLOPs), Megatron's tensor-parallel collectives and data-parallel buckets counted and
// sized by hand, its recompute, and the bad-input cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "workloads/generators/megatron_block.hpp"
#include "workloads/tests/block_kernels.hpp"
#include "workloads/tests/parallel_layouts.hpp"

namespace stepsim::workloads {
namespace {

using models::CollectiveOp;
using transformer::Checkpointing;
using transformer::Kernels;
using testing::gemm_flops;
using testing::names;
using transformer::TensorParallel;

// A Llama-style model small enough to count by hand: 4 blocks of hidden 1024, 8 heads, 2 KV heads.
transformer::ModelConfig small_llama() {
  transformer::ModelConfig m;
  m.layers = 4;
  m.hidden = 1024;
  m.heads = 8;
  m.kv_heads = 2;
  m.ffn_hidden = 4096;
  m.vocab = 32000;
  return m;
}
transformer::TrainingConfig training(double sequence = 2048) {
  transformer::TrainingConfig t;
  t.sequence = static_cast<int>(sequence);
  return t;
}

int comms(const Kernels& kernels, CollectiveOp op, double bytes) {
  return static_cast<int>(std::count_if(kernels.begin(), kernels.end(), [&](const transformer::Kernel& k) {
    return k.comm && k.comm->op == op && k.comm->bytes == bytes;
  }));
}

TEST(MegatronBlock, RunsTransformerEnginesFusedKernels) {
  const transformer::Block b = transformer::megatron_layer_block(small_llama(), training(), Checkpointing::none, {});
  EXPECT_EQ(names(b.forward),
            (std::vector<std::string>{"self_attention.linear_qkv.layer_norm", "self_attention.linear_qkv",
                                      "self_attention.rope_q", "self_attention.rope_k", "self_attention.core_attention",
                                      "self_attention.linear_proj", "self_attn_bda", "mlp.linear_fc1.layer_norm",
                                      "mlp.linear_fc1", "mlp.bias_swiglu", "mlp.linear_fc2", "mlp_bda"}));
  // Backward: two kernels per linear and per norm, one per fused elementwise op and attention.
  EXPECT_EQ(names(b.backward).size(), 4u * 2 + 2u * 2 + 2 + 1 + 1 + 2);
  EXPECT_TRUE(b.recompute.empty());
  // Native grouped-query attention: the kernel reads the 2 KV heads as they are.
  const auto core = std::find_if(b.forward.begin(), b.forward.end(),
                                 [](const transformer::Kernel& k) { return k.name == "self_attention.core_attention"; });
  EXPECT_EQ(core->spec.param("kv_heads"), 2);
  EXPECT_EQ(core->spec.param("heads"), 8);
}

TEST(MegatronBlock, DoesTorchtitansGemmWorkInFewerGemms) {
  for (int tp : {1, 2, 4}) {
    const TensorParallel parallel{tp, true, false};
    const transformer::Block megatron =
        transformer::megatron_layer_block(small_llama(), training(), Checkpointing::none, parallel);
    const transformer::Block torchtitan =
        transformer::layer_block(small_llama(), training(), Checkpointing::none, false, parallel);
    // 6 P T per block: the fused QKV and fc1 GEMMs hold wq+wk+wv and w1+w3.
    const double p = (1024.0 * (1024 + 2 * 256) + 1024.0 * 1024 + 3 * 1024.0 * 4096) / tp;
    EXPECT_NEAR(gemm_flops(megatron.forward) + gemm_flops(megatron.backward), 6 * p * 2048, 1e-9 * p) << tp;
    EXPECT_NEAR(gemm_flops(megatron.forward) + gemm_flops(megatron.backward),
                gemm_flops(torchtitan.forward) + gemm_flops(torchtitan.backward), 1e-9 * p)
        << tp;
    EXPECT_EQ(names(megatron.forward).size(), 12u);   // torchtitan's eager block launches far more
    EXPECT_GT(names(torchtitan.forward).size(), 2 * names(megatron.forward).size());
  }
}

TEST(MegatronBlock, SequenceParallelBackwardGathersInputsAgainAndOverlapsTheScatter) {
  const TensorParallel parallel{2, true, false};
  const transformer::Block b = transformer::megatron_layer_block(small_llama(), training(), Checkpointing::none, parallel);
  const double activation = 2048.0 * 1024 * 2;   // T x hidden bf16, the whole gathered buffer
  // Forward: gather before qkv and fc1, scatter after proj and fc2.
  EXPECT_EQ(comms(b.forward, CollectiveOp::allgather, activation), 2);
  EXPECT_EQ(comms(b.forward, CollectiveOp::reduce_scatter, activation), 2);
  // Backward: the row-parallel outputs' gradients gathered (2), the column inputs gathered
  // again (2), the column inputs' gradients scattered (2).
  EXPECT_EQ(comms(b.backward, CollectiveOp::allgather, activation), 4);
  EXPECT_EQ(comms(b.backward, CollectiveOp::reduce_scatter, activation), 2);
  // The dgrad reduce-scatter is issued async before the weight-gradient GEMM and waited after it.
  const auto rs = std::find_if(b.backward.begin(), b.backward.end(), [](const transformer::Kernel& k) {
    return k.name == "mlp.linear_fc1.dgrad_reduce_scatter";
  });
  ASSERT_NE(rs, b.backward.end());
  ASSERT_GE(rs->comm->tag, 0);
  EXPECT_EQ((rs + 1)->name, "mlp.linear_fc1.wgrad");
  EXPECT_EQ((rs + 2)->after, rs->comm->tag);
  // Without sequence parallelism: all-reduces after proj and fc2, and of qkv's and fc1's dgrad.
  const transformer::Block plain =
      transformer::megatron_layer_block(small_llama(), training(), Checkpointing::none, {2, false, false});
  EXPECT_EQ(comms(plain.forward, CollectiveOp::allreduce, activation), 2);
  EXPECT_EQ(comms(plain.backward, CollectiveOp::allreduce, activation), 2);
  EXPECT_EQ(comms(plain.backward, CollectiveOp::allgather, activation), 0);
}

TEST(MegatronBlock, TpCommOverlapSplitsTheForwardCollectivesIntoChunks) {
  // --tp-comm-overlap on tp = 2: the forward's two gathers and two scatters run as 2 chunks each,
  // the same bytes and GEMM work as without.
  const transformer::Block plain =
      transformer::megatron_layer_block(small_llama(), training(), Checkpointing::none, {2, true, false});
  const transformer::Block overlap =
      transformer::megatron_layer_block(small_llama(), training(), Checkpointing::none, {2, true, true});
  const double activation = 2048.0 * 1024 * 2;
  EXPECT_EQ(comms(overlap.forward, CollectiveOp::allgather, activation / 2), 2 * 2);
  EXPECT_EQ(comms(overlap.forward, CollectiveOp::reduce_scatter, activation / 2), 2 * 2);
  EXPECT_EQ(comms(overlap.forward, CollectiveOp::allgather, activation), 0);
  EXPECT_NEAR(gemm_flops(overlap.forward) + gemm_flops(overlap.backward),
              gemm_flops(plain.forward) + gemm_flops(plain.backward), 1e-9 * gemm_flops(plain.forward));
}

TEST(MegatronBlock, SelectiveRecomputeRerunsTheCoreAttentionFullRerunsTheBlock) {
  const transformer::Block selective =
      transformer::megatron_layer_block(small_llama(), training(), Checkpointing::selective, {});
  EXPECT_EQ(names(selective.recompute), (std::vector<std::string>{"self_attention.core_attention.recompute"}));
  const transformer::Block full = transformer::megatron_layer_block(small_llama(), training(), Checkpointing::full, {});
  EXPECT_EQ(names(full.recompute).size(), names(full.forward).size());
}

TEST(MegatronBlock, ContextParallelPassesKeysAndValuesRankToRank) {
  // Transformer Engine's p2p ring over cp = 4: 1/4 of 2048 tokens per rank; K and V (2 KV heads
  // of 128, not expanded) go to the next rank under each of the first three steps, forward and
  // backward; their bf16 gradients under every step; each step attends 512 queries.
  const transformer::ContextParallel cp{4, true};
  const transformer::Block b = transformer::megatron_layer_block(small_llama(), training(), Checkpointing::none, {}, cp);
  const double kv = 2 * 512.0 * 256 * 2;   // K and V of the rank's 512 tokens, bf16
  EXPECT_EQ(comms(b.forward, CollectiveOp::sendrecv, kv), 3);
  EXPECT_EQ(comms(b.backward, CollectiveOp::sendrecv, kv), 3 + 4);
  int steps = 0;
  for (const transformer::Kernel& k : b.forward)
    if (!k.comm && k.spec.kind == "attention") {
      EXPECT_EQ(k.spec.param("seq_q"), 512);
      EXPECT_EQ(k.spec.param("kv_heads"), 2);
      ++steps;
    }
  EXPECT_EQ(steps, 4);
  // The GEMMs see a quarter of the tokens.
  const transformer::Block whole = transformer::megatron_layer_block(small_llama(), training(), Checkpointing::none, {});
  EXPECT_NEAR(gemm_flops(b.forward), gemm_flops(whole.forward) / 4, 1e-9 * gemm_flops(whole.forward));
}

// The gpt3-175b-megatron preset shrunk to 8 blocks of hidden 1024 on one dgx-h100 node.
class MegatronIterationTest : public ::testing::Test {
 protected:
  Trace load(std::vector<std::string> overrides, int nodes = 1) { return job_.load(std::move(overrides), nodes); }
  std::string error(std::vector<std::string> overrides, int nodes = 1) { return job_.error(std::move(overrides), nodes); }
  testing::PresetJob job_{"gpt3-175b-megatron",
                          {"model.layers=8", "model.hidden=1024", "model.heads=8", "model.kv_heads=8",
                           "model.ffn_hidden=4096", "model.vocab=32000", "parallelism.tp=1", "parallelism.pp=1",
                           "training.gradient_accumulation=1"}};
  // A GPT block with biases: attention 4 h^2 + 4 h, MLP 8 h^2 + 5 h, two LayerNorms 4 h.
  static constexpr double kBlock = 12 * 1024.0 * 1024 + 13 * 1024;
  static constexpr double kEmbedding = 32000.0 * 1024 + 2048.0 * 1024;
  static constexpr double kHead = 2 * 1024;   // the final LayerNorm (the output is tied)
  static constexpr double kParams = 8 * kBlock + kEmbedding + kHead;
};

double sum_bytes(const Trace& t, int rank, int group, CollectiveOp op) {
  double bytes = 0;
  for (const Op& o : t.program(rank).ops)
    if (o.kind == OpKind::collective && t.collectives[o.collective].group == group &&
        t.collectives[o.collective].op == op)
      bytes += t.collectives[o.collective].bytes;
  return bytes;
}

TEST_F(MegatronIterationTest, DistributedOptimizerScattersGradientsAndGathersParametersOnce) {
  for (int micro : {1, 4}) {
    const Trace t = load({"training.gradient_accumulation=" + std::to_string(micro), "megatron.distributed_optimizer=true",
                          "megatron.overlap_grad_reduce=true", "megatron.overlap_param_gather=true"});
    const int dp = testing::group_named(t, "dp");
    ASSERT_GE(dp, 0);
    EXPECT_EQ(t.groups[dp].subgroups.front().size(), 8u);
    // Every gradient once in fp32, every parameter once in bf16, however many micro-batches.
    EXPECT_NEAR(sum_bytes(t, 0, dp, CollectiveOp::reduce_scatter), kParams * 4, 1e-9 * kParams) << micro;
    EXPECT_NEAR(sum_bytes(t, 0, dp, CollectiveOp::allgather), kParams * 2, 1e-9 * kParams) << micro;
    EXPECT_EQ(sum_bytes(t, 0, dp, CollectiveOp::allreduce), 4);   // the clip norm's one fp32
  }
}

TEST_F(MegatronIterationTest, DdpAllReducesGradientsInBuckets) {
  // 40e6-parameter buckets filled from the output end: the head and 4 blocks (12.6 M each)
  // close the first, the next 4 blocks the second, the embedding (34.8 M) is the third.
  const Trace t = load({"megatron.overlap_grad_reduce=true", "megatron.bucket_size=40000000"});
  const int dp = testing::group_named(t, "dp");
  EXPECT_EQ(testing::count(t, 0, dp, CollectiveOp::allreduce, (4 * kBlock + kHead) * 4), 1);
  EXPECT_EQ(testing::count(t, 0, dp, CollectiveOp::allreduce, 4 * kBlock * 4), 1);
  EXPECT_EQ(testing::count(t, 0, dp, CollectiveOp::allreduce, kEmbedding * 4), 1);
  EXPECT_EQ(testing::count(t, 0, dp, CollectiveOp::allgather), 0);
  // Without overlap: one bucket after backward.
  const Trace after = load({});
  EXPECT_EQ(testing::count(after, 0, dp, CollectiveOp::allreduce, kParams * 4), 1);
}

TEST_F(MegatronIterationTest, ContextParallelRanksReduceGradientsWithTheirDataParallelPeers) {
  const Trace t = load({"parallelism.cp=2", "megatron.distributed_optimizer=true"});
  const int dp = testing::group_named(t, "dp");
  // Megatron's data-parallel group with context parallelism: dp_shard 4 x cp 2.
  EXPECT_EQ(t.groups[dp].subgroups.front().size(), 8u);
  EXPECT_NEAR(sum_bytes(t, 0, dp, CollectiveOp::reduce_scatter), kParams * 4, 1e-9 * kParams);
  EXPECT_GE(testing::group_named(t, "cp"), 0);
}

TEST_F(MegatronIterationTest, PipelineStagesSplitTheBlocksEvenly) {
  const Trace t = load({"parallelism.pp=4", "training.gradient_accumulation=8", "pipeline.schedule=Interleaved1F1B"});
  const int pp = testing::group_named(t, "pp");
  ASSERT_GE(pp, 0);
  // 4 stages x 2 chunks of one block: each rank runs 2 chunks x 8 micro-batches forward, each
  // chunk but the very first receiving its activation, and the tied embedding's copies meet.
  // Ranks are [pp, dp]: stage s is rank 2 s.
  for (int stage = 0; stage < 4; ++stage) {
    int recvs = 0;
    for (const Op& o : t.program(2 * stage).ops) recvs += o.kind == OpKind::recv;
    EXPECT_EQ(recvs, 2 * 2 * 8 - (stage == 0 ? 8 : 0) - (stage == 3 ? 8 : 0)) << stage;
  }
  const int embedding = testing::group_named(t, "embedding");
  EXPECT_EQ(testing::count(t, 0, embedding, CollectiveOp::allreduce, 32000.0 * 1024 * 4), 1);
  EXPECT_EQ(testing::count(t, 6, embedding, CollectiveOp::allreduce, 32000.0 * 1024 * 4), 1);
}

TEST_F(MegatronIterationTest, TheVocabularyIsPaddedAsMegatronPadsIt) {
  // GPT-2's 50257 tokens: 50304 rows at 128 (nanoGPT's 50304 too), 51200 with 1024.
  const Trace t = load({"model.vocab=50257", "parallelism.pp=2", "training.gradient_accumulation=2"});
  const int embedding = testing::group_named(t, "embedding");
  EXPECT_EQ(testing::count(t, 0, embedding, CollectiveOp::allreduce, 50304.0 * 1024 * 4), 1);
  const Trace wide = load({"model.vocab=50257", "parallelism.pp=2", "training.gradient_accumulation=2",
                           "megatron.make_vocab_size_divisible_by=1024"});
  EXPECT_EQ(testing::count(wide, 0, testing::group_named(wide, "embedding"), CollectiveOp::allreduce, 51200.0 * 1024 * 4), 1);
}

TEST_F(MegatronIterationTest, BadInputNamesTheKey) {
  EXPECT_NE(error({"fsdp.strategy=FULL_SHARD"}).find("fsdp"), std::string::npos);
  EXPECT_NE(error({"megatron.overlap_param_gather=true"}).find("megatron.overlap_param_gather"), std::string::npos);
  EXPECT_NE(error({"model.layers=6", "parallelism.pp=4"}).find("parallelism.pp"), std::string::npos);
  EXPECT_NE(error({"parallelism.pp=2", "pipeline.schedule=GPipe"}).find("pipeline.schedule"), std::string::npos);
  EXPECT_NE(error({"parallelism.cp=2", "context_parallel.rotate_method=alltoall"}).find("context_parallel"),
            std::string::npos);
  EXPECT_NE(error({"parallelism.dp_replicate=2"}).find("parallelism.dp_replicate"), std::string::npos);
  EXPECT_NE(error({"framework=deepspeed"}).find("framework"), std::string::npos);
  EXPECT_NE(error({"megatron.recompute=everything"}).find("megatron.recompute"), std::string::npos);
  testing::PresetJob torchtitan{"llama3-8b", {}};
  EXPECT_NE(torchtitan.error({"megatron.recompute=full"}).find("megatron"), std::string::npos);
  EXPECT_NE(torchtitan.error({"framework=megatron"}).find("fsdp"), std::string::npos);
}

}  // namespace
}  // namespace stepsim::workloads
