#pragma once
/// @file NCCL's tuning constants per release: the tables and feature switches of
/// src/graph/tuning.cc (and init.cc/enqueue.cc for 2.4) that changed between the NCCL
/// versions our measurements ran, so `nccl_tune` can model the NCCL a data set used.
///
/// Sources (read from NVIDIA/nccl with the stored versions; where a tag is not stored the
/// nearest stored version is used and its entry says so): v2.4-era init.cc/enqueue.cc/
/// core.h, v2.7.5 tuning.cc (01afd20a), v2.8.3 tuning.cc (920dbe5b), v2.20.3 tuning.cc
/// (b6475625), HEAD 2.30.7 (papers.md §4). Units as in nccl_tuning.hpp: us and GB/s.
///
/// Contract: `nccl_version` returns one immutable, program-lifetime constant set; HEAD is the
/// default everywhere a version is not given.
#include <string>
#include <vector>

#include "models/algorithm.hpp"
#include "models/collectives/nccl_tuning.hpp"

namespace stepsim::models::nccl {

/// @brief Which generation of NCCL's selection logic a constant set belongs to: the
/// formulas of tuning.cc changed shape (not just values) between these.
enum class Era {
  v2_4,    ///< no tuning model: ring/tree by treeThreshold, LL by llThreshold (init.cc, enqueue.cc)
  v2_7,    ///< tuning.cc with Tree/Ring/CollNet, per-collective LL128 caps, fixed tree caps
  v2_8,    ///< as v2_7, but LL capped by llMaxBws and trees by perChMaxTreeBws (v2.8.3)
  v2_20,   ///< per-arch caps, NVLS/NVLSTree with the 5/6 ratio, net overhead
  head,    ///< 2.27+: NVLS efficiency, LL at 1/2, Blackwell rows
};

/// @brief One NCCL release's tuning constants (rows: Volta, Ampere, Hopper, Blackwell;
/// columns N1, N2, N4+ nodes where tabled).
struct VersionConstants {
  std::string name;      ///< the key `--algo-param version=` accepts
  std::string source;    ///< NCCL file and version the numbers were read from
  Era era = Era::head;
  double base_lat[kAlgos][kProtos] = {};
  double hw_lat[3][kAlgos][kProtos] = {};   ///< NVLink, PCI, NET
  double ll_max_bw[4][3] = {};
  double per_ch_max_ring_ll128[4] = {};
  double per_ch_max_tree_ll128[4][3] = {};
  double per_ch_max_tree[4][3] = {};
  double per_ch_max_nvls_tree[2][3] = {};   ///< Hopper, Blackwell
  double ll128_per_coll[5] = {};            ///< ll128MaxBwPerCh (2.7/2.8): Broadcast, Reduce,
                                            ///< AllGather, ReduceScatter, AllReduce
  double nvls_efficiency[2] = {};           ///< Hopper, Blackwell
  double tree_correction[kProtos][23] = {};
  int tree_correction_len = 23;             ///< 22 sizes (64 B..128 MiB) before 2.8
  bool has_nvls = false;                    ///< NCCL_ALGO_NVLS exists (2.17+)
  bool has_nvls_tree = false;               ///< NCCL_ALGO_NVLS_TREE exists (2.18+)
  bool has_collnet_chain = false;           ///< CollNet split into Direct/Chain (2.14+)
  bool has_ll128 = true;                    ///< LL128 exists (2.5+)
  bool ll128_sm100 = false;                 ///< LL128 on by default on Blackwell
};

/// @brief The constant set for `version` ("2.18", "2.20.5", "head", ...): the longest
/// known key that is a prefix-by-components of it. Throws ConfigError listing the known
/// versions otherwise.
const VersionConstants& nccl_version(const std::string& version);
/// @brief NCCL HEAD (2.30.7), the default.
const VersionConstants& head_version();
/// @brief The release an algorithm's options select (`version=2.18`), HEAD by default.
const VersionConstants& nccl_version(const AlgorithmOptions& options);
/// @brief Every accepted key, oldest first.
std::vector<std::string> known_versions();

}  // namespace stepsim::models::nccl
