// The DLRM generator and its sharding planners: communication sizes against hand computation,
// planner placements on hand cases, determinism, the memory check, DDP buckets, the preset,
// and the bad-input catalogue.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "platforms/config_error.hpp"
#include "platforms/loader.hpp"
#include "workloads/generators/dlrm_config.hpp"
#include "workloads/generators/dlrm_sharding.hpp"
#include "workloads/generators/dlrm_torchrec_ops.hpp"
#include "workloads/generators/dlrm_torchrec_planner.hpp"
#include "workloads/workload.hpp"

namespace stepsim::workloads {
namespace {

constexpr double kMiB = 1048576.0;

// A small DLRM: 4 tables of dim 16, batch 1024, fp32; `extra` is appended (sharding: ...).
std::string small_dlrm(const std::string& tables = "{rows: [100, 200, 300, 400]}",
                       const std::string& training = "{global_batch: 1024}", const std::string& extra = "") {
  return "version: 1\nkind: dlrm\nmodel:\n  dense_features: 13\n  bottom_mlp: [32, 16]\n  top_mlp: [64, 1]\n"
         "  embedding_dim: 16\n  tables: " +
         tables + "\ntraining: " + training + "\n" + extra;
}

// `text` with `line` added to its model section (before the tables).
std::string with_model_key(std::string text, const std::string& line) {
  return text.replace(text.find("  tables:"), 0, "  " + line + "\n");
}

class Dlrm : public ::testing::Test {
 protected:
  Trace parse(const std::string& text, const std::string& gpus) {
    const platforms::Allocation allocation = platforms::parse_allocation(gpus, platform_);
    return parse_workload(text, "test.yaml", JobContext{platform_, allocation});
  }
  Trace preset(const std::string& gpus) {
    const platforms::Allocation allocation = platforms::parse_allocation(gpus, platform_);
    return load_workload("dlrm-criteo-1tb", JobContext{platform_, allocation});
  }
  // The ConfigError text `text` raises on `gpus`.
  std::string error(const std::string& text, const std::string& gpus = "0,1") {
    try {
      parse(text, gpus);
    } catch (const ConfigError& e) {
      return e.what();
    }
    ADD_FAILURE() << "no ConfigError";
    return {};
  }

  platforms::Platform platform_ = platforms::load_platform("dgx-a100");
};

// Collectives of one op kind that rank `rank` issues, in order.
std::vector<CollectiveCall> calls(const Trace& t, int rank, models::CollectiveOp op) {
  std::vector<CollectiveCall> out;
  for (const Op& o : t.program(rank).ops)
    if (o.kind == OpKind::collective && t.collectives[o.collective].op == op) out.push_back(t.collectives[o.collective]);
  return out;
}

std::vector<const models::KernelSpec*> kernels(const Trace& t, int rank, const std::string& kind) {
  std::vector<const models::KernelSpec*> out;
  for (const Op& o : t.program(rank).ops)
    if (o.kind == OpKind::kernel && t.kernels[o.kernel].kind == kind) out.push_back(&t.kernels[o.kernel]);
  return out;
}

std::vector<const models::KernelSpec*> kernels_named(const Trace& t, int rank, const std::string& name) {
  std::vector<const models::KernelSpec*> out;
  for (const Op& o : t.program(rank).ops)
    if (o.kind == OpKind::kernel && t.names[o.name] == name) out.push_back(&t.kernels[o.kernel]);
  return out;
}

/// The sparse SGD's index_add_ into the tables (not the interaction's, which is one too).
std::vector<const models::KernelSpec*> table_updates(const Trace& t, int rank) {
  std::vector<const models::KernelSpec*> out;
  for (const Op& o : t.program(rank).ops)
    if (o.kind == OpKind::kernel && t.kernels[o.kernel].kind == "index_add" &&
        t.names[o.name].starts_with("embedding_sgd"))
      out.push_back(&t.kernels[o.kernel]);
  return out;
}

std::vector<EmbeddingTable> tables_of_rows(const std::vector<double>& rows, int dim = 1) {
  std::vector<EmbeddingTable> out;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::string name = "t";
    name += std::to_string(i);  // not "t" + ...: GCC 12's -Wrestrict false positive
    out.push_back({name, rows[i], dim, 1, 4});
  }
  return out;
}

ShardingRequest request(std::vector<EmbeddingTable> tables, int ranks, const std::string& planner) {
  ShardingRequest r;
  r.tables = std::move(tables);
  r.ranks = ranks;
  r.planner = planner;
  return r;
}

// ---------------------------------------------------------------- communication sizes

TEST_F(Dlrm, TableWiseAlltoallMatchesHandComputation) {
  // naive: rank 0 holds tables 0 and 2, rank 1 tables 1 and 3. Each rank sends its 2 tables x
  // 512 local samples x 16 x 4 B = 64 KiB to its peer; nccl-tests size (per-rank buffer, its
  // own block included) = 2 tables x 1024 samples x 16 x 4 B = 128 KiB.
  const Trace t = parse(small_dlrm("{rows: [100, 200, 300, 400]}", "{global_batch: 1024}",
                                   "sharding: {plan: table_wise, planner: naive}\n"),
                        "0,1");
  for (int rank : {0, 1}) {
    const auto a2a = calls(t, rank, models::CollectiveOp::alltoall);
    ASSERT_EQ(a2a.size(), 2u) << "forward and backward";
    EXPECT_EQ(a2a[0].bytes, 2 * 1024 * 16 * 4.0);
    EXPECT_EQ(a2a[1].bytes, a2a[0].bytes);
    const auto lookups = kernels(t, rank, "embedding_forward");
    ASSERT_EQ(lookups.size(), 2u) << "two tables of different rows: one kernel each";
    for (const auto* k : lookups) {
      EXPECT_EQ(k->param("batch"), 1024) << "table-wise looks up the global batch";
      EXPECT_EQ(k->param("tables"), 1);
      EXPECT_EQ(k->param("dim"), 16);
    }
  }
  EXPECT_EQ(kernels(t, 0, "embedding_forward")[0]->param("rows"), 100);
  EXPECT_EQ(kernels(t, 0, "embedding_forward")[1]->param("rows"), 300);
  EXPECT_EQ(t.work.items_per_rank, 512);
}

TEST_F(Dlrm, UnequalSharesUseMaxOfMax) {
  // 3 tables on 2 ranks (naive): s0 = 2 x 512 x 16 x 4 = 65536, s1 = 32768. Rank 0 sends
  // 65536, rank 1 receives 65536: busiest 65536 bytes, size = 2/1 x 65536.
  const Trace t = parse(small_dlrm("{rows: [100, 200, 300]}", "{global_batch: 1024}",
                                   "sharding: {planner: naive}\n"),
                        "0,1");
  EXPECT_EQ(calls(t, 1, models::CollectiveOp::alltoall)[0].bytes, 131072);
  bool noted = false;
  for (const std::string& n : t.notes) noted = noted || n.find("max of") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST_F(Dlrm, AmpHalvesTheAlltoall) {
  const Trace t = parse(small_dlrm("{rows: [100, 200, 300, 400]}", "{global_batch: 1024, dtype: fp16}",
                                   "sharding: {planner: naive}\n"),
                        "0,1");
  EXPECT_EQ(calls(t, 0, models::CollectiveOp::alltoall)[0].bytes, 2 * 1024 * 16 * 2.0);
  for (const auto* k : kernels(t, 0, "gemm")) EXPECT_EQ(k->dtype, models::Dtype::fp16);
  EXPECT_EQ(kernels(t, 0, "embedding_forward")[0]->dtype, models::Dtype::fp32);
}

TEST_F(Dlrm, RowWiseReduceScattersPooledSums) {
  // Every rank holds a block of every table's rows and looks up the whole batch; the partial
  // sums of all 4 tables (4 x 16 values per sample) are reduce-scattered: 4 x 16 x 1024 x 4 B.
  const Trace t = parse(small_dlrm("{rows: [100, 200, 300, 400], pooling: 8}", "{global_batch: 1024}",
                                   "sharding: {plan: row_wise}\n"),
                        "0,1");
  for (int rank : {0, 1}) {
    EXPECT_TRUE(calls(t, rank, models::CollectiveOp::alltoall).empty());
    const auto rs = calls(t, rank, models::CollectiveOp::reduce_scatter);
    const auto ag = calls(t, rank, models::CollectiveOp::allgather);
    ASSERT_EQ(rs.size(), 1u);
    ASSERT_EQ(ag.size(), 1u);
    EXPECT_EQ(rs[0].bytes, 4 * 16 * 1024 * 4.0);
    EXPECT_EQ(ag[0].bytes, rs[0].bytes);
  }
  // Table 0 (100 rows): blocks of 50 rows, each seeing half of the 8 lookups per sample.
  const auto lookups = kernels(t, 1, "embedding_forward");
  ASSERT_EQ(lookups.size(), 4u);
  EXPECT_EQ(lookups[0]->param("rows"), 50);
  EXPECT_EQ(lookups[0]->param("pooling"), 4);
  EXPECT_EQ(lookups[0]->param("batch"), 1024);
}

TEST_F(Dlrm, ColumnWiseSplitsTheDim) {
  // Each rank holds 8 of the 16 columns of every table: size = 4 tables x 1024 x 8 x 4 B.
  const Trace t = parse(small_dlrm("{rows: [100, 100, 100, 100]}", "{global_batch: 1024}",
                                   "sharding: {plan: column_wise}\n"),
                        "0,1");
  EXPECT_EQ(calls(t, 0, models::CollectiveOp::alltoall)[0].bytes, 4 * 1024 * 8 * 4.0);
  const auto lookups = kernels(t, 0, "embedding_forward");
  ASSERT_EQ(lookups.size(), 1u) << "4 alike shards: one multi-table kernel";
  EXPECT_EQ(lookups[0]->param("tables"), 4);
  EXPECT_EQ(lookups[0]->param("dim"), 8);
}

TEST_F(Dlrm, DataParallelTablesAreAllreduced) {
  // Replicated tables: local lookups, no exchange; their dense gradients (4 x 250 rows x 16 x
  // 4 B) join the MLP gradients in the DDP buckets.
  const Trace t = parse(small_dlrm("{rows: [250, 250, 250, 250]}", "{global_batch: 1024, ddp_bucket: 1MiB}",
                                   "sharding: {plan: data_parallel}\n"),
                        "0,1");
  EXPECT_TRUE(calls(t, 0, models::CollectiveOp::alltoall).empty());
  EXPECT_EQ(kernels(t, 0, "embedding_forward")[0]->param("batch"), 512);
  double reduced = 0;
  for (const CollectiveCall& c : calls(t, 0, models::CollectiveOp::allreduce)) reduced += c.bytes;
  const double top_input = 16 + 5 * 4 / 2;  // dot: D + (F+1)F/2 with F = 4
  const double params = (13 * 32 + 32) + (32 * 16 + 16) + (top_input * 64 + 64) + (64 + 1);
  EXPECT_EQ(reduced, params * 4 + 4 * 250 * 16 * 4);
}

// ---------------------------------------------------------------- DDP buckets

TEST_F(Dlrm, BucketCountIsCeilOfGradientBytes) {
  // Rule: fp32 gradients in reverse layer order cut every ddp_bucket bytes (no smaller first
  // bucket), so buckets = ceil(dense gradient bytes / ddp_bucket).
  const std::string text =
      "version: 1\nkind: dlrm\nmodel:\n  dense_features: 13\n  bottom_mlp: [512, 256, 128]\n"
      "  top_mlp: [4096, 4096, 4096, 1]\n  embedding_dim: 128\n  tables: {rows: [1000, 1000, 1000]}\n"
      "training: {global_batch: 4096, ddp_bucket: 25MiB}\n";
  const Trace t = parse(text, "0-3");
  const double top_input = 128 + 4 * 3 / 2;
  const double params = (13 * 512 + 512) + (512 * 256 + 256) + (256 * 128 + 128) + (top_input * 4096 + 4096) +
                        2 * (4096 * 4096 + 4096) + (4096 + 1);  // 34.2M: 136.8 MB
  const auto buckets = calls(t, 2, models::CollectiveOp::allreduce);
  EXPECT_EQ(buckets.size(), static_cast<std::size_t>(std::ceil(params * 4 / (25 * kMiB))));
  EXPECT_EQ(buckets.size(), 6u);
  double total = 0;
  for (const CollectiveCall& c : buckets) total += c.bytes;
  EXPECT_EQ(total, params * 4);
  EXPECT_EQ(buckets.front().bytes, 25 * kMiB);
}

TEST_F(Dlrm, BucketsOverlapBackward) {
  // The first bucket's allreduce is issued before the bottom MLP's backward kernels.
  const Trace t = parse(small_dlrm("{rows: [100, 200, 300, 400]}", "{global_batch: 1024, ddp_bucket: 1KiB}"), "0,1");
  const Program& p = t.program(0);
  std::size_t first_allreduce = p.ops.size(), last_kernel = 0;
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    if (p.ops[i].kind == OpKind::collective && first_allreduce == p.ops.size() &&
        t.collectives[p.ops[i].collective].op == models::CollectiveOp::allreduce)
      first_allreduce = i;
    if (p.ops[i].kind == OpKind::kernel && t.names[p.ops[i].name].rfind("bottom_mlp.fc0.wgrad", 0) == 0)
      last_kernel = i;
  }
  EXPECT_LT(first_allreduce, last_kernel);
  EXPECT_EQ(p.streams, (std::vector<std::string>{"compute", "embedding_comm", "allreduce"}));
}

// ---------------------------------------------------------------- per-table plans

// A plan listed per table, as TorchRec prints it, places whole tables as `placement` does.
TEST_F(Dlrm, PerTablePlanPlacesTablesAsAPlacement) {
  const std::string listed =
      "sharding:\n  plan:\n    - {table: 0, type: table_wise, ranks: [1]}\n    - {table: 1, type: table_wise, ranks: [0]}\n"
      "    - {table: 2, type: table_wise, ranks: [0]}\n    - {table: 3, type: table_wise, ranks: [1]}\n";
  const Trace a = parse(small_dlrm("{rows: [100, 200, 300, 400]}", "{global_batch: 1024}", listed), "0,1");
  const Trace b = parse(small_dlrm("{rows: [100, 200, 300, 400]}", "{global_batch: 1024}",
                                   "sharding: {placement: [1, 0, 0, 1]}\n"),
                        "0,1");
  ASSERT_EQ(a.programs.size(), b.programs.size());
  for (std::size_t p = 0; p < a.programs.size(); ++p) EXPECT_EQ(a.programs[p].ops.size(), b.programs[p].ops.size());
  EXPECT_EQ(calls(a, 0, models::CollectiveOp::alltoall).front().bytes,
            calls(b, 0, models::CollectiveOp::alltoall).front().bytes);
  const auto plan = [&](const std::string& entries) {
    return error(small_dlrm("{rows: [100, 200, 300, 400]}", "{global_batch: 1024}", "sharding:\n  plan:\n" + entries));
  };
  const std::string three = "    - {table: 0, type: table_wise, ranks: [0]}\n    - {table: 1, type: table_wise, ranks: [0]}\n"
                            "    - {table: 2, type: table_wise, ranks: [1]}\n";
  EXPECT_NE(plan(three).find("table 3 (t3) is not planned"), std::string::npos);
  EXPECT_NE(plan(three + "    - {table: 2, type: table_wise, ranks: [1]}\n").find("planned twice"), std::string::npos);
  EXPECT_NE(plan(three + "    - {table: 3, type: table_wise, ranks: [0, 1]}\n").find("exactly one rank"),
            std::string::npos);
}

// A plan of several kinds exchanges each kind apart, as TorchRec's sharded EmbeddingBagCollection
// does: 2 ranks, 512 samples each, fp32, dim 16. t0 and t1 table-wise (one per rank: each sends
// 16 x 512 x 4 B to its peer, size 2 x 32768), t2 column-wise (8 columns each: 2 x 16384), t3
// row-wise (a reduce-scatter of its 16 x 1024 x 4 B partial sums; an all-gather backward).
TEST_F(Dlrm, MixedPlanExchangesEachKindApart) {
  const std::string plan =
      "sharding:\n  plan:\n    - {table: 0, type: table_wise, ranks: [0]}\n    - {table: 1, type: table_wise, ranks: [1]}\n"
      "    - {table: 2, type: column_wise, ranks: [0, 1]}\n    - {table: 3, type: row_wise}\n";
  const Trace t = parse(small_dlrm("{rows: [100, 200, 300, 400]}", "{global_batch: 1024}", plan), "0,1");
  std::vector<double> a2a;
  for (const CollectiveCall& c : calls(t, 0, models::CollectiveOp::alltoall)) a2a.push_back(c.bytes);
  // Forward in plan order (table-wise, column-wise), backward in reverse (the all-gather first).
  EXPECT_EQ(a2a, (std::vector<double>{65536, 32768, 32768, 65536}));
  ASSERT_EQ(calls(t, 0, models::CollectiveOp::reduce_scatter).size(), 1u);
  EXPECT_EQ(calls(t, 0, models::CollectiveOp::reduce_scatter).front().bytes, 65536);
  EXPECT_EQ(calls(t, 0, models::CollectiveOp::allgather).front().bytes, 65536);
  // Rank 0 looks up its whole table (100 rows), its 8 columns of t2 (300 rows) and its half of
  // t3's rows (200 of 400, so half the lookups), each kind its own kernel, all for the whole batch.
  const auto lookups = kernels(t, 0, "embedding_forward");
  ASSERT_EQ(lookups.size(), 3u);
  const std::vector<std::vector<double>> expected = {{100, 16, 1}, {300, 8, 1}, {200, 16, 0.5}};
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(lookups[i]->params.at("rows"), expected[i][0]);
    EXPECT_EQ(lookups[i]->params.at("dim"), expected[i][1]);
    EXPECT_EQ(lookups[i]->params.at("pooling"), expected[i][2]);
    EXPECT_EQ(lookups[i]->params.at("batch"), 1024);
  }
  // Stored: 100 x 16 + 300 x 8 + 200 x 16 values of 4 B.
  ASSERT_TRUE(t.memory);
  const std::string bad_rank0 = small_dlrm("{rows: [100, 200, 300, 400]}", "{global_batch: 1024}",
                                           plan + "  bottom_mlp: rank0\n");
  EXPECT_NE(error(bad_rank0).find("one exchange per sharding type"), std::string::npos);
}

