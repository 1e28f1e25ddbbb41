/// @file NCCL tuning constants per release, see nccl_versions.hpp. Each set names the NCCL
/// tag and commit it copies (docs/nccl-releases.md has the table); a release's set is built
/// from the previous one plus that release's diff of tuning.cc, so every change sits in the
/// function of the release that made it. Rows are Volta, Ampere, Hopper, Blackwell.
#include "models/collectives/nccl_versions.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "platforms/config_error.hpp"

namespace stepsim::models::nccl {
namespace {

constexpr int kTree = static_cast<int>(Algo::tree);
constexpr int kRing = static_cast<int>(Algo::ring);
constexpr int kCollNetDirect = static_cast<int>(Algo::collnet_direct);
constexpr int kCollNetChain = static_cast<int>(Algo::collnet_chain);
constexpr int kNvls = static_cast<int>(Algo::nvls);
constexpr int kNvlsTree = static_cast<int>(Algo::nvls_tree);
constexpr int kSimple = static_cast<int>(Proto::simple);
constexpr int kNvlink = 0, kPci = 1, kNet = 2;
constexpr int kHopper = 2, kBlackwell = 3;

// treeCorrectionFactor of tuning.cc 2.10-2.30 (23 sizes, 64 B .. 256 MiB; 2.29 appends a
// 24th size that only NVLSTree reads).
constexpr double kTreeCorrection23[kProtos][23] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};

/// Copies a constant table into the VersionConstants member of the same shape; the shared
/// type makes a shape mismatch a compile error instead of a silent partial copy.
template <class Table>
void fill(Table& member, const Table& table) {
  static_assert(std::is_array_v<Table>);
  std::memcpy(&member, &table, sizeof(Table));
}

/// The 22-size treeCorrectionFactor of 2.5-2.7 (64 B .. 128 MiB).
void fill_tree_correction22(VersionConstants& v, const double (&corr)[kProtos][22]) {
  for (int p = 0; p < kProtos; ++p) std::copy(corr[p], corr[p] + 22, v.tree_correction[p]);
  v.tree_correction_len = 22;
}

/// A set derived from an earlier release: only the key and its source change here.
VersionConstants derive(VersionConstants v, const char* name, const char* source) {
  v.name = name;
  v.source = source;
  return v;
}

/// NCCL v2.5.7 tuning.cc (3701130b; enqueue.cc holds its tree correction): Tree and Ring
/// only, LL128 on sm70 only, every ring hop across nodes at hwLat[NET], no ring plateau.
/// Its bandwidth refinements (ll128MaxBw totals {113, 72, 110, 91, 100} GB/s, tree caps
/// 70/90 GB/s, tree LL x1/3) differ from 2.7's, which the v2_7 formulas apply, with
/// v2.7.5's ll128MaxBwPerCh (docs/nccl-releases.md).
VersionConstants make_2_5() {
  VersionConstants v{.name = "2.5",
                     .source = "tuning.cc, enqueue.cc @ v2.5.7-1 (3701130b); bandwidth refinements and "
                               "ll128MaxBwPerCh of v2.7.5 (01afd20a)",
                     .era = Era::v2_7};
  const double base[kAlgos][kProtos] = {{4.4, 4.4, 0}, {3.6, 3.6, 8.4}};
  const double hw[3][kAlgos][kProtos] = {{{.5, 1.9, 28}, {.4, 2.5, 5.7}},
                                         {{1.0, 1.9, 28}, {1.0, 2.5, 5.7}},
                                         {{5.0, 7.5, 50}, {.9, 2.5, 6.6}}};
  const double corr[kProtos][22] = {
      {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .5, .5, .6, .7, .8, .9, .9, 1.0, 1.0, 1.0},
      {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .8, .7, .7, .7, .6, .6, .7, .7, .8, .8, .9, .9, 1.0},
      {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .5, .5, .6, .6, .7, .8, .9}};
  const double ll128[5] = {18.8, 12.0, 18.3, 15.2, 16.7};
  fill(v.base_lat, base);
  fill(v.hw_lat, hw);
  fill_tree_correction22(v, corr);
  fill(v.ll128_per_coll, ll128);
  v.has_collnet = false;
  v.ll128_sms = {70};
  v.ring_hops_all_net = true;
  return v;
}

/// NCCL v2.6.4 tuning.cc (b221128e): adds CollNet (one algorithm, the CollNetDirect row
/// here) and moves the tree caps to 80/110 GB/s by nNodes > 2, which the v2_7 formulas
/// already apply.
VersionConstants make_2_6() {
  VersionConstants v = derive(make_2_5(), "2.6",
                              "tuning.cc @ v2.6.4-1 (b221128e); bandwidth refinements and ll128MaxBwPerCh of "
                              "v2.7.5 (01afd20a)");
  v.has_collnet = true;
  fill(v.base_lat[kCollNetDirect], {4.4, 4.4, 0});
  fill(v.hw_lat[kNvlink][kCollNetDirect], {.5, 1.9, 4.0});
  fill(v.hw_lat[kPci][kCollNetDirect], {1.0, 1.9, 5.5});
  fill(v.hw_lat[kNet][kCollNetDirect], {5.0, 5.0, 10.7});
  return v;
}

/// NCCL v2.7.8 tuning.cc (033d7995; identical to v2.7.5, 01afd20a): Tree, Ring, CollNet;
/// LL128 on sm70 and sm80; intra and inter ring hops priced apart. The fixed tree caps live
/// in the v2_7 branch of nccl_tuning.cpp (they are not per-arch tables in this era).
VersionConstants make_2_7() {
  VersionConstants v{.name = "2.7", .source = "tuning.cc @ v2.7.8-1 (033d7995) = v2.7.5 (01afd20a)", .era = Era::v2_7};
  // CollNet (one algorithm then) sits in the CollNetDirect row.
  const double base[kAlgos][kProtos] = {{4.4, 4.4, 0}, {3.6, 10.0, 8.4}, {4.4, 4.4, 0}};
  const double hw[3][kAlgos][kProtos] = {{{.52, 1.2, 28}, {.47, 1.9, 3.4}, {.5, 1.2, 4.0}},
                                         {{1.0, 1.9, 28}, {1.0, 2.5, 5.7}, {1.0, 1.9, 5.5}},
                                         {{5.0, 8.5, 50}, {2.7, 4.0, 9.6}, {5.0, 5.0, 10.7}}};
  fill(v.base_lat, base);
  fill(v.hw_lat, hw);
  // v2.7.5 treeCorrectionFactor: 22 sizes, 64 B .. 128 MiB.
  const double corr[kProtos][22] = {
      {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0},
      {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .5, .6, .6, .7, .7, .8, .9, .9, 1.0},
      {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .5, .5, .6, .6, .7, .8, .9}};
  fill_tree_correction22(v, corr);
  const double ll128[5] = {18.8, 12.0, 18.3, 15.2, 16.7};   // ll128MaxBwPerCh
  fill(v.ll128_per_coll, ll128);
  v.ll128_sms = {70, 80};
  v.ring_ll128_ppn1_discount = true;
  fill(v.ring_plateau, {1.9, 1.9, 1.9, 1.9});
  return v;
}

/// NCCL 2.4 (v2.4.8-1, 7c72dee6: init.cc ncclTreeThreshold, enqueue.cc getKernelInfo): no
/// tuning model, no LL128 (2.5+), no CollNet (2.6+). Selection follows the 2.4 thresholds
/// (nccl_tuning.cpp); the latency and bandwidth the lowering needs come from v2.7.5's model.
VersionConstants make_2_4() {
  VersionConstants v = derive(make_2_7(), "2.4",
                              "init.cc/enqueue.cc/core.h @ v2.4.8-1 (7c72dee6) (thresholds); tuning.cc @ "
                              "v2.7.5 (01afd20a) (estimates)");
  v.era = Era::v2_4;
  v.has_ll128 = false;
  v.has_collnet = false;
  return v;
}

/// NCCL v2.8.4 tuning.cc (911d61f2; identical to v2.8.3, 920dbe5b): v2.7's baseLat and
/// formulas with new tables: llMaxBws caps ring and tree LL, perChMaxTreeBws caps trees per
/// channel, hwLat NVLink Tree/LL128 1.25 and NET Tree/Simple 28 (was 1.2 and 50), AllReduce
/// LL128 16.9 GB/s per channel (was 16.7), 23 tree correction sizes. Its two-row tables
/// index by compCap80 (an all-sm80 job) for a single node and by CPU vendor (Intel 0, AMD
/// 1) across nodes, so Hopper and Blackwell take row 0. v2.9.9 (3fec2fa5) only drops
/// CollNet LL, which nccl_tune never offers, so 2.9 shares this set.
VersionConstants make_2_8() {
  VersionConstants v{.name = "2.8",
                     .source = "tuning.cc @ v2.8.4-1 (911d61f2) = v2.8.3 (920dbe5b); v2.9.9-1 (3fec2fa5) "
                               "changes only CollNet LL",
                     .era = Era::v2_8};
  const double base[kAlgos][kProtos] = {{4.4, 4.4, 0}, {3.6, 10.0, 8.4}, {4.4, 4.4, 0}};
  const double hw[3][kAlgos][kProtos] = {{{.52, 1.25, 28}, {.47, 1.9, 3.4}, {.5, 1.2, 4.0}},
                                         {{1.0, 1.9, 28}, {1.0, 2.5, 5.7}, {1.0, 1.9, 5.5}},
                                         {{5.0, 8.5, 28}, {2.7, 4.0, 9.6}, {5.0, 5.0, 10.7}}};
  const double ll[4][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {39.0, 39.0, 20.4}, {39.0, 39.0, 20.4}};
  const double tree[4][3] = {{26.5, 18.5, 10.0}, {24.0, 22.5, 16.0}, {26.5, 18.5, 10.0}, {26.5, 18.5, 10.0}};
  const double ll128[5] = {18.8, 12.0, 18.3, 15.2, 16.9};
  const double corr[kProtos][23] = {
      {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
      {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .5, .6, .6, .7, .7, .8, .9, .9, .92, .92},
      {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};
  fill(v.base_lat, base);
  fill(v.hw_lat, hw);
  fill(v.ll_max_bw, ll);
  fill(v.per_ch_max_tree, tree);
  fill(v.ll128_per_coll, ll128);
  fill(v.tree_correction, corr);
  v.ll128_sms = {70, 80};
  v.ring_ll128_ppn1_discount = true;
  fill(v.ring_plateau, {1.9, 1.9, 1.9, 1.9});
  return v;
}

/// NCCL v2.10.3 tuning.cc (7e515921; v2.11.4, e11238b3, is identical): CollNet Simple
/// 8 us on NVLink and PCI, one LL128 cap of 20 GB/s per channel for every collective,
/// Ampere tree caps N2/N4 23.6/17.8, the LL128 row of the tree correction reshaped. Its
/// tree LL128 x120/128 across nodes (was 0.915) and CollNet's 0.5 us arity term are not in
/// the v2_8 formulas (docs/nccl-releases.md).
VersionConstants make_2_10() {
  VersionConstants v = derive(make_2_8(), "2.10", "tuning.cc @ v2.10.3-1 (7e515921) = v2.11.4-1 (e11238b3)");
  v.hw_lat[kNvlink][kCollNetDirect][kSimple] = 8.0;
  v.hw_lat[kPci][kCollNetDirect][kSimple] = 8.0;
  fill(v.ll128_per_coll, {20.0, 20.0, 20.0, 20.0, 20.0});
  fill(v.per_ch_max_tree[1], {24.0, 23.6, 17.8});
  fill(v.tree_correction, kTreeCorrection23);
  return v;
}

/// NCCL v2.12.12 tuning.cc (7aa1c46f; v2.13.4, 19ab67d1, is identical): ring NET Simple
/// 28 us (was 9.6) and 2 nNodes inter-node steps in ring AllReduce.
VersionConstants make_2_12() {
  VersionConstants v = derive(make_2_10(), "2.12", "tuning.cc @ v2.12.12-1 (7aa1c46f) = v2.13.4-1 (19ab67d1)");
  v.hw_lat[kNet][kRing][kSimple] = 28;
  v.ring_ar_inter_2n = true;
  return v;
}

/// NCCL v2.14.3 tuning.cc (c4e2aa6c): CollNet splits into Direct and Chain (Simple only,
/// Direct scaled by the GPU/NIC ratio), ring NET Simple back to 9.6 us.
VersionConstants make_2_14() {
  VersionConstants v = derive(make_2_12(), "2.14", "tuning.cc @ v2.14.3-1 (c4e2aa6c)");
  v.has_collnet_chain = true;
  v.hw_lat[kNet][kRing][kSimple] = 9.6;
  fill(v.base_lat[kCollNetChain], {4.4, 4.4, 0});
  for (int path : {kNvlink, kPci, kNet}) {
    v.hw_lat[path][kCollNetDirect][0] = v.hw_lat[path][kCollNetDirect][1] = 0;
    std::copy(v.hw_lat[path][kCollNetDirect], v.hw_lat[path][kCollNetDirect] + kProtos,
              v.hw_lat[path][kCollNetChain]);
  }
  return v;
}

/// NCCL v2.15.5 tuning.cc (cb111f76; v2.16.5, f3d51667, is identical): a Hopper row (an
/// all-sm90 job) equal to Ampere's in llMaxBws and perChMaxTreeBws, LL128 on sm90. Other
/// archs (sm100) still take the Volta row.
VersionConstants make_2_15() {
  VersionConstants v = derive(make_2_14(), "2.15", "tuning.cc @ v2.15.5-1 (cb111f76) = v2.16.5-1 (f3d51667)");
  fill(v.ll_max_bw[kHopper], {87.7, 22.5, 19.0});
  fill(v.per_ch_max_tree[kHopper], {24.0, 23.6, 17.8});
  v.ll128_sms = {70, 80, 90};
  return v;
}

/// NCCL v2.17.1 tuning.cc (5d3ab08b): NVLS (AllReduce, AllGather, ReduceScatter; baseLat
/// 40 us, algBw 0.75 busBw), LL128 caps per arch {20, 20, 36.7} for rings and trees, Hopper
/// tree caps {38.7, 41.4, 33.0}, compCapIndex by minimum (sm100 takes the Hopper row), ring
/// plateau x1.5 from sm90. Modelled by the v2_20 formulas; its 235/370 GB/s busBw caps and
/// CollNet Chain's x0.75 are not (docs/nccl-releases.md).
VersionConstants make_2_17() {
  VersionConstants v = derive(make_2_15(), "2.17", "tuning.cc @ v2.17.1-1 (5d3ab08b)");
  v.era = Era::v2_20;
  v.has_nvls = v.nvls_ag_rs = true;
  v.nvls_ratio = 0.75;
  v.base_lat[kNvls][kSimple] = 40.0;
  std::fill_n(v.ll128_per_coll, 5, 0.0);
  const double ll128[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}, {36.7, 36.7, 36.7}};
  fill(v.per_ch_max_ring_ll128, ll128);
  fill(v.per_ch_max_tree_ll128, ll128);
  fill(v.per_ch_max_tree[kHopper], {38.7, 41.4, 33.0});
  fill(v.per_ch_max_tree[kBlackwell], {38.7, 41.4, 33.0});
  fill(v.ll_max_bw[kBlackwell], {87.7, 22.5, 19.0});
  fill(v.ring_plateau, {1.9, 1.9, 1.5, 1.5});
  v.nvls_min_gpus = 2;   // nvls.cc: off only at localRanks <= 1, and on one node only
  return v;
}

/// NCCL v2.18.6 tuning.cc (0b083e52): NVLSTree, new latency tables (baseLat, hwLat),
/// per-arch/per-node LL128 caps, Hopper tree N4 36.0, the net overhead floor instead of
/// LL's x1.8, the plateau from 64 B per channel and rank (x1.4 from sm80), NVLS ratio 5/6
/// and AllReduce only. Its NVLSTree ratio (0.7 nNodes / 2 (nNodes-1)) and latency
/// (2 (nNodes-1) NET hops) are modelled as 2.19's (docs/nccl-releases.md).
VersionConstants make_2_18() {
  VersionConstants v = derive(make_2_17(), "2.18", "tuning.cc @ v2.18.6-1 (0b083e52)");
  v.nvls_min_gpus = 3;           // nvls.cc: gpuCount <= 2 disables
  v.nvls_allreduce_sharp = true;  // "Add support for IB SHARP to NVLS" (release note)
  v.has_nvls_tree = true;
  v.nvls_ag_rs = false;
  v.nvls_ratio = 5.0 / 6.0;
  const double base[kAlgos][kProtos] = {{6.8, 14.0, 0}, {6.6, 14.0, 8.4}, {6.8, 14.0, 0},
                                        {6.8, 14.0, 0}, {0, 0, 23.0},     {0, 0, 23.0}};
  const double hw[3][kAlgos][kProtos] = {
      {{.6, 1.25, 4}, {.6, 1.9, 3.4}, {0, 0, 8.0}, {0, 0, 4.75}, {0, 0, 0}, {0, 0, 0}},
      {{1.0, 1.9, 6}, {1.0, 2.5, 5.7}, {0, 0, 8.0}, {0, 0, 8.0}, {0, 0, 0}, {0, 0, 0}},
      {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 10.7}, {0, 0, 14}, {0, 0, 18}, {0, 0, 19}}};
  fill(v.base_lat, base);
  fill(v.hw_lat, hw);
  fill(v.per_ch_max_tree_ll128[kHopper], {36.7, 36.7, 29.0});
  fill(v.per_ch_max_tree_ll128[kBlackwell], {36.7, 36.7, 29.0});
  v.per_ch_max_tree[kHopper][2] = v.per_ch_max_tree[kBlackwell][2] = 36.0;
  v.net_overhead = true;
  v.plateau_per_channel = true;
  fill(v.ring_plateau, {1.9, 1.4, 1.4, 1.4});
  return v;
}

/// NCCL v2.19.4 tuning.cc (88d44d77): new latency tables (CollNet and NVLS base latencies
/// move into hwLat, tree Simple 28 us everywhere), NVLS back on AllGather/ReduceScatter
/// with bw min(bwIntra, bwInter), NVLSTree at the 5/6 ratio and 2 log2(nNodes) NET hops,
/// CollNet arity 0.4 us.
VersionConstants make_2_19() {
  VersionConstants v = derive(make_2_18(), "2.19", "tuning.cc @ v2.19.4-1 (88d44d77)");
  v.nvls_ag_rs = true;
  const double base[kAlgos][kProtos] = {{6.8, 14.0, 0}, {6.6, 14.0, 8.4}};
  const double hw[3][kAlgos][kProtos] = {
      {{.6, 1.25, 28}, {.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 23}, {0, 0, 23}},
      {{1.0, 1.9, 28}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0}},
      {{5.0, 8.5, 28}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 14}}};
  fill(v.base_lat, base);
  fill(v.hw_lat, hw);
  return v;
}

