#pragma once
// Hand-built nodes for the platform tests (no YAML): vertices and links in GB/s and us, and the
// four-GPU rail node the fabric tests share.
#include <string>
#include <utility>

#include "platforms/platform.hpp"

namespace stepsim::platforms::testing {

inline int add_vertex(NodeTemplate& node, std::string name, VertexKind kind) {
  Vertex v;
  v.name = std::move(name);
  v.kind = kind;
  if (kind == VertexKind::gpu) {
    v.local_gpu = static_cast<int>(node.gpus.size());
    node.gpus.push_back(static_cast<int>(node.vertices.size()));
  }
  if (kind == VertexKind::nic) node.nics.push_back(static_cast<int>(node.vertices.size()));
  node.vertices.push_back(v);
  return static_cast<int>(node.vertices.size()) - 1;
}

inline void add_link(NodeTemplate& node, int a, int b, LinkType type, double gbps, double latency_us) {
  Link l;
  l.name = node.vertices[a].name + "-" + node.vertices[b].name;
  l.type = type;
  l.a = a;
  l.b = b;
  l.datasheet_bandwidth = gbps * 1e9;
  l.latency = latency_us * 1e-6;
  node.links.push_back(l);
}

/// Four GPUs on an NVSwitch (100 GB/s, 0.3 us a side), GPU i with its own NIC i over PCIe
/// (50 GB/s, 0.5 us): NIC i is rail i. Vertices gpu0-3, nvswitch, nic0-3; 8 links.
inline NodeTemplate rail_node() {
  NodeTemplate n;
  for (int g = 0; g < 4; ++g) add_vertex(n, "gpu" + std::to_string(g), VertexKind::gpu);
  const int sw = add_vertex(n, "nvswitch", VertexKind::nvswitch);
  for (int g = 0; g < 4; ++g) add_link(n, g, sw, LinkType::nvlink, 100, 0.3);
  for (int g = 0; g < 4; ++g) {
    const int nic = add_vertex(n, "nic" + std::to_string(g), VertexKind::nic);
    add_link(n, g, nic, LinkType::pcie, 50, 0.5);
  }
  return n;
}

/// NIC 10 GB/s, NIC 2 us one way, 0.5 us per switch: a NIC link costs 1.25 us, an uplink 0.5 us.
inline Fabric rail_fabric(FabricKind kind, double oversubscription = 1, int nodes_per_leaf = 0, bool pxn = true) {
  Fabric f;
  f.kind = kind;
  f.nic_bandwidth = 10e9;
  f.nic_latency = 2e-6;
  f.switch_latency = 0.5e-6;
  f.oversubscription = oversubscription;
  f.nodes_per_leaf = nodes_per_leaf;
  f.pxn = pxn;
  return f;
}

}  // namespace stepsim::platforms::testing