// A row-wise table's lookups scale with its shard: on 4 ranks each looks up a quarter of the rows
// and a quarter of the lookups, and stores a quarter of the table.
TEST_F(Dlrm, RowWiseShardLookupsScaleWithTheShard) {
  const auto shard = [&](const std::string& gpus) {
    const Trace t = parse(small_dlrm("{rows: [4000]}", "{global_batch: 1024}", "sharding: {plan: row_wise}\n"), gpus);
    const auto lookups = kernels(t, 0, "embedding_forward");
    return std::make_pair(lookups.front()->params.at("rows"), lookups.front()->params.at("pooling"));
  };
  EXPECT_EQ(shard("0,1"), std::make_pair(2000.0, 0.5));
  EXPECT_EQ(shard("0,1,2,3"), std::make_pair(1000.0, 0.25));
}

// A data-parallel table in a mixed plan is looked up for the local batch and its dense gradient
// (rows x dim x 4 B) joins DDP's buckets; the others still exchange.
TEST_F(Dlrm, DataParallelTableInAMixedPlanIsAllreduced) {
  const auto ddp_bytes = [&](const std::string& last) {
    const std::string plan = "sharding:\n  plan:\n    - {table: 0, type: table_wise, ranks: [0]}\n"
                             "    - {table: 1, type: table_wise, ranks: [1]}\n    - {table: 2, type: row_wise}\n"
                             "    - {table: 3, type: " + last + "}\n";
    const Trace t = parse(small_dlrm("{rows: [100, 200, 300, 400]}", "{global_batch: 1024}", plan), "0,1");
    double bytes = 0;
    for (const CollectiveCall& c : calls(t, 0, models::CollectiveOp::allreduce)) bytes += c.bytes;
    return std::make_pair(bytes, kernels(t, 0, "embedding_forward").back()->params.at("batch"));
  };
  const auto [sharded, sharded_batch] = ddp_bytes("row_wise");
  const auto [replicated, replicated_batch] = ddp_bytes("data_parallel");
  EXPECT_EQ(replicated - sharded, 400 * 16 * 4);
  EXPECT_EQ(sharded_batch, 1024);
  EXPECT_EQ(replicated_batch, 512);
}