/// NCCL v2.20.5 tuning.cc (48bb7fec; identical to v2.20.3, b6475625): CollNet Direct runs
/// AllGather and ReduceScatter (busBw as 2.27 computes it, docs/nccl-releases.md).
VersionConstants make_2_20() {
  VersionConstants v = derive(make_2_19(), "2.20", "tuning.cc @ v2.20.5-1 (48bb7fec) = v2.20.3 (b6475625)");
  v.collnet_ag_rs = true;
  return v;
}

/// NCCL v2.21.5 tuning.cc (ab2b89c4; v2.22.3, 178b6b75, changes nothing modelled): NVLS and
/// NVLSTree NVLink latency 25 us, Hopper llMaxBws {141, 45, 35}, ring LL at half the bus.
VersionConstants make_2_21() {
  VersionConstants v = derive(make_2_20(), "2.21", "tuning.cc @ v2.21.5-1 (ab2b89c4); v2.22.3-1 (178b6b75) same");
  v.hw_lat[kNvlink][kNvls][kSimple] = v.hw_lat[kNvlink][kNvlsTree][kSimple] = 25;
  fill(v.ll_max_bw[kHopper], {141.0, 45.0, 35.0});
  fill(v.ll_max_bw[kBlackwell], {141.0, 45.0, 35.0});
  v.ring_ll_half = true;
  return v;
}

