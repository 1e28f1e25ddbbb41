/// @file NcclSystem from a platform (see nccl_topology.hpp).
#include "models/collectives/nccl_topology.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <set>
#include <string>

#include "models/collectives/lowering.hpp"
#include "models/collectives/nccl_versions.hpp"
#include "models/collectives/ring_order.hpp"

namespace stepsim::models::nccl {
namespace {

/// The narrowest datasheet bandwidth on a route: NCCL sizes its graphs from what it detects
/// (NVLink counts, PCIe widths, the NIC's port rate), never from what a wire achieves, so a
/// link's achieved fraction (a preset's or calibration's) must not change NCCL's view (a 0.95
/// NVLink fraction would otherwise read as 11.4 NVLinks and reshape the channel search).
double datasheet_route_bandwidth(const platforms::Platform& platform, const platforms::Route& route) {
  double narrowest = std::numeric_limits<double>::infinity();
  for (const platforms::Hop& hop : route.hops) narrowest = std::min(narrowest, platform.link(hop.link).datasheet_bandwidth);
  return route.hops.empty() ? route.bandwidth : narrowest;
}

bool crosses_nvswitch(const platforms::Platform& platform, const platforms::Route& route) {
  for (const platforms::Hop& hop : route.hops) {
    const platforms::Link link = platform.link(hop.link);
    if (platform.vertex(link.a).kind == platforms::VertexKind::nvswitch ||
        platform.vertex(link.b).kind == platforms::VertexKind::nvswitch)
      return true;
  }
  return false;
}

/// A GPU-to-GPU PCIe route through the host: NCCL's path when P2P is off (paths.cc
/// ncclTopoComputePaths: "Divert all traffic through the CPU", addInterStep -> PATH_PHB).
/// NCCL's graph holds only its PCI links, not the host staging behind them, so its figure is the
/// narrowest full-duplex (wire) hop; the search then charges Intel root complexes 6/5 of the
/// speed on PHB paths (search.cc followPath, topo.h INTEL_P2P_OVERHEAD(bw) = bw*6/5).
double nccl_host_path_bw(const platforms::Platform& platform, const platforms::Route& route) {
  double wire = std::numeric_limits<double>::infinity();
  for (const platforms::Hop& hop : route.hops) {
    const platforms::Link link = platform.link(hop.link);
    if (!link.half_duplex) wire = std::min(wire, link.datasheet_bandwidth);
  }
  const double bw = wire / kGB * kNcclPciePerWire;
  return platform.cpu_vendor == "intel" ? bw * 5.0 / 6.0 : bw;
}

/// One route's bandwidth in NCCL's figures (GB/s).
double nccl_route_bw(const platforms::Platform& platform, const platforms::Route& route) {
  const platforms::GpuModel& gpu = platform.gpu();
  const double bandwidth = datasheet_route_bandwidth(platform, route);
  if (route.worst == platforms::LinkType::nvlink && gpu.nvlink_bandwidth_per_link > 0)
    return bandwidth / gpu.nvlink_bandwidth_per_link * nvlink_bw_per_link(gpu.sm_version);
  if (path_type(platform, route) == PathType::phb) return nccl_host_path_bw(platform, route);
  return bandwidth / kGB * kNcclPciePerWire;
}

/// The node's NVLinks between the ranks of `group` in NCCL's figures: links x the
/// per-link bandwidth of topo.h, both directions alike. Empty (gpus = 0) when an NVLink
/// reaches an NVSwitch (NCCL's NVSwitch graphs are not a mesh search) or none joins two ranks.
NvlinkMesh nvlink_mesh(const CollectiveContext& ctx, const std::vector<int>& group) {
  const platforms::Platform& platform = ctx.platform;
  const int n = static_cast<int>(group.size());
  NvlinkMesh mesh{n, std::vector<double>(static_cast<std::size_t>(n * n), 0.0)};
  auto index_of = [&](int vertex) {
    for (int i = 0; i < n; ++i)
      if (ctx.gpu_vertex(group[static_cast<std::size_t>(i)]) == vertex) return i;
    return -1;
  };
  bool any = false;
  for (int id = 0; id < platform.link_count(); ++id) {
    const platforms::Link link = platform.link(id);
    if (link.type != platforms::LinkType::nvlink) continue;
    if (platform.vertex(link.a).kind == platforms::VertexKind::nvswitch ||
        platform.vertex(link.b).kind == platforms::VertexKind::nvswitch)
      return {};
    const int a = index_of(link.a);
    const int b = index_of(link.b);
    if (a < 0 || b < 0) continue;
    const double bw = link.lanes * nvlink_bw_per_link(platform.gpu().sm_version);
    mesh.bw[static_cast<std::size_t>(a * n + b)] += bw;
    mesh.bw[static_cast<std::size_t>(b * n + a)] += bw;
    any = true;
  }
  return any ? mesh : NvlinkMesh{};
}

}  // namespace

PathType path_type(const platforms::Platform& platform, const platforms::Route& route) {
  if (route.worst == platforms::LinkType::network) return PathType::net;
  if (route.worst == platforms::LinkType::inter_socket) return PathType::sys;
  std::set<int> switches;
  bool cpu = false;
  for (const platforms::Hop& hop : route.hops) {
    const platforms::Link link = platform.link(hop.link);
    for (const int v : {link.a, link.b}) {
      const platforms::VertexKind kind = platform.vertex(v).kind;
      cpu |= kind == platforms::VertexKind::cpu;
      if (kind == platforms::VertexKind::pcie_switch) switches.insert(v);
    }
  }
  if (cpu) return PathType::phb;
  if (route.worst == platforms::LinkType::nvlink) return PathType::nvl;
  return switches.size() > 1 ? PathType::pxb : PathType::pix;
}

int nvlink_count(const CollectiveContext& ctx, int a, int b) {
  const platforms::Route& route = ctx.platform.route(ctx.gpu_vertex(a), ctx.gpu_vertex(b));
  if (route.worst != platforms::LinkType::nvlink) return 0;
  const double per_link = nvlink_bw_per_link(ctx.platform.gpu().sm_version);
  return std::max(1, static_cast<int>(nccl_route_bw(ctx.platform, route) / per_link));
}

std::map<std::pair<int, int>, int> nvb_relays(const CollectiveContext& ctx) {
  std::map<std::pair<int, int>, int> relays;
  for (const std::vector<int>& node : lowering::ranks_by_node(ctx)) {
    std::vector<int> links(node.size() * node.size(), 0);
    for (std::size_t i = 0; i < node.size(); ++i)
      for (std::size_t j = 0; j < node.size(); ++j)
        if (i != j) links[i * node.size() + j] = nvlink_count(ctx, node[i], node[j]);
    for (std::size_t i = 0; i < node.size(); ++i)
      for (std::size_t j = 0; j < node.size(); ++j) {
        if (i == j || links[i * node.size() + j] > 0) continue;
        int best = 0;
        for (std::size_t m = 0; m < node.size(); ++m) {
          const int width = std::min(links[i * node.size() + m], links[m * node.size() + j]);
          if (width > best) {
            best = width;
            relays[{node[i], node[j]}] = node[m];
          }
        }
      }
  }
  return relays;
}

std::string relay_nvb_hops(Schedule& s, const CollectiveContext& ctx) {
  const std::map<std::pair<int, int>, int> relays = nvb_relays(ctx);
  if (relays.empty()) return "";
  std::set<std::array<int, 3>> relayed;
  for (Round& round : s.rounds)
    for (Step& step : round.steps) {
      if (step.is_codec()) continue;
      const auto relay = relays.find({step.src, step.dst});
      if (relay == relays.end()) continue;
      step.via = relay->second;
      relayed.insert({step.src, step.via, step.dst});
    }
  std::string pairs;
  for (const auto& [a, via, b] : relayed)
    pairs += (pairs.empty() ? "" : ", ") + std::to_string(a) + "->" + std::to_string(via) + "->" + std::to_string(b);
  return pairs.empty() ? "" : "nccl NVB relays (P2P/indirect, ranks src->via->dst): " + pairs;
}

bool nvb_paths(const CollectiveContext& ctx) { return nccl_version(ctx.options).era >= Era::v2_8; }

MeshRings nccl_mesh_rings(const CollectiveContext& ctx, bool nvb) {
  const std::vector<std::vector<int>> nodes = lowering::ranks_by_node(ctx);
  if (nodes.size() != 1 || nodes.front().size() < 2 || nodes.front().size() > kMaxMeshGpus) return {};
  const std::vector<int>& group = nodes.front();
  const NvlinkMesh mesh = nvlink_mesh(ctx, group);
  if (mesh.gpus == 0) return {};
  MeshRings rings = search_mesh_rings(mesh, search_speeds(ctx.platform.gpu().sm_version, false),
                                      kMaxGraphChannels, nvb);
  for (std::vector<int>& ring : rings.rings)
    for (int& g : ring) g = group[static_cast<std::size_t>(g)];
  return rings;
}

NcclSystem nccl_system(const CollectiveContext& ctx) {
  const platforms::Platform& platform = ctx.platform;
  NcclSystem sys;
  sys.sm = platform.gpu().sm_version;
  sys.ranks = ctx.ranks();
  sys.nodes = ctx.allocation.nodes(platform);
  sys.ppn = ctx.allocation.max_ranks_per_node(platform);
  sys.amd_cpu = platform.cpu_vendor == "amd";
  sys.nvls = platform.has_nvls() && sys.sm >= 90;
  sys.collnet = platform.fabric().sharp && platform.fabric().kind != platforms::FabricKind::none;
  sys.nics_per_node = static_cast<int>(platform.node().nics.size());
  if (!platform.fabric().nccl_protocols.empty())
    for (int p = 0; p < kProtos; ++p)
      sys.plugin_protocols[p] = std::count(platform.fabric().nccl_protocols.begin(),
                                           platform.fabric().nccl_protocols.end(),
                                           to_string(static_cast<Proto>(p))) > 0;
  sys.nic_bw = platform.fabric().nic_bandwidth / kGB;

  // The intra-node graph: the ring through the largest node group of the allocation.
  std::vector<int> group;
  for (const std::vector<int>& node : lowering::ranks_by_node(ctx))
    if (node.size() > group.size()) group = node;
  sys.intra = IntraPath::nvlink;
  if (group.size() < 2) {
    // One GPU per node: NCCL's intra graph is the GPU alone; take the GPU's NVLink total as
    // the per-GPU limit (it never binds against a NIC).
    sys.intra_bw = platform.gpu().nvlinks * nvlink_bw_per_link(sys.sm);
    if (sys.intra_bw <= 0) sys.intra_bw = 12.0;
    return sys;
  }
  if (const MeshRings mesh = nccl_mesh_rings(ctx, nvb_paths(ctx)); mesh.channels > 0) {
    // typeIntra NVB takes the PCI rows of hwLat (tuning.cc: intraHw is NVLINK only for NVL).
    sys.intra = mesh.nvb ? IntraPath::pcie : IntraPath::nvlink;
    sys.mesh_ring_channels = mesh.channels;
    sys.mesh_ring_bw = mesh.bw;
    sys.intra_bw = mesh.channels * mesh.bw;
    return sys;
  }
  const std::vector<int> order = widest_order(ctx, group, true);
  double narrowest = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < order.size(); ++i) {
    const int a = order[i];
    const int b = order[(i + 1) % order.size()];
    const platforms::Route& route = ctx.route(a, b);
    if (route.worst != platforms::LinkType::nvlink) sys.intra = IntraPath::pcie;
    if (crosses_nvswitch(platform, route)) sys.nvswitch = true;
    narrowest = std::min(narrowest, nccl_route_bw(platform, route));
  }
  sys.intra_bw = narrowest;
  return sys;
}

}  // namespace stepsim::models::nccl