// Table-row-wise on 2 nodes of 2 ranks (b = 256): t0 and t2 on node 0, t1 on node 1, t3 whole on
// rank 3. Node 0 reduce-scatters (16 + 16) x 1024 x 4 B, node 1 16 x 1024 x 4 B; then the ranks of
// each local index exchange their node's sums for the peer's 256 samples: node 0 sends 32 x 256 x
// 4 B, node 1 half that, so the all-to-all's size is 2 x 32768. t3's all-to-all: rank 3 sends
// 16 x 256 x 4 B to each of 3 peers, so 3 x 16384 x 4/3.
TEST_F(Dlrm, TableRowWiseReduceScattersInTheNodeThenExchangesAcross) {
  platforms::PlatformOptions options;
  options.nodes = 2;
  platform_ = platforms::load_platform("dgx-a100", options);
  const std::string plan =
      "sharding:\n  plan:\n    - {table: 0, type: table_row_wise, ranks: [0, 1]}\n"
      "    - {table: 1, type: table_row_wise, ranks: [2, 3]}\n    - {table: 2, type: table_row_wise, ranks: [0, 1]}\n"
      "    - {table: 3, type: table_wise, ranks: [3]}\n";
  const std::string text = small_dlrm("{rows: [100, 200, 300, 400]}", "{global_batch: 1024}", plan);
  const Trace t = parse(text, "0,1,8,9");
  const auto rs = [&](int rank) { return calls(t, rank, models::CollectiveOp::reduce_scatter); };
  ASSERT_EQ(rs(0).size(), 1u);
  EXPECT_EQ(rs(0).front().bytes, 131072);
  EXPECT_EQ(rs(3).front().bytes, 65536);
  EXPECT_EQ(t.groups[static_cast<std::size_t>(rs(0).front().group)].subgroups,
            (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
  const auto a2a = calls(t, 1, models::CollectiveOp::alltoall);
  ASSERT_EQ(a2a.size(), 4u);  // forward: the cross-node one, then t3's; backward the reverse
  EXPECT_EQ(a2a[0].bytes, 65536);
  EXPECT_EQ(t.groups[static_cast<std::size_t>(a2a[0].group)].subgroups, (std::vector<std::vector<int>>{{0, 2}, {1, 3}}));
  EXPECT_DOUBLE_EQ(a2a[1].bytes, 65536);
  EXPECT_EQ(calls(t, 1, models::CollectiveOp::allgather).front().bytes, 131072);
  // Rank 1 holds the second 50-row block of t0 and the second 150 rows of t2.
  const auto lookups = kernels(t, 1, "embedding_forward");
  ASSERT_EQ(lookups.size(), 2u);
  EXPECT_EQ(lookups[0]->params.at("rows"), 50);
  EXPECT_EQ(lookups[1]->params.at("rows"), 150);
  const auto fails = [&](const std::string& entry) {
    const std::string planned = "{table: 1, type: table_row_wise, ranks: [2, 3]}";
    std::string bad = text;
    bad.replace(bad.find(planned), planned.size(), entry);
    return error(bad, "0,1,8,9");
  };
  EXPECT_NE(fails("{table: 1, type: table_row_wise, ranks: [1, 2]}").find("list ranks [0, 1]"), std::string::npos);
  EXPECT_NE(fails("{table: 1, type: table_row_wise, ranks: [3, 2]}").find("one node, in order"), std::string::npos);
  EXPECT_NE(fails("{table: 1, type: row_wise, ranks: [2]}").find("over every rank"), std::string::npos);
  EXPECT_NE(fails("{table: 1, type: column_wise, ranks: [2, 2]}").find("twice"), std::string::npos);
  EXPECT_NE(fails("{table: 1, type: column_wise, ranks: [4]}").find("not a rank of this 4-rank job"), std::string::npos);
  EXPECT_NE(error(text, "0,1,2,8").find("as many ranks"), std::string::npos);
}

// Per-table plans of several kinds run FBGEMM's fused kernels; the sparse paths are refused.
TEST_F(Dlrm, MixedPlanRefusesSparseGradients) {
  const std::string plan = "sharding:\n  plan:\n    - {table: 0, type: table_wise, ranks: [0]}\n"
                           "    - {table: 1, type: row_wise}\n";
  EXPECT_NE(error(small_dlrm("{rows: [100, 200]}", "{global_batch: 1024, embedding_gradient: sparse}", plan))
                .find("fused kernels"),
            std::string::npos);
}

// ---------------------------------------------------------------- TorchRec's input distribution

// Sequence tables (TorchRec's EmbeddingCollection): every lookup's row goes back to its sample's
// rank by all-to-all, row-wise too (no reduce-scatter: nothing is summed). Hand counts on 2 ranks
// of 512 samples, fp32, dim 16: a table-wise sequence table of pooling 10 on one rank sends
// 512 x 10 x 16 x 4 B to its peer (max of max: x 2 / 1); a row-wise one of pooling 8 (rows split
// evenly) sends each peer 512 x 8 / 2 x 16 x 4 B (x 2). The receiver sums each sample's rows:
// 512 x 10 x 16 values in, 512 x 16 out; the lookups are 1024 x 10 one-row bags.
TEST_F(Dlrm, SequenceTablesExchangeEveryLookupsRow) {
  const std::string tables = "[{rows: 1000}, {rows: 1000, pooling: 10, sequence: true}]";
  const std::string training = "{global_batch: 1024}";
  const Trace tw = parse(small_dlrm(tables, training, "sharding: {plan: [{table: 0, type: table_wise, ranks: [0]}, "
                                                     "{table: 1, type: table_wise, ranks: [1]}]}\n"),
                         "0,1");
  std::vector<double> sizes;
  for (const auto& c : calls(tw, 0, models::CollectiveOp::alltoall)) sizes.push_back(c.bytes);
  // Forward: the pooled table's 512 x 16 x 4, then the sequence table's; backward the reverse.
  EXPECT_EQ(sizes, (std::vector<double>{512 * 16 * 4 * 2, 512 * 10 * 16 * 4 * 2, 512 * 10 * 16 * 4 * 2,
                                        512 * 16 * 4 * 2}));
  const auto pool = kernels_named(tw, 0, "sequence.table_wise.sequence_pool");
  ASSERT_EQ(pool.size(), 1u);
  EXPECT_DOUBLE_EQ(pool[0]->param("elements"), 512 * 10 * 16);
  EXPECT_DOUBLE_EQ(pool[0]->param("bytes_written"), 4.0 / 10);
  EXPECT_EQ(kernels_named(tw, 0, "sequence.table_wise.sequence_pool_backward").size(), 1u);
  for (const auto* k : kernels(tw, 1, "embedding_forward"))
    if (k->param("rows") == 1000 && k->param("pooling") == 1 && k->param("batch") == 1024 * 10) sizes.clear();
  EXPECT_TRUE(sizes.empty()) << "rank 1 looks up 1024 x 10 one-row bags";

  const Trace rw = parse(small_dlrm("[{rows: 1000, pooling: 8, sequence: true}]", training, "sharding: {plan: row_wise}\n"),
                         "0,1");
  EXPECT_TRUE(calls(rw, 0, models::CollectiveOp::reduce_scatter).empty());
  const auto a2a = calls(rw, 0, models::CollectiveOp::alltoall);
  ASSERT_EQ(a2a.size(), 2u);
  EXPECT_DOUBLE_EQ(a2a[0].bytes, 512 * 8 / 2 * 16 * 4 * 2);
  // NVIDIA DLE's sparse gradients and its exchange of pooled vectors are refused, each named.
  EXPECT_NE(error("framework: dle\n" + small_dlrm(tables, training)).find("sequence table 't1' is TorchRec's EmbeddingCollection"),
            std::string::npos);
  EXPECT_NE(error(small_dlrm(tables, training, "sharding: {bottom_mlp: rank0}\n")).find("NVIDIA DLE's exchange carries one pooled"),
            std::string::npos);
  EXPECT_NE(error(small_dlrm(tables, training, "sharding: {plan: [{table: 0, type: table_wise, ranks: [0]}, "
                                               "{table: 1, type: table_row_wise, ranks: [0, 1]}]}\n"))
                .find("does not shard table_row_wise"),
            std::string::npos);
}

// KJT all-to-alls before the lookups: per peer sample, 4 B of lengths per feature and 8 B per
// index (one-hot here) of the features the receiver holds; the collective's size is the busiest
// rank's bytes x n / (n - 1). 2 ranks, 512 samples each.
TEST_F(Dlrm, InputDistributionAllToAllsMatchHandCounts) {
  const auto sizes = [&](const std::string& placement) {
    const Trace t = parse(small_dlrm("{rows: [100, 200, 300, 400]}", "{global_batch: 1024}",
                                     "sharding: {placement: " + placement + ", input_distribution: all_to_all}\n"),
                          "0,1");
    std::vector<double> bytes;
    for (const Op& o : t.program(0).ops)
      if (o.kind == OpKind::collective && t.names[o.name].starts_with("input_dist"))
        bytes.push_back(t.collectives[o.collective].bytes);
    return bytes;
  };
  // First the splits: 3 int64 to each of 2 ranks. Then two features on each rank: each receives
  // and sends 512 x 2 x (4 or 8) B.
  EXPECT_EQ(sizes("[0, 1, 1, 0]"), (std::vector<double>{2 * 3 * 8, 512 * 2 * 4 * 2, 512 * 2 * 8 * 2}));
  // Three on rank 0: it receives 512 x 3 x (4 or 8) B, the busiest.
  EXPECT_EQ(sizes("[0, 0, 0, 1]"), (std::vector<double>{2 * 3 * 8, 512 * 3 * 4 * 2, 512 * 3 * 8 * 2}));
  // Without it (NVIDIA DLE's loader) there is none.
  const Trace dle = parse(small_dlrm(), "0,1");
  for (const Op& o : dle.program(0).ops) {
    if (o.kind == OpKind::collective) {
      EXPECT_FALSE(dle.names[o.name].starts_with("input_dist"));
    }
  }
}

// Where the input distribution sits in a rank's program: unpipelined before the lookups, which
// wait for it; with TorchRec's TrainPipelineSparseDist the next batch's splits at the start and
// its lengths and indices after this batch's forward (the host reading the splits first), while a
// later batch is copied to the GPU: 512 x (4 label + 13 x 4 dense + 4 x 4 lengths + 4 x 8 indices) B.
TEST_F(Dlrm, PipelinedInputDistributionFollowsTheForward) {
  const auto program = [&](const std::string& pipeline) {
    const Trace t = parse(small_dlrm("{rows: [100, 200, 300, 400]}", "{global_batch: 1024, pipeline: " + pipeline + "}",
                                     "sharding: {input_distribution: all_to_all}\n"),
                          "0,1");
    std::map<std::string, std::size_t> first;
    double copied = 0;
    int host_waits = 0;
    const Program& p = t.program(0);
    for (std::size_t i = 0; i < p.ops.size(); ++i) {
      const Op& o = p.ops[i];
      if (o.kind == OpKind::sync && o.event >= 0) ++host_waits;
      if (o.kind == OpKind::memcpy) copied += o.bytes;
      if (o.kind == OpKind::kernel || o.kind == OpKind::collective) first.emplace(t.names[o.name], i);
    }
    return std::make_tuple(first, copied, host_waits);
  };
  const auto [eager, eager_copy, eager_waits] = program("none");
  EXPECT_LT(eager.at("input_dist.indices"), eager.at("embedding_forward[0]"));
  EXPECT_EQ(eager_copy, 0);
  EXPECT_EQ(eager_waits, 1);
  const auto [piped, piped_copy, piped_waits] = program("sparse_dist");
  EXPECT_LT(piped.at("input_dist.splits"), piped.at("embedding_forward[0]"));
  EXPECT_GT(piped.at("input_dist.lengths"), piped.at("loss.mean"));
  EXPECT_LT(piped.at("input_dist.indices"), piped.at("loss.backward.sigmoid"));
  EXPECT_EQ(piped_copy, 512 * (4 + 13 * 4 + 4 * 4 + 4 * 8));
  EXPECT_EQ(piped_waits, 1);
  EXPECT_NE(error(small_dlrm("{rows: [100]}", "{global_batch: 1024, pipeline: sparse_dist}")).find("input_distribution: all_to_all"),
            std::string::npos);
}

// `framework:` gives a framework's own defaults, which keys in the document override: NVIDIA DLE's
// trace equals the one its keys spelled out give; TorchRec's distributes inputs, pipelined, on
// its planner's plan.
TEST_F(Dlrm, FrameworkGivesItsDefaults) {
  const std::string tables = "{rows: [100, 200, 300, 400]}";
  const auto same = [&](const Trace& a, const Trace& b) {
    ASSERT_EQ(a.programs.size(), b.programs.size());
    for (std::size_t p = 0; p < a.programs.size(); ++p) ASSERT_EQ(a.programs[p].ops.size(), b.programs[p].ops.size());
    EXPECT_EQ(a.kernels.size(), b.kernels.size());
    EXPECT_EQ(a.collectives.size(), b.collectives.size());
  };
  const std::string dle_keys = "sharding: {bottom_mlp: rank0, planner: nvidia_dle, process_groups: shared}\n";
  const Trace dle = parse("framework: dle\n" + small_dlrm(tables, "{global_batch: 1024}"), "0,1");
  const Trace spelled = parse(with_model_key(with_model_key(with_model_key(small_dlrm(tables, "{global_batch: 1024, embedding_gradient: sparse}", dle_keys),
                                                                         "interaction_kernel: fused"),
                                                          "interaction_pad_to: 8"),
                                           "mlp_epilogue: apex"),
                              "0,1");
  same(dle, spelled);
  const Trace torchrec = parse("framework: torchrec\n" + small_dlrm(tables, "{global_batch: 1024}"), "0,1");
  const Trace torchrec_spelled = parse(with_model_key(small_dlrm(tables, "{global_batch: 1024, pipeline: sparse_dist}",
                                                                 "sharding: {input_distribution: all_to_all, plan: torchrec, "
                                                                 "library: torchrec}\n"),
                                                      "mlp_epilogue: torch"),
                                       "0,1");
  same(torchrec, torchrec_spelled);
  // A key given overrides the framework's default, and choices that need one another are checked.
  const Trace unpiped = parse("framework: torchrec\n" + small_dlrm(tables, "{global_batch: 1024, pipeline: none}"), "0,1");
  EXPECT_EQ(std::count_if(unpiped.program(0).ops.begin(), unpiped.program(0).ops.end(),
                          [&](const Op& o) { return o.kind == OpKind::memcpy && unpiped.names[o.name] == "next_batch.to_device"; }),
            0);
  EXPECT_NE(error("framework: dle\n" + small_dlrm(tables, "{global_batch: 1024}", "sharding: {plan: row_wise}\n"))
                .find("framework: dle puts the bottom MLP on rank 0"),
            std::string::npos);
}

// ---------------------------------------------------------------- DCN v2 interaction

// DCN v2 against cat on the small DLRM (x0 = 16 + 4 x 16 = 80 values, the top MLP's input either
// way): per cross layer two forward GEMMs through the rank and four backward ones, each 2 b d r
// FLOPs, so 12 L b d r more; 2 d r + d parameters per layer more in DDP's buckets (fp32) and in
// the rank's parameters.
TEST_F(Dlrm, DcnV2AddsItsCrossLayersGemmsAndParameters) {
  const std::string cat = with_model_key(small_dlrm(), "interaction: cat");
  const std::string dcn = with_model_key(small_dlrm(), "interaction: dcn_v2\n  dcn: {layers: 3, low_rank: 8}");
  const Trace a = parse(cat, "0,1"), b = parse(dcn, "0,1");
  const double batch = 1024 / 2, d = 80, r = 8, layers = 3;
  EXPECT_NEAR(b.work.model_flops_per_rank - a.work.model_flops_per_rank, 12 * layers * batch * d * r, 1e-6);
  const auto bytes = [](const Trace& t) {
    double total = 0;
    for (const CollectiveCall& c : calls(t, 0, models::CollectiveOp::allreduce)) total += c.bytes;
    return total;
  };
  EXPECT_NEAR(bytes(b) - bytes(a), 4 * layers * (2 * d * r + d), 1e-6);
  EXPECT_EQ(kernels_named(b, 0, "interaction.cross2.v").size(), 1u);
  EXPECT_EQ(kernels_named(b, 0, "interaction.cross0.bias_grad").front()->kind, "column_sum");
  const double params = [&] {
    const auto& g = b.memory->groups.front().at_peak;
    const auto& h = a.memory->groups.front().at_peak;
    return g[models::MemoryTerm::parameters] - h[models::MemoryTerm::parameters];
  }();
  EXPECT_NEAR(params, 4 * layers * (2 * d * r + d), 1e-6);
  // Under TorchRec's DDP each of a layer's U, V and bias is copied into its bucket: d r, r d, d.
  const Trace torchrec = parse(dcn + "sharding: {library: torchrec}\n", "0,1");
  std::vector<double> copies;
  for (const auto* k : kernels_named(torchrec, 0, "interaction.cross1.ddp_param_to_bucket")) copies.push_back(k->param("elements"));
  EXPECT_EQ(copies, (std::vector<double>{d * r, r * d, d}));
}

TEST_F(Dlrm, DcnV2NeedsItsShape) {
  EXPECT_NE(error(with_model_key(small_dlrm(), "interaction: dcn_v2")).find("add dcn: {layers"), std::string::npos);
  EXPECT_NE(error(with_model_key(small_dlrm(), "dcn: {layers: 3, low_rank: 8}")).find("model.dcn configures"),
            std::string::npos);
  EXPECT_NE(error(with_model_key(small_dlrm(), "interaction: dcn_v2\n  dcn: {layers: 0, low_rank: 8}"))
                .find("model.dcn.layers"),
            std::string::npos);
  EXPECT_NE(error(with_model_key(small_dlrm(), "interaction: dcn_v2\n  dcn: {layers: 3, rank: 8}")).find("low_rank"),
            std::string::npos);
  EXPECT_NE(error(with_model_key(small_dlrm(), "interaction: dcn_v2\n  dcn: {layers: 1000000000, low_rank: 8}"))
                .find("at most 64"),
            std::string::npos);
}

// ---------------------------------------------------------------- optimizers

// The small DLRM on one GPU: 1,000 rows of 16 fp32 values in 4 tables, and 2,769 dense
// parameters (bottom 13-32-16: 976; top 26-64-1 after the dot interaction's 16 + 10 values: 1,793).
TEST_F(Dlrm, OptimizerStateIsCountedPerTableAndDenseParameter) {
  const auto optimizer_bytes = [&](const std::string& training) {
    const Trace t = parse(small_dlrm("{rows: [100, 200, 300, 400]}", training), "0");
    return t.memory->groups.front().at_peak[models::MemoryTerm::optimizer];
  };
  const double elements = 1000 * 16, dense = 2769;
  EXPECT_EQ(optimizer_bytes("{global_batch: 1024}"), 0);
  EXPECT_NEAR(optimizer_bytes("{global_batch: 1024, optimizer: adagrad}"), 4 * (elements + dense), 1e-9);
  EXPECT_NEAR(optimizer_bytes("{global_batch: 1024, optimizer: adam}"), 8 * (elements + dense), 1e-9);
  EXPECT_NEAR(optimizer_bytes("{global_batch: 1024, embedding_optimizer: rowwise_adagrad}"), 4 * 1000, 1e-9);
  EXPECT_NEAR(optimizer_bytes("{global_batch: 1024, optimizer: adam, embedding_optimizer: rowwise_adagrad}"),
              4 * 1000 + 8 * dense, 1e-9);
}

TEST_F(Dlrm, FusedBackwardReadsAndWritesTheOptimizerState) {
  // State per row of 16 fp32 values: none (SGD), one accumulator (row-wise Adagrad), one per value
  // (Adagrad), two per value (Adam).
  const std::map<std::string, double> state = {{"sgd", 0}, {"rowwise_adagrad", 4}, {"adagrad", 64}, {"adam", 128}};
  std::map<std::string, double> time;
  for (const auto& [o, bytes] : state) {
    const Trace t = parse(small_dlrm("{rows: [250000, 250000, 250000, 250000]}",
                                     "{global_batch: 65536, embedding_optimizer: " + o + "}"),
                          "0");
    const auto backward = kernels(t, 0, "embedding_backward");
    ASSERT_EQ(backward.size(), 1u);
    EXPECT_EQ(backward.front()->param("state_bytes"), bytes) << o;
    time[o] = models::kernel_cost(*backward.front(), platform_.gpu()).time;
  }
  EXPECT_LT(time["sgd"], time["rowwise_adagrad"]);
  EXPECT_LT(time["rowwise_adagrad"], time["adagrad"]);
  EXPECT_LT(time["adagrad"], time["adam"]);
  // The MLPs' fused step: weight and gradient read, weight written, and the state both ways.
  for (const auto& [o, bytes] : std::map<std::string, double>{{"sgd", 0}, {"adagrad", 4}, {"adam", 8}}) {
    const Trace t = parse(small_dlrm("{rows: [100, 200, 300, 400]}", "{global_batch: 1024, optimizer: " + o + "}"), "0");
    const auto step = kernels_named(t, 0, "optimizer");
    ASSERT_EQ(step.size(), 1u);
    EXPECT_EQ(step.front()->param("bytes_read"), 8 + bytes) << o;
    EXPECT_EQ(step.front()->param("bytes_written"), 4 + bytes) << o;
  }
}

// The planners and the memory check place a table's optimizer state with it: four tables of
// 100M rows x 16 fp32 values (25.6 GB) fit one A100 40GB with SGD or row-wise Adagrad (+1.6 GB),
// not with Adam (+51.2 GB of moments).
TEST_F(Dlrm, TablesCarryTheirOptimizerStateIntoThePlan) {
  const std::string tables = "{rows: [100000000, 100000000, 100000000, 100000000]}";
  EXPECT_NO_THROW(parse(small_dlrm(tables, "{global_batch: 1024}"), "0"));
  EXPECT_NO_THROW(parse(small_dlrm(tables, "{global_batch: 1024, embedding_optimizer: rowwise_adagrad}"), "0"));
  EXPECT_NE(error(small_dlrm(tables, "{global_batch: 1024, embedding_optimizer: adam}"), "0")
                .find("76.80 GB of embedding tables and their optimizer state"),
            std::string::npos);
}

TEST_F(Dlrm, OptimizersThatAreNotModelledAreRefused) {
  EXPECT_NE(error(small_dlrm("{rows: [100, 200, 300, 400]}", "{global_batch: 1024, optimizer: rowwise_adagrad}"))
                .find("embedding_optimizer: rowwise_adagrad"),
            std::string::npos);
  EXPECT_NE(error(small_dlrm("{rows: [100, 200, 300, 400]}",
                             "{global_batch: 1024, embedding_gradient: sparse, embedding_optimizer: adam}"))
                .find("embedding_gradient: fused"),
            std::string::npos);
}

// ---------------------------------------------------------------- planners

TEST(DlrmPlanners, SizeGreedyBalancesTheHandCase) {
  const ShardingPlan plan = plan_sharding(request(tables_of_rows({10, 9, 8, 1}), 2, "size_greedy"));
  EXPECT_EQ(plan.tables_of_rank, (std::vector<std::vector<int>>{{0, 3}, {1, 2}}));
  EXPECT_EQ(plan.bytes_of_rank, (std::vector<Bytes>{44, 68}));
}

TEST(DlrmPlanners, LookupGreedyIsolatesTheHeavyTable) {
  auto tables = tables_of_rows({100, 100, 100, 100});
  tables[0].pooling = 10;
  const ShardingPlan plan = plan_sharding(request(tables, 2, "lookup_greedy"));
  EXPECT_EQ(plan.tables_of_rank, (std::vector<std::vector<int>>{{0}, {3, 2, 1}}));
}

TEST(DlrmPlanners, NaiveIsRoundRobin) {
  const ShardingPlan plan = plan_sharding(request(tables_of_rows({1, 2, 3, 4, 5}), 2, "naive"));
  EXPECT_EQ(plan.tables_of_rank, (std::vector<std::vector<int>>{{0, 2, 4}, {1, 3}}));
}

TEST(DlrmPlanners, RandomDependsOnlyOnTheSeed) {
  auto random_plan = [](std::uint64_t seed) {
    ShardingRequest r = request(tables_of_rows(std::vector<double>(16, 10)), 4, "random");
    r.seed = seed;
    return plan_sharding(r).tables_of_rank;
  };
  EXPECT_EQ(random_plan(7), random_plan(7));
  bool differs = false;
  for (std::uint64_t seed = 1; seed < 10 && !differs; ++seed) differs = random_plan(seed) != random_plan(0);
  EXPECT_TRUE(differs);
}

TEST(DlrmPlanners, EveryPlannerPlacesEveryTableOnce) {
  const std::vector<double> criteo = {39884406, 39043, 17289, 7420,  20263, 3,        7120,     1543,   63,
                                      38532951, 2953546, 403346, 10,  2208,  11938,    155,      4,      976,
                                      14,       39979771, 25641295, 39664984, 585935, 12972, 108, 36};
  for (const PlannerInfo& info : sharding_planners()) {
    ShardingRequest r = request(tables_of_rows(criteo, 128), 8, info.name);
    r.seed = 3;
    const ShardingPlan a = plan_sharding(r), b = plan_sharding(r);
    EXPECT_EQ(a.tables_of_rank, b.tables_of_rank) << info.name << " is deterministic";
    std::multiset<int> seen;
    for (const auto& mine : a.tables_of_rank) seen.insert(mine.begin(), mine.end());
    EXPECT_EQ(seen.size(), criteo.size()) << info.name;
    for (int t = 0; t < static_cast<int>(criteo.size()); ++t) EXPECT_EQ(seen.count(t), 1u) << info.name << " table " << t;
  }
}

TEST(DlrmPlanners, NvidiaDleKeepsGpu0ForTheBottomMlp) {
  const ShardingPlan plan = plan_sharding(request(tables_of_rows(std::vector<double>(26, 1000), 128), 8, "nvidia_dle"));
  EXPECT_TRUE(plan.tables_of_rank[0].empty());
  for (int r = 1; r < 8; ++r) EXPECT_LE(plan.tables_of_rank[r].size(), 4u) << "ceil(26 / 7) tables at most";
  // With 4 GPUs or fewer every GPU takes tables.
  const ShardingPlan four = plan_sharding(request(tables_of_rows(std::vector<double>(8, 1000)), 4, "nvidia_dle"));
  for (const auto& mine : four.tables_of_rank) EXPECT_EQ(mine.size(), 2u);
}

TEST(DlrmPlanners, GreedySkipsFullRanks) {
  // lookup_greedy: C (pooling 10) to rank 0, B to rank 1, then A to the rank of least cost,
  // rank 1, unless its 400 + 400 B exceed the capacity: then to rank 0 (100 + 400 B).
  auto tables = tables_of_rows({100, 100, 25});  // 400, 400, 100 B
  tables[2].pooling = 10;
  ShardingRequest r = request(tables, 2, "lookup_greedy");
  EXPECT_EQ(plan_sharding(r).tables_of_rank, (std::vector<std::vector<int>>{{2}, {1, 0}}));
  r.gpu_memory = 500;
  EXPECT_EQ(plan_sharding(r).tables_of_rank, (std::vector<std::vector<int>>{{2, 0}, {1}}));
  r.gpu_memory = 350;  // B fits nowhere next to C
  try {
    plan_sharding(r);
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("fits on no rank"), std::string::npos) << e.what();
  }
}

TEST(DlrmPlanners, UnknownPlannerListsTheKnownOnes) {
  try {
    plan_sharding(request(tables_of_rows({1}), 1, "best"));
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("unknown planner 'best'"), std::string::npos) << what;
    EXPECT_NE(what.find("size_lookup_greedy"), std::string::npos) << what;
  }
}