/// NCCL v2.23.4 tuning.cc (68b54236; v2.24.3, 6aae3792, changes nothing modelled): PAT
/// (not modelled), tree Simple baseLat 8.4 and hwLat 4/4/14 us, ring AllReduce back to
/// 2 (nNodes-1) inter-node steps, no ring LL128 discount at one GPU per node, whose
/// inter-node hops take the Tree NET latency, AllGather/ReduceScatter ratios on rings only.
VersionConstants make_2_23() {
  VersionConstants v = derive(make_2_21(), "2.23", "tuning.cc @ v2.23.4-1 (68b54236); v2.24.3-1 (6aae3792) same");
  v.base_lat[kTree][kSimple] = 8.4;
  v.hw_lat[kNvlink][kTree][kSimple] = v.hw_lat[kPci][kTree][kSimple] = 4.0;
  v.hw_lat[kNet][kTree][kSimple] = 14;
  v.ring_ar_inter_2n = false;
  v.ring_ll128_ppn1_discount = false;
  v.ppn1_tree_net_latency = true;
  v.ag_rs_ratio_ring_only = true;
  return v;
}

/// NCCL v2.25.1 tuning.cc (80f6bda4; v2.26.6, 8171af65, changes nothing modelled):
/// Blackwell rows at twice Hopper's, LL128 on sm100 and sm120.
VersionConstants make_2_25() {
  VersionConstants v = derive(make_2_23(), "2.25", "tuning.cc @ v2.25.1-1 (80f6bda4); v2.26.6-1 (8171af65) same");
  fill(v.ll_max_bw[kBlackwell], {2 * 141.0, 2 * 45.0, 2 * 35.0});
  fill(v.per_ch_max_ring_ll128[kBlackwell], {2 * 36.7, 2 * 36.7, 2 * 36.7});
  fill(v.per_ch_max_tree_ll128[kBlackwell], {2 * 36.7, 2 * 36.7, 2 * 29.0});
  fill(v.per_ch_max_tree[kBlackwell], {2 * 38.7, 2 * 41.4, 2 * 36.0});
  v.ll128_sms = {70, 80, 90, 100, 120};
  // search.cc "Limit NVLS heads to 32"; nvls.cc NVLS_NCHANNELS_SM100 32 (v2.25.1-1).
  v.nvls_max_heads = 32;
  v.nvls_ag_rs_arity_cap = true;
  v.nvls_channels_sm100_one_node = v.nvls_channels_sm100_nodes = 32;
  return v;
}

