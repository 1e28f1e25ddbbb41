// The fsdp and ddp generators on the shipped presets: parameter counts against the published
// model sizes, collective counts and sizes per strategy, HSDP subgroups, GEMM FLOPs against
// 6 x parameters x tokens (plus what checkpointing recomputes), stream order, DDP buckets, and
// the bad-input catalogue.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "platforms/config_error.hpp"
#include "platforms/loader.hpp"
#include "workloads/workload.hpp"

namespace stepsim::workloads {
namespace {

using models::CollectiveOp;

// Llama 3.1 8B block: q and o 4096 x 4096, k and v 4096 x 1024, three 4096 x 14336 MLP matrices,
// two RMSNorm weights.
constexpr double kLlama8bBlock = 2 * 4096.0 * 4096 + 2 * 4096.0 * 1024 + 3 * 4096.0 * 14336 + 2 * 4096;
constexpr double kLlama8bEmbedding = 128256.0 * 4096;
constexpr double kLlama8bTotal = 32 * kLlama8bBlock + 2 * kLlama8bEmbedding + 4096;

class FsdpTest : public ::testing::Test {
 protected:
  Trace load(const std::string& preset, const std::vector<std::string>& overrides = {}, int nodes = 1) {
    platforms::PlatformOptions options;
    options.nodes = nodes;
    platforms_.push_back(std::make_unique<platforms::Platform>(platforms::load_platform("dgx-h100", options)));
    allocations_.push_back(platforms::parse_allocation("", *platforms_.back()));
    return load_workload(preset, JobContext{*platforms_.back(), allocations_.back()}, overrides);
  }

  Trace parse(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
    platforms_.push_back(std::make_unique<platforms::Platform>(platforms::load_platform("dgx-h100")));
    allocations_.push_back(platforms::parse_allocation("", *platforms_.back()));
    return parse_workload(yaml, "test.yaml", JobContext{*platforms_.back(), allocations_.back()}, overrides);
  }