// ---------------------------------------------------------------- TorchRec's op sequence

// FBGEMM's TBE backward launches (71d6f8b2), counted by hand: 16 with cub's one-tile sort, one
// fewer below 1024 lookups (no accumulator to zero); 19 + 2P with the onesweep sort of P 8-bit
// passes (10M rows: 24 bits, P = 3: 25). The model's embedding_backward is one of them.
TEST(TorchrecOps, TbeBackwardLaunchesMatchFbgemm) {
  EXPECT_EQ(dlrm::torchrec::tbe_backward_extra_launches(1000, 1e5) + 1, 15);
  EXPECT_EQ(dlrm::torchrec::tbe_backward_extra_launches(2000, 1e5) + 1, 16);
  EXPECT_EQ(dlrm::torchrec::tbe_backward_extra_launches(1e5, 1e7) + 1, 25);
  EXPECT_EQ(dlrm::torchrec::tbe_backward_extra_launches(1e5, 65536) + 1, 19 + 2 * 3);  // 17 bits: 3 passes
  EXPECT_EQ(dlrm::torchrec::tbe_backward_extra_launches(1e5, 65535) + 1, 19 + 2 * 2);  // 16 bits: 2 passes
}

// sharding.library: torchrec on 2 ranks, table-wise: per exchanging section three blocking split
// copies and the recat copy (the host waits for each), the received KJT's lengths read back, one
// TBE call per section (only its first lookup group pays the op gap), the gradient's n pieces
// before the backward all-to-all and DDP's copy of every MLP parameter into its bucket.
TEST_F(Dlrm, TorchrecLibraryRunsItsOpsAroundTheLookups) {
  const std::string tables = "[{rows: 100}, {rows: 100000}, {rows: 200}, {rows: 300000}]";
  const auto build = [&](const std::string& library) {
    return parse(small_dlrm(tables, "{global_batch: 1024, pipeline: sparse_dist}",
                            "sharding: {input_distribution: all_to_all, placement: [0, 0, 1, 1], library: " + library +
                                "}\n"),
                 "0,1");
  };
  const Trace plain = build("none"), torchrec = build("torchrec");
  const auto named = [](const Trace& t, const std::string& name) {
    return std::count_if(t.program(0).ops.begin(), t.program(0).ops.end(),
                         [&](const Op& o) { return t.names[o.name] == name; });
  };
  for (const char* copy : {"input_dist.splits_batch", "input_dist.splits_values", "input_dist.splits_stride",
                           "input_dist.recat"})
    EXPECT_EQ(named(torchrec, copy), 1) << copy;
  EXPECT_EQ(named(torchrec, "dist_init.lengths_read"), 1);  // KJT.sync's host read of the lengths
  EXPECT_EQ(named(plain, "dist_init.lengths_read"), 0);
  EXPECT_EQ(named(torchrec, "output_dist.grad_piece"), 2);
  EXPECT_EQ(named(torchrec, "bottom_mlp.fc0.ddp_weight_to_bucket"), 1);
  EXPECT_EQ(named(torchrec, "top_mlp.fc1.ddp_bias_to_bucket"), 1);
  EXPECT_EQ(named(plain, "output_dist.grad_piece"), 0);
  // Rank 0's two tables differ in rows: two lookup groups, one TBE call (one op gap).
  const Program& p = torchrec.program(0);
  int forwards = 0, gapped = 0;
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    if (p.ops[i].kind != OpKind::kernel || torchrec.names[p.ops[i].name].rfind("embedding_forward", 0) != 0) continue;
    ++forwards;
    gapped += i > 0 && p.ops[i - 1].kind == OpKind::cpu;
  }
  EXPECT_EQ(forwards, 2);
  EXPECT_EQ(gapped, 1);
  EXPECT_NE(error(small_dlrm(tables, "{global_batch: 1024, embedding_gradient: sparse}", "sharding: {library: torchrec}\n"))
                .find("TorchRec's sharded modules run FBGEMM's fused TBE"),
            std::string::npos);
}

// ---------------------------------------------------------------- plan: torchrec

TorchrecPlannerInputs torchrec_topology(int per_node) {
  TorchrecPlannerInputs in;
  in.batch_per_rank = 1024;
  in.hbm = 1.5e12;
  in.intra_node = 300e9;
  in.inter_node = 50e9;
  in.ranks_per_node = per_node;
  return in;
}

// Equal tables with room to spare: each table whole on one rank (replicating or splitting only
// adds communication), and the greedy partition spreads them evenly, two per rank.
TEST(TorchrecPlanner, EqualTablesSpreadEvenlyWhole) {
  ShardingRequest r = request(tables_of_rows({1e6, 1e6, 1e6, 1e6, 1e6, 1e6, 1e6, 1e6}, 128), 4, "");
  const std::vector<TableSharding> plan = torchrec_plan(r, torchrec_topology(4));
  ASSERT_EQ(plan.size(), 8u);
  std::map<int, int> per_rank;
  for (const TableSharding& t : plan) {
    ASSERT_EQ(t.kind, ShardingKind::table_wise);
    ASSERT_EQ(t.ranks.size(), 1u);
    ++per_rank[t.ranks[0]];
  }
  EXPECT_EQ(per_rank, (std::map<int, int>{{0, 2}, {1, 2}, {2, 2}, {3, 2}}));
}

// A table larger than one GPU's room cannot stay whole: it is split (rows or columns) while the
// small ones stay whole; the result is a valid per-table plan that fits, the same every time.
TEST(TorchrecPlanner, TableLargerThanAGpuIsSplit) {
  ShardingRequest r = request(tables_of_rows({4e6, 1e5, 1e5, 1e5}, 256), 4, "");
  r.gpu_memory = 3e9;  // the 4M x 256 fp32 table is 4.1 GB
  const std::vector<TableSharding> plan = torchrec_plan(r, torchrec_topology(4));
  EXPECT_TRUE(plan[0].kind == ShardingKind::row_wise || plan[0].kind == ShardingKind::column_wise)
      << to_string(plan[0].kind);
  r.per_table = plan;
  const ShardingPlan checked = plan_sharding(r);
  for (Bytes b : checked.bytes_of_rank) EXPECT_LE(b, 3e9);
  const std::vector<TableSharding> again = torchrec_plan(r, torchrec_topology(4));
  for (std::size_t t = 0; t < plan.size(); ++t) {
    EXPECT_EQ(again[t].kind, plan[t].kind);
    EXPECT_EQ(again[t].ranks, plan[t].ranks);
  }
}

// Across slow nodes a table too big for one GPU keeps its row blocks within one node
// (table_row_wise: its reduce-scatter stays on NVLink, only the pooled sums cross), on one
// whole node's ranks in order.
TEST(TorchrecPlanner, NodeRowBlocksAreOneWholeNode) {
  // 8M x 128 fp32 = 4.1 GB; 128 columns make one column block, so rows are what splits.
  ShardingRequest r = request(tables_of_rows({8e6, 1e5, 1e5, 1e5}, 128), 4, "");
  r.gpu_memory = 3e9;
  r.node_of_rank = {0, 0, 1, 1};
  TorchrecPlannerInputs in = torchrec_topology(2);
  in.inter_node = 1e9;
  const TableSharding big = torchrec_plan(r, in)[0];
  ASSERT_EQ(big.kind, ShardingKind::table_row_wise);
  EXPECT_TRUE(big.ranks == (std::vector<int>{0, 1}) || big.ranks == (std::vector<int>{2, 3}));
  r.tables[0].sequence = true;  // TorchRec's EmbeddingCollection has no table_row_wise
  EXPECT_EQ(torchrec_plan(r, in)[0].kind, ShardingKind::row_wise);
}

// TorchRec's default Topology believes every GPU has 32 GiB: on 80 GB GPUs its plan still keeps
// every rank under 32 GiB less the reserve, where the platform's memory would allow more.
TEST(TorchrecPlanner, DefaultTopologyCapsTheMemoryAt32GiB) {
  ShardingRequest r = request(tables_of_rows({6e7, 6e7, 1e5}, 128), 2, "");  // 30.7 GB each
  r.gpu_memory = 80e9;
  r.memory_reserve = 2e9;
  TorchrecPlannerInputs defaults = torchrec_default_topology();
  defaults.batch_per_rank = 1024;
  defaults.ranks_per_node = 2;
  EXPECT_DOUBLE_EQ(defaults.hbm_cap, 32.0 * 1024 * 1024 * 1024);
  r.per_table = torchrec_plan(r, defaults);
  for (Bytes b : plan_sharding(r).bytes_of_rank) EXPECT_LE(b, defaults.hbm_cap - 2e9);
  r = request(tables_of_rows({6e7, 6e7, 1e5}, 128), 4, "");
  r.gpu_memory = 20e9;  // a real GPU smaller than the cap bounds the plan instead
  r.memory_reserve = 2e9;
  defaults.ranks_per_node = 4;
  r.per_table = torchrec_plan(r, defaults);
  for (Bytes b : plan_sharding(r).bytes_of_rank) EXPECT_LE(b, 18e9);
  // Where the cap alone makes a job not fit, the error says so and names the key that lifts it.
  ShardingRequest one = request(tables_of_rows({8e7}, 128), 1, "");  // 41 GB
  one.gpu_memory = 80e9;
  try {
    torchrec_plan(one, defaults);
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("sharding.torchrec_topology: platform"), std::string::npos) << e.what();
  }
}

