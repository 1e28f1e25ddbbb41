#pragma once
/// @file How NCCL 2.19+ spreads one send or receive over channels (enqueue.cc addP2pToPlan,
/// paths.cc ncclTopoComputeP2pChannels, connect.cc ncclTopoPostset).
///
/// Contract: pure. Single-node communicators of the v2_20 and HEAD eras only (nullopt
/// otherwise: multi-node p2p, with its per-NIC channel rules and PXN, and older releases keep
/// the caller's one-channel-set model). The rules, in NCCL's order:
///  - compute channels = 2 x the search's channels ("each search channel gets two compute
///    channels"), at least NVLS's; p2p channels P = the next power of two;
///  - channels per peer = the next power of two of min(P, the fewest any pair of local GPUs
///    gets: 2 x its NVLinks, 2 for a non-NVLink pair);
///  - the smallest split: halve the per-peer count while count x ranks > P;
///  - step size = NCCL_P2P_NVL_CHUNKSIZE (512 KiB) when every pair is NVLink, else
///    NCCL_P2P_PCI_CHUNKSIZE (128 KiB); parts of step/8 .. 32 x step: a peer's bytes start on
///    min(smallest split, bytes / (step/8)) channels, doubled while a part exceeds 32 steps.
#include <optional>

#include "models/algorithm.hpp"
#include "models/collectives/nccl_tuning.hpp"
#include "models/collectives/nccl_versions.hpp"

namespace stepsim::models::nccl {

struct P2pChannels {
  int per_peer = 1;       ///< channels one peer's bytes are split over
  int total = 1;          ///< the communicator's p2p channels (CTAs every peer shares)
  double channel_bw = 0;  ///< GB/s one compute channel carries: the ring graph's per-channel
                          ///< bandwidth over the two compute channels each search channel gets
};

std::optional<P2pChannels> p2p_channels(const CollectiveContext& ctx, const NcclSystem& sys, const Graphs& graphs,
                                        const VersionConstants& version, Bytes per_peer_bytes);

}  // namespace stepsim::models::nccl
