// The FSDP compression knob (fsdp.collectives, fsdp.compression; docs/fsdp.md) and the trace
// format's compression keys (docs/trace.md): which calls get which codec, the threshold, the
// dtype the codec is given, determinism, and the bad-input catalogue (file, key path, line, fix).
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "platforms/config_error.hpp"
#include "platforms/loader.hpp"
#include "workloads/workload.hpp"

namespace stepsim::workloads {
namespace {

using models::CollectiveOp;

// Two Llama-style blocks of 1024 (15.2e6 parameters, 30.4 MB in bf16) and a 32000 x 1024
// token embedding plus output (65.5e6 parameters) in the root, on 8 GPUs.
const char* const kSmall = R"(version: 1
kind: fsdp
model: {layers: 2, hidden: 1024, heads: 16, kv_heads: 4, ffn_hidden: 4096, vocab: 32000}
training: {micro_batch: 1, sequence: 1024}
fsdp:
  strategy: FULL_SHARD
  collectives: {algo: ring, channels: 1}
  compression: {allgather: "zfp:rate=8", reduce_scatter: "zfp:rate=4"}
)";

class FsdpCompressionTest : public ::testing::Test {
 protected:
  Trace parse(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
    platforms_.push_back(std::make_unique<platforms::Platform>(platforms::load_platform("dgx-h100")));
    allocations_.push_back(platforms::parse_allocation("", *platforms_.back()));
    return parse_workload(yaml, "test.yaml", JobContext{*platforms_.back(), allocations_.back()}, overrides);
  }