TEST(TorchrecPlanner, NothingFitsNamesTheFix) {
  ShardingRequest r = request(tables_of_rows({1e7}, 256), 2, "");
  r.gpu_memory = 1e9;
  r.gpu_name = "A100-SXM4-40GB";
  r.where = "w.yaml: sharding";
  try {
    torchrec_plan(r, torchrec_topology(2));
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("w.yaml: sharding"), std::string::npos) << what;
    EXPECT_NE(what.find("A100-SXM4-40GB"), std::string::npos) << what;
    EXPECT_NE(what.find("more GPUs"), std::string::npos) << what;
  }
}

// In a workload: the plan the generator notes, given back as sharding.plan, builds the same
// trace; the planner refuses the sparse-gradient path it does not model.
TEST_F(Dlrm, TorchrecPlanIsReusableAsAPerTablePlan) {
  const std::string rows = "{rows: [200000, 1000, 1000, 50, 300000, 2000]}";
  const std::string training = "{global_batch: 4096}";
  const Trace planned = parse(small_dlrm(rows, training, "sharding: {plan: torchrec}\n"), "0-3");
  std::string listed;
  for (const std::string& n : planned.notes)
    if (n.rfind("TorchRec's plan (usable as sharding.plan): ", 0) == 0) listed = n.substr(43);
  if (listed.empty()) {  // an all-table-wise plan is noted as a placement
    for (const std::string& n : planned.notes)
      if (n.rfind("table placement (usable as sharding.placement): ", 0) == 0)
        listed = "placement: " + n.substr(48, n.find(']') - 47);
  } else {
    listed = "plan: " + listed;
  }
  ASSERT_FALSE(listed.empty());
  const Trace given = parse(small_dlrm(rows, training, "sharding: {" + listed + "}\n"), "0-3");
  EXPECT_EQ(given.kernels, planned.kernels);
  EXPECT_EQ(given.program_of_rank, planned.program_of_rank);
  EXPECT_NE(error(small_dlrm(rows, "{global_batch: 4096, embedding_gradient: sparse}", "sharding: {plan: torchrec}\n"),
                  "0-3")
                .find("(TorchRec's planner) is modelled with FBGEMM's fused kernels"),
            std::string::npos);
}

// ---------------------------------------------------------------- the preset

TEST_F(Dlrm, PresetOnEightGpusIsNvidiaDleHybridParallel) {
  const Trace t = preset("");
  ASSERT_EQ(t.ranks, 8);
  EXPECT_EQ(t.work.items_per_rank, 8192);
  EXPECT_EQ(t.launch.cpu_launch, 0) << "CUDA graphs";
  // Rank 0: bottom MLP over the global batch, no tables; ranks 1-7: 3 or 4 tables each.
  EXPECT_TRUE(kernels(t, 0, "embedding_forward").empty());
  EXPECT_EQ(kernels(t, 0, "gemm")[0]->param("m"), 65536);
  double tables = 0;
  for (int r = 1; r < 8; ++r)
    for (const auto* k : kernels(t, r, "embedding_forward")) tables += k->param("tables");
  EXPECT_EQ(tables, 26);
  // Widths per rank: the bottom output or the rank's tables, x 128 values x 8192 samples x
  // 2 B (AMP); the all-to-all carries n/(n-1) x the busiest rank's traffic.
  ShardingRequest r;
  for (double rows : {39884406., 39043., 17289., 7420., 20263., 3., 7120., 1543., 63., 38532951., 2953546., 403346.,
                      10., 2208., 11938., 155., 4., 976., 14., 39979771., 25641295., 39664984., 585935., 12972., 108.,
                      36.})
    r.tables.push_back({"", rows, 128, 1, 4});
  r.ranks = 8;
  r.planner = "nvidia_dle";
  const ShardingPlan plan = plan_sharding(r);
  std::vector<double> s;
  for (int rank = 0; rank < 8; ++rank)
    s.push_back((rank == 0 ? 1.0 : plan.tables_of_rank[rank].size()) * 128 * 8192 * 2);
  const double total = std::accumulate(s.begin(), s.end(), 0.0);
  double busiest = 0;
  for (double si : s) busiest = std::max({busiest, 7 * si, total - si});
  EXPECT_EQ(calls(t, 3, models::CollectiveOp::alltoall)[0].bytes, busiest * 8 / 7);
  // The top MLP's 2.2M fp32 gradients (its input padded from 479 to 480: 1024 more weights) are
  // one 25 MiB bucket; the bottom MLP's are not reduced, so the bucket is complete, and
  // launched, before the backward all-to-all.
  const auto allreduces = calls(t, 0, models::CollectiveOp::allreduce);
  ASSERT_EQ(allreduces.size(), 1u);
  EXPECT_EQ(allreduces[0].bytes, (2197505 + 1024) * 4.0);
  std::vector<models::CollectiveOp> order;
  for (const Op& o : t.program(0).ops)
    if (o.kind == OpKind::collective) order.push_back(t.collectives[o.collective].op);
  EXPECT_EQ(order, (std::vector<models::CollectiveOp>{models::CollectiveOp::alltoall, models::CollectiveOp::allreduce,
                                                      models::CollectiveOp::alltoall}));
}

// The TorchRec presets on 8 A100 80GB: dlrm_main.py's defaults (256 samples, dim 64, one-hot) and
// MLPerf's DCNv2 (multi-hot: 216 lookups per sample, Adagrad's state beside every value). FBGEMM's
// fused backward keeps no table-sized gradient: the peak holds the tables, their state and the
// lookups' buffers, not a second copy of the tables.
TEST_F(Dlrm, TorchRecPresetsRunOnEightGpus) {
  platforms::PlatformOptions options;
  options.overrides = {"gpu.model=A100-SXM4-80GB"};
  platform_ = platforms::load_platform("dgx-a100", options);
  const platforms::Allocation allocation = platforms::parse_allocation("0-7", platform_);
  const Trace small = load_workload("dlrm-torchrec-criteo-1tb", JobContext{platform_, allocation});
  EXPECT_EQ(small.work.items_per_rank, 32);
  // Whole tables, so that every table's lookups are counted once.
  const Trace dcn = load_workload("dlrm-dcnv2-mlperf", JobContext{platform_, allocation}, {"sharding.plan=table_wise"});
  double lookups = 0;
  for (int r = 0; r < 8; ++r)
    for (const auto* k : kernels(dcn, r, "embedding_forward")) lookups += k->params.at("tables") * k->params.at("pooling");
  EXPECT_EQ(lookups, 3 + 2 + 1 + 2 + 6 + 1 + 1 + 1 + 1 + 7 + 3 + 8 + 1 + 6 + 9 + 5 + 1 + 1 + 1 + 12 + 100 + 27 + 10 + 3 + 1 + 1);
  ASSERT_TRUE(dcn.memory);
  const auto& worst = dcn.memory->worst();
  EXPECT_LT(worst.at_peak[models::MemoryTerm::gradients], 0.01 * worst.at_peak[models::MemoryTerm::parameters]);
  EXPECT_NEAR(worst.at_peak[models::MemoryTerm::optimizer], worst.at_peak[models::MemoryTerm::parameters],
              0.01 * worst.at_peak[models::MemoryTerm::parameters]);
}

TEST_F(Dlrm, PresetDoesNotFitOneGpu) {
  const platforms::Allocation one = platforms::parse_allocation("0", platform_);
  try {
    load_workload("dlrm-criteo-1tb", JobContext{platform_, one});
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 0 would store 96.14 GB"), std::string::npos) << what;
    EXPECT_NE(what.find("A100-SXM4-40GB"), std::string::npos) << what;
    EXPECT_NE(what.find("at least 3 GPUs"), std::string::npos) << what;
    EXPECT_NE(what.find("dlrm-criteo-1tb.yaml (preset): sharding"), std::string::npos) << what;
  }
}

// DLE's small model on one GPU: all 26 FL15 tables (32,709,138 rows of 128 fp32 = 16.75 GB) on
// rank 0, joint_fused's gradient copy over all 65,536 x 26 pooled rows, no communication.
TEST_F(Dlrm, SmallPresetRunsOnOneGpu) {
  const platforms::Allocation one = platforms::parse_allocation("0", platform_);
  const Trace t = load_workload("dlrm-criteo-1tb-small", JobContext{platform_, one});
  double rows = 0;
  for (const auto* k : kernels(t, 0, "embedding_forward")) rows += k->param("tables") * k->param("rows");
  EXPECT_DOUBLE_EQ(rows, 32709138);
  const auto copy = kernels_named(t, 0, "embedding_grad_copy");
  ASSERT_EQ(copy.size(), 1u);
  EXPECT_DOUBLE_EQ(copy[0]->param("elements"), 65536.0 * 26 * 128);
  for (const Op& o : t.program(0).ops) EXPECT_NE(o.kind, OpKind::collective);
}

TEST_F(Dlrm, GenerationIsDeterministic) {
  const std::string text = small_dlrm("{rows: [100, 200, 300, 400, 500]}", "{global_batch: 1024}",
                                      "sharding: {planner: random, seed: 5}\nindex_distribution: {kind: zipf, alpha: 1.05}\n");
  const Trace a = parse(text, "0-3"), b = parse(text, "0-3");
  EXPECT_EQ(a.kernels, b.kernels);
  EXPECT_EQ(a.program_of_rank, b.program_of_rank);
  EXPECT_EQ(a.names, b.names);
}

// ---------------------------------------------------------------- index distributions

TEST_F(Dlrm, ZipfReuseHistogram) {
  // alpha 20 puts essentially every lookup on the hottest row: 4 lookups (batch 4, pooling 1)
  // are one unique row used 4 times, bin "3-4".
  const Trace t = parse(small_dlrm("{rows: [1000]}", "{global_batch: 4}", "index_distribution: {kind: zipf, alpha: 20}\n"),
                        "0");
  const auto* k = kernels(t, 0, "embedding_forward")[0];
  ASSERT_EQ(k->histogram.size(), 17u);
  EXPECT_NEAR(k->histogram[2], 1, 1e-5);
  // A Criteo-sized table: fractions sum to 1, most unique rows seen once.
  const Trace big = parse(small_dlrm("{rows: [40000000]}", "{global_batch: 65536}",
                                     "index_distribution: {kind: zipf, alpha: 1.05}\n"),
                          "0");
  const auto& h = kernels(big, 0, "embedding_forward")[0]->histogram;
  EXPECT_NEAR(std::accumulate(h.begin(), h.end(), 0.0), 1, 1e-9);
  EXPECT_GT(h[0], 0.5);
  // Uniform indices leave the hit rate to the kernel model (no histogram).
  EXPECT_TRUE(kernels(parse(small_dlrm(), "0,1"), 0, "embedding_forward")[0]->histogram.empty());
}

// ---------------------------------------------------------------- bad input

TEST_F(Dlrm, BadInputNamesFilePathAndFix) {
  struct Case {
    std::string text, gpus;
    std::vector<std::string> expect;
  };
  const std::vector<Case> cases = {
      {small_dlrm("{rows: [100]}", "{global_batch: 1024}", "sharding: {plan: diagonal}\n"), "0,1",
       {"test.yaml: sharding.plan (line", "unknown value 'diagonal'", "table_wise, row_wise"}},
      {small_dlrm("{rows: [100]}", "{global_batch: 1024, learning_rate: 1}"), "0,1",
       {"test.yaml: training.learning_rate", "unknown key 'learning_rate'", "global_batch, dtype"}},
      {small_dlrm("{rows: [100]}", "{global_batch: 0}"), "0,1",
       {"test.yaml: training.global_batch (line", "must be >= 1", "fix:"}},
      {small_dlrm("{rows: [100]}", "{global_batch: 1000}"), "0-2",
       {"test.yaml: training.global_batch (line", "do not split evenly over the job's 3 ranks", "999 or 1002"}},
      {small_dlrm("{rows: [100, 0.5]}"), "0,1", {"test.yaml: model.tables.rows[1]", "whole number >= 1"}},
      {small_dlrm("{rows: [100], dim: 8}"), "0,1", {"test.yaml: model.tables", "dot interaction", "interaction: cat"}},
      {small_dlrm("{rows: [100]}", "{global_batch: 1024}", "sharding: {plan: row_wise, bottom_mlp: rank0}\n"), "0,1",
       {"test.yaml: sharding.bottom_mlp", "all-to-all"}},
      {small_dlrm("{rows: [100]}", "{global_batch: 1024}", "index_distribution: {kind: zipf}\n"), "0,1",
       {"test.yaml: index_distribution.alpha", "missing required key 'alpha'"}},
      {small_dlrm("{rows: [100]}", "{global_batch: 1024}", "index_distribution: {kind: histogram, histogram: [1]}\n"),
       "0,1", {"test.yaml: index_distribution.histogram", "list of 17 fractions", "occur 1, 2, 3-4"}},
      {small_dlrm("{rows: [100]}", "{global_batch: 1024}", "sharding: {planner: best}\n"), "0,1",
       {"test.yaml: sharding.planner", "unknown value 'best'", "nvidia_dle"}},
      {small_dlrm("{rows: [100]}", "{global_batch: 1024, graph_scope: forward_backward}"), "0,1",
       {"test.yaml: training.graph_scope (line", "needs cuda_graphs: true", "set training.cuda_graphs: true"}},
      {small_dlrm("{rows: [100]}", "{global_batch: 1024, cuda_graphs: true, sync_each_step: true}"), "0,1",
       {"test.yaml: training.sync_each_step (line", "applies to NVIDIA DLE's loop",
        "set training.graph_scope: forward_backward"}},
      {small_dlrm("{rows: [100]}", "{global_batch: 1024, embedding_gradient: dense}"), "0,1",
       {"test.yaml: training.embedding_gradient", "unknown value 'dense'", "fused, sparse"}},
      {"version: 1\nkind: dlrm\nmodel:\n  dense_features: 13\n  bottom_mlp: [32, 16]\n  top_mlp: [64, 1]\n"
       "  embedding_dim: 16\n  interaction: cat\n  interaction_kernel: fused\n  tables: {rows: [100]}\n"
       "training: {global_batch: 1024}\n",
       "0,1", {"test.yaml: model.interaction_kernel (line", "applies to interaction: dot", "interaction: dot"}},
      {"version: 1\nkind: dlrm\nmodel:\n  dense_features: 13\n  bottom_mlp: [32, 16]\n  top_mlp: [64, 1]\n"
       "  embedding_dim: 16\n  interaction: cat\n  interaction_pad_to: 8\n  tables: {rows: [100]}\n"
       "training: {global_batch: 1024}\n",
       "0,1", {"test.yaml: model.interaction_pad_to (line", "applies to interaction: dot"}},
      {with_model_key(small_dlrm("{rows: [100]}"), "interaction_pad_to: 0"), "0,1",
       {"test.yaml: model.interaction_pad_to (line", ">= 1"}},
      {with_model_key(small_dlrm("{rows: [100]}"), "mlp_epilogue: cublaslt"), "0,1",
       {"test.yaml: model.mlp_epilogue (line", "unknown value 'cublaslt'", "fused, apex, torch"}},
      {with_model_key(small_dlrm("{rows: [100]}"), "embedding_kernel: torch"), "0,1",
       {"test.yaml: model.embedding_kernel (line", "gradient is sparse", "set training.embedding_gradient: sparse"}},
      {with_model_key(small_dlrm("{rows: [100]}", "{global_batch: 1024, embedding_gradient: sparse}",
                                 "sharding: {plan: data_parallel}\n"),
                      "embedding_kernel: torch"),
       "0,1", {"test.yaml: model.embedding_kernel (line", "not replicated ones", "another sharding.plan"}},
  };
  for (const Case& c : cases) {
    const std::string what = error(c.text, c.gpus);
    for (const std::string& part : c.expect) EXPECT_NE(what.find(part), std::string::npos) << part << "\n in: " << what;
  }
}

