// Parsing of `--gpus` allocations against a hand-built 2-node platform of 4 GPUs each.
#include <gtest/gtest.h>

#include "platforms/config_error.hpp"
#include "platforms/platform.hpp"

namespace stepsim::platforms {
namespace {

Platform two_nodes() {
  NodeTemplate n;
  Vertex sw{"sw", VertexKind::pcie_switch};
  n.vertices.push_back(sw);
  for (int i = 0; i < 4; ++i) {
    std::string name = "gpu";  // appended, not `"gpu" + ...`: GCC 12 warns falsely on that form
    name += std::to_string(i);
    n.vertices.push_back({name, VertexKind::gpu, i});
    n.gpus.push_back(i + 1);
    n.links.push_back({name + "-sw", LinkType::pcie, 0, i + 1, 12e9, 1e-6});
  }
  n.vertices.push_back({"nic0", VertexKind::nic});
  n.nics.push_back(5);
  n.links.push_back({"nic", LinkType::pcie, 0, 5, 12e9, 1e-6});
  Fabric f;
  f.kind = FabricKind::fat_tree;
  f.nic_bandwidth = 12.5e9;
  return Platform("two", {}, n, 2, f);
}

std::string error_of(const std::string& text) {
  try {
    parse_allocation(text, two_nodes());
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.where(), "--gpus");
    return e.what();
  }
  ADD_FAILURE() << "no error for '" << text << "'";
  return "";
}

TEST(Allocation, EmptyMeansAll) {
  Platform p = two_nodes();
  Allocation a = parse_allocation("", p);
  EXPECT_EQ(a.gpus, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(a.nodes(p), 2);
  EXPECT_EQ(a.max_ranks_per_node(p), 4);
}

TEST(Allocation, ListsAndRangesInWrittenOrder) {
  Platform p = two_nodes();
  EXPECT_EQ(parse_allocation("0,1,3", p).gpus, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(parse_allocation("2-5", p).gpus, (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(parse_allocation("3, 0", p).gpus, (std::vector<int>{3, 0}));
}

TEST(Allocation, NodePrefixedItems) {
  Platform p = two_nodes();
  Allocation a = parse_allocation("n0:0-2,n1:0-1", p);
  EXPECT_EQ(a.gpus, (std::vector<int>{0, 1, 2, 4, 5}));
  EXPECT_EQ(a.nodes(p), 2);
  EXPECT_EQ(a.max_ranks_per_node(p), 3);
  // An un-prefixed item after a prefix stays on that node.
  EXPECT_EQ(parse_allocation("n1:0,3", p).gpus, (std::vector<int>{4, 7}));
}

TEST(Allocation, Errors) {
  EXPECT_NE(error_of("8").find("GPU 8 is out of range"), std::string::npos);
  EXPECT_NE(error_of("n1:4").find("GPU 4 of node 1 is out of range"), std::string::npos);
  EXPECT_NE(error_of("n2:0").find("node 2 is out of range"), std::string::npos);
  EXPECT_NE(error_of("0,1,0").find("GPU 0 is listed twice"), std::string::npos);
  EXPECT_NE(error_of("4,n1:0").find("GPU 4 is listed twice"), std::string::npos);
  EXPECT_NE(error_of("3-1").find("runs backwards"), std::string::npos);
  EXPECT_NE(error_of("a").find("not a GPU index"), std::string::npos);
  EXPECT_NE(error_of("1,,2").find("empty item"), std::string::npos);
  EXPECT_NE(error_of("n1").find("lacks ':'"), std::string::npos);
  EXPECT_NE(error_of("-1").find("not a GPU index"), std::string::npos);
  EXPECT_NE(error_of("1x").find("not a GPU index"), std::string::npos);
}

}  // namespace
}  // namespace stepsim::platforms
