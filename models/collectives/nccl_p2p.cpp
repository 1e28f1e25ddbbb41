#include "models/collectives/nccl_p2p.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "models/collectives/lowering.hpp"
#include "models/collectives/nccl_topology.hpp"

namespace stepsim::models::nccl {
namespace {

constexpr int kMaxChannels = 32;               // MAXCHANNELS of the 2.19-2.2x device code
constexpr Bytes kNvlChunk = 512.0 * 1024;      // NCCL_P2P_NVL_CHUNKSIZE default
constexpr Bytes kPciChunk = 128.0 * 1024;      // NCCL_P2P_PCI_CHUNKSIZE default

}  // namespace

std::optional<P2pChannels> p2p_channels(const CollectiveContext& ctx, const NcclSystem& sys, const Graphs& graphs,
                                        const VersionConstants& version, Bytes per_peer_bytes) {
  if (sys.nodes != 1 || (version.era != Era::v2_20 && version.era != Era::head)) return std::nullopt;
  const int search = std::max(1, std::min(graphs.ring.channels, graphs.tree.channels));
  const int compute = std::max(std::min(kMaxChannels, 2 * search), sys.nvls ? graphs.nvls.channels : 0);
  P2pChannels out;
  out.total = static_cast<int>(std::bit_ceil(static_cast<unsigned>(compute)));
  out.channel_bw = graphs.ring.bw_intra / 2;

  // ncclTopoGetNchannels over every pair of local GPUs.
  const std::vector<int> node = lowering::ranks_by_node(ctx).front();
  int fewest = out.total;
  bool all_nvlink = true;
  for (int a : node)
    for (int b : node) {
      if (a == b) continue;
      const int links = nvlink_count(ctx, a, b);
      if (links == 0) all_nvlink = false;
      fewest = std::min(fewest, links > 0 ? 2 * links : 2);
    }
  const int per_peer_max = static_cast<int>(std::bit_ceil(static_cast<unsigned>(fewest)));
  int smallest = per_peer_max;
  while (smallest * sys.ranks > out.total && smallest > 1) smallest /= 2;

  const Bytes step = all_nvlink ? kNvlChunk : kPciChunk;
  const Bytes min_part = step / 8, max_part = step * 32;
  int k = static_cast<int>(std::min<double>(smallest, std::ceil(per_peer_bytes / min_part)));
  k = std::max(k, 1);
  double part = std::max(min_part, std::ceil(per_peer_bytes / k));
  while (part > max_part && k <= per_peer_max / 2) {
    k *= 2;
    part = std::ceil(per_peer_bytes / k);
  }
  out.per_peer = k;
  return out;
}

}  // namespace stepsim::models::nccl
