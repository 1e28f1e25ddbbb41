#pragma once
/// @file What NCCL's topology detection would find on a stepsim platform + allocation, in
/// NCCL's own figures (topo.h link bandwidths, not the preset's wire rates).
///
/// Contract: pure (relay_nvb_hops writes only the schedule it is given); reads only the
/// platform's GPU model, routes, NICs and fabric flags.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "models/algorithm.hpp"
#include "models/collectives/nccl_graph_search.hpp"
#include "models/collectives/nccl_tuning.hpp"

namespace stepsim::models::nccl {

/// @brief NCCL's path types (topo.h PATH_*, in its order) that a stepsim route between two
/// GPUs can have; NVB (NVLink through a GPU) is no route here (routes never transit GPUs).
enum class PathType { nvl, pix, pxb, phb, sys, net };

/// @brief NCCL's type of a GPU-to-GPU route (paths.cc): NVL when every hop is NVLink (an
/// NVSwitch included); PIX through one PCIe switch, PXB through several; PHB through a CPU (a
/// root complex, or a pair without peer-to-peer, which NCCL diverts through the CPU:
/// platform.hpp); SYS across the inter-socket link; NET across the network.
PathType path_type(const platforms::Platform& platform, const platforms::Route& route);

/// @brief NcclSystem for `ctx`:
///  - sm, CPU vendor, NVLS (Platform::has_nvls and sm90+), CollNet (fabric().sharp);
///  - nodes and ranks per node of the allocation;
///  - the intra-node path class from the routes between ranks of one node (NVLink when
///    every hop is NVLink, PCIe otherwise) and whether it crosses an NVSwitch;
///  - on one node whose GPUs are wired to each other by NVLink (no NVSwitch): NCCL's ring
///    search over those links (nccl_mesh_rings), intra_bw = channels x speed; where it finds
///    no NVLink ring, or otherwise:
///  - intra_bw: the narrowest hop of the node's ring (ring_order) in NCCL's figures: NVLink
///    routes as (datasheet bandwidth / the GPU's per-link wire rate) x NCCL's per-link figure
///    (topo.h: 20.6 GB/s on sm90, ...), PCIe routes scaled like NCCL's Gen3 x16 = 12 GB/s
///    against its 15.75 GB/s wire rate (PIX/PXB: GPUs under a switch with P2P on); PHB
///    routes (through the host: a root complex, or P2P off) take NCCL's PHB figure: the
///    narrowest full-duplex hop, less Intel's 6/5 P2P overhead;
///  - the NICs per node and NCCL's NET bandwidth (port rate / 8 = the preset's figure).
///  Every bandwidth here is the platform's datasheet figure (Link::datasheet_bandwidth,
///  Fabric::nic_bandwidth), never an achieved one; the paths themselves are the platform's
///  routes, which are chosen on achieved figures (docs/platforms.md, "Link figures").
NcclSystem nccl_system(const CollectiveContext& ctx);

/// @brief NCCL's ring graph on a single-node allocation whose GPUs are joined by direct
/// NVLinks and no NVSwitch (search_mesh_rings with NCCL HEAD's intra-node speed array;
/// rings hold ranks). With `nvb`, hops may also take NVB paths (two NVLinks through another
/// GPU, relayed through its memory: nvb_relays) when no ring runs on direct NVLinks alone.
/// channels = 0 for NVSwitch nodes, several nodes, more than kMaxMeshGpus ranks, or when no
/// ring is found: the ring then goes over PCIe.
MeshRings nccl_mesh_rings(const CollectiveContext& ctx, bool nvb);

/// @brief Whether the selected NCCL release has NVB paths (2.8+; the NCCL of the Blink
/// paper, 2.4, had none).
bool nvb_paths(const CollectiveContext& ctx);

/// @brief NVLinks NCCL counts between the GPUs of ranks `a` and `b` (paths.cc path->bw over
/// topo.h's per-link figure, through an NVSwitch too); 0 when their route is not all NVLink.
int nvlink_count(const CollectiveContext& ctx, int a, int b);

/// @brief NCCL 2.8+'s relays (p2p.cc "P2P/indirect"): for each pair of ranks (a, b) of one
/// node with no NVLink between them, the rank of that node whose NVLinks to both are widest
/// (the fewer of the two link counts; ties to the lowest rank), as paths.cc's PATH_NVB. Pairs
/// with a direct or no NVLink path, or on different nodes, are absent (so NVSwitch nodes and
/// PCIe boxes have none, whatever the rank count).
std::map<std::pair<int, int>, int> nvb_relays(const CollectiveContext& ctx);

/// @brief Sets `via` on every transfer of `s` between ranks that nvb_relays relays: NCCL's
/// transports connect such GPUs through the intermediate GPU whatever the algorithm. Returns
/// a note listing the relays ("" when none).
std::string relay_nvb_hops(Schedule& s, const CollectiveContext& ctx);

/// @brief NCCL's PCIe figure per byte/s of PCIe wire rate: Gen3 x16 moves 15.75 GB/s
/// (8 GT/s x 16 lanes x 128/130 / 8) and NCCL models it as 12 GB/s (topo.h).
constexpr double kNcclPciePerWire = 12.0 / 15.75;

}  // namespace stepsim::models::nccl