  std::vector<std::unique_ptr<platforms::Platform>> platforms_;
  std::vector<platforms::Allocation> allocations_;
};

/// The collectives rank 0 issues of `op`, in order.
std::vector<const CollectiveCall*> calls(const Trace& trace, CollectiveOp op) {
  std::vector<const CollectiveCall*> out;
  for (const Op& o : trace.program(0).ops)
    if (o.kind == OpKind::collective && trace.collectives[o.collective].op == op) out.push_back(&trace.collectives[o.collective]);
  return out;
}

int compressed(const std::vector<const CollectiveCall*>& list) {
  int count = 0;
  for (const CollectiveCall* call : list) count += !call->options.compression.codec.empty();
  return count;
}

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

TEST_F(FsdpCompressionTest, AllGathersAndReduceScattersCarryTheirCodecWithTheirDtype) {
  const Trace trace = parse(kSmall);
  const auto gathers = calls(trace, CollectiveOp::allgather);
  const auto reductions = calls(trace, CollectiveOp::reduce_scatter);
  ASSERT_EQ(gathers.size(), 4u);   // root, two blocks in forward, the first block again in backward
  ASSERT_EQ(reductions.size(), 3u);
  for (const CollectiveCall* call : gathers) {
    EXPECT_EQ(call->algorithm, "ring");
    EXPECT_EQ(call->options.channels, 1);
    // bf16 parameters: the codec is given their dtype (ratio 16 / r, not 32 / r).
    EXPECT_EQ(call->options.compression.codec, "zfp:rate=8,dtype=bf16");
    EXPECT_EQ(call->options.compression.mode, models::CompressionMode::collective);
  }
  for (const CollectiveCall* call : reductions) EXPECT_EQ(call->options.compression.codec, "zfp:rate=4,dtype=fp32");
  // The clipping norm's 4-byte all-reduce runs the same algorithm, raw.
  const auto norms = calls(trace, CollectiveOp::allreduce);
  ASSERT_EQ(norms.size(), 1u);
  EXPECT_EQ(norms[0]->algorithm, "ring");
  EXPECT_TRUE(norms[0]->options.compression.codec.empty());
  bool noted = false;
  for (const std::string& note : trace.notes) noted = noted || note.find("compression (collective mode") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST_F(FsdpCompressionTest, ThresholdLeavesSmallCollectivesRawInCollectiveMode) {
  // Blocks gather 30.4 MB, the root 131 MB: a 64 MiB threshold compresses the root's only.
  const Trace trace = parse(kSmall, {"fsdp.compression.threshold=64MiB"});
  const auto gathers = calls(trace, CollectiveOp::allgather);
  EXPECT_EQ(compressed(gathers), 1);
  EXPECT_GT(gathers[0]->bytes, 64.0 * 1024 * 1024);
  EXPECT_FALSE(gathers[0]->options.compression.codec.empty());
  // p2p: every call carries the codec, the threshold deciding per message.
  const Trace p2p = parse(kSmall, {"fsdp.compression.threshold=64MiB", "fsdp.compression.mode=p2p",
                                   "fsdp.collectives.algo=nccl"});
  const auto p2p_gathers = calls(p2p, CollectiveOp::allgather);
  EXPECT_EQ(compressed(p2p_gathers), static_cast<int>(p2p_gathers.size()));
  EXPECT_EQ(p2p_gathers[0]->options.compression.mode, models::CompressionMode::p2p);
  EXPECT_EQ(p2p_gathers[0]->options.compression.threshold, 64.0 * 1024 * 1024);
  EXPECT_EQ(p2p_gathers[0]->algorithm, "nccl");
}

TEST_F(FsdpCompressionTest, OnlyTheNamedCollectivesAreCompressed) {
  const std::string gathers_only = std::string(kSmall).replace(std::string(kSmall).find(", reduce_scatter: \"zfp:rate=4\""),
                                                               30, "");
  const Trace trace = parse(gathers_only);
  EXPECT_EQ(compressed(calls(trace, CollectiveOp::allgather)), 4);
  EXPECT_EQ(compressed(calls(trace, CollectiveOp::reduce_scatter)), 0);
}

TEST_F(FsdpCompressionTest, SameInputSameTrace) {
  const Trace a = parse(kSmall), b = parse(kSmall);
  EXPECT_EQ(a.collectives, b.collectives);
  ASSERT_EQ(a.program(0).ops.size(), b.program(0).ops.size());
  for (std::size_t i = 0; i < a.program(0).ops.size(); ++i) {
    EXPECT_EQ(a.program(0).ops[i].kind, b.program(0).ops[i].kind);
    EXPECT_EQ(a.program(0).ops[i].collective, b.program(0).ops[i].collective);
  }
  EXPECT_EQ(a.notes, b.notes);
}

TEST_F(FsdpCompressionTest, BadKnobsNameFilePathLineAndFix) {
  expect_error([&] { parse(kSmall, {"fsdp.compression.rate=8"}); },
               {"test.yaml", "fsdp.compression.rate", "allgather", "reduce_scatter", "mode", "threshold"});
  expect_error([&] { parse(kSmall, {"fsdp.compression.allgather=lz4"}); },
               {"test.yaml", "fsdp.compression.allgather", "unknown codec 'lz4'", "zfp"});
  expect_error([&] { parse(kSmall, {"fsdp.compression.allgather=zfp:rate=0"}); },
               {"test.yaml", "fsdp.compression.allgather", "rate"});
  expect_error([&] { parse(kSmall, {"fsdp.compression.allgather=zfp:speed=2"}); },
               {"fsdp.compression.allgather", "no parameter 'speed'"});
  expect_error([&] { parse(kSmall, {"fsdp.compression.mode=pipelined"}); },
               {"test.yaml", "fsdp.compression.mode", "collective", "p2p"});
  expect_error([&] { parse(kSmall, {"fsdp.collectives.algo=nccl"}); },
               {"test.yaml", "fsdp.compression", "compressed ring", "'nccl'", "algo: ring"});
  expect_error([&] { parse(kSmall, {"fsdp.collectives.algo=rings"}); },
               {"test.yaml", "fsdp.collectives.algo", "unknown algorithm 'rings'"});
  expect_error([&] { parse(kSmall, {"fsdp.collectives.chanels=2"}); }, {"fsdp.collectives.chanels", "channels"});
  expect_error([&] { parse(kSmall, {"fsdp.strategy=NO_SHARD"}); }, {"fsdp.compression", "NO_SHARD"});
  expect_error([&] { parse(kSmall, {"fsdp.compression.allgather=zfp:rate=8,dtype=fp32"}); },
               {"fsdp.compression.allgather", "dtype=fp32", "bf16"});
  expect_error([&] { parse(kSmall, {"fsdp.compression.allgather=cast:to=fp16"}); },
               {"fsdp.compression.allgather", "cast narrows fp32", "bf16"});
  expect_error([&] { parse(kSmall, {"fsdp.compression.threshold=-1"}); }, {"fsdp.compression.threshold"});
  // Keys read from the file carry their line.
  const std::string bad = std::string(kSmall).replace(std::string(kSmall).find("zfp:rate=8"), 10, "zfp:rate=64");
  expect_error([&] { parse(bad); }, {"test.yaml: fsdp.compression.allgather (line 8)", "rate"});
  const std::string empty = std::string(kSmall).substr(0, std::string(kSmall).find("  compression:")) +
                            "  compression: {mode: p2p}\n";
  expect_error([&] { parse(empty); }, {"test.yaml: fsdp.compression (line 8)", "no codec given"});
}

// A hand-written trace carries compression per collective, as the CLI's --compression flags.
const char* const kTrace = R"(version: 1
kind: trace
programs:
  - ranks: all
    streams: [comm]
    ops:
      - {collective: allgather, size: 64MiB, algo: ring, compression: "zfp:rate=8"}
      - {collective: reduce_scatter, size: 64MiB, compression: "mpc:ratio=1.5", compression_mode: p2p, compression_threshold: 2MiB}
      - {collective: allgather, size: 64MiB, algo: ring}
)";

TEST_F(FsdpCompressionTest, TraceFileCarriesCompression) {
  const Trace trace = parse(kTrace);
  ASSERT_EQ(trace.collectives.size(), 3u);   // the raw allgather is a call of its own
  const models::CompressionOptions& first = trace.collectives[0].options.compression;
  EXPECT_EQ(first.codec, "zfp:rate=8");
  EXPECT_EQ(first.mode, models::CompressionMode::collective);
  const models::CompressionOptions& second = trace.collectives[1].options.compression;
  EXPECT_EQ(second.codec, "mpc:ratio=1.5");
  EXPECT_EQ(second.mode, models::CompressionMode::p2p);
  EXPECT_EQ(second.threshold, 2.0 * 1024 * 1024);
  EXPECT_TRUE(trace.collectives[2].options.compression.codec.empty());
}

TEST_F(FsdpCompressionTest, BadTraceCompressionNamesTheOpAndLine) {
  auto line = [](const std::string& op) {
    std::string text = kTrace;
    const std::size_t at = text.find("      - {collective: allgather, size: 64MiB, algo: ring}");
    return text.replace(at, std::string::npos, "      - " + op + "\n");
  };
  expect_error([&] { parse(line("{collective: allgather, size: 1MiB, algo: ring, compression: zstd}")); },
               {"test.yaml: programs[0].ops[2].compression (line 9)", "unknown codec 'zstd'"});
  expect_error([&] { parse(line("{collective: allgather, size: 1MiB, compression: \"zfp:rate=8\"}")); },
               {"programs[0].ops[2].compression (line 9)", "compressed ring", "'nccl'", "algo: ring"});
  expect_error([&] { parse(line("{collective: broadcast, size: 1MiB, algo: ring, compression: \"zfp\"}")); },
               {"programs[0].ops[2].compression", "broadcast", "compression_mode: p2p"});
  expect_error([&] { parse(line("{collective: allgather, size: 1MiB, algo: ring, compression_mode: p2p}")); },
               {"programs[0].ops[2].compression_mode (line 9)", "no codec"});
  expect_error(
      [&] { parse(line("{collective: allgather, size: 1MiB, algo: ring, compression: zfp, compression_threshold: 1MiB}")); },
      {"programs[0].ops[2].compression_threshold (line 9)", "compression_mode: p2p"});
  expect_error([&] { parse(line("{collective: allgather, size: 1MiB, compression: zfp, compression_mode: lossy}")); },
               {"programs[0].ops[2].compression_mode (line 9)", "p2p"});
}

}  // namespace
}  // namespace stepsim::workloads
