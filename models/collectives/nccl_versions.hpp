#pragma once
/// @file NCCL's tuning constants per release: the tables and feature switches of
/// src/graph/tuning.cc (and init.cc/enqueue.cc for 2.4, enqueue.cc for 2.5's tree
/// correction) for every minor release from 2.4 to HEAD, so `nccl_tune` can model the NCCL a
/// data set used.
///
/// Sources: NVIDIA/nccl at each minor release's latest patch tag (v2.4.8-1 .. v2.30.7-1;
/// HEAD 5067397c is 2.30.7); docs/nccl-releases.md tables release -> tag, commit and what
/// changed. Units as in nccl_tuning.hpp: us and GB/s.
///
/// Contract: `nccl_version` returns one immutable, program-lifetime constant set; releases
/// whose modelled constants did not change share one set. HEAD is the default everywhere a
/// version is not given.
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
           ///< (2.7; 2.5/2.6 approximated by it, docs/nccl-releases.md)
  v2_8,    ///< as v2_7, but LL capped by llMaxBws and trees by perChMaxTreeBws (2.8-2.16)
  v2_20,   ///< per-arch caps, NVLS/NVLSTree with a fixed ratio (2.17-2.27)
  head,    ///< NVLS efficiency model, LL at 1/2 (2.28+)
};

/// @brief One NCCL release's tuning constants (rows: Volta, Ampere, Hopper, Blackwell;
/// columns N1, N2, N4+ nodes where tabled). The switches below are the formula changes
/// between releases of one Era; each names the releases it holds for.
struct VersionConstants {
  std::string name;      ///< the first release (`--algo-param version=` key) with this set
  std::string source;    ///< NCCL tags and commits the numbers were read from
  Era era = Era::head;
  double base_lat[kAlgos][kProtos] = {};
  double hw_lat[3][kAlgos][kProtos] = {};   ///< NVLink, PCI, NET
  double ll_max_bw[4][3] = {};
  double per_ch_max_ring_ll128[4][3] = {};
  double per_ch_max_tree_ll128[4][3] = {};
  double per_ch_max_tree[4][3] = {};
  double per_ch_max_nvls_tree[2][3] = {};   ///< Hopper, Blackwell
  double ll128_per_coll[5] = {};            ///< ll128MaxBwPerCh (2.7-2.16): Broadcast, Reduce,
                                            ///< AllGather, ReduceScatter, AllReduce
  double nvls_efficiency[2] = {};           ///< Hopper, Blackwell
  double tree_correction[kProtos][23] = {};
  int tree_correction_len = 23;             ///< 22 sizes (64 B..128 MiB) before 2.8
  bool has_collnet = true;                  ///< NCCL_ALGO_COLLNET exists (2.6+)
  bool has_nvls = false;                    ///< NCCL_ALGO_NVLS exists (2.17+)
  bool has_nvls_tree = false;               ///< NCCL_ALGO_NVLS_TREE exists (2.18+)
  bool has_collnet_chain = false;           ///< CollNet split into Direct/Chain (2.14+)
  bool nvls_ag_rs = false;                  ///< NVLS runs AllGather/ReduceScatter (2.17, 2.19+)
  bool collnet_ag_rs = false;               ///< CollNet Direct runs AllGather/ReduceScatter (2.20+)
  bool has_ll128 = true;                    ///< LL128 exists (2.5+)
  std::vector<int> ll128_sms = {};          ///< SM versions with LL128 on by default;
                                            ///< empty: every sm70+ (2.27+)
  bool ring_hops_all_net = false;           ///< across nodes every ring hop costs hwLat[NET]
                                            ///< (2.5, 2.6)
  bool net_overhead = false;                ///< getNetOverhead floors intra ring hops across
                                            ///< nodes (2.18+); before, LL intra hops x1.8 (2.7+)
  bool ring_ar_inter_2n = false;            ///< ring AllReduce counts 2 nNodes inter-node
                                            ///< steps, not 2 (nNodes-1) (2.12-2.22)
  double ring_plateau[4] = {1, 1, 1, 1};    ///< multi-node ring AllReduce Simple latency
                                            ///< factor per arch row (1: none, 2.5/2.6)
  bool plateau_per_channel = false;         ///< the plateau starts at 64 B per channel and
                                            ///< rank (2.18+), not at nRanks/16 x 64 KiB
  bool ring_ll_half = false;                ///< ring LL busBw x1/2, not x1/4 or x1/3 (2.21+)
  bool ring_ll128_ppn1_discount = false;    ///< ring LL128 busBw x0.7 at one GPU per node
                                            ///< (2.7-2.22)
  bool ppn1_tree_net_latency = false;       ///< one GPU per node: inter-node hops take the
                                            ///< Tree row of hwLat[NET] (2.23+)
  double nvls_ratio = 0;                    ///< NVLS/NVLSTree algBw/busBw: 0.75 (2.17), 5/6
                                            ///< (2.18-2.27); 0: ring ratio (2.28+)
  bool ag_rs_ratio_ring_only = false;       ///< AllGather/ReduceScatter apply no algorithm
                                            ///< ratio except on rings (2.23+)
  bool nvls_allreduce_sharp = false;        ///< NVLS AllReduce across nodes through SHARP
                                            ///< (CollNet) (2.18+; 2.17 is single-node only)
  bool nvls_ag_rs_multinode = false;        ///< NVLS AllGather/ReduceScatter across nodes, with
                                            ///< SHARP (CollNet) and one NIC per GPU (2.27+;
                                            ///< 2.19-2.26 enqueue.cc: "single-node only")
  int nvls_min_gpus = 3;                    ///< GPUs per node NVLS needs (nvls.cc: 2 in 2.17,
                                            ///< 3 from 2.18, 2 from 2.28.7)
  int nvls_max_heads = 0;                   ///< NVLS graph heads cap (search.cc
                                            ///< NCCL_MAX_NVLS_ARITY 32, 2.25+; 0: none)
  bool nvls_ag_rs_arity_cap = false;        ///< NVLS AllGather/ReduceScatter off beyond 32 ranks
                                            ///< of a node (2.25+)
  int nvls_channels_sm100_one_node = 16;    ///< NVLS channels on sm100 (nvls.cc: 16 for every
  int nvls_channels_sm100_nodes = 16;       ///< arch before 2.25; 32 from 2.25; 24 on one
                                            ///< NVLink domain from 2.27); sm90 keeps 16
  bool nvls_ag_rs_ppn_bw = false;           ///< NVLS AllGather/ReduceScatter busBw from
                                            ///< bwIntra (ppn-1)/ppn and 0.9 bwInter (2.27+)
};

/// @brief The constant set for `version` ("2.18", "2.20.5", "head", ...): the longest
/// known key that is a prefix-by-components of it. Throws ConfigError listing the known
/// versions otherwise.
const VersionConstants& nccl_version(const std::string& version);
/// @brief NCCL HEAD (2.30.7, 5067397c), the default.
const VersionConstants& head_version();
/// @brief The release an algorithm's options select (`version=2.18`), HEAD by default.
const VersionConstants& nccl_version(const AlgorithmOptions& options);
/// @brief NVLS channels NCCL launches (transport/nvls.cc NVLS_NCHANNELS_SM90 16; sm100 as
/// the release's VersionConstants say).
int nvls_channels(const VersionConstants& v, const NcclSystem& sys);
/// @brief Every accepted key, oldest first: "2.4" .. "2.30", then "head".
std::vector<std::string> known_versions();

}  // namespace stepsim::models::nccl
