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

/// @brief The widest Hamiltonian path (`closed` = false) or cycle (true) through `ranks`,
/// starting at ranks.front(); rank order when there are more than kExhaustiveRingRanks.
std::vector<int> widest_order(const CollectiveContext& ctx, const std::vector<int>& ranks, bool closed);

}  // namespace stepsim::models