// ---------------------------------------------------------------- DLE's training loop

// Names of rank `rank`'s ops in issue order, "cpu:" / "sync:" prefixed for host ops.
std::vector<std::string> op_names(const Trace& t, int rank) {
  std::vector<std::string> out;
  for (const Op& o : t.program(rank).ops) {
    if (o.kind == OpKind::kernel) out.push_back(t.names[o.name]);
    if (o.kind == OpKind::cpu) out.push_back("cpu:" + t.names[o.name]);
    if (o.kind == OpKind::sync) out.push_back("sync:" + t.names[o.name]);
  }
  return out;
}

// graph_scope forward_backward + sparse gradients under AMP, on 2 GPUs: the graph waits for the
// CPU's iteration start (DLE synchronizes every iteration); after the backward the CPU launches
// (25 us each) GradScaler's one-element ops and the dense unscale, syncs on its inf flag,
// launches FusedSGD, then the sparse gradient's unscale (after the same one-element ops), its
// -lr scaling and the index_add, GradScaler's update and the loss sum; then DLE's prefetcher
// copies the next batch to the GPU and the loop synchronizes. The backward only casts the fp16
// pooled gradient back to fp32 (4 tables x 1024 samples x 16).
TEST_F(Dlrm, DleLoopLaunchesTheWeightUpdateAfterTheGraph) {
  const Trace t = parse(small_dlrm("{rows: [100, 100, 100, 100]}",
                                   "{global_batch: 1024, dtype: fp16, cuda_graphs: true, graph_scope: forward_backward, "
                                   "embedding_gradient: sparse}"),
                        "0,1");
  EXPECT_EQ(t.launch.cpu_launch, 0);
  const std::vector<std::string> names = op_names(t, 0);
  const auto at = [&](const std::string& name) {
    const auto it = std::find(names.begin(), names.end(), name);
    EXPECT_NE(it, names.end()) << name;
    return it - names.begin();
  };
  // In this order (each name's first occurrence).
  const std::vector<std::string> order = {"embedding_forward",
                                          "embedding_output_cast",
                                          "embedding_grad_cast",
                                          "grad_scaler.mlp.double",
                                          "grad_scaler.mlp.found_inf_copy",
                                          "grad_scaler.unscale",
                                          "sync:grad_scaler.found_inf",
                                          "cpu:optimizer.launch",
                                          "optimizer",
                                          "grad_scaler.embedding.double",
                                          "grad_scaler.embedding.found_inf_copy",
                                          "embedding_grad_unscale",
                                          "embedding_grad_scale_lr",
                                          "embedding_sgd",
                                          "grad_scaler.update_scale",
                                          "moving_loss",
                                          "cpu:prefetcher.wait_stream"};
  for (std::size_t i = 0; i + 1 < order.size(); ++i) EXPECT_LT(at(order[i]), at(order[i + 1])) << order[i];
  EXPECT_EQ(names.back(), "sync:torch.cuda.synchronize");
  EXPECT_EQ(std::count(names.begin(), names.end(), "embedding_backward"), 0);
  // The iteration starts on the CPU after DLE's per-iteration synchronize: the learning-rate
  // scheduler (T1), three copies into the graph's inputs and the replay (T1 + T4 each).
  const Program& p = t.program(0);
  ASSERT_EQ(p.ops.front().kind, OpKind::cpu);
  EXPECT_EQ(t.names[p.ops.front().name], "iteration_start");
  EXPECT_DOUBLE_EQ(p.ops.front().duration, 21e-6 + 4 * (21e-6 + 4e-6));
  // Every later CPU op is a launch (Lin et al.'s op gap T1 + launch call T4) or a host-only op
  // (T1): 2 x 6 one-element ops, the two unscales, FusedSGD, the -lr scaling, the index_add, the
  // inf sum, the scale update, the loss sum and one launch per uploaded input; host-only: the
  // sparse gradient's _values(), the update's two found_inf moves, the prefetcher's wait_stream
  // and next(), and one record_stream per upload.
  int launches = 0, host_only = 0, uploads = 0;
  Bytes uploaded = 0;
  for (std::size_t i = 1; i < p.ops.size(); ++i) {
    if (p.ops[i].kind == OpKind::memcpy) {
      EXPECT_EQ(p.ops[i].memcpy, MemcpyKind::host_to_device);
      // From the loader's pageable memory: the CPU waits for the copy on its stream.
      EXPECT_EQ(p.ops[i].host_memory, HostMemory::pageable);
      ASSERT_LT(i + 1, p.ops.size());
      EXPECT_EQ(p.ops[i + 1].kind, OpKind::sync);
      EXPECT_EQ(p.ops[i + 1].stream, p.ops[i].stream);
      EXPECT_EQ(p.ops[i + 1].event, -1);
      uploaded += p.ops[i].bytes;
      ++uploads;
    }
    if (p.ops[i].kind != OpKind::cpu) continue;
    if (p.ops[i].duration == 21e-6 + 4e-6) ++launches;
    else if (p.ops[i].duration == 21e-6) ++host_only;
    else ADD_FAILURE() << t.names[p.ops[i].name] << " takes " << p.ops[i].duration;
  }
  const int bottom = std::count(names.begin(), names.end(), "input.numerical_cast");
  EXPECT_EQ(launches, 12 + 2 + 5 + 1 + uploads + bottom);
  EXPECT_EQ(host_only, 1 + 2 + 2 + uploads);
  // Data movement: the global batch's fp32 labels, the rank's tables' int64 indices for the
  // global batch and the fp16 dense features of the rank's bottom MLP batch (data parallel by
  // default: the local 512 samples).
  double rank_tables = 0;
  for (const auto* k : kernels(t, 0, "embedding_forward")) rank_tables += k->param("tables");
  ASSERT_EQ(bottom, 1);
  EXPECT_DOUBLE_EQ(uploaded, 1024 * 4 + 1024 * rank_tables * 8 + 512 * 13 * 2);
  // Pass sizes: the rank's tables (one group of alike ones) x the global batch x dim 16.
  double tables = 0;
  for (const auto* k : kernels(t, 0, "embedding_forward")) tables += k->param("tables");
  ASSERT_GT(tables, 0);
  for (const Op& o : t.program(0).ops) {
    if (o.kind != OpKind::kernel) continue;
    const std::string& name = t.names[o.name];
    if (name == "embedding_output_cast" || name == "embedding_grad_cast" || name == "embedding_grad_unscale" ||
        name == "embedding_grad_scale_lr") {
      EXPECT_DOUBLE_EQ(t.kernels[o.kernel].param("elements"), 1024 * tables * 16) << name;
    }
  }
  // GradScaler's unscale and the dense SGD are multi-tensor kernels.
  for (const char* name : {"embedding_grad_unscale", "grad_scaler.unscale", "optimizer"})
    for (const models::KernelSpec* k : kernels_named(t, 0, name)) EXPECT_EQ(k->param("multi_tensor"), 1) << name;
  EXPECT_FALSE(kernels_named(t, 0, "embedding_grad_unscale").empty());
  // The index_add_ of the scaled values: every looked-up row of the rank's tables.
  double added = 0;
  for (const auto* k : table_updates(t, 0)) added += k->param("rows");
  EXPECT_DOUBLE_EQ(added, 1024 * tables);
  EXPECT_EQ(std::count(names.begin(), names.end(), "sync:step.synchronize"), 0);
}

// A benchmark loop that synchronizes between the steps it times: the device sync comes before
// next(batch_iter), so the prefetch copies start on an idle GPU instead of overlapping the
// weight update; nothing else changes.
TEST_F(Dlrm, SyncEachStepExposesThePrefetchCopies) {
  const std::string training = "{global_batch: 65536, dtype: fp16, cuda_graphs: true, graph_scope: forward_backward, "
                               "embedding_gradient: sparse";
  const Trace dle = parse(small_dlrm("{rows: [100000, 100000]}", training + "}"), "0");
  const Trace synced = parse(small_dlrm("{rows: [100000, 100000]}", training + ", sync_each_step: true}"), "0");
  const std::vector<std::string> names = op_names(synced, 0);
  const auto sync = std::find(names.begin(), names.end(), "sync:step.synchronize");
  ASSERT_NE(sync, names.end());
  EXPECT_EQ(*(sync - 1), "moving_loss");
  EXPECT_EQ(*(sync + 1), "cpu:prefetcher.wait_stream");
  EXPECT_EQ(names.size(), op_names(dle, 0).size() + 1);
}

// NVIDIA DLE's hybrid-parallel exchange (bottom_mlp: rank0) copies around its all-to-all: rank
// 0's bottom output and its tables' joint output concatenated before it (global batch x its
// width; a rank with tables alone sends its joint output as it is), the received 5 vectors
// after it and the gradient split before the backward one (local batch 512 x 5 x 16), 2 B
// each under AMP. TorchRec's layout (data-parallel bottom MLP) copies nothing.
TEST_F(Dlrm, DleExchangeCopiesAroundTheAlltoall) {
  const std::string training = "{global_batch: 1024, dtype: fp16}";
  const Trace t = parse(small_dlrm("{rows: [100, 100, 100, 100]}", training, "sharding: {bottom_mlp: rank0}\n"), "0,1");
  for (int r = 0; r < 2; ++r) {
    double tables = 0;
    for (const auto* k : kernels(t, r, "embedding_forward")) tables += k->param("tables");
    const double width = 16 * (tables + (r == 0 ? 1 : 0));
    std::map<std::string, double> elements;
    for (const Op& o : t.program(r).ops)
      if (o.kind == OpKind::kernel && t.names[o.name].rfind("exchange_", 0) == 0)
        elements[t.names[o.name]] = t.kernels[o.kernel].param("elements");
    const bool concatenates = r == 0 && tables > 0;
    EXPECT_EQ(elements.count("exchange_input_cat"), concatenates ? 1u : 0u) << r;
    if (concatenates) {
      EXPECT_DOUBLE_EQ(elements["exchange_input_cat"], 1024 * width) << r;
    }
    EXPECT_DOUBLE_EQ(elements["exchange_output_cat"], 512 * 5 * 16) << r;
    EXPECT_DOUBLE_EQ(elements["exchange_grad_split"], 512 * 5 * 16) << r;
  }
  const Trace torchrec = parse(small_dlrm("{rows: [100, 100, 100, 100]}", training), "0,1");
  for (int r = 0; r < 2; ++r)
    for (const Op& o : torchrec.program(r).ops)
      if (o.kind == OpKind::kernel) {
        EXPECT_NE(torchrec.names[o.name].rfind("exchange_", 0), 0u) << torchrec.names[o.name];
      }
}

// Behind DLE's exchange the fused interaction's bottom-output gradient comes back through
// autograd's select_backward (the bottom output is from_bottom[:, 0, :]): zeros the size of all
// 5 vectors (512 x 5 x 16 per rank), the slice's gradient copied in (512 x 16, a strided view)
// and the sum with the vectors' gradient; the gradient split before the backward all-to-all
// copies column slices (strided). Without the exchange only the bottom output's two gradients
// are summed.
TEST_F(Dlrm, DleFusedInteractionAccumulatesTheSlicedGradient) {
  const std::string training = "{global_batch: 1024, dtype: fp16}";
  const std::string dle = small_dlrm("{rows: [100, 100, 100, 100]}", training, "sharding: {bottom_mlp: rank0}\n");
  const Trace t = parse(with_model_key(dle, "interaction_kernel: fused"), "0,1");
  const auto spec_of = [](const Trace& trace, const std::string& name) -> const models::KernelSpec* {
    for (const Op& o : trace.program(0).ops)
      if (o.kind == OpKind::kernel && trace.names[o.name] == name) return &trace.kernels[o.kernel];
    return nullptr;
  };
  ASSERT_NE(spec_of(t, "interaction.select_backward.zeros"), nullptr);
  EXPECT_EQ(spec_of(t, "interaction.select_backward.zeros")->param("elements"), 512 * 5 * 16);
  EXPECT_EQ(spec_of(t, "interaction.select_backward.zeros")->param("bytes_read"), 0);
  EXPECT_EQ(spec_of(t, "interaction.select_backward")->param("elements"), 512 * 16);
  EXPECT_EQ(spec_of(t, "interaction.select_backward")->param("strided"), 1);
  EXPECT_EQ(spec_of(t, "interaction.grad_accumulate")->param("elements"), 512 * 5 * 16);
  EXPECT_EQ(spec_of(t, "interaction.grad_accumulate")->param("strided"), 0);
  EXPECT_EQ(spec_of(t, "exchange_grad_split")->param("strided"), 1);
  EXPECT_EQ(spec_of(t, "bottom_output.grad_add"), nullptr);

  const Trace single =
      parse(with_model_key(small_dlrm("{rows: [100, 100, 100, 100]}", training), "interaction_kernel: fused"), "0");
  EXPECT_EQ(spec_of(single, "interaction.select_backward.zeros"), nullptr);
  ASSERT_NE(spec_of(single, "bottom_output.grad_add"), nullptr);
  EXPECT_EQ(spec_of(single, "bottom_output.grad_add")->param("elements"), 1024 * 16);
  EXPECT_EQ(spec_of(single, "bottom_output.grad_add")->param("strided"), 1);
}

