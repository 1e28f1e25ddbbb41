/// @file NcclSystem from a platform (see nccl_topology.hpp).
#include "models/collectives/nccl_topology.hpp"

#include <algorithm>
#include <limits>

#include "models/collectives/lowering.hpp"
#include "models/collectives/ring_order.hpp"

namespace stepsim::models::nccl {
namespace {

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
    if (!link.half_duplex) wire = std::min(wire, link.bandwidth);
  }
  const double bw = wire / kGB * kNcclPciePerWire;
  return platform.cpu_vendor == "intel" ? bw * 5.0 / 6.0 : bw;
}

bool crosses_cpu(const platforms::Platform& platform, const platforms::Route& route) {
  for (const platforms::Hop& hop : route.hops) {
    const platforms::Link link = platform.link(hop.link);
    if (platform.vertex(link.a).kind == platforms::VertexKind::cpu ||
        platform.vertex(link.b).kind == platforms::VertexKind::cpu)
      return true;
  }
  return false;
}

/// One route's bandwidth in NCCL's figures (GB/s).
double nccl_route_bw(const platforms::Platform& platform, const platforms::Route& route) {
  const platforms::GpuModel& gpu = platform.gpu();
  if (route.worst == platforms::LinkType::nvlink && gpu.nvlink_bandwidth_per_link > 0)
    return route.bandwidth / gpu.nvlink_bandwidth_per_link * nvlink_bw_per_link(gpu.sm_version);
  if (route.worst == platforms::LinkType::pcie && crosses_cpu(platform, route))
    return nccl_host_path_bw(platform, route);
  return route.bandwidth / kGB * kNcclPciePerWire;
}

}  // namespace

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
