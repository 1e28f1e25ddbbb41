#pragma once
/// @file Ring order over an allocation: which rank follows which in a ring.
#include <vector>

#include "models/algorithm.hpp"

namespace stepsim::models {

/// @brief Largest node size searched exhaustively; bigger nodes keep rank order.
constexpr int kExhaustiveRingRanks = 10;

/// @brief Ranks in ring order. One node: the Hamiltonian cycle whose narrowest hop
/// (ctx.route(a, b).bandwidth) is widest, ties to the lexicographically first order from the
/// lowest rank; found by branch and bound for <= kExhaustiveRingRanks ranks, rank order
/// beyond. Several nodes: nodes ascending, each node's ranks as the widest Hamiltonian path
/// from its lowest rank (the same search), so the ring crosses the network once per node,
/// as NCCL's rings do.
std::vector<int> ring_order(const CollectiveContext& ctx);

/// @brief Channels `ring` opens when options.channels is 0. One node: 1 (every channel would
/// follow the same ring, so more only split the same links). Several nodes: one per NIC of
/// the node, so each channel crosses the network through its own NIC, as NCCL opens at least
/// one ring per NIC (src/graph/search.cc tries each NIC as a ring's entry); capped by the
/// smallest node's ranks, since a node has only that many entry GPUs to rotate through.
int default_ring_channels(const CollectiveContext& ctx);

/// @brief One ring per channel, all of n ranks. One node, or one channel: ring_order(ctx).
/// Several nodes: nodes ascending, as ring_order; inside each node of len ranks, channel c of C
/// walks the node's widest cycle rotated by floor(c * len / C) positions, so channel c enters
/// the node at a different GPU and leaves through that GPU's cycle predecessor, hence through
/// different NICs (routes leave through the NIC nearest their GPU). This is NCCL's
/// per-channel ring (src/graph/search.cc searches each channel's ring from another NIC,
/// src/graph/rings.cc links the nodes in the same node order). A node whose rotated cycles
/// would be narrower than its widest path (ring_order's) keeps that path on every channel.
std::vector<std::vector<int>> channel_ring_orders(const CollectiveContext& ctx, int channels);

/// @brief The widest Hamiltonian path (`closed` = false) or cycle (true) through `ranks`,
/// starting at ranks.front(); rank order when there are more than kExhaustiveRingRanks.
std::vector<int> widest_order(const CollectiveContext& ctx, const std::vector<int>& ranks, bool closed);

}  // namespace stepsim::models