// Eager PyTorch (no CUDA graph): Lin et al.'s op gap T1 (21 us, training.cpu_op_gap) before
// every kernel and collective; under a graph none.
// PyTorch's eager op sequence, kernel by kernel as the harness's H100 trace shows it: under AMP
// nn.Linear's autocast casts each layer's weight and bias to fp16 forward (and the first layer's
// input) and their gradients back to fp32 backward; BCE-with-logits is six kernels forward and
// four backward, with the logits' casts, GradScaler's scale and autograd's seed around them;
// nn.EmbeddingBag given 2-D indices builds its offsets (an arange) per table.
TEST_F(Dlrm, EagerPytorchOpsAreCountedKernelByKernel) {
  const auto count = [&](const std::string& training, const std::string& model_key, const std::string& part) {
    const Trace t = parse(with_model_key(small_dlrm("{rows: [100, 200, 300, 400]}", training), model_key), "0");
    int n = 0;
    for (const Op& o : t.program(0).ops)
      if (o.kind == OpKind::kernel && t.names[o.name].find(part) != std::string::npos) ++n;
    return n;
  };
  const std::string amp = "{global_batch: 1024, dtype: fp16}";
  // 4 layers (bottom 13-32-16, top 26-64-1): 2 casts each way per layer, plus the input's.
  EXPECT_EQ(count(amp, "mlp_epilogue: torch", "_to_fp16"), 2 * 4 + 1 + 1);  // + the logits' gradient
  EXPECT_EQ(count(amp, "mlp_epilogue: torch", "grad_to_fp32"), 2 * 4);
  EXPECT_EQ(count(amp, "mlp_epilogue: fused", "weight_to_fp16"), 0);
  EXPECT_EQ(count("{global_batch: 1024}", "mlp_epilogue: torch", "weight_to_fp16"), 0);
  // The loss: 6 + 4 kernels in fp32 plus the seed; AMP adds both logits casts and the scale's two.
  EXPECT_EQ(count("{global_batch: 1024}", "mlp_epilogue: fused", "loss."), 6 + 1 + 4);
  EXPECT_EQ(count(amp, "mlp_epilogue: fused", "loss.") + count(amp, "mlp_epilogue: fused", "grad_scaler.scale"),
            6 + 1 + 4 + 2 + 2);
  const std::string sparse = "{global_batch: 1024, embedding_gradient: sparse}";
  EXPECT_EQ(count(sparse, "embedding_kernel: torch", "embedding_offsets"), 4);
  EXPECT_EQ(count(sparse, "embedding_kernel: fused", "embedding_offsets"), 0);
}

TEST_F(Dlrm, EagerOpsPayTheCpuOpGap) {
  const Trace eager = parse(small_dlrm("{rows: [100]}", "{global_batch: 1024, cpu_op_gap: 30us}"), "0,1");
  const Program& p = eager.program(0);
  int launches = 0;
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    if (p.ops[i].kind != OpKind::kernel && p.ops[i].kind != OpKind::collective) continue;
    ++launches;
    ASSERT_GT(i, 0u);
    EXPECT_EQ(p.ops[i - 1].kind, OpKind::cpu) << eager.names[p.ops[i].name];
    EXPECT_DOUBLE_EQ(p.ops[i - 1].duration, 30e-6);
  }
  EXPECT_GT(launches, 10);
  const Trace graphed = parse(small_dlrm("{rows: [100]}", "{global_batch: 1024, cuda_graphs: true}"), "0,1");
  for (const Op& o : graphed.program(0).ops) EXPECT_NE(o.kind, OpKind::cpu);
}

// DLE's JointSparseEmbedding keeps a rank's tables in one parameter: whatever the lookup
// groups (tables of different sizes), one unscale, one -lr scaling and one index_add carry
// every looked-up row of the rank, and one cast each way its pooled rows.
TEST_F(Dlrm, DleUpdatesARanksTablesAsOneSparseParameter) {
  const Trace t = parse(small_dlrm("{rows: [100, 200, 300, 400]}",
                                   "{global_batch: 1024, dtype: fp16, cuda_graphs: true, graph_scope: forward_backward, "
                                   "embedding_gradient: sparse}"),
                        "0,1");
  bool some_rank_has_groups = false;
  for (int r = 0; r < 2; ++r) {
    double tables = 0;
    for (const auto* k : kernels(t, r, "embedding_forward")) tables += k->param("tables");
    some_rank_has_groups = some_rank_has_groups || kernels(t, r, "embedding_forward").size() > 1;
    std::map<std::string, std::vector<const models::KernelSpec*>> by_name;
    for (const Op& o : t.program(r).ops)
      if (o.kind == OpKind::kernel) by_name[t.names[o.name]].push_back(&t.kernels[o.kernel]);
    ASSERT_EQ(by_name["embedding_sgd"].size(), 1u) << "rank " << r;
    EXPECT_DOUBLE_EQ(by_name["embedding_sgd"][0]->param("rows"), 1024 * tables) << "rank " << r;
    EXPECT_EQ(by_name["embedding_grad_unscale"].size(), 1u) << "rank " << r;
    EXPECT_EQ(by_name["embedding_grad_scale_lr"].size(), 1u) << "rank " << r;
    // Its pooled rows are one tensor too: one fp16 cast forward, one fp32 cast backward.
    for (const char* cast : {"embedding_output_cast", "embedding_grad_cast"}) {
      ASSERT_EQ(by_name[cast].size(), 1u) << cast << " rank " << r;
      EXPECT_DOUBLE_EQ(by_name[cast][0]->param("elements"), 1024 * tables * 16) << cast;
    }
  }
  EXPECT_TRUE(some_rank_has_groups) << "the case must split a rank's tables into lookup groups";
}

// DLE's main.py picks joint_fused in one process with 26 tables of dimension 128: the gather
// writes fp16 itself (no cast kernel), and the backward adds the row offsets and copies the
// pooled gradient into fp32 values whatever the precision; with two processes (joint_sparse) the
// offsets are added once before the gather and the casts are separate kernels.
TEST_F(Dlrm, DleSingleProcessUsesTheJointFusedEmbedding) {
  std::string rows = "{rows: [";
  for (int t = 0; t < 26; ++t) rows += std::string(t ? ", " : "") + std::to_string(1000 + t);
  rows += "]}";
  std::string text = small_dlrm(rows, "{global_batch: 1024, dtype: DTYPE, embedding_gradient: sparse}");
  text.replace(text.find("embedding_dim: 16"), 17, "embedding_dim: 128");
  text.replace(text.find("bottom_mlp: [32, 16]"), 20, "bottom_mlp: [32, 128]");
  const auto with_dtype = [&](const std::string& dtype) {
    std::string d = text;
    return d.replace(d.find("DTYPE"), 5, dtype);
  };
  const auto named = [](const Trace& t, int r, const std::string& name) { return kernels_named(t, r, name); };
  for (const std::string dtype : {"fp16", "fp32"}) {
    const Trace one = parse(with_dtype(dtype), "0");
    const double lookups = 1024 * 26, values = lookups * 128;
    EXPECT_TRUE(named(one, 0, "embedding_output_cast").empty()) << dtype;
    EXPECT_TRUE(named(one, 0, "embedding_grad_cast").empty()) << dtype;
    const auto offsets = named(one, 0, "embedding_index_offsets");
    ASSERT_EQ(offsets.size(), 1u) << dtype << ": backward only, the gather adds them forward";
    EXPECT_DOUBLE_EQ(offsets[0]->param("elements"), lookups);
    const auto copy = named(one, 0, "embedding_grad_copy");
    ASSERT_EQ(copy.size(), 1u) << dtype;
    EXPECT_DOUBLE_EQ(copy[0]->param("elements"), values);
    EXPECT_DOUBLE_EQ(copy[0]->param("bytes_read"), dtype == "fp16" ? 2 : 4);
    for (const auto* k : kernels(one, 0, "embedding_forward"))
      EXPECT_DOUBLE_EQ(k->param("output_bytes"), dtype == "fp16" ? 2 : 4) << dtype;
  }
  const Trace two = parse(with_dtype("fp16"), "0,1");
  for (int r = 0; r < 2; ++r) {
    if (kernels(two, r, "embedding_forward").empty()) continue;
    EXPECT_TRUE(named(two, r, "embedding_grad_copy").empty());
    EXPECT_EQ(named(two, r, "embedding_index_offsets").size(), 1u) << "rank " << r;
    EXPECT_EQ(named(two, r, "embedding_output_cast").size(), 1u) << "rank " << r;
    for (const auto* k : kernels(two, r, "embedding_forward")) EXPECT_EQ(k->param("output_bytes"), 0);
  }
}

// In fp32 nothing is scaled: no GradScaler op, no host sync but the loop's own synchronize and
// the waits for its pageable uploads, no cast; the fused default keeps one embedding_backward per group and the optimizer inside the
// graph (no CPU launch).
TEST_F(Dlrm, Fp32AndFusedDefaultsAddNoHostWork) {
  const Trace fp32 = parse(small_dlrm("{rows: [100]}",
                                      "{global_batch: 1024, cuda_graphs: true, graph_scope: forward_backward, "
                                      "embedding_gradient: sparse}"),
                           "0,1");
  for (int r = 0; r < 2; ++r)
    for (const std::string& n : op_names(fp32, r)) {
      EXPECT_EQ(n.find("grad_scaler"), std::string::npos) << n;
      EXPECT_EQ(n.find("unscale"), std::string::npos) << n;
      if (n.rfind("sync:", 0) == 0 && n != "sync:torch.cuda.synchronize") {
        EXPECT_EQ(n.substr(n.size() - 7), ".staged") << n;
      }
      EXPECT_EQ(n.find("embedding_grad_cast"), std::string::npos) << n;
      EXPECT_EQ(n.find("embedding_output_cast"), std::string::npos) << n;
    }
  const Trace fused = parse(small_dlrm("{rows: [100]}", "{global_batch: 1024, dtype: fp16, cuda_graphs: true}"), "0,1");
  for (int r = 0; r < 2; ++r)
    for (const std::string& n : op_names(fused, r)) {
      EXPECT_EQ(n.rfind("cpu:", 0), std::string::npos) << n;
      EXPECT_EQ(n.rfind("sync:", 0), std::string::npos) << n;
      EXPECT_EQ(n.rfind("embedding_sgd", 0), std::string::npos) << n;
    }
}

// interaction_kernel fused: one dot_interaction kernel each way (forward, backward) instead of
// PyTorch's three batched GEMMs (X X^T; G X and X^T G), with the same model FLOPs in the
// reported work.
TEST_F(Dlrm, FusedInteractionIsOneKernelEachWay) {
  const std::string gemm_form = small_dlrm();
  std::string fused_form = gemm_form;
  fused_form.replace(fused_form.find("  tables:"), 0, "  interaction_kernel: fused\n");
  const Trace gemm = parse(gemm_form, "0,1");
  const Trace fused = parse(fused_form, "0,1");
  const auto dots = kernels(fused, 0, "dot_interaction");
  ASSERT_EQ(dots.size(), 2u);
  EXPECT_EQ(dots[0]->param("backward"), 0);
  EXPECT_EQ(dots[1]->param("backward"), 1);
  EXPECT_EQ(dots[0]->param("vectors"), 5);   // 4 tables + the bottom output
  EXPECT_EQ(dots[0]->param("batch"), 512);
  EXPECT_EQ(kernels(gemm, 0, "gemm").size(), kernels(fused, 0, "gemm").size() + 3);
  EXPECT_DOUBLE_EQ(gemm.work.model_flops_per_rank, fused.work.model_flops_per_rank);
}

// Elements of every kernel op named `name` on `rank`, in issue order.
std::vector<double> pass_elements(const Trace& t, int rank, const std::string& name) {
  std::vector<double> out;
  for (const models::KernelSpec* k : kernels_named(t, rank, name)) out.push_back(k->param("elements"));
  return out;
}

// A reduction over the batch: its kind and rows x cols.
std::vector<std::string> reductions(const Trace& t, int rank, const std::string& name) {
  std::vector<std::string> out;
  for (const models::KernelSpec* k : kernels_named(t, rank, name))
    out.push_back(k->kind + " " + std::to_string(int(k->param("rows"))) + "x" + std::to_string(int(k->param("cols"))));
  return out;
}