/// NCCL v2.27.7 tuning.cc (593de54e): LL128 on every sm70+, NVLS AllGather/ReduceScatter
/// busBw from bwIntra (ppn-1)/ppn and 0.9 bwInter.
VersionConstants make_2_27() {
  VersionConstants v = derive(make_2_25(), "2.27", "tuning.cc @ v2.27.7-1 (593de54e)");
  v.ll128_sms.clear();
  v.nvls_ag_rs_ppn_bw = true;
  // enqueue.cc drops "single-node NVLS allgather and reducescatter" (SHARP's iallgather /
  // ireducescatter with 1:1 GPU:NIC, tuning.cc); nvls.cc NVLS_NCHANNELS_SM100_NVL 24 (v2.27.3-1).
  v.nvls_ag_rs_multinode = true;
  v.nvls_channels_sm100_one_node = 24;
  return v;
}

/// NCCL v2.28.9 tuning.cc (dbc86fd0, ncclTunerConstantsDefaults): the NVLS efficiency model
/// (Hopper 0.85, Blackwell 0.74, ring ratio) with perChMaxNVLSTreeBws, NVLSTree NET latency
/// 20.9 us, measured Blackwell rows.
VersionConstants make_2_28() {
  VersionConstants v = derive(make_2_27(), "2.28", "tuning.cc @ v2.28.9-1 (dbc86fd0)");
  v.era = Era::head;
  v.nvls_ratio = 0;
  v.hw_lat[kNet][kNvlsTree][kSimple] = 20.9;
  fill(v.per_ch_max_ring_ll128[kBlackwell], {2 * 36.7, 34.6, 2 * 36.7});
  fill(v.per_ch_max_tree_ll128[kBlackwell], {55.6, 31.67, 20.0});
  fill(v.per_ch_max_tree[kBlackwell], {70.0, 42.8, 24.0});
  const double nvls_tree[2][3] = {{0, 57.7, 45.5}, {0, 96.0, 43.8}};
  fill(v.per_ch_max_nvls_tree, nvls_tree);
  fill(v.nvls_efficiency, {0.85, 0.74});
  v.nvls_min_gpus = 2;   // nvls.cc gpuCount < 2 (2.28.7: "multimem with as few as two ranks")
  return v;
}

