#pragma once
/// @file The allocation census behind Blink's motivation (MLSys 2020 §2; papers.md §1): for
/// every allocation of a server's GPUs, whether NCCL-style rings could stay on NVLink (an
/// NVLink Hamiltonian cycle), whether trees can (NVLink connected), and how the packed
/// tree rate from every root compares with Edmonds' min-cut bound.
///
/// Contract: pure and deterministic; GPUs are node-local indices of node 0.
#include <vector>

#include "models/collectives/blink_packing.hpp"

namespace stepsim::models::blink {

/// @brief Largest server the census enumerates (2^12 allocations).
constexpr int kMaxCensusGpus = 12;

/// @brief The broadcast trees packed from one root of an allocation.
struct RootPacking {
  int gpu = 0;       ///< the root (node-local GPU index)
  double rate = 0;   ///< bytes/s: NVLink trees, or NVLink + PCIe where NVLink is disconnected
  double bound = 0;  ///< Edmonds' min-cut bound over the same links
  int trees = 0;
  std::string method;   ///< pack_trees' method
  double mwu_rate = 0;  ///< MWU alone (PackOptions' epsilon), before any tree is cut
  int mwu_trees = 0;    ///< distinct trees MWU alone used
};

/// @brief One allocation of the census.
struct AllocationCensus {
  std::vector<int> gpus;           ///< node-local GPU indices, ascending
  bool nvlink_ring = false;        ///< the GPUs hold an NVLink Hamiltonian cycle
  bool nvlink_connected = false;   ///< their NVLinks connect them
  std::vector<RootPacking> roots;  ///< broadcast from each GPU
  double allreduce_rate = 0;       ///< undirected NVLink trees (Flow::both); 0 if disconnected
  double allreduce_bound = 0;      ///< partition_bound of the NVLink graph; 0 where undefined
  int allreduce_trees = 0;
};

/// @brief Every allocation of `size` GPUs of a node of `gpus_per_node`, lexicographic.
std::vector<std::vector<int>> allocations_of(int gpus_per_node, int size);

/// @brief The census entry of `gpus` (node-local indices of node 0) on `platform`.
AllocationCensus census_allocation(const platforms::Platform& platform, const std::vector<int>& gpus);

}  // namespace stepsim::models::blink
