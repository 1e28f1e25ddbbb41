#pragma once
/// @file NCCL's ring-graph search on a node whose GPUs are wired to each other by NVLink
/// (DGX-1P/-1V hybrid cube-mesh, HGX 4-GPU boards), without an NVSwitch.
///
/// Source: src/graph/search.cc ncclTopoCompute / ncclTopoSearchRec (2.19-2.30; the same
/// shape in 2.7.5, 01afd20a) and src/graph/paths.cc. NCCL looks for channels, each a
/// Hamiltonian ring of the node's GPUs moving `speed` GB/s, and charges every channel's
/// speed to each directed link its hops follow (followPath); a link is usable while its
/// remaining bandwidth covers the speed, so rings may share a link within its capacity.
/// It tries the speed array from the highest speed that a GPU-to-GPU path can carry
/// downwards, keeps the graph with the most total bandwidth (channels x speed; ties keep
/// the earlier, faster graph), and stops lowering the speed once the next speed is
/// below 0.49 x the best graph's. Path classes are tried in order: direct NVLink hops
/// (PATH_NVL) first, then, while nothing better was found, NVLink through one other GPU
/// of the job (PATH_NVB, NCCL 2.8+; paths.cc routes through at most one GPU and only
/// where no direct link exists). Rings that need a PCIe hop are outside this search.
///
/// Contract: pure and deterministic. The search is exhaustive over the node's directed
/// Hamiltonian cycles (n <= kMaxMeshGpus), where NCCL's is a timed DFS: on these small
/// meshes both find the maximum channel count at each speed.
#include <vector>

namespace stepsim::models::nccl {

/// @brief Largest node searched (8! / 8 = 5040 directed cycles).
constexpr int kMaxMeshGpus = 8;

/// @brief NVLink capacities between the GPUs of one node in NCCL's figures.
struct NvlinkMesh {
  int gpus = 0;
  /// gpus x gpus, row-major: GB/s from a to b per direction (NCCL's per-link bandwidth,
  /// topo.h ncclTopoNVLinkBw, x the links of the pair); 0 where no NVLink joins them.
  std::vector<double> bw;
  double at(int a, int b) const { return bw[static_cast<std::size_t>(a * gpus + b)]; }
};

/// @brief The ring graph found: per channel one ring of mesh GPU indices, starting at 0.
struct MeshRings {
  int channels = 0;     ///< rings found; 0 when no NVLink Hamiltonian cycle exists
  double bw = 0;        ///< GB/s per channel (NCCL's bwIntra)
  bool nvb = false;     ///< some hop crosses an intermediate GPU (typeIntra PATH_NVB)
  std::vector<std::vector<int>> rings;
};

/// @brief Emulates ncclTopoCompute's ring search on `mesh` with NCCL's intra-node speed
/// array `speeds` (descending), at most `max_channels` rings (MAXCHANNELS / 2), NVB paths
/// when `nvb`. Throws std::invalid_argument for more than kMaxMeshGpus GPUs.
MeshRings search_mesh_rings(const NvlinkMesh& mesh, const std::vector<double>& speeds, int max_channels, bool nvb);

}  // namespace stepsim::models::nccl