/// NCCL v2.29.7 tuning.cc (b91894bd): Blackwell ring LL128 40 GB/s per channel (its NVLSTree
/// correction on Blackwell x86 is not modelled).
VersionConstants make_2_29() {
  VersionConstants v = derive(make_2_28(), "2.29", "tuning.cc @ v2.29.7-1 (b91894bd)");
  fill(v.per_ch_max_ring_ll128[kBlackwell], {40.0, 40.0, 40.0});
  return v;
}

/// NCCL v2.30.7 tuning.cc (73cf1122; HEAD 5067397c has the same tuning.cc): Blackwell
/// NVLSTree N4 80 GB/s per channel.
VersionConstants make_2_30() {
  VersionConstants v = derive(make_2_29(), "2.30", "tuning.cc @ v2.30.7-1 (73cf1122) = HEAD (5067397c)");
  v.per_ch_max_nvls_tree[1][2] = 80.0;
  return v;
}

struct Entry {
  const char* key;
  const VersionConstants* constants;
};

const std::vector<Entry>& table() {
  static const VersionConstants v24 = make_2_4(), v25 = make_2_5(), v26 = make_2_6(), v27 = make_2_7(),
                                v28 = make_2_8(), v210 = make_2_10(), v212 = make_2_12(), v214 = make_2_14(),
                                v215 = make_2_15(), v217 = make_2_17(), v218 = make_2_18(), v219 = make_2_19(),
                                v220 = make_2_20(), v221 = make_2_21(), v223 = make_2_23(), v225 = make_2_25(),
                                v227 = make_2_27(), v228 = make_2_28(), v229 = make_2_29(), v230 = make_2_30();
  // Every minor release, oldest first, to the set in force (its latest patch release's).
  static const std::vector<Entry> t = {
      {"2.4", &v24},   {"2.5", &v25},   {"2.6", &v26},   {"2.7", &v27},   {"2.8", &v28},   {"2.9", &v28},
      {"2.10", &v210}, {"2.11", &v210}, {"2.12", &v212}, {"2.13", &v212}, {"2.14", &v214}, {"2.15", &v215},
      {"2.16", &v215}, {"2.17", &v217}, {"2.18", &v218}, {"2.19", &v219}, {"2.20", &v220}, {"2.21", &v221},
      {"2.22", &v221}, {"2.23", &v223}, {"2.24", &v223}, {"2.25", &v225}, {"2.26", &v225}, {"2.27", &v227},
      {"2.28", &v228}, {"2.29", &v229}, {"2.30", &v230}, {"head", &v230}};
  return t;
}

}  // namespace

