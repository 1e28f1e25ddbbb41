// Pipeline parallelism in the fsdp generator (parallelism.pp, pipeline): one program per
// stage shared by its replicas, activations and gradients counted and sized by hand, FSDP
// gathering and reducing each unit once per iteration, the layer split, GEMM FLOPs summed over
// the stages equal to the unpipelined model's, and the bad-input cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "platforms/yaml_reader.hpp"
#include "workloads/generators/transformer.hpp"
#include "workloads/tests/parallel_layouts.hpp"

namespace stepsim::workloads {
namespace {

using models::CollectiveOp;

constexpr double kTokens = 2048;                      // micro_batch 1 x sequence 2048
constexpr double kActivation = kTokens * 4096 * 2;    // a micro-batch's bf16 residual stream

class PipelineTest : public ::testing::Test {
 protected:
  Trace load(std::vector<std::string> overrides, int nodes = 1) { return job_.load(std::move(overrides), nodes); }
  std::string error(std::vector<std::string> overrides) { return job_.error(std::move(overrides)); }
  testing::Llama8b job_{2048, 8};
};

using testing::gemm_flops;
using testing::group_named;

struct P2p {
  int sends = 0, recvs = 0;
  double bytes = 0;
  std::vector<int> peers;   // resolved, in order
};
P2p p2p(const Trace& t, int rank) {
  P2p out;
  for (const Op& o : t.program(rank).ops) {
    if (o.kind != OpKind::send && o.kind != OpKind::recv) continue;
    (o.kind == OpKind::send ? out.sends : out.recvs) += 1;
    out.bytes += o.bytes;
    out.peers.push_back(peer_rank(t, rank, o));
  }
  return out;
}

int collectives(const Trace& t, int rank, int group, CollectiveOp op) { return testing::count(t, rank, group, op); }

TEST_F(PipelineTest, EachStageIsOneProgramSharedByItsReplicas) {
  const Trace t = load({"parallelism.pp=2"});
  ASSERT_EQ(t.programs.size(), 2u);
  EXPECT_EQ(t.program_of_rank, (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(t.groups[group_named(t, "pp")].subgroups.front(), (std::vector<int>{0, 4}));
  EXPECT_EQ(t.groups[group_named(t, "fsdp")].subgroups.front(), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_NO_THROW(validate(t));
}

TEST_F(PipelineTest, OneFOneBSendsEachMicroBatchOnceEachWay) {
  const Trace t = load({"parallelism.pp=2"});
  // Stage 0 sends 8 activations to stage 1 and receives 8 gradients back; rank 1's peer is 5.
  const P2p first = p2p(t, 1), last = p2p(t, 5);
  EXPECT_EQ(first.sends, 8);
  EXPECT_EQ(first.recvs, 8);
  EXPECT_EQ(last.sends, 8);
  EXPECT_EQ(last.recvs, 8);
  EXPECT_DOUBLE_EQ(first.bytes, 16 * kActivation);
  for (int peer : first.peers) EXPECT_EQ(peer, 5);
  // Under sequence parallelism a TP rank passes its 1/tp slice to the same TP rank downstream.
  const Trace tp = load({"parallelism.pp=2", "parallelism.tp=2"});
  EXPECT_DOUBLE_EQ(p2p(tp, 0).bytes, 16 * kActivation / 2);
}

TEST_F(PipelineTest, InterleavedChunksWrapAroundTheRanks) {
  // pp 2 x 2 chunks: rank 0 holds chunks 0 and 2. Forward it sends 0->1 and 2->3 (16), back
  // 2->1 (8); it receives 1->2 forward (8) and 3->2, 1->0 back (16).
  const Trace t = load({"parallelism.pp=2", "pipeline.schedule=Interleaved1F1B"});
  const P2p first = p2p(t, 0);
  EXPECT_EQ(first.sends, 24);
  EXPECT_EQ(first.recvs, 24);
  EXPECT_NO_THROW(validate(t));
}

TEST_F(PipelineTest, FsdpGathersAndReducesEachUnitOncePerIteration) {
  // 32 blocks + embedding + output over 2 stages: 16 blocks each (torchtitan's split). Stage 0
  // holds the embedding, stage 1 the final norm and output: 17 units each.
  const Trace t = load({"parallelism.pp=2"});
  const int fsdp = group_named(t, "fsdp");
  for (int rank : {0, 4}) {
    EXPECT_EQ(collectives(t, rank, fsdp, CollectiveOp::allgather), 17) << rank;
    EXPECT_EQ(collectives(t, rank, fsdp, CollectiveOp::reduce_scatter), 17) << rank;
  }
  EXPECT_TRUE(std::any_of(t.notes.begin(), t.notes.end(),
                          [](const std::string& n) { return n.find("blocks per chunk 16, 16") != std::string::npos; }));
}

TEST_F(PipelineTest, TheStagesTogetherRunTheWholeModel) {
  const double whole = gemm_flops(load({}), 0);
  for (const char* schedule : {"GPipe", "1F1B", "Interleaved1F1B", "LoopedBFS"}) {
    const Trace t = load({"parallelism.pp=2", std::string("pipeline.schedule=") + schedule});
    EXPECT_NEAR(gemm_flops(t, 0) + gemm_flops(t, 4), whole, 1e-9 * whole) << schedule;
  }
  EXPECT_DOUBLE_EQ(load({"parallelism.pp=4"}).work.items_per_rank, 8 * kTokens / 4);
}

TEST_F(PipelineTest, TiedEmbeddingsKeepACopyOnTheLastStageAndSyncItsGradient) {
  // pp 4 on 8 GPUs: stages {0,1}, {2,3}, {4,5}, {6,7}; dp_shard 2.
  const Trace t = load({"parallelism.pp=4", "model.tied_embeddings=true"});
  const int group = group_named(t, "embedding");
  ASSERT_GE(group, 0);
  EXPECT_EQ(t.groups[group].subgroups.front(), (std::vector<int>{0, 6}));
  EXPECT_EQ(t.groups[group].subgroup_of_rank[2], -1);   // middle stages are not members
  const double shard = 128256.0 * 4096 / 2 * 4;            // the table's fp32 gradient shard
  EXPECT_EQ(testing::count(t, 0, group, CollectiveOp::allreduce, shard), 1);
  EXPECT_EQ(testing::count(t, 6, group, CollectiveOp::allreduce, shard), 1);
  EXPECT_EQ(testing::count(t, 2, group, CollectiveOp::allreduce), 0);
  // The last stage gathers its root: the final norm and the output copy of the table, bf16.
  EXPECT_EQ(testing::count(t, 6, group_named(t, "fsdp"), CollectiveOp::allgather, (4096 + 128256.0 * 4096) * 2), 1);
  EXPECT_NO_THROW(validate(t));
}

TEST(ParallelPresets, TheShippedLayoutsLoadAsDocumented) {
  // llama3-405b-3d on 512 GPUs: 8 stage programs, TP 8 x PP 8 x FSDP 8; llama3-70b-tp8 on 64.
  platforms::PlatformOptions options;
  options.nodes = 64;
  const platforms::Platform big = platforms::load_platform("dgx-h100", options);
  const platforms::Allocation all = platforms::parse_allocation("", big);
  const Trace t = load_workload("llama3-405b-3d", JobContext{big, all});
  EXPECT_EQ(t.programs.size(), 8u);
  EXPECT_EQ(t.groups[group_named(t, "pp")].subgroups.front().size(), 8u);
  EXPECT_EQ(t.groups[group_named(t, "tp")].subgroups.front(), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(t.groups[group_named(t, "fsdp")].subgroups.front().size(), 8u);
  options.nodes = 8;
  const platforms::Platform eight = platforms::load_platform("dgx-h100", options);
  const platforms::Allocation sixty_four = platforms::parse_allocation("", eight);
  const Trace tp = load_workload("llama3-70b-tp8", JobContext{eight, sixty_four});
  EXPECT_EQ(tp.programs.size(), 1u);
  EXPECT_EQ(tp.groups[group_named(tp, "tp")].subgroups.size(), 8u);
}

TEST_F(PipelineTest, BadPipelinesNameTheKeyAndTheFix) {
  EXPECT_NE(error({"parallelism.pp=4", "training.gradient_accumulation=6", "pipeline.schedule=Interleaved1F1B"})
                .find("multiple of pp (4)"),
            std::string::npos);
  EXPECT_NE(error({"parallelism.pp=2", "pipeline.virtual_stages=2"}).find("1F1B runs one chunk per rank"),
            std::string::npos);
  EXPECT_NE(error({"parallelism.pp=8", "pipeline.schedule=LoopedBFS", "pipeline.virtual_stages=8"}).find("64 chunks"),
            std::string::npos);
  EXPECT_NE(error({"pipeline.schedule=ZeroBubble"}).find("pipeline.schedule"), std::string::npos);
  EXPECT_NE(error({"parallelism.pp=2", "fsdp.wrap=model"}).find("use fsdp.wrap: layer"), std::string::npos);
  EXPECT_NE(error({"pipeline.schedule=Interleaved1F1B", "pipeline.virtual_stages=2"}).find("parallelism.pp is 1"),
            std::string::npos);
}

TEST_F(PipelineTest, AScheduleWithoutPipelineParallelismIsPlainTraining) {
  const Trace plain = load({});
  for (const char* schedule : {"GPipe", "1F1B", "Interleaved1F1B", "LoopedBFS"}) {
    const Trace scheduled = load({std::string("pipeline.schedule=") + schedule});
    EXPECT_EQ(scheduled.program(0).ops.size(), plain.program(0).ops.size()) << schedule;
    EXPECT_EQ(gemm_flops(scheduled, 0), gemm_flops(plain, 0)) << schedule;
  }
}

TEST_F(PipelineTest, LayerPassesPerRankAreLimitedAfterThePipelineSplit) {
  // llama3-8b's 32 layers: 16,384 / 32 = 512 micro-batches on one stage.
  EXPECT_NE(error({"training.gradient_accumulation=513"}).find("16416 layer passes, past the limit of 16384"),
            std::string::npos);
  EXPECT_NE(error({"training.gradient_accumulation=513"}).find("at most 512 micro-batches"), std::string::npos);
  // Counted per stage: 32 layers on two stages (16 each) take 1,024; 33 layers on two take 17.
  const YAML::Node doc = platforms::load_yaml("training: {gradient_accumulation: 1024}\n", "w.yaml");
  const platforms::YamlReader reader("w.yaml");
  transformer::ModelConfig model;
  transformer::TrainingConfig training;
  training.gradient_accumulation = 1024;
  model.layers = 32;
  EXPECT_NO_THROW(transformer::check_layer_passes(doc, reader, 2, model, training));
  EXPECT_THROW(transformer::check_layer_passes(doc, reader, 1, model, training), ConfigError);
  model.layers = 33;
  EXPECT_THROW(transformer::check_layer_passes(doc, reader, 2, model, training), ConfigError);
  training.gradient_accumulation = 963;   // 17 x 963 = 16,371
  EXPECT_NO_THROW(transformer::check_layer_passes(doc, reader, 2, model, training));
}

}  // namespace
}  // namespace stepsim::workloads
