// The device mesh (workloads/mesh.hpp): rank layout, process groups by hand, the expert view,
// and the `parallelism:` section's checks.
#include <gtest/gtest.h>

#include "platforms/config_error.hpp"
#include "workloads/mesh.hpp"

namespace stepsim::workloads {
namespace {

using Groups = std::vector<std::vector<int>>;

Parallelism read(const std::string& yaml, int ranks) {
  const platforms::YamlReader reader("w.yaml");
  return read_parallelism(YAML::Load(yaml), reader, ranks);
}

std::string error(const std::string& yaml, int ranks) {
  try {
    read(yaml, ranks);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Mesh, TensorParallelRanksAreConsecutive) {
  // 16 ranks: pp 2 x dp_shard 2 x tp 4, torchtitan's order (tp innermost).
  const Parallelism p = read("parallelism: {pp: 2, dp_shard: 2, tp: 4}", 16);
  const DeviceMesh mesh = dense_mesh(p);
  EXPECT_EQ(mesh.group("tp", {"tp"}).subgroups, (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}}));
  EXPECT_EQ(mesh.group("dp", {"dp_shard"}).subgroups,
            (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}}));
  EXPECT_EQ(mesh.group("pp", {"pp"}).subgroups, (Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}}));
  const ProcessGroup stage = mesh.group("stage", {"dp_shard", "tp"});
  EXPECT_EQ(stage.subgroups, (Groups{{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}}));
  EXPECT_EQ(stage.subgroup_of_rank[9], 1);
  EXPECT_EQ(mesh.coord(13, "pp"), 1);
  EXPECT_EQ(mesh.coord(13, "dp_shard"), 1);
  EXPECT_EQ(mesh.coord(13, "tp"), 1);
  EXPECT_EQ(mesh.with(13, "pp", 0), 5);
  EXPECT_EQ(mesh.size("cp"), 1);
}

TEST(Mesh, OrderPutsAnAxisInnermost) {
  // Data parallel innermost instead: a tp group strides over the dp ranks.
  const Parallelism p = read("parallelism: {dp_shard: 2, tp: 4, order: [pp, dp_replicate, cp, tp, dp_shard]}", 8);
  EXPECT_EQ(dense_mesh(p).group("tp", {"tp"}).subgroups, (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
}

TEST(Mesh, ExpertGroupsAreConsecutiveWithinTheRegion) {
  // dp_shard 4 x tp 2 = 8 ranks per region, ep 4: two expert groups of 4, four efsdp pairs.
  const Parallelism p = read("parallelism: {dp_shard: 4, tp: 2, ep: 4}", 8);
  const ExpertGroups g = expert_groups(p);
  EXPECT_EQ(g.ep.subgroups, (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(g.efsdp.subgroups, (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  // Two pipeline stages: each stage is its own region.
  const ExpertGroups staged = expert_groups(read("parallelism: {pp: 2, dp_shard: 2, ep: 2}", 4));
  EXPECT_EQ(staged.ep.subgroups, (Groups{{0, 1}, {2, 3}}));
  EXPECT_EQ(staged.efsdp.subgroups, (Groups{{0}, {1}, {2}, {3}}));
}

TEST(Mesh, TheRestAndTheDefault) {
  const Parallelism rest = read("parallelism: {dp_shard: -1, tp: 8, pp: 2}", 64);
  EXPECT_EQ(rest.dp_shard, 4);
  const Parallelism none = read("model: {}", 24);
  EXPECT_EQ(none.dp_shard, 24);
  EXPECT_EQ(none.tp * none.pp * none.cp * none.dp_replicate * none.ep, 1);
  EXPECT_EQ(read("parallelism: {dp_replicate: -1, dp_shard: 8}", 32).dp_replicate, 4);
  EXPECT_EQ(read("parallelism: {tp: 4}", 32).dp_shard, 8);   // unset: the rest
  EXPECT_EQ(read("parallelism: {tp: -1, dp_replicate: 2}", 32).dp_shard, 1);
}

TEST(Mesh, BadSectionsNameTheKeyAndTheFix) {
  EXPECT_NE(error("parallelism: {tp: 8, dp_shard: 2}", 32).find("dp_replicate 1 x dp_shard 2 x cp 1 x tp 8 x pp 1 = 16 "
                                                                "ranks, but the job has 32"),
            std::string::npos);
  EXPECT_NE(error("parallelism: {tp: -1, dp_shard: -1}", 32).find("at most one degree as -1"), std::string::npos);
  EXPECT_NE(error("parallelism: {tp: 3, dp_shard: -1}", 32).find("does not divide the job's 32 ranks"), std::string::npos);
  EXPECT_NE(error("parallelism: {tp: 3}", 32).find("w.yaml: parallelism (line 1)"), std::string::npos);
  EXPECT_NE(error("parallelism: {tp: 0}", 8).find("w.yaml: parallelism.tp"), std::string::npos);
  EXPECT_NE(error("parallelism: {dp_shard: 4, tp: 2, ep: 3}", 8).find("ep (3) must divide dp_shard x cp x tp (8)"),
            std::string::npos);
  EXPECT_NE(error("parallelism: {order: [tp, pp]}", 8).find("each of pp, dp_replicate, dp_shard, cp, tp once"),
            std::string::npos);
  EXPECT_NE(error("parallelism: {tensor_parallel: 2}", 8).find("allowed keys here"), std::string::npos);
  EXPECT_NE(error("parallelism: 4", 8).find("expected a section"), std::string::npos);
}

}  // namespace
}  // namespace stepsim::workloads