int nvls_channels(const VersionConstants& v, const NcclSystem& sys) {
  if (sys.sm < 100) return 16;
  return sys.nodes > 1 ? v.nvls_channels_sm100_nodes : v.nvls_channels_sm100_one_node;
}

const VersionConstants& head_version() { return *table().back().constants; }

std::vector<std::string> known_versions() {
  std::vector<std::string> out;
  for (const Entry& e : table()) out.push_back(e.key);
  return out;
}

const VersionConstants& nccl_version(const AlgorithmOptions& options) {
  auto it = options.extra.find("version");
  return it == options.extra.end() ? head_version() : nccl_version(it->second);
}

const VersionConstants& nccl_version(const std::string& version) {
  // "2.20.5" and "2.20.5-1" select "2.20": compare major.minor only.
  std::string key = version;
  const auto first = key.find('.');
  if (first != std::string::npos) {
    const auto second = key.find_first_of(".-", first + 1);
    if (second != std::string::npos) key = key.substr(0, second);
  }
  for (const Entry& e : table())
    if (key == e.key) return *e.constants;
  std::string list;
  for (const Entry& e : table()) list += std::string(list.empty() ? "" : ", ") + e.key;
  throw ConfigError("--algo nccl option 'version'", "unknown NCCL version '" + version + "'",
                    "use one of " + list + " (major.minor; a patch level is ignored)");
}

}  // namespace stepsim::models::nccl