// mlp_epilogue torch: a ReLU kernel after every GEMM but the last top layer's (local batch 512
// on each of 2 GPUs, widths 32, 16 | 64, 1), its gradient before the layer's GEMMs and the bias
// gradient's reduction (column_sum) after them; apex's ReLU gradient kernel also reduces the
// bias, so only the ReLU-less last layer (DLE's plain nn.Linear) reduces alone; fused adds nothing.
TEST_F(Dlrm, MlpEpiloguesAreSeparateMemoryPasses) {
  const std::string training = "{global_batch: 1024, dtype: fp16}";
  const auto with = [&](const std::string& epilogue) {
    return parse(with_model_key(small_dlrm("{rows: [100, 100]}", training), "mlp_epilogue: " + epilogue), "0,1");
  };
  const Trace torch = with("torch"), apex = with("apex"), fused = with("fused");
  const std::map<std::string, int> widths{{"bottom_mlp.fc0", 32}, {"bottom_mlp.fc1", 16}, {"top_mlp.fc0", 64}, {"top_mlp.fc1", 1}};
  for (const auto& [layer, width] : widths) {
    const bool relu = layer != "top_mlp.fc1";
    const double elements = 512.0 * width;
    const std::string shape = "512x" + std::to_string(width);
    for (const Trace* t : {&torch, &apex})
      EXPECT_EQ(pass_elements(*t, 0, layer + ".relu"), relu ? std::vector<double>{elements} : std::vector<double>{})
          << layer;
    EXPECT_EQ(pass_elements(torch, 0, layer + ".relu_backward"), relu ? std::vector<double>{elements} : std::vector<double>{})
        << layer;
    EXPECT_EQ(reductions(apex, 0, layer + ".relu_backward"),
              relu ? std::vector<std::string>{"apex_bias_backward " + shape} : std::vector<std::string>{})
        << layer;
    EXPECT_EQ(reductions(torch, 0, layer + ".bias_grad"), std::vector<std::string>{"column_sum " + shape}) << layer;
    EXPECT_EQ(reductions(apex, 0, layer + ".bias_grad"),
              relu ? std::vector<std::string>{} : std::vector<std::string>{"column_sum " + shape})
        << layer;
    for (const char* suffix : {".relu", ".relu_backward", ".bias_grad"})
      EXPECT_TRUE(kernels_named(fused, 0, layer + suffix).empty()) << layer << suffix;
  }
  // fp16 activations: the ReLU reads and writes 2 bytes, its gradient reads output and gradient;
  // the reductions run on fp16, apex's with the ReLU's gradient.
  EXPECT_EQ(kernels_named(torch, 0, "top_mlp.fc0.relu")[0]->param("bytes_read"), 2);
  EXPECT_EQ(kernels_named(torch, 0, "top_mlp.fc0.relu")[0]->param("bytes_written"), 2);
  EXPECT_EQ(kernels_named(torch, 0, "top_mlp.fc0.relu_backward")[0]->param("bytes_read"), 4);
  EXPECT_EQ(kernels_named(torch, 0, "top_mlp.fc0.bias_grad")[0]->dtype, models::Dtype::fp16);
  EXPECT_EQ(kernels_named(apex, 0, "top_mlp.fc0.relu_backward")[0]->param("relu"), 1);
  // The relu gradient precedes the layer's GEMMs, the bias gradient follows them.
  for (const Trace* t : {&torch, &apex}) {
    const std::vector<std::string> names = op_names(*t, 0);
    const auto at = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) - names.begin(); };
    EXPECT_LT(at("top_mlp.fc0.relu_backward"), at("top_mlp.fc0.dgrad"));
    EXPECT_LT(at("top_mlp.fc1.wgrad"), at("top_mlp.fc1.bias_grad"));
    if (t == &torch) {
      EXPECT_LT(at("top_mlp.fc0.wgrad"), at("top_mlp.fc0.bias_grad"));
    }
  }
}

// interaction_kernel gemm is PyTorch's sequence, here for 512 samples of V = 3 vectors (2 tables
// + the bottom output) of D = 16 with P = 3 pairs: cat into X, bmm X X^T, index_select of the
// triangle (all V^2 products read), cat with the bottom output; backward the index_select's
// zero fill and index_add, the bmm gradients G X (V x D x V) and X^T G (D x V x V), dX summed
// and the bottom output's two gradients summed.
TEST_F(Dlrm, GemmInteractionIsPytorchsOpSequence) {
  const Trace t = parse(small_dlrm("{rows: [100, 100]}", "{global_batch: 1024, dtype: fp16}"), "0,1");
  const double b = 512, v = 3, d = 16, p = 3;
  EXPECT_EQ(pass_elements(t, 0, "interaction.cat"), std::vector<double>{b * v * d});
  EXPECT_EQ(pass_elements(t, 0, "interaction.pairs"), std::vector<double>{b * p});
  EXPECT_EQ(pass_elements(t, 0, "interaction.output_cat"), std::vector<double>{b * (d + p)});
  EXPECT_EQ(pass_elements(t, 0, "interaction.pairs.zero"), std::vector<double>{b * v * v});
  ASSERT_EQ(kernels_named(t, 0, "interaction.pairs.backward").size(), 1u);  // index_add of p columns of b
  EXPECT_EQ(kernels_named(t, 0, "interaction.pairs.backward")[0]->kind, "index_add");
  EXPECT_EQ(kernels_named(t, 0, "interaction.pairs.backward")[0]->param("rows"), p);
  EXPECT_EQ(kernels_named(t, 0, "interaction.pairs.backward")[0]->param("dim"), b);
  EXPECT_EQ(kernels_named(t, 0, "interaction.pairs.backward")[0]->param("strided"), 1);
  EXPECT_EQ(pass_elements(t, 0, "interaction.grad_add"), std::vector<double>{b * v * d});
  EXPECT_EQ(pass_elements(t, 0, "bottom_output.grad_add"), std::vector<double>{b * d});
  // Both sums read a view (the transposed product's gradient, a slice of the cat's): strided.
  for (const Op& o : t.program(0).ops)
    if (o.kind == OpKind::kernel && t.names[o.name].find("grad_add") != std::string::npos) {
      EXPECT_EQ(t.kernels[o.kernel].param("strided"), 1) << t.names[o.name];
    }
  std::vector<std::vector<double>> bmm;
  for (const auto* k : kernels(t, 0, "gemm"))
    if (k->param("batch") > 1) bmm.push_back({k->param("m"), k->param("n"), k->param("k"), k->param("batch")});
  EXPECT_EQ(bmm, (std::vector<std::vector<double>>{{v, v, d, b}, {v, d, v, b}, {d, v, v, b}}));
  for (const Op& o : t.program(0).ops)
    if (o.kind == OpKind::kernel && t.names[o.name] == "interaction.pairs") {
      EXPECT_DOUBLE_EQ(t.kernels[o.kernel].param("bytes_read"), 2 * v * v / p);
    }
}

// interaction_pad_to: the dot output (16 + 3 pairs = 19 values) zero-padded to 24, the first top
// layer's input (NVIDIA DLE pads to a multiple of 8 so that its fp16 GEMMs stay aligned).
TEST_F(Dlrm, InteractionPaddingWidensTheFirstTopLayer) {
  const std::string text = small_dlrm("{rows: [100, 100]}", "{global_batch: 1024, dtype: fp16}");
  const auto first_top = [&](const Trace& t) {
    for (const auto* k : kernels(t, 0, "gemm"))
      if (k->param("n") == 64 && k->param("batch") == 1) return k->param("k");
    return 0.0;
  };
  EXPECT_EQ(first_top(parse(text, "0,1")), 19);
  EXPECT_EQ(first_top(parse(with_model_key(text, "interaction_pad_to: 8"), "0,1")), 24);
  EXPECT_EQ(first_top(parse(with_model_key(text, "interaction_pad_to: 19"), "0,1")), 19);
}

// embedding_kernel torch (eager PyTorch, AMP, one GPU, 3 tables of 1024 samples x 16): one
// nn.EmbeddingBag launch per table, the outputs stacked and cast to fp16; backward the gradient
// cast back once and one index_select per table; the update unscales the sparse values
// (GradScaler, with its host sync: no graph) and index_adds each table with alpha -lr (an atomic
// scatter-add), with no separate -lr pass and no fused embedding kernel.
TEST_F(Dlrm, TorchEmbeddingBagIsOneLaunchPerTable) {
  const Trace t = parse(with_model_key(small_dlrm("{rows: [100, 200, 300]}",
                                                  "{global_batch: 1024, dtype: fp16, embedding_gradient: sparse}"),
                                       "embedding_kernel: torch"),
                        "0");
  const auto bags = kernels(t, 0, "torch_embedding_bag");
  ASSERT_EQ(bags.size(), 3u);
  for (const auto* k : bags) {
    EXPECT_EQ(k->param("batch"), 1024);
    EXPECT_EQ(k->param("dim"), 16);
    EXPECT_EQ(k->dtype, models::Dtype::fp32);
  }
  const double values = 3 * 1024 * 16;
  EXPECT_EQ(pass_elements(t, 0, "embedding_stack"), std::vector<double>{values});
  EXPECT_EQ(pass_elements(t, 0, "embedding_output_cast"), std::vector<double>{values});
  EXPECT_EQ(pass_elements(t, 0, "embedding_grad_cast"), std::vector<double>{values});
  // The gradient's cast back to fp32 widens: PyTorch's non-vectorized copy (strided).
  for (const Op& o : t.program(0).ops)
    if (o.kind == OpKind::kernel && t.names[o.name] == "embedding_grad_cast") {
      EXPECT_EQ(t.kernels[o.kernel].param("strided"), 1);
    }
  std::vector<std::string> names = op_names(t, 0);
  const auto count = [&](const std::string& prefix) {
    return std::count_if(names.begin(), names.end(), [&](const std::string& n) { return n.rfind(prefix, 0) == 0; });
  };
  EXPECT_EQ(count("embedding_grad_rows"), 3);
  EXPECT_EQ(count("embedding_sgd"), 3);
  EXPECT_EQ(count("embedding_grad_unscale"), 1);
  EXPECT_EQ(count("sync:grad_scaler.found_inf"), 1);
  EXPECT_EQ(count("embedding_grad_scale_lr"), 0);
  EXPECT_TRUE(kernels(t, 0, "embedding_forward").empty());
  EXPECT_TRUE(kernels(t, 0, "embedding_backward").empty());
  const auto adds = table_updates(t, 0);
  ASSERT_EQ(adds.size(), 3u);  // one index_add_ per table: its 1024 looked-up rows of 16
  for (const auto* k : adds) {
    EXPECT_EQ(k->param("rows"), 1024);
    EXPECT_EQ(k->param("dim"), 16);
  }
}

// The sparse update's collisions: a table's hottest row gets its share of the global batch's
// lookups (uniform: 1024 / rows; Zipf 1.0 over 4 rows: 1024 / (1 + 1/2 + 1/3 + 1/4); a given
// reuse histogram: what its highest bin guarantees); DLE's joint parameter takes its hottest table's.
TEST_F(Dlrm, IndexAddIsChargedTheHottestRowsLookups) {
  const auto hits = [&](const std::string& tables, const std::string& extra, const std::string& kernel) {
    const Trace t = parse(with_model_key(small_dlrm(tables, "{global_batch: 1024, embedding_gradient: sparse}", extra),
                                         kernel),
                          "0");
    std::vector<double> out;
    for (const auto* k : table_updates(t, 0)) out.push_back(k->param("hottest_row_hits"));
    return out;
  };
  EXPECT_EQ(hits("{rows: [4, 256]}", "", "embedding_kernel: torch"), (std::vector<double>{256, 4}));
  const std::vector<double> zipf =
      hits("{rows: [4, 256]}", "index_distribution: {kind: zipf, alpha: 1.0}\n", "embedding_kernel: torch");
  ASSERT_EQ(zipf.size(), 2u);
  EXPECT_NEAR(zipf[0], 1024 / (1 + 1 / 2.0 + 1 / 3.0 + 1 / 4.0), 1e-9);
  // A given histogram guarantees the least count of its highest occupied bin: 5-8 -> 5.
  const std::string histogram =
      "index_distribution: {kind: histogram, histogram: [0.5, 0, 0, 0.5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]}\n";
  EXPECT_EQ(hits("{rows: [4, 256]}", histogram, "embedding_kernel: torch"), (std::vector<double>{5, 5}));
  const std::vector<double> joint = hits("{rows: [4, 256]}", "", "interaction_kernel: fused");
  ASSERT_EQ(joint.size(), 1u);
  EXPECT_EQ(joint[0], 256);
}

// A 1M-row Zipf table's hottest row: the bucketed normalisation (1024 rows exactly, then
// geometric buckets) against the plain sum of r^-alpha over every row.
TEST(HottestRow, ZipfBucketsMatchTheExactSum) {
  for (const double alpha : {0.8, 1.0, 1.2}) {
    double norm = 0;
    for (double r = 1; r <= 1e6; ++r) norm += std::pow(r, -alpha);
    IndexDistribution d;
    d.kind = "zipf";
    d.alpha = alpha;
    EXPECT_NEAR(hottest_row_lookups(d, 1e6, 65536) / (65536 / norm), 1, 1e-4) << alpha;
  }
}

// sharding.process_groups: separate (TorchRec) gives DDP's allreduce its own stream and
// communicator; shared (NVIDIA DLE's default group) queues it on the exchange's, behind and
// before the all-to-alls in issue order.
TEST_F(Dlrm, SharedProcessGroupQueuesTheAllreduceWithTheExchange) {
  const auto allreduce = [&](const std::string& groups) {
    const Trace t = parse(small_dlrm("{rows: [100, 100, 100, 100]}", "{global_batch: 1024}",
                                     "sharding: {process_groups: " + groups + "}\n"),
                          "0,1");
    std::pair<int, int> out{-1, -1};  // stream, group
    for (const Op& o : t.program(0).ops)
      if (o.kind == OpKind::collective && t.collectives[o.collective].op == models::CollectiveOp::allreduce)
        out = {o.stream, t.collectives[o.collective].group};
    int alltoall_stream = -1, alltoall_group = -1;
    for (const Op& o : t.program(0).ops)
      if (o.kind == OpKind::collective && t.collectives[o.collective].op == models::CollectiveOp::alltoall) {
        alltoall_stream = o.stream;
        alltoall_group = t.collectives[o.collective].group;
      }
    return std::make_tuple(out.first, out.second, alltoall_stream, alltoall_group);
  };
  const auto [sep_stream, sep_group, a2a_stream, a2a_group] = allreduce("separate");
  EXPECT_NE(sep_stream, a2a_stream);
  EXPECT_NE(sep_group, a2a_group);
  const auto [shared_stream, shared_group, a2a_stream2, a2a_group2] = allreduce("shared");
  EXPECT_EQ(shared_stream, a2a_stream2);
  EXPECT_EQ(shared_group, a2a_group2);
  EXPECT_NE(error(small_dlrm("{rows: [100]}", "{global_batch: 1024}", "sharding: {process_groups: one}\n"))
                .find("sharding.process_groups"),
            std::string::npos);
}

TEST_F(Dlrm, AutoFallsBackToRowWise) {
  // One table of 1e8 rows x 128 x 4 B = 51.2 GB fits no 40 GB GPU whole, but half of it does.
  const std::string text =
      "version: 1\nkind: dlrm\nmodel:\n  dense_features: 13\n  bottom_mlp: [128]\n  top_mlp: [1]\n"
      "  embedding_dim: 128\n  tables: {rows: [100000000]}\ntraining: {global_batch: 64}\n"
      "sharding: {plan: auto}\n";
  const Trace t = parse(text, "0,1");
  EXPECT_EQ(calls(t, 0, models::CollectiveOp::reduce_scatter).size(), 1u);
}

}  // namespace
}  // namespace stepsim::workloads
