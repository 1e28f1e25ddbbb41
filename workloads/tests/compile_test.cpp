// torch.compile of the blocks (training.compile): the fused kernels per block counted by hand,
// their bytes against a hand count, the GEMMs and SDPA unchanged, no eager host gap before a
// compiled kernel, and the combinations refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "workloads/generators/transformer.hpp"
#include "workloads/tests/block_kernels.hpp"
#include "workloads/tests/parallel_layouts.hpp"

namespace stepsim::workloads {
namespace {

using transformer::Checkpointing;
using transformer::Kernels;
using testing::elementwise_bytes;
using testing::gemm_flops;
using testing::names;

// Llama 3.1 8B's block: hidden 4096, 32 heads, 8 KV heads of 128, SwiGLU 14336.
transformer::ModelConfig llama8b() {
  transformer::ModelConfig m;
  m.layers = 32;
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 8;
  m.ffn_hidden = 14336;
  m.vocab = 128256;
  return m;
}
transformer::TrainingConfig training(bool compile) {
  transformer::TrainingConfig t;
  t.micro_batch = 2;
  t.sequence = 8192;
  t.compile = compile;
  return t;
}

TEST(Compile, FusesEachChainBetweenGemmsIntoOneKernel) {
  const transformer::Block b = transformer::layer_block(llama8b(), training(true), Checkpointing::none, false);
  EXPECT_EQ(names(b.forward),
            (std::vector<std::string>{"attention_norm", "attention.wq", "attention.wk", "attention.wv",
                                      "attention.rope_q", "attention.rope_k", "attention.repeat_kv_v", "attention.sdpa",
                                      "attention.contiguous", "attention.wo", "ffn_norm", "feed_forward.w1",
                                      "feed_forward.w3", "feed_forward.silu_mul", "feed_forward.w2", "ffn_residual"}));
  // Backward: 14 GEMMs (two per linear), SDPA, the transpose copy, SwiGLU's, the three RoPE / repeat_kv
  // kernels, and two per norm (input and weight gradients, the fork sums fused in).
  EXPECT_EQ(names(b.backward).size(), 14u + 1 + 1 + 1 + 3 + 2 * 2);
  for (const Kernels* pass : {&b.forward, &b.backward})
    for (const transformer::Kernel& k : *pass) EXPECT_TRUE(k.compiled) << k.name;
  // Eager launches far more for the same GEMM work.
  const transformer::Block eager = transformer::layer_block(llama8b(), training(false), Checkpointing::none, false);
  EXPECT_EQ(names(eager.forward).size(), 37u);
  EXPECT_DOUBLE_EQ(gemm_flops(b.forward) + gemm_flops(b.backward), gemm_flops(eager.forward) + gemm_flops(eager.backward));
}

TEST(Compile, ForwardMovesTheHandCountedBytes) {
  const transformer::Block b = transformer::layer_block(llama8b(), training(true), Checkpointing::none, false);
  const double t = 2 * 8192.0, h = 4096, q = 4096, kv = 1024, f = 14336, a = 2;
  const double hand = t * h * 2 * a            // attention_norm: x in, normalized out
                      + t * q * 2 * a          // RoPE on q
                      + 2 * t * kv * (a + 4 * a)   // RoPE on k and v's expansion to 32 heads
                      + t * q * 2 * a          // the transpose copy feeding wo
                      + t * h * 4 * a          // residual + ffn_norm: two in, two out
                      + t * f * 3 * a          // silu(w1 x) * w3 x
                      + t * h * 3 * a;         // the last residual
  EXPECT_NEAR(elementwise_bytes(b.forward), hand, 1e-9 * hand);
  const transformer::Block eager = transformer::layer_block(llama8b(), training(false), Checkpointing::none, false);
  EXPECT_LT(elementwise_bytes(b.forward), 0.5 * elementwise_bytes(eager.forward));
  EXPECT_LT(elementwise_bytes(b.backward), 0.5 * elementwise_bytes(eager.backward));
}

int host_gaps(const Trace& t) {
  int n = 0;
  for (const Op& o : t.program(0).ops) n += o.kind == OpKind::cpu;
  return n;
}

TEST(Compile, CompiledKernelsCarryNoEagerHostGap) {
  testing::Llama8b job(2048, 1);
  const Trace eager = job.load({});
  const Trace compiled = job.load({"training.compile=true"});
  // Eager: one gap per launch. Compiled: the blocks' kernels go without (their collectives,
  // the embedding, the head and FSDP's copies keep theirs).
  EXPECT_LT(host_gaps(compiled), host_gaps(eager) - 32 * 50);
}

int count_kernels(const Kernels& kernels, const std::string& suffix) {
  int n = 0;
  for (const transformer::Kernel& k : kernels)
    n += k.name.size() >= suffix.size() && k.name.compare(k.name.size() - suffix.size(), suffix.size(), suffix) == 0;
  return n;
}

TEST(Float8, EveryBlockLinearRunsInFp8WithItsCasts) {
  transformer::TrainingConfig t = training(true);
  t.float8 = transformer::Float8::tensorwise;
  const transformer::Block b = transformer::layer_block(llama8b(), t, Checkpointing::none, false);
  int fp8 = 0;
  for (const Kernels* pass : {&b.forward, &b.backward})
    for (const transformer::Kernel& k : *pass) fp8 += k.spec.kind == "gemm" && k.spec.dtype == models::Dtype::fp8;
  EXPECT_EQ(fp8, 7 * 3);   // wq wk wv wo w1 w3 w2: forward, data and weight gradients
  // Forward casts: the four distinct inputs (wq/wk/wv's, wo's, w1/w3's, w2's) and the seven
  // weights, each an amax then a cast.
  EXPECT_EQ(count_kernels(b.forward, "input_amax"), 4);
  EXPECT_EQ(count_kernels(b.forward, "weight_amax"), 7);
  EXPECT_EQ(count_kernels(b.forward, "_to_float8"), 4 + 7);
  // Backward: every output gradient (both layouts in one cast), the weights and inputs again.
  EXPECT_EQ(count_kernels(b.backward, "grad_output_to_float8"), 7);
  EXPECT_EQ(count_kernels(b.backward, "weight_t_to_float8"), 7);
  EXPECT_EQ(count_kernels(b.backward, "input_t_to_float8"), 4);
  // Rowwise: one kernel per cast, no separate amax.
  t.float8 = transformer::Float8::rowwise;
  const transformer::Block rowwise = transformer::layer_block(llama8b(), t, Checkpointing::none, false);
  EXPECT_EQ(count_kernels(rowwise.forward, "_amax"), 0);
  EXPECT_EQ(count_kernels(rowwise.backward, "grad_output_to_float8") + count_kernels(rowwise.backward, "grad_output_to_float8_t"), 14);
}

TEST(Float8, FsdpGathersTheLinearWeightsInFp8) {
  testing::Llama8b job(2048, 1);
  const Trace bf16 = job.load({"training.compile=true", "training.float8=tensorwise"});
  const Trace fp8 = job.load({"training.compile=true", "training.float8=tensorwise", "training.float8_all_gather=true"});
  const int fsdp = testing::group_named(fp8, "fsdp");
  const double linears = 2 * 4096.0 * 4096 + 2 * 4096.0 * 1024 + 3 * 4096.0 * 14336, norms = 2 * 4096.0;
  // A block's all-gather: 1 B per linear weight, 2 B per norm weight; forward and backward but
  // the last block's backward (kept unsharded).
  EXPECT_EQ(testing::count(fp8, 0, fsdp, models::CollectiveOp::allgather, linears + 2 * norms), 2 * 32 - 1);
  EXPECT_EQ(testing::count(bf16, 0, fsdp, models::CollectiveOp::allgather, 2 * (linears + norms)), 2 * 32 - 1);
  // The precomputed scales: one all-reduce of the 7 x 32 weights' amaxes.
  EXPECT_EQ(testing::count(fp8, 0, fsdp, models::CollectiveOp::allreduce, 7 * 32 * 4), 1);
}

TEST(Float8, AsyncTpChunksTheFp8AllGathersToo) {
  // tp = 2 with sequence parallelism: each block's two column groups all-gather fp8 shards
  // (1 B per element of the 2048 x 4096 activation), async TP splits each into 2 chunks.
  testing::Llama8b job(2048, 1);
  const Trace t = job.load({"parallelism.tp=2", "training.compile=true", "training.float8=tensorwise",
                            "tensor_parallel.async=true"});
  const int tp = testing::group_named(t, "tp");
  const double fp8_activation = 2048.0 * 4096;
  EXPECT_EQ(testing::count(t, 0, tp, models::CollectiveOp::allgather, fp8_activation / 2), 2 * 2 * 32);
  EXPECT_EQ(testing::count(t, 0, tp, models::CollectiveOp::allgather, fp8_activation), 0);
}

TEST(Float8, RefusedWhereTheGpuHasNoFp8Units) {
  testing::PresetJob a100{"llama3-8b", {"training.compile=true"}, "dgx-a100"};
  EXPECT_EQ(a100.error({}), "no error");
  EXPECT_NE(a100.error({"training.float8=tensorwise"}).find("FP8 tensor cores"), std::string::npos);
  testing::PresetJob v100{"llama3-8b", {}, "dgx1-v100"};
  EXPECT_NE(v100.error({}).find("training.param_dtype"), std::string::npos);
  EXPECT_EQ(v100.error({"training.param_dtype=fp16"}), "no error");
}

TEST(Compile, RefusesWhatIsNotModelled) {
  testing::Llama8b job(2048, 1);
  EXPECT_NE(job.error({"parallelism.tp=2", "tensor_parallel.async=true"}).find("training.compile"), std::string::npos);
  EXPECT_NE(job.error({"training.float8=tensorwise"}).find("training.float8"), std::string::npos);
  EXPECT_NE(job.error({"training.compile=true", "training.float8=tensorwise", "training.param_dtype=fp16"})
                .find("training.float8"),
            std::string::npos);
  EXPECT_NE(job.error({"training.compile=true", "training.float8=rowwise", "training.float8_all_gather=true"})
                .find("training.float8_all_gather"),
            std::string::npos);
  testing::PresetJob mixtral{"mixtral-8x7b", {}};
  EXPECT_NE(mixtral.error({"training.compile=true"}, 2).find("training.compile"), std::string::npos);
  testing::PresetJob megatron{"gpt3-175b-megatron", {"parallelism.tp=1", "parallelism.pp=1"}};
  EXPECT_NE(megatron.error({"training.compile=true"}).find("training.compile"), std::string::npos);
}

}  // namespace
}  // namespace stepsim::workloads
