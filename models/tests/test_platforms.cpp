#include "models/tests/test_platforms.hpp"

namespace stepsim::models::test_support {
namespace {

using platforms::Link;
using platforms::LinkType;
using platforms::NodeTemplate;
using platforms::Vertex;
using platforms::VertexKind;

int add_vertex(NodeTemplate& node, const std::string& name, VertexKind kind) {
  Vertex v;
  v.name = name;
  v.kind = kind;
  const int id = static_cast<int>(node.vertices.size());
  if (kind == VertexKind::gpu) {
    v.local_gpu = static_cast<int>(node.gpus.size());
    node.gpus.push_back(id);
  }
  if (kind == VertexKind::nic) node.nics.push_back(id);
  node.vertices.push_back(v);
  return id;
}

void add_link(NodeTemplate& node, int a, int b, LinkType type, double gbytes_per_s) {
  Link l;
  l.name = node.vertices[static_cast<std::size_t>(a)].name + "-" + node.vertices[static_cast<std::size_t>(b)].name;
  l.type = type;
  l.a = a;
  l.b = b;
  l.datasheet_bandwidth = gbytes_per_s * 1e9;
  l.latency = 1e-6;
  node.links.push_back(l);
}

}  // namespace

platforms::Platform switch_platform(int nodes, int gpus) {
  NodeTemplate node;
  for (int g = 0; g < gpus; ++g) add_vertex(node, "gpu" + std::to_string(g), VertexKind::gpu);
  const int sw = add_vertex(node, "nvswitch", VertexKind::nvswitch);
  for (int g = 0; g < gpus; ++g) {
    add_link(node, g, sw, LinkType::nvlink, 450);
    const int nic = add_vertex(node, "nic" + std::to_string(g), VertexKind::nic);
    add_link(node, g, nic, LinkType::pcie, 50);
  }
  platforms::Fabric fabric;
  if (nodes > 1) {
    fabric.kind = platforms::FabricKind::fat_tree;
    fabric.nic_bandwidth = 50e9;
    fabric.nic_latency = 2e-6;
  }
  return platforms::Platform("switch", {}, node, nodes, fabric);
}

platforms::Platform crossed_node() {
  NodeTemplate node;
  for (int g = 0; g < 4; ++g) add_vertex(node, "gpu" + std::to_string(g), VertexKind::gpu);
  const int sw = add_vertex(node, "pcie_sw", VertexKind::pcie_switch);
  for (int g = 0; g < 4; ++g) add_link(node, g, sw, LinkType::pcie, 12);
  for (auto [a, b] : {std::pair{0, 2}, {2, 1}, {1, 3}, {3, 0}}) add_link(node, a, b, LinkType::nvlink, 100);
  return platforms::Platform("crossed", {}, node, 1, {});
}

Job whole(int nodes, int gpus) {
  Job s;
  s.platform = std::make_unique<platforms::Platform>(switch_platform(nodes, gpus));
  for (int g = 0; g < nodes * gpus; ++g) s.allocation.gpus.push_back(g);
  return s;
}

std::optional<std::string> lower_and_check(const std::string& algo, const CollectiveSpec& spec,
                                           const CollectiveContext& ctx, Schedule* out) {
  Schedule s = AlgorithmRegistry::instance().get(algo).make()->lower(spec, ctx);
  std::optional<std::string> verdict = check_schedule(s);
  if (out) *out = std::move(s);
  return verdict;
}

}  // namespace stepsim::models::test_support
