#pragma once
/// @file What NCCL's topology detection would find on a stepsim platform + allocation, in
/// NCCL's own figures (topo.h link bandwidths, not the preset's wire rates).
///
/// Contract: pure; reads only the platform's GPU model, routes, NICs and fabric flags.
#include "models/algorithm.hpp"
#include "models/collectives/nccl_tuning.hpp"

namespace stepsim::models::nccl {

/// @brief NcclSystem for `ctx`:
///  - sm, CPU vendor, NVLS (Platform::has_nvls and sm90+), CollNet (fabric().sharp);
///  - nodes and ranks per node of the allocation;
///  - the intra-node path class from the routes between ranks of one node (NVLink when
///    every hop is NVLink, PCIe otherwise) and whether it crosses an NVSwitch;
///  - intra_bw: the narrowest hop of the node's ring (ring_order) in NCCL's figures: NVLink
///    routes as (route bandwidth / the GPU's per-link wire rate) x NCCL's per-link figure
///    (topo.h: 20.6 GB/s on sm90, ...), PCIe routes scaled like NCCL's Gen3 x16 = 12 GB/s
///    against its 15.75 GB/s wire rate; PCIe routes through the host (P2P off) take NCCL's
///    PHB figure: the narrowest full-duplex hop, less Intel's 6/5 P2P overhead;
///  - the NICs per node and NCCL's NET bandwidth (port rate / 8 = the preset's figure).
NcclSystem nccl_system(const CollectiveContext& ctx);

/// @brief NCCL's PCIe figure per byte/s of PCIe wire rate: Gen3 x16 moves 15.75 GB/s
/// (8 GT/s x 16 lanes x 128/130 / 8) and NCCL models it as 12 GB/s (topo.h).
constexpr double kNcclPciePerWire = 12.0 / 15.75;

}  // namespace stepsim::models::nccl
