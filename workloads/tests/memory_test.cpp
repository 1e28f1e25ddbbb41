// The memory model (issue 21; workloads/generators/transformer_memory.cpp, dlrm_memory.cpp,
// models/memory/): hand-counted saved bytes of a Llama-3-8B block under each checkpointing
// policy, the state terms as each framework shards them, the order of the policies and of the
// pipeline schedules, and the reports the generators attach to their traces.
#include <gtest/gtest.h>

#include "workloads/generators/transformer.hpp"
#include "workloads/generators/transformer_memory.hpp"
#include "workloads/tests/parallel_layouts.hpp"

namespace stepsim::workloads {
namespace {

using models::MemoryTerm;
using transformer::Checkpointing;
using transformer::IterationLayout;

// Llama 3.1 8B (the llama3-8b preset): 32 layers, hidden 4096, 32 heads, 8 KV heads, FFN 14336.
IterationLayout llama8b(Checkpointing checkpointing) {
  IterationLayout l;
  l.model.layers = 32;
  l.model.hidden = 4096;
  l.model.heads = 32;
  l.model.kv_heads = 8;
  l.model.ffn_hidden = 14336;
  l.model.vocab = 128256;
  l.training.micro_batch = 2;
  l.training.sequence = 8192;
  l.checkpointing = checkpointing;
  l.chunk_first = {0, 32};
  return l;
}

constexpr double kTokens = 2 * 8192;

// Counted by hand from torchtitan's eager block (bytes per token, bf16 activations, h 4096,
// q 4096, kv 1024, f 14336, 32 heads): each RMSNorm keeps x.float() (4h), the rsqrt (4) and the
// bf16 normalised values (2h), and its output feeds the linears (2h): 2 x 8h + 8 = 65,544; RoPE's
// fp32 copies of q and k 4 (q + kv) = 20,480; SDPA's q and the repeated k and v 3 x 2q = 24,576,
// its output 2q = 8,192 and logsumexp 4 x 32 = 128; the MLP's w1, w3, silu and product outputs
// 4 x 2f = 114,688. Total 233,608.
constexpr double kEagerBlock = 233608;
// torchtitan's op-level selective policy keeps the block input (2h), wq's output (2q), wv's (2kv),
// SDPA's output and logsumexp, w1's output (2f) and w2's (2h): 8,192 + 8,192 + 2,048 + 8,192 + 128 +
// 28,672 + 8,192 = 63,616.
constexpr double kSelectiveBlock = 63616;
// Of the eager set, SDPA's output, logsumexp and w1's output are also on the selective list.
constexpr double kBoth = 8192 + 128 + 28672;

TEST(Memory, LlamaBlockSavesWhatTorchtitanSaves) {
  const auto none = transformer::block_memory(llama8b(Checkpointing::none));
  EXPECT_NEAR(none.saved, kEagerBlock * kTokens, 1e-9 * none.saved);
  EXPECT_EQ(none.recompute, 0);
  const auto selective = transformer::block_memory(llama8b(Checkpointing::selective));
  EXPECT_NEAR(selective.saved, kSelectiveBlock * kTokens, 1e-9 * selective.saved);
  EXPECT_NEAR(selective.recompute, (kEagerBlock - kBoth) * kTokens, 1e-9 * selective.recompute);
  const auto full = transformer::block_memory(llama8b(Checkpointing::full));
  EXPECT_NEAR(full.saved, 2 * 4096 * kTokens, 1e-9 * full.saved);
  EXPECT_NEAR(full.recompute, kEagerBlock * kTokens, 1e-9 * full.recompute);
}

// Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models",
// section 4.1) count a GPT layer's activations as s b h (34 + 5 a s / h) bytes in 16-bit: flash
// attention (Transformer Engine) keeps none of the a s^2 terms, and without dropout the two
// 1-byte masks of s b h go too, leaving 32 s b h, plus the statistics of the two LayerNorms
// (fp32 mean and rstd, 16 bytes per token) and flash attention's fp32 logsumexp (4 per head).
TEST(Memory, MegatronGptLayerMatchesKorthikantiWithoutDropoutMasks) {
  IterationLayout l;
  l.model.layers = 96;
  l.model.hidden = 12288;
  l.model.heads = 96;
  l.model.kv_heads = 96;
  l.model.ffn_hidden = 4 * 12288;
  l.model.vocab = 50257;
  l.model.activation = transformer::Activation::gelu;
  l.model.norm = transformer::Norm::layernorm;
  l.model.bias = true;
  l.training.micro_batch = 1;
  l.training.sequence = 2048;
  l.megatron = true;
  l.checkpointing = Checkpointing::none;
  const double tokens = 2048;
  EXPECT_NEAR(transformer::block_memory(l).saved, tokens * (32.0 * 12288 + 16 + 4 * 96), 1e-9 * tokens * 32 * 12288);
  // Korthikanti's sequence and tensor parallelism divide all of it by t.
  l.tp.tp = 8;
  EXPECT_NEAR(transformer::block_memory(l).saved, tokens * (32.0 * 12288 + 16 + 4 * 96) / 8, 1e-9 * tokens * 4 * 12288);
}

TEST(Memory, SequenceParallelismAndContextParallelismSplitTheBlockInput) {
  IterationLayout l = llama8b(Checkpointing::full);
  const double whole = transformer::block_memory(l).saved;
  l.tp.tp = 4;
  EXPECT_NEAR(transformer::block_memory(l).saved, whole / 4, 1e-9 * whole);
  l.tp.sequence_parallel = false;
  EXPECT_NEAR(transformer::block_memory(l).saved, whole, 1e-9 * whole);
  l.tp.tp = 1;
  l.cp.cp = 2;
  EXPECT_NEAR(transformer::block_memory(l).saved, whole / 2, 1e-9 * whole);
}

models::MemoryReport report(const IterationLayout& l, int ranks) {
  platforms::GpuModel gpu;
  gpu.memory = 80.0 * (1 << 30);
  gpu.arch = platforms::GpuArch::hopper;
  std::vector<int> stage_of_rank(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) stage_of_rank[static_cast<std::size_t>(r)] = r * l.pp / ranks;
  return transformer::transformer_memory(l, stage_of_rank, gpu, 1);
}

TEST(Memory, FsdpShardsEveryStateAndMegatronShardsTheOptimizer) {
  IterationLayout l = llama8b(Checkpointing::selective);
  const double params = transformer::total_params(l.model, l.training);
  l.shard = 8;
  const auto fsdp = report(l, 8).worst().at_peak;
  EXPECT_NEAR(fsdp[MemoryTerm::parameters], 4 * params / 8, 1e-6);  // fp32 shards
  EXPECT_NEAR(fsdp[MemoryTerm::optimizer], 8 * params / 8, 1e-6);   // AdamW's two fp32 states
  l.megatron = true;
  l.sharding = transformer::StateSharding::megatron_distributed;
  const auto megatron = report(l, 8).worst().at_peak;
  // Megatron-LM's guide: 6 + 12 / d bytes per parameter (bf16 weights, fp32 main gradients).
  EXPECT_NEAR(megatron[MemoryTerm::parameters], 2 * params, 1e-6);
  EXPECT_NEAR(megatron[MemoryTerm::gradients], 4 * params, 1e-6);
  EXPECT_NEAR(megatron[MemoryTerm::optimizer], 12 * params / 8, 1e-6);
  l.sharding = transformer::StateSharding::megatron;
  EXPECT_NEAR(report(l, 8).worst().at_peak[MemoryTerm::optimizer], 12 * params, 1e-6);
}

TEST(Memory, PeakFallsWithCheckpointingAndShardingAndGrowsWithTheBatch) {
  const auto allocated = [](IterationLayout l) { return report(l, l.shard).worst().allocated; };
  IterationLayout none = llama8b(Checkpointing::none), selective = llama8b(Checkpointing::selective),
                  full = llama8b(Checkpointing::full);
  for (IterationLayout* l : {&none, &selective, &full}) l->shard = 8;
  EXPECT_GT(allocated(none), allocated(selective));
  EXPECT_GT(allocated(selective), allocated(full));
  IterationLayout more = selective;
  more.shard = 64;
  EXPECT_LT(allocated(more), allocated(selective));
  IterationLayout bigger = selective;
  bigger.training.micro_batch = 3;
  EXPECT_GT(allocated(bigger), allocated(selective));
  // The report's terms add up to its peak, and the reserve only adds.
  const models::RankMemory r = report(selective, 8).worst();
  EXPECT_NEAR(r.at_peak.total(), r.peak, 1e-6 * r.peak);
  EXPECT_GE(r.reserved, r.allocated);
  EXPECT_GT(r.peak, r.required());
}

TEST(Memory, OneFOneBHoldsFewerMicroBatchesThanGPipe) {
  IterationLayout l = llama8b(Checkpointing::full);
  l.pp = 4;
  l.shard = 2;
  l.training.micro_batch = 1;
  l.training.gradient_accumulation = 8;
  l.chunk_first = transformer::chunk_first_layers(32, 4);
  l.pipeline.schedule = PipelineSchedule::one_f_one_b;
  const models::MemoryReport one = report(l, 8);
  l.pipeline.schedule = PipelineSchedule::gpipe;
  const models::MemoryReport gpipe = report(l, 8);
  ASSERT_EQ(one.groups.size(), 4u);
  // Stage 0 of 1F1B holds pp = 4 micro-batches of activations, GPipe's all 8.
  EXPECT_GT(gpipe.groups[0].at_peak[MemoryTerm::activations], one.groups[0].at_peak[MemoryTerm::activations]);
  // 1F1B's first stage keeps more in flight than a middle one.
  EXPECT_GT(one.groups[0].at_peak[MemoryTerm::activations], one.groups[2].at_peak[MemoryTerm::activations]);
}

TEST(Memory, GeneratorsAttachAReportPerStage) {
  testing::PresetJob job("llama3-405b-3d", {});
  const Trace trace = job.load({}, 64);
  ASSERT_TRUE(trace.memory.has_value());
  EXPECT_EQ(trace.memory->groups.size(), 8u);  // pp 8
  EXPECT_EQ(trace.memory->group_of_rank.size(), 512u);
  EXPECT_TRUE(trace.memory->fits());
  testing::PresetJob dlrm("dlrm-criteo-1tb", {}, "dgx-a100");
  const Trace d = dlrm.load({});
  ASSERT_TRUE(d.memory.has_value());
  for (const models::RankMemory& g : d.memory->groups) EXPECT_GT(g.at_peak[MemoryTerm::parameters], 0);
}

}  // namespace
}  // namespace stepsim::workloads