  std::vector<std::unique_ptr<platforms::Platform>> platforms_;
  std::vector<platforms::Allocation> allocations_;
};

// The collectives rank 0 issues, in order.
std::vector<const CollectiveCall*> collectives(const Trace& trace, CollectiveOp op) {
  std::vector<const CollectiveCall*> out;
  for (const Op& o : trace.program(0).ops)
    if (o.kind == OpKind::collective && trace.collectives[o.collective].op == op) out.push_back(&trace.collectives[o.collective]);
  return out;
}

const Op* find_op(const Trace& trace, const std::string& name) {
  for (const Op& o : trace.program(0).ops)
    if (o.name >= 0 && trace.names[o.name] == name) return &o;
  return nullptr;
}

double gemm_flops(const Trace& trace) {
  double flops = 0;
  for (const Op& o : trace.program(0).ops) {
    if (o.kind != OpKind::kernel || trace.kernels[o.kernel].kind != "gemm") continue;
    const models::KernelSpec& k = trace.kernels[o.kernel];
    flops += 2 * k.param("m") * k.param("n") * k.param("k") * k.param("batch");
  }
  return flops;
}

bool has_note(const Trace& trace, const std::string& text) {
  for (const std::string& note : trace.notes)
    if (note.find(text) != std::string::npos) return true;
  return false;
}

TEST_F(FsdpTest, PresetParameterCountsMatchThePublishedSizes) {
  // Every unit is all-gathered once in forward, in param_dtype (2 bytes): the first 1 + layers
  // all-gathers hold the whole model.
  const std::map<std::string, std::pair<int, double>> presets = {
      {"llama3-8b", {32, 8.03e9}}, {"llama3-70b", {80, 70.6e9}}, {"llama3-405b", {126, 405.9e9}}, {"gpt3-175b", {96, 175e9}}};
  for (const auto& [preset, expected] : presets) {
    const Trace trace = load(preset);
    const auto gathers = collectives(trace, CollectiveOp::allgather);
    ASSERT_GT(gathers.size(), static_cast<std::size_t>(expected.first)) << preset;
    double params = 0;
    for (int u = 0; u <= expected.first; ++u) params += gathers[static_cast<std::size_t>(u)]->bytes / 2;
    EXPECT_NEAR(params / expected.second, 1.0, 0.005) << preset << ": " << params;
  }
  const Trace llama = load("llama3-8b");
  const auto gathers = collectives(llama, CollectiveOp::allgather);
  double params = 0;
  for (int u = 0; u <= 32; ++u) params += gathers[static_cast<std::size_t>(u)]->bytes / 2;
  EXPECT_DOUBLE_EQ(params, kLlama8bTotal);
}

TEST_F(FsdpTest, AllGatherOfABlockIsItsParametersInBf16AndReduceScatterInFp32) {
  const Trace trace = load("llama3-8b");
  const Op* gather = find_op(trace, "layers.3.all_gather");
  const Op* reduce = find_op(trace, "layers.3.reduce_scatter");
  ASSERT_TRUE(gather && reduce);
  EXPECT_DOUBLE_EQ(trace.collectives[gather->collective].bytes, kLlama8bBlock * 2);
  EXPECT_DOUBLE_EQ(trace.collectives[reduce->collective].bytes, kLlama8bBlock * 4);
  EXPECT_DOUBLE_EQ(trace.collectives[find_op(trace, "root.all_gather")->collective].bytes,
                   (2 * kLlama8bEmbedding + 4096) * 2);
  EXPECT_TRUE(has_note(trace, "model FLOPs per rank per iteration"));
}

TEST_F(FsdpTest, CollectivesPerIterationFollowTheStrategy) {
  // FULL_SHARD: every block gathered before forward and again before backward, except the last
  // block and the root (kept unsharded, as torchtitan and FSDP2 do); one reduce-scatter per unit;
  // one all-reduce of the gradient norm.
  const Trace full = load("llama3-8b");
  EXPECT_EQ(collectives(full, CollectiveOp::allgather).size(), 1u + 32 + 31);
  EXPECT_EQ(collectives(full, CollectiveOp::reduce_scatter).size(), 33u);
  EXPECT_EQ(collectives(full, CollectiveOp::allreduce).size(), 1u);
  EXPECT_EQ(collectives(full, CollectiveOp::allreduce).front()->bytes, 4);

  const Trace zero2 = load("llama3-8b", {"fsdp.strategy=SHARD_GRAD_OP"});
  EXPECT_EQ(collectives(zero2, CollectiveOp::allgather).size(), 33u);
  EXPECT_EQ(collectives(zero2, CollectiveOp::reduce_scatter).size(), 33u);

  const Trace none = load("llama3-8b", {"fsdp.strategy=NO_SHARD"});
  EXPECT_EQ(collectives(none, CollectiveOp::allgather).size(), 0u);
  EXPECT_EQ(collectives(none, CollectiveOp::reduce_scatter).size(), 0u);
  const auto reduces = collectives(none, CollectiveOp::allreduce);
  ASSERT_EQ(reduces.size(), 33u);
  EXPECT_DOUBLE_EQ(reduces.front()->bytes, kLlama8bBlock * 4);

  const Trace whole = load("llama3-8b", {"fsdp.wrap=model"});
  EXPECT_EQ(collectives(whole, CollectiveOp::allgather).size(), 1u);
  EXPECT_EQ(collectives(whole, CollectiveOp::reduce_scatter).size(), 1u);
  EXPECT_DOUBLE_EQ(collectives(whole, CollectiveOp::reduce_scatter).front()->bytes, kLlama8bTotal * 4);

  const Trace accumulate = load("llama3-8b", {"training.gradient_accumulation=2"});
  EXPECT_EQ(collectives(accumulate, CollectiveOp::allgather).size(), 2u * 64);
  EXPECT_EQ(collectives(accumulate, CollectiveOp::reduce_scatter).size(), 2u * 33);
}

TEST_F(FsdpTest, HybridShardOnTwoNodesShardsWithinNodesAndReplicatesAcross) {
  const Trace trace = load("llama3-8b", {"fsdp.strategy=HYBRID_SHARD"}, 2);
  ASSERT_EQ(trace.ranks, 16);
  EXPECT_EQ(trace.programs.size(), 1u);
  EXPECT_EQ(trace.program_of_rank, std::vector<int>(16, 0));
  const auto gathers = collectives(trace, CollectiveOp::allgather);
  const auto scatters = collectives(trace, CollectiveOp::reduce_scatter);
  const auto reduces = collectives(trace, CollectiveOp::allreduce);
  EXPECT_EQ(gathers.size(), 64u);
  EXPECT_EQ(scatters.size(), 33u);
  ASSERT_EQ(reduces.size(), 33u + 1);   // one per unit on the replicate groups, one gradient norm
  const ProcessGroup& shard = trace.groups[gathers.front()->group];
  ASSERT_EQ(shard.subgroups.size(), 2u);
  EXPECT_EQ(shard.subgroups[0], (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(shard.subgroups[1], (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(trace.groups[scatters.front()->group].name, shard.name);
  const ProcessGroup& replicate = trace.groups[reduces.front()->group];
  ASSERT_EQ(replicate.subgroups.size(), 8u);
  for (int local = 0; local < 8; ++local) EXPECT_EQ(replicate.subgroups[local], (std::vector<int>{local, local + 8}));
  // The all-reduce moves a node's shard of the block's fp32 gradients.
  EXPECT_DOUBLE_EQ(trace.collectives[find_op(trace, "layers.3.all_reduce")->collective].bytes, kLlama8bBlock / 8 * 4);
}

// PyTorch's non-vectorized elementwise kernels (`strided`): in bf16, RMSNorm's and RoPE's
// widening .float(), the broadcast x * rsqrt and * weight, repeat_kv's copy and the logits'
// .float(); of the backward kernels only the narrowing type_as's (a widening cast of the
// gradient). With fp32 parameters .float() is a plain copy.
TEST_F(FsdpTest, NonVectorizedElementwiseKernelsAreStrided) {
  const auto strided = [](const Trace& trace, const std::string& name) {
    const Op* op = find_op(trace, name);
    EXPECT_NE(op, nullptr) << name;
    return op ? trace.kernels[op->kernel].param("strided") : -1.0;
  };
  const Trace bf16 = load("llama3-8b");
  for (const char* name : {"layers.0.attention_norm.float", "layers.0.attention_norm.mul_rsqrt",
                           "layers.0.attention_norm.mul_weight", "layers.0.attention.rope_q.float",
                           "layers.0.attention.repeat_kv_k", "loss.float", "layers.0.attention_norm.type_as.backward",
                           "layers.0.attention.rope_q.type_as.backward"})
    EXPECT_EQ(strided(bf16, name), 1) << name;
  for (const char* name : {"layers.0.attention_norm.type_as", "layers.0.attention_norm.pow",
                           "layers.0.attention.rope_q.mul", "layers.0.attention_norm.float.backward",
                           "layers.0.attention_norm.mul_weight.backward", "loss.float.backward"})
    EXPECT_EQ(strided(bf16, name), 0) << name;
  // FSDP2's copy of the bf16 gradients into the fp32 reduce-scatter buffer widens them too.
  EXPECT_EQ(strided(bf16, "layers.0.reduce.copy_in"), 1);
  const Trace fp32 = load("llama3-8b", {"training.param_dtype=fp32", "training.reduce_dtype=fp32"});
  EXPECT_EQ(strided(fp32, "layers.0.reduce.copy_in"), 0);
  EXPECT_EQ(strided(fp32, "layers.0.attention_norm.float"), 0);
  EXPECT_EQ(strided(fp32, "layers.0.attention_norm.type_as.backward"), 0);
  EXPECT_EQ(strided(fp32, "layers.0.attention_norm.mul_rsqrt"), 1);
}

// Weight gradients of broadcast parameters are sums over the tokens (PyTorch's reduce_kernel):
// RMSNorm's weight right after its product's backward, and each biased linear's bias.
TEST_F(FsdpTest, BroadcastWeightGradientsAreTokenSums) {
  const auto reduction = [](const Trace& trace, const std::string& name) {
    const Op* op = find_op(trace, name);
    if (op == nullptr) return std::string("missing");
    const models::KernelSpec& k = trace.kernels[op->kernel];
    return k.kind + " " + std::to_string(int(k.param("rows"))) + "x" + std::to_string(int(k.param("cols")));
  };
  EXPECT_EQ(reduction(load("llama3-8b"), "layers.0.attention_norm.weight_grad"), "column_sum 16384x4096");
  EXPECT_EQ(reduction(load("llama3-8b"), "layers.0.attention.wq.bias_grad"), "missing");
  const Trace gpt = load("gpt2-xl");
  EXPECT_EQ(find_op(gpt, "layers.0.attention_norm.weight_grad"), nullptr);  // LayerNorm: its own kernels
  EXPECT_EQ(reduction(gpt, "layers.0.attention.wq.bias_grad"), "column_sum 4096x1600");  // 4 x 1024 tokens
}

// The optimizer step and clip_grad_norm_'s passes are multi_tensor_apply kernels; the blocks'
// elementwise ops are not.
TEST_F(FsdpTest, OptimizerAndClippingAreMultiTensorKernels) {
  const Trace t = load("llama3-8b");
  for (const char* name : {"optimizer.adamw", "clip_grad_norm.norm", "clip_grad_norm.scale"}) {
    const Op* op = find_op(t, name);
    ASSERT_NE(op, nullptr) << name;
    EXPECT_EQ(t.kernels[op->kernel].param("multi_tensor"), 1) << name;
  }
  EXPECT_EQ(t.kernels[find_op(t, "layers.0.attention_norm.pow")->kernel].param("multi_tensor"), 0);
}

// A vocabulary row of fp32 logits exceeds the 48 KiB PyTorch's softmax kernels stage in shared
// memory, so log_softmax reads it three times forward and the gradient twice and the output once
// backward; a row that fits (8192 x 4 B = 32 KiB) is read once each way.
TEST_F(FsdpTest, LogSoftmaxRereadsRowsThatMissSharedMemory) {
  const auto read = [](const Trace& t, const std::string& name) {
    return t.kernels[find_op(t, name)->kernel].param("bytes_read");
  };
  const Trace large = load("llama3-8b");
  EXPECT_EQ(read(large, "loss.log_softmax"), 12);
  EXPECT_EQ(read(large, "loss.log_softmax.backward"), 12);
  const Trace small = load("llama3-8b", {"model.vocab=8192"});
  EXPECT_EQ(read(small, "loss.log_softmax"), 4);
  EXPECT_EQ(read(small, "loss.log_softmax.backward"), 8);
}

TEST_F(FsdpTest, GemmFlopsAreSixTimesParametersTimesTokensPlusRecomputation) {
  // 6 N T over the GEMM weights (every linear of the blocks and the output projection); N is the
  // parameter count without the token embedding, less the norm weights (0.004 % of it).
  const double tokens = 2 * 8192;
  const double gemm_params = kLlama8bTotal - 2 * 32 * 4096 - 4096 - kLlama8bEmbedding;
  const double nonembedding = kLlama8bTotal - kLlama8bEmbedding;
  const Trace none = load("llama3-8b", {"fsdp.activation_checkpointing=none"});
  EXPECT_NEAR(gemm_flops(none) / (6 * nonembedding * tokens), 1.0, 1e-4);
  EXPECT_DOUBLE_EQ(gemm_flops(none), 6 * gemm_params * tokens);
  // torchtitan's selective op policy recomputes every second mm of a block: wk, wo, w3.
  const double recomputed = 4096.0 * 1024 + 4096.0 * 4096 + 4096.0 * 14336;
  EXPECT_DOUBLE_EQ(gemm_flops(load("llama3-8b")), 6 * gemm_params * tokens + 32 * 2 * recomputed * tokens);
  // Full checkpointing reruns each block's forward.
  const double block_gemm = kLlama8bBlock - 2 * 4096;
  EXPECT_DOUBLE_EQ(gemm_flops(load("llama3-8b", {"fsdp.activation_checkpointing=full"})),
                   6 * gemm_params * tokens + 32 * 2 * block_gemm * tokens);
  // The note carries torchtitan's model FLOPs: (6 N + 12 L H d S) per token.
  const Trace trace = load("llama3-8b");
  const double model_flops = (6 * nonembedding + 12.0 * 32 * 32 * 128 * 8192) * tokens;
  char expected[64];
  std::snprintf(expected, sizeof expected, "= %.4g", model_flops);
  EXPECT_TRUE(has_note(trace, expected)) << expected;
}

TEST_F(FsdpTest, ComputeWaitsForEachAllGatherAndReduceScatterWaitsForTheGradients) {
  const Trace trace = load("llama3-8b");
  const Program& program = trace.program(0);
  const int compute = 0;
  ASSERT_EQ(program.streams[compute], "compute");
  for (int layer = 0; layer < 32; ++layer) {
    const std::string prefix = "layers." + std::to_string(layer) + ".";
    int waited = -1, first_kernel = -1;
    for (int i = 0; i < static_cast<int>(program.ops.size()) && first_kernel < 0; ++i) {
      const Op& op = program.ops[i];
      if (op.kind == OpKind::wait && op.stream == compute && program.events[op.event] == prefix + "all_gather") waited = i;
      if (op.kind == OpKind::kernel && trace.names[op.name] == prefix + "attention_norm.float") first_kernel = i;
    }
    EXPECT_GE(waited, 0) << layer;
    EXPECT_LT(waited, first_kernel) << layer;
  }
  // Each reduce-scatter is preceded on its stream by a wait on the gradients being ready.
  for (std::size_t i = 0; i < program.ops.size(); ++i) {
    const Op& op = program.ops[i];
    if (op.kind != OpKind::collective || trace.collectives[op.collective].op != CollectiveOp::reduce_scatter) continue;
    std::size_t j = i;
    while (j > 0 && (program.ops[j - 1].stream != op.stream || program.ops[j - 1].kind == OpKind::cpu)) --j;
    ASSERT_GT(j, 0u);
    EXPECT_EQ(program.ops[j - 1].kind, OpKind::wait) << trace.names[op.name];
  }
}

// One NCCL stream per process group runs its collectives in issue order: BACKWARD_PRE issues
// block i-1's all-gather ahead of block i's reduce-scatter, NONE behind it.
TEST_F(FsdpTest, BackwardPrefetchOrdersTheAllGatherAheadOfTheReduceScatter) {
  auto order = [](const Trace& trace) {
    std::vector<std::string> names;
    const Program& program = trace.program(0);
    for (const Op& op : program.ops)
      if (op.kind == OpKind::collective) {
        EXPECT_EQ(program.streams[op.stream], "fsdp.nccl");
        names.push_back(trace.names[op.name]);
      }
    const auto at = [&](const std::string& name) { return std::find(names.begin(), names.end(), name) - names.begin(); };
    const auto gather = std::find(names.rbegin(), names.rend(), "layers.10.all_gather");   // the backward one
    return (names.rend() - gather - 1) < at("layers.11.reduce_scatter");
  };
  EXPECT_TRUE(order(load("llama3-8b")));
  EXPECT_FALSE(order(load("llama3-8b", {"fsdp.backward_prefetch=NONE"})));
}

TEST_F(FsdpTest, LimitAllGathersBlocksTheCpu) {
  const Trace fsdp2 = load("llama3-8b");
  const Trace fsdp1 = load("llama3-8b", {"fsdp.limit_all_gathers=true"});
  auto syncs = [](const Trace& t) {
    int n = 0;
    for (const Op& op : t.program(0).ops) n += op.kind == OpKind::sync;
    return n;
  };
  EXPECT_EQ(syncs(fsdp2), 0);
  EXPECT_GT(syncs(fsdp1), 30);
}

const char* const kDdp = R"(version: 1
kind: ddp
model: {layers: 4, hidden: 1024, heads: 16, kv_heads: 4, ffn_hidden: 4096, vocab: 32000}
training: {micro_batch: 2, sequence: 2048}
ddp: {bucket_cap_mb: 25}
)";

TEST_F(FsdpTest, DdpAllReducesEveryGradientInBucketsDuringBackward) {
  const Trace trace = parse(kDdp);
  const double block = 2 * 1024.0 * 1024 + 2 * 1024.0 * 256 + 3 * 1024.0 * 4096 + 2 * 1024;
  const double total = 4 * block + 2 * 32000.0 * 1024 + 1024;
  const auto buckets = collectives(trace, CollectiveOp::allreduce);
  ASSERT_GE(buckets.size(), 3u);
  double bytes = 0;
  for (const CollectiveCall* call : buckets) bytes += call->bytes;
  EXPECT_DOUBLE_EQ(bytes, total * 4);
  // The first bucket closes at 1 MiB, the others at 25 MiB (a bucket may overshoot by its last
  // tensor); the output projection alone is 125 MiB.
  EXPECT_GE(buckets.front()->bytes, 1024.0 * 1024);
  for (std::size_t b = 1; b + 1 < buckets.size(); ++b) EXPECT_GE(buckets[b]->bytes, 25.0 * 1024 * 1024);
  // Overlap: the first all-reduce is issued before the last block's backward ends.
  const Program& program = trace.program(0);
  std::size_t first_reduce = 0, last_backward = 0;
  for (std::size_t i = 0; i < program.ops.size(); ++i) {
    const Op& op = program.ops[i];
    if (op.kind == OpKind::collective && !first_reduce) first_reduce = i;
    if (op.kind == OpKind::kernel && trace.names[op.name] == "layers.0.attention.wq.wgrad") last_backward = i;
  }
  EXPECT_LT(first_reduce, last_backward);
  EXPECT_EQ(program.streams, (std::vector<std::string>{"compute", "all_reduce"}));
  // GEMMs: 6 x GEMM weights x tokens, the output projection included.
  EXPECT_DOUBLE_EQ(gemm_flops(trace), 6 * (4 * (block - 2 * 1024) + 32000.0 * 1024) * 2 * 2048);
  // Gradient accumulation under no_sync: only the last micro-batch all-reduces.
  const Trace accumulate = parse(kDdp, {"training.gradient_accumulation=3"});
  EXPECT_EQ(collectives(accumulate, CollectiveOp::allreduce).size(), buckets.size());
  EXPECT_DOUBLE_EQ(gemm_flops(accumulate), 3 * gemm_flops(trace));
}

TEST_F(FsdpTest, DdpGptStyleModelReducesEachParameterOnce) {
  // LayerNorm, GELU MLP, biases, learned positions and a tied output projection, as GPT-3.
  const Trace trace = parse(R"(version: 1
kind: ddp
model: {layers: 2, hidden: 512, heads: 8, ffn_hidden: 2048, vocab: 1000, activation: gelu, norm: layernorm,
        positions: learned, bias: true, tied_embeddings: true}
training: {micro_batch: 1, sequence: 256}
ddp: {activation_checkpointing: full, gradient_as_bucket_view: true}
)");
  const double block = 4 * (512.0 * 512 + 512) + (512.0 * 2048 + 2048) + (2048.0 * 512 + 512) + 2 * 2 * 512;
  const double total = 2 * block + 1000.0 * 512 + 256.0 * 512 + 2 * 512;
  double bytes = 0;
  for (const CollectiveCall* call : collectives(trace, CollectiveOp::allreduce)) bytes += call->bytes;
  EXPECT_DOUBLE_EQ(bytes, total * 4);
  // The tied output projection still runs its GEMMs; full checkpointing reruns each block's GEMMs.
  const double block_gemm = 4 * 512.0 * 512 + 2 * 512.0 * 2048;
  EXPECT_DOUBLE_EQ(gemm_flops(trace), (6 * (2 * block_gemm + 1000.0 * 512) + 2 * 2 * block_gemm) * 256);
  EXPECT_EQ(find_op(trace, "bucket.0.copy_to_grad"), nullptr);
}

// Every bad input names the file, the key path, the line and a fix.
void expect_error(const std::function<void()>& run, const std::vector<std::string>& parts) {
  try {
    run();
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    for (const std::string& part : parts) EXPECT_NE(what.find(part), std::string::npos) << what << "\nmissing: " << part;
    EXPECT_NE(what.find("(fix: "), std::string::npos) << what;
  }
}

const char* const kSmall = R"(version: 1
kind: fsdp
model: {layers: 2, hidden: 1024, heads: 16, kv_heads: 4, ffn_hidden: 4096, vocab: 32000}
training: {micro_batch: 1, sequence: 1024}
fsdp: {strategy: FULL_SHARD}
)";

TEST_F(FsdpTest, BadInputsNameFilePathLineAndFix) {
  EXPECT_NO_THROW(parse(kSmall));
  expect_error([&] { parse(kSmall, {"fsdp.strategy=ZERO3"}); },
               {"test.yaml", "fsdp.strategy", "FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD", "NO_SHARD"});
  expect_error([&] { parse(kSmall, {"model.heads=24"}); }, {"test.yaml", "model.heads", "must divide hidden"});
  expect_error([&] { parse(kSmall, {"model.kv_heads=3"}); }, {"test.yaml", "model.kv_heads", "must divide heads"});
  expect_error([&] { parse(kSmall, {"model.layers=0"}); }, {"test.yaml", "model.layers", ">= 1"});
  expect_error([&] { parse(kSmall, {"fsdp.sharding=FULL_SHARD"}); },
               {"test.yaml", "fsdp.sharding", "unknown key", "strategy", "reshard_after_forward"});
  expect_error([&] { parse(kSmall, {"model.hidden_size=1024"}); }, {"test.yaml", "model.hidden_size", "allowed keys"});
  expect_error([&] { parse(kSmall, {"fsdp.activation_checkpointing=op"}); },
               {"test.yaml", "fsdp.activation_checkpointing", "selective"});
  expect_error([&] { parse(kSmall, {"fsdp.strategy=SHARD_GRAD_OP", "fsdp.reshard_after_forward=true"}); },
               {"test.yaml", "fsdp.reshard_after_forward"});
  // Keys read from the file carry their line.
  const std::string bad_heads = std::string(kSmall).replace(std::string(kSmall).find("heads: 16"), 9, "heads: 24");
  expect_error([&] { parse(bad_heads); }, {"test.yaml: model.heads (line 3)"});
  expect_error([&] { parse(std::string(kSmall) + "optimiser: adamw\n"); }, {"test.yaml", "optimiser", "line 6"});
  expect_error([&] { parse(std::string(kDdp), {"training.reduce_dtype=bf16"}); }, {"training.reduce_dtype", "fp32"});
}

// FSDP2's reduce-scatter writes a new shard tensor, so on one GPU NCCL still copies the
// gradients (an out-of-place one-rank call); its in-place all-gathers leave nothing to do.
TEST_F(FsdpTest, OneGpuKeepsOnlyTheOutOfPlaceReduceScatters) {
  const platforms::Platform platform = platforms::load_platform("dgx-h100");
  const platforms::Allocation one = platforms::parse_allocation("0", platform);
  const Trace t = load_workload("llama3-8b", JobContext{platform, one}, {"model.layers=4"});
  std::vector<models::CollectiveOp> ops;
  for (const Op& o : t.programs[0].ops)
    if (o.kind == OpKind::collective) {
      const CollectiveCall& call = t.collectives[static_cast<std::size_t>(o.collective)];
      ops.push_back(call.op);
      EXPECT_FALSE(call.in_place);
    }
  // One per block and the root's.
  EXPECT_EQ(ops, std::vector<models::CollectiveOp>(5, models::CollectiveOp::reduce_scatter));
  for (const CollectiveCall& call : load("llama3-8b").collectives)
    EXPECT_EQ(call.in_place, call.op != models::CollectiveOp::reduce_scatter) << models::to_string(call.op);
}

TEST_F(FsdpTest, HybridShardNeedsEqualNodes) {
  platforms::PlatformOptions options;
  options.nodes = 2;
  const platforms::Platform platform = platforms::load_platform("dgx-h100", options);
  const platforms::Allocation uneven = platforms::parse_allocation("n0:0-7,n1:0-3", platform);
  expect_error([&] { load_workload("llama3-8b", JobContext{platform, uneven}, {"fsdp.strategy=HYBRID_SHARD"}); },
               {"llama3-8b.yaml", "fsdp.strategy", "same number of GPUs"});
}

}  // namespace
}  // namespace stepsim::workloads
