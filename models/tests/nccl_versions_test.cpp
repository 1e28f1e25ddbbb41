// NCCL version-specific tuning constants (models/collectives/nccl_versions.hpp): every minor
// release 2.4-2.30 resolves; at each release boundary exactly the constants NCCL changed
// differ, with both values hand-copied from src/graph/tuning.cc at the two tags
// (docs/nccl-releases.md); and the selection changes those switches make.
#include "models/collectives/nccl_versions.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "models/tests/nccl_estimates.hpp"
#include "platforms/config_error.hpp"

namespace stepsim::models::nccl {
namespace {

NcclSystem node(int sm, int ranks, double intra_bw, bool nvls) {
  NcclSystem s;
  s.sm = sm;
  s.ranks = s.ppn = ranks;
  s.nodes = 1;
  s.intra = IntraPath::nvlink;
  s.nvswitch = true;
  s.intra_bw = intra_bw;
  s.nvls = nvls;
  return s;
}
NcclSystem h100(int ranks) { return node(90, ranks, 18 * 20.6, true); }   // 18 NVLink4 links
NcclSystem a100(int ranks) { return node(80, ranks, 12 * 20.0, false); }  // 12 NVLink3 links

/// `s` on `nodes` nodes with 8 NICs of 25 GB/s each.
NcclSystem across(NcclSystem s, int nodes) {
  s.nodes = nodes;
  s.ranks = s.ppn * nodes;
  s.nic_bw = 25;
  s.nics_per_node = 8;
  return s;
}
NcclSystem a100_nodes(int nodes) { return across(a100(8), nodes); }

const VersionConstants& v(const char* version) { return nccl_version(version); }

// ---- Every release, patch levels, unknown versions ----

TEST(NcclVersions, EveryReleaseFrom24To230ResolvesAndHeadIs230) {
  std::vector<std::string> releases;
  for (int minor = 4; minor <= 30; ++minor) releases.push_back("2." + std::to_string(minor));
  for (const std::string& r : releases) EXPECT_NO_THROW(nccl_version(r)) << r;
  std::vector<std::string> keys = releases;
  keys.push_back("head");
  EXPECT_EQ(known_versions(), keys);
  EXPECT_EQ(&v("head"), &head_version());
  EXPECT_EQ(&v("2.30"), &head_version());
}

TEST(NcclVersions, PatchLevelsSelectTheirRelease) {
  EXPECT_EQ(&v("2.21.5-1"), &v("2.21"));
  EXPECT_EQ(&v("2.18.6"), &v("2.18"));
  EXPECT_EQ(&v("2.8.4"), &v("2.8"));
  EXPECT_EQ(&v("2.4.8-1"), &v("2.4"));
  EXPECT_EQ(&v("2.30.7"), &head_version());
  EXPECT_EQ(v("2.20.5").name, "2.20");
  EXPECT_EQ(v("2.9.9").name, "2.8");   // 2.9 changed nothing modelled: 2.8's set
  EXPECT_EQ(v("2.29.2").name, "2.29");
}

TEST(NcclVersions, UnknownVersionsThrowWithTheList) {
  for (const char* bad : {"2.3", "2.31", "3.0", "abc"}) {
    try {
      nccl_version(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(std::string("'") + bad + "'"), std::string::npos) << what;
      EXPECT_NE(what.find("2.4, 2.5, 2.6, "), std::string::npos) << what;
      EXPECT_NE(what.find("2.29, 2.30, head"), std::string::npos) << what;
    }
  }
}

// ---- Release boundaries: exactly the constants that changed, both values ----

/// One VersionConstants element, named after the NCCL table it copies, with its values
/// before and after a release (numbers to 6 significant digits).
struct Change {
  struct Value {
    std::string text;
    Value(double x) {   // NOLINT: tables list plain numbers
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.6g", x);
      text = buf;
    }
    Value(const char* s) : text(s) {}   // NOLINT
    Value(std::string s) : text(std::move(s)) {}   // NOLINT
  };
  Change(std::string f, Value b, Value a) : field(std::move(f)), before(std::move(b.text)), after(std::move(a.text)) {}
  std::string field, before, after;
  bool operator==(const Change&) const = default;
};
void PrintTo(const Change& c, std::ostream* os) { *os << c.field << ": " << c.before << " -> " << c.after; }

const char* const kPath[] = {"NVLink", "PCI", "NET"};
const char* const kArch[] = {"Volta", "Ampere", "Hopper", "Blackwell"};
const char* const kNodes[] = {"N1", "N2", "N4"};
const char* const kColl[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"};

std::string era_name(Era e) {
  switch (e) {
    case Era::v2_4: return "v2_4";
    case Era::v2_7: return "v2_7";
    case Era::v2_8: return "v2_8";
    case Era::v2_20: return "v2_20";
    case Era::head: return "head";
  }
  return "?";
}

std::string sms(const std::vector<int>& list) {
  if (list.empty()) return "sm70+";
  std::string out;
  for (int sm : list) out += (out.empty() ? "" : ",") + std::to_string(sm);
  return out;
}

/// Every element (not name or source) where `a` and `b` differ, in declaration order.
std::vector<Change> changes(const VersionConstants& a, const VersionConstants& b) {
  std::vector<Change> out;
  auto num = [&](const std::string& field, double x, double y) {
    if (x != y) out.emplace_back(field, x, y);
  };
  auto algo_proto = [](int al, int p) {
    return std::string(to_string(static_cast<Algo>(al))) + "][" + to_string(static_cast<Proto>(p)) + "]";
  };
  auto rows = [&](const char* field, const double (&x)[4][3], const double (&y)[4][3]) {
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 3; ++c)
        num(std::string(field) + "[" + kArch[r] + "][" + kNodes[c] + "]", x[r][c], y[r][c]);
  };
  if (a.era != b.era) out.emplace_back("era", era_name(a.era), era_name(b.era));
  for (int al = 0; al < kAlgos; ++al)
    for (int p = 0; p < kProtos; ++p) num("base_lat[" + algo_proto(al, p), a.base_lat[al][p], b.base_lat[al][p]);
  for (int h = 0; h < 3; ++h)
    for (int al = 0; al < kAlgos; ++al)
      for (int p = 0; p < kProtos; ++p)
        num(std::string("hw_lat[") + kPath[h] + "][" + algo_proto(al, p), a.hw_lat[h][al][p], b.hw_lat[h][al][p]);
  rows("ll_max_bw", a.ll_max_bw, b.ll_max_bw);
  rows("per_ch_max_ring_ll128", a.per_ch_max_ring_ll128, b.per_ch_max_ring_ll128);
  rows("per_ch_max_tree_ll128", a.per_ch_max_tree_ll128, b.per_ch_max_tree_ll128);
  rows("per_ch_max_tree", a.per_ch_max_tree, b.per_ch_max_tree);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c)
      num(std::string("per_ch_max_nvls_tree[") + kArch[r + 2] + "][" + kNodes[c] + "]", a.per_ch_max_nvls_tree[r][c],
          b.per_ch_max_nvls_tree[r][c]);
  for (int c = 0; c < 5; ++c)
    num(std::string("ll128_per_coll[") + kColl[c] + "]", a.ll128_per_coll[c], b.ll128_per_coll[c]);
  for (int r = 0; r < 2; ++r)
    num(std::string("nvls_efficiency[") + kArch[r + 2] + "]", a.nvls_efficiency[r], b.nvls_efficiency[r]);
  for (int p = 0; p < kProtos; ++p)
    for (int i = 0; i < 23; ++i)
      num(std::string("tree_correction[") + to_string(static_cast<Proto>(p)) + "][" + std::to_string(i) + "]",
          a.tree_correction[p][i], b.tree_correction[p][i]);
  num("tree_correction_len", a.tree_correction_len, b.tree_correction_len);
  num("has_collnet", a.has_collnet, b.has_collnet);
  num("has_nvls", a.has_nvls, b.has_nvls);
  num("has_nvls_tree", a.has_nvls_tree, b.has_nvls_tree);
  num("has_collnet_chain", a.has_collnet_chain, b.has_collnet_chain);
  num("nvls_ag_rs", a.nvls_ag_rs, b.nvls_ag_rs);
  num("collnet_ag_rs", a.collnet_ag_rs, b.collnet_ag_rs);
  num("has_ll128", a.has_ll128, b.has_ll128);
  if (a.ll128_sms != b.ll128_sms) out.emplace_back("ll128_sms", sms(a.ll128_sms), sms(b.ll128_sms));
  num("ring_hops_all_net", a.ring_hops_all_net, b.ring_hops_all_net);
  num("net_overhead", a.net_overhead, b.net_overhead);
  num("ring_ar_inter_2n", a.ring_ar_inter_2n, b.ring_ar_inter_2n);
  for (int r = 0; r < 4; ++r) num(std::string("ring_plateau[") + kArch[r] + "]", a.ring_plateau[r], b.ring_plateau[r]);
  num("plateau_per_channel", a.plateau_per_channel, b.plateau_per_channel);
  num("ring_ll_half", a.ring_ll_half, b.ring_ll_half);
  num("ring_ll128_ppn1_discount", a.ring_ll128_ppn1_discount, b.ring_ll128_ppn1_discount);
  num("ppn1_tree_net_latency", a.ppn1_tree_net_latency, b.ppn1_tree_net_latency);
  num("nvls_ratio", a.nvls_ratio, b.nvls_ratio);
  num("ag_rs_ratio_ring_only", a.ag_rs_ratio_ring_only, b.ag_rs_ratio_ring_only);
  num("nvls_ag_rs_ppn_bw", a.nvls_ag_rs_ppn_bw, b.nvls_ag_rs_ppn_bw);
  num("nvls_allreduce_sharp", a.nvls_allreduce_sharp, b.nvls_allreduce_sharp);
  num("nvls_ag_rs_multinode", a.nvls_ag_rs_multinode, b.nvls_ag_rs_multinode);
  num("nvls_min_gpus", a.nvls_min_gpus, b.nvls_min_gpus);
  num("nvls_max_heads", a.nvls_max_heads, b.nvls_max_heads);
  num("nvls_ag_rs_arity_cap", a.nvls_ag_rs_arity_cap, b.nvls_ag_rs_arity_cap);
  num("nvls_channels_sm100_one_node", a.nvls_channels_sm100_one_node, b.nvls_channels_sm100_one_node);
  num("nvls_channels_sm100_nodes", a.nvls_channels_sm100_nodes, b.nvls_channels_sm100_nodes);
  return out;
}

struct Boundary {
  const char* from;
  const char* to;
  std::vector<Change> changes;   ///< empty: the two releases share one set
};

/// tuning.cc (2.5: and enqueue.cc) diffs between consecutive latest patch tags, restricted
/// to what VersionConstants holds.
const std::vector<Boundary>& boundaries() {
  static const std::vector<Boundary> b = {
      // 2.4 has no tuning model; its estimates are v2.7.5's. v2.5.7: baseLat/hwLat,
      // 2.5's tree correction, LL128 on sm70 only, every multi-node ring hop at NET, no
      // plateau.
      {"2.4", "2.5",
       {{"era", "v2_4", "v2_7"},
        {"base_lat[ring][LL128]", 10.0, 3.6},
        {"base_lat[collnet_direct][LL]", 4.4, 0.0},
        {"base_lat[collnet_direct][LL128]", 4.4, 0.0},
        {"hw_lat[NVLink][tree][LL]", .52, .5},
        {"hw_lat[NVLink][tree][LL128]", 1.2, 1.9},
        {"hw_lat[NVLink][ring][LL]", .47, .4},
        {"hw_lat[NVLink][ring][LL128]", 1.9, 2.5},
        {"hw_lat[NVLink][ring][Simple]", 3.4, 5.7},
        {"hw_lat[NVLink][collnet_direct][LL]", .5, 0.0},
        {"hw_lat[NVLink][collnet_direct][LL128]", 1.2, 0.0},
        {"hw_lat[NVLink][collnet_direct][Simple]", 4.0, 0.0},
        {"hw_lat[PCI][collnet_direct][LL]", 1.0, 0.0},
        {"hw_lat[PCI][collnet_direct][LL128]", 1.9, 0.0},
        {"hw_lat[PCI][collnet_direct][Simple]", 5.5, 0.0},
        {"hw_lat[NET][tree][LL128]", 8.5, 7.5},
        {"hw_lat[NET][ring][LL]", 2.7, .9},
        {"hw_lat[NET][ring][LL128]", 4.0, 2.5},
        {"hw_lat[NET][ring][Simple]", 9.6, 6.6},
        {"hw_lat[NET][collnet_direct][LL]", 5.0, 0.0},
        {"hw_lat[NET][collnet_direct][LL128]", 5.0, 0.0},
        {"hw_lat[NET][collnet_direct][Simple]", 10.7, 0.0},
        {"tree_correction[LL][12]", .4, .5},
        {"tree_correction[LL][13]", .4, .5},
        {"tree_correction[LL][14]", .5, .6},
        {"tree_correction[LL][15]", .6, .7},
        {"tree_correction[LL][16]", .7, .8},
        {"tree_correction[LL][17]", .8, .9},
        {"tree_correction[LL128][9]", .7, .8},
        {"tree_correction[LL128][10]", .6, .7},
        {"tree_correction[LL128][11]", .6, .7},
        {"tree_correction[LL128][12]", .6, .7},
        {"tree_correction[LL128][13]", .5, .6},
        {"tree_correction[LL128][15]", .6, .7},
        {"tree_correction[LL128][17]", .7, .8},
        {"has_ll128", false, true},
        {"ll128_sms", "70,80", "70"},
        {"ring_hops_all_net", false, true},
        {"ring_plateau[Volta]", 1.9, 1.0},
        {"ring_plateau[Ampere]", 1.9, 1.0},
        {"ring_plateau[Hopper]", 1.9, 1.0},
        {"ring_plateau[Blackwell]", 1.9, 1.0},
        {"ring_ll128_ppn1_discount", true, false}}},
      // v2.6.4: CollNet.
      {"2.5", "2.6",
       {{"base_lat[collnet_direct][LL]", 0.0, 4.4},
        {"base_lat[collnet_direct][LL128]", 0.0, 4.4},
        {"hw_lat[NVLink][collnet_direct][LL]", 0.0, .5},
        {"hw_lat[NVLink][collnet_direct][LL128]", 0.0, 1.9},
        {"hw_lat[NVLink][collnet_direct][Simple]", 0.0, 4.0},
        {"hw_lat[PCI][collnet_direct][LL]", 0.0, 1.0},
        {"hw_lat[PCI][collnet_direct][LL128]", 0.0, 1.9},
        {"hw_lat[PCI][collnet_direct][Simple]", 0.0, 5.5},
        {"hw_lat[NET][collnet_direct][LL]", 0.0, 5.0},
        {"hw_lat[NET][collnet_direct][LL128]", 0.0, 5.0},
        {"hw_lat[NET][collnet_direct][Simple]", 0.0, 10.7},
        {"has_collnet", false, true}}},
      // v2.7.8 (= v2.7.5): new ring/tree latencies, tree correction, LL128 on sm80,
      // intra/inter ring hops, the ring plateau x1.9.
      {"2.6", "2.7",
       {{"base_lat[ring][LL128]", 3.6, 10.0},
        {"hw_lat[NVLink][tree][LL]", .5, .52},
        {"hw_lat[NVLink][tree][LL128]", 1.9, 1.2},
        {"hw_lat[NVLink][ring][LL]", .4, .47},
        {"hw_lat[NVLink][ring][LL128]", 2.5, 1.9},
        {"hw_lat[NVLink][ring][Simple]", 5.7, 3.4},
        {"hw_lat[NVLink][collnet_direct][LL128]", 1.9, 1.2},
        {"hw_lat[NET][tree][LL128]", 7.5, 8.5},
        {"hw_lat[NET][ring][LL]", .9, 2.7},
        {"hw_lat[NET][ring][LL128]", 2.5, 4.0},
        {"hw_lat[NET][ring][Simple]", 6.6, 9.6},
        {"tree_correction[LL][12]", .5, .4},
        {"tree_correction[LL][13]", .5, .4},
        {"tree_correction[LL][14]", .6, .5},
        {"tree_correction[LL][15]", .7, .6},
        {"tree_correction[LL][16]", .8, .7},
        {"tree_correction[LL][17]", .9, .8},
        {"tree_correction[LL128][9]", .8, .7},
        {"tree_correction[LL128][10]", .7, .6},
        {"tree_correction[LL128][11]", .7, .6},
        {"tree_correction[LL128][12]", .7, .6},
        {"tree_correction[LL128][13]", .6, .5},
        {"tree_correction[LL128][15]", .7, .6},
        {"tree_correction[LL128][17]", .8, .7},
        {"ll128_sms", "70", "70,80"},
        {"ring_hops_all_net", true, false},
        {"ring_plateau[Volta]", 1.0, 1.9},
        {"ring_plateau[Ampere]", 1.0, 1.9},
        {"ring_plateau[Hopper]", 1.0, 1.9},
        {"ring_plateau[Blackwell]", 1.0, 1.9},
        {"ring_ll128_ppn1_discount", false, true}}},
      // v2.8.4 (= v2.8.3): llMaxBws, perChMaxTreeBws, 23 tree correction sizes.
      {"2.7", "2.8",
       {{"era", "v2_7", "v2_8"},
        {"hw_lat[NVLink][tree][LL128]", 1.2, 1.25},
        {"hw_lat[NET][tree][Simple]", 50.0, 28.0},
        {"ll_max_bw[Volta][N1]", 0.0, 39.0},
        {"ll_max_bw[Volta][N2]", 0.0, 39.0},
        {"ll_max_bw[Volta][N4]", 0.0, 20.4},
        {"ll_max_bw[Ampere][N1]", 0.0, 87.7},
        {"ll_max_bw[Ampere][N2]", 0.0, 22.5},
        {"ll_max_bw[Ampere][N4]", 0.0, 19.0},
        {"ll_max_bw[Hopper][N1]", 0.0, 39.0},
        {"ll_max_bw[Hopper][N2]", 0.0, 39.0},
        {"ll_max_bw[Hopper][N4]", 0.0, 20.4},
        {"ll_max_bw[Blackwell][N1]", 0.0, 39.0},
        {"ll_max_bw[Blackwell][N2]", 0.0, 39.0},
        {"ll_max_bw[Blackwell][N4]", 0.0, 20.4},
        {"per_ch_max_tree[Volta][N1]", 0.0, 26.5},
        {"per_ch_max_tree[Volta][N2]", 0.0, 18.5},
        {"per_ch_max_tree[Volta][N4]", 0.0, 10.0},
        {"per_ch_max_tree[Ampere][N1]", 0.0, 24.0},
        {"per_ch_max_tree[Ampere][N2]", 0.0, 22.5},
        {"per_ch_max_tree[Ampere][N4]", 0.0, 16.0},
        {"per_ch_max_tree[Hopper][N1]", 0.0, 26.5},
        {"per_ch_max_tree[Hopper][N2]", 0.0, 18.5},
        {"per_ch_max_tree[Hopper][N4]", 0.0, 10.0},
        {"per_ch_max_tree[Blackwell][N1]", 0.0, 26.5},
        {"per_ch_max_tree[Blackwell][N2]", 0.0, 18.5},
        {"per_ch_max_tree[Blackwell][N4]", 0.0, 10.0},
        {"ll128_per_coll[AllReduce]", 16.7, 16.9},
        {"tree_correction[LL][22]", 0.0, 1.0},
        {"tree_correction[LL128][21]", 1.0, .92},
        {"tree_correction[LL128][22]", 0.0, .92},
        {"tree_correction[Simple][15]", .5, .6},
        {"tree_correction[Simple][16]", .5, .7},
        {"tree_correction[Simple][17]", .6, .8},
        {"tree_correction[Simple][18]", .6, .7},
        {"tree_correction[Simple][22]", 0.0, .9},
        {"tree_correction_len", 22, 23}}},
      {"2.8", "2.9", {}},   // v2.9.9 drops CollNet LL, which nccl_tune never offers
      // v2.10.3: CollNet Simple 8 us, one 20 GB/s LL128 cap, Ampere tree caps.
      {"2.9", "2.10",
       {{"hw_lat[NVLink][collnet_direct][Simple]", 4.0, 8.0},
        {"hw_lat[PCI][collnet_direct][Simple]", 5.5, 8.0},
        {"per_ch_max_tree[Ampere][N2]", 22.5, 23.6},
        {"per_ch_max_tree[Ampere][N4]", 16.0, 17.8},
        {"ll128_per_coll[Broadcast]", 18.8, 20.0},
        {"ll128_per_coll[Reduce]", 12.0, 20.0},
        {"ll128_per_coll[AllGather]", 18.3, 20.0},
        {"ll128_per_coll[ReduceScatter]", 15.2, 20.0},
        {"ll128_per_coll[AllReduce]", 16.9, 20.0},
        {"tree_correction[LL128][13]", .5, .6},
        {"tree_correction[LL128][16]", .7, .8},
        {"tree_correction[LL128][17]", .7, .9},
        {"tree_correction[LL128][18]", .8, .9},
        {"tree_correction[LL128][21]", .92, 1.0},
        {"tree_correction[LL128][22]", .92, 1.0}}},
      {"2.10", "2.11", {}},
      // v2.12.12: ring NET Simple 28 us, 2 nNodes AllReduce inter-node steps.
      {"2.11", "2.12", {{"hw_lat[NET][ring][Simple]", 9.6, 28.0}, {"ring_ar_inter_2n", false, true}}},
      {"2.12", "2.13", {}},
      // v2.14.3: CollNet Direct/Chain (Simple only), ring NET Simple 9.6 us again.
      {"2.13", "2.14",
       {{"base_lat[collnet_chain][LL]", 0.0, 4.4},
        {"base_lat[collnet_chain][LL128]", 0.0, 4.4},
        {"hw_lat[NVLink][collnet_direct][LL]", .5, 0.0},
        {"hw_lat[NVLink][collnet_direct][LL128]", 1.2, 0.0},
        {"hw_lat[NVLink][collnet_chain][Simple]", 0.0, 8.0},
        {"hw_lat[PCI][collnet_direct][LL]", 1.0, 0.0},
        {"hw_lat[PCI][collnet_direct][LL128]", 1.9, 0.0},
        {"hw_lat[PCI][collnet_chain][Simple]", 0.0, 8.0},
        {"hw_lat[NET][ring][Simple]", 28.0, 9.6},
        {"hw_lat[NET][collnet_direct][LL]", 5.0, 0.0},
        {"hw_lat[NET][collnet_direct][LL128]", 5.0, 0.0},
        {"hw_lat[NET][collnet_chain][Simple]", 0.0, 10.7},
        {"has_collnet_chain", false, true}}},
      // v2.15.5: a Hopper row equal to Ampere's, LL128 on sm90.
      {"2.14", "2.15",
       {{"ll_max_bw[Hopper][N1]", 39.0, 87.7},
        {"ll_max_bw[Hopper][N2]", 39.0, 22.5},
        {"ll_max_bw[Hopper][N4]", 20.4, 19.0},
        {"per_ch_max_tree[Hopper][N1]", 26.5, 24.0},
        {"per_ch_max_tree[Hopper][N2]", 18.5, 23.6},
        {"per_ch_max_tree[Hopper][N4]", 10.0, 17.8},
        {"ll128_sms", "70,80", "70,80,90"}}},
      {"2.15", "2.16", {}},
      // v2.17.1: NVLS, LL128 caps per arch (sm100 takes Hopper's row), Hopper tree caps,
      // ring plateau x1.5 from sm90.
      {"2.16", "2.17",
       {{"era", "v2_8", "v2_20"},
        {"base_lat[nvls][Simple]", 0.0, 40.0},
        {"ll_max_bw[Blackwell][N1]", 39.0, 87.7},
        {"ll_max_bw[Blackwell][N2]", 39.0, 22.5},
        {"ll_max_bw[Blackwell][N4]", 20.4, 19.0},
        {"per_ch_max_ring_ll128[Volta][N1]", 0.0, 20.0},
        {"per_ch_max_ring_ll128[Volta][N2]", 0.0, 20.0},
        {"per_ch_max_ring_ll128[Volta][N4]", 0.0, 20.0},
        {"per_ch_max_ring_ll128[Ampere][N1]", 0.0, 20.0},
        {"per_ch_max_ring_ll128[Ampere][N2]", 0.0, 20.0},
        {"per_ch_max_ring_ll128[Ampere][N4]", 0.0, 20.0},
        {"per_ch_max_ring_ll128[Hopper][N1]", 0.0, 36.7},
        {"per_ch_max_ring_ll128[Hopper][N2]", 0.0, 36.7},
        {"per_ch_max_ring_ll128[Hopper][N4]", 0.0, 36.7},
        {"per_ch_max_ring_ll128[Blackwell][N1]", 0.0, 36.7},
        {"per_ch_max_ring_ll128[Blackwell][N2]", 0.0, 36.7},
        {"per_ch_max_ring_ll128[Blackwell][N4]", 0.0, 36.7},
        {"per_ch_max_tree_ll128[Volta][N1]", 0.0, 20.0},
        {"per_ch_max_tree_ll128[Volta][N2]", 0.0, 20.0},
        {"per_ch_max_tree_ll128[Volta][N4]", 0.0, 20.0},
        {"per_ch_max_tree_ll128[Ampere][N1]", 0.0, 20.0},
        {"per_ch_max_tree_ll128[Ampere][N2]", 0.0, 20.0},
        {"per_ch_max_tree_ll128[Ampere][N4]", 0.0, 20.0},
        {"per_ch_max_tree_ll128[Hopper][N1]", 0.0, 36.7},
        {"per_ch_max_tree_ll128[Hopper][N2]", 0.0, 36.7},
        {"per_ch_max_tree_ll128[Hopper][N4]", 0.0, 36.7},
        {"per_ch_max_tree_ll128[Blackwell][N1]", 0.0, 36.7},
        {"per_ch_max_tree_ll128[Blackwell][N2]", 0.0, 36.7},
        {"per_ch_max_tree_ll128[Blackwell][N4]", 0.0, 36.7},
        {"per_ch_max_tree[Hopper][N1]", 24.0, 38.7},
        {"per_ch_max_tree[Hopper][N2]", 23.6, 41.4},
        {"per_ch_max_tree[Hopper][N4]", 17.8, 33.0},
        {"per_ch_max_tree[Blackwell][N1]", 26.5, 38.7},
        {"per_ch_max_tree[Blackwell][N2]", 18.5, 41.4},
        {"per_ch_max_tree[Blackwell][N4]", 10.0, 33.0},
        // the per-arch tables above replace the single ll128MaxBwPerCh
        {"ll128_per_coll[Broadcast]", 20.0, 0.0},
        {"ll128_per_coll[Reduce]", 20.0, 0.0},
        {"ll128_per_coll[AllGather]", 20.0, 0.0},
        {"ll128_per_coll[ReduceScatter]", 20.0, 0.0},
        {"ll128_per_coll[AllReduce]", 20.0, 0.0},
        {"has_nvls", false, true},
        {"nvls_ag_rs", false, true},
        {"ring_plateau[Hopper]", 1.9, 1.5},
        {"ring_plateau[Blackwell]", 1.9, 1.5},
        {"nvls_ratio", 0.0, 0.75},
        {"nvls_min_gpus", 3.0, 2.0}}},
      // v2.18.6: NVLSTree, new latency tables, tree LL128 N4 caps, net overhead, plateau
      // from 64 B per channel and rank, NVLS ratio 5/6 and AllReduce only.
      {"2.17", "2.18",
       {{"base_lat[tree][LL]", 4.4, 6.8},
        {"base_lat[tree][LL128]", 4.4, 14.0},
        {"base_lat[ring][LL]", 3.6, 6.6},
        {"base_lat[ring][LL128]", 10.0, 14.0},
        {"base_lat[collnet_direct][LL]", 4.4, 6.8},
        {"base_lat[collnet_direct][LL128]", 4.4, 14.0},
        {"base_lat[collnet_chain][LL]", 4.4, 6.8},
        {"base_lat[collnet_chain][LL128]", 4.4, 14.0},
        {"base_lat[nvls][Simple]", 40.0, 23.0},
        {"base_lat[nvls_tree][Simple]", 0.0, 23.0},
        {"hw_lat[NVLink][tree][LL]", .52, .6},
        {"hw_lat[NVLink][tree][Simple]", 28.0, 4.0},
        {"hw_lat[NVLink][ring][LL]", .47, .6},
        {"hw_lat[NVLink][collnet_chain][Simple]", 8.0, 4.75},
        {"hw_lat[PCI][tree][Simple]", 28.0, 6.0},
        {"hw_lat[NET][tree][Simple]", 28.0, 14.0},
        {"hw_lat[NET][ring][Simple]", 9.6, 14.0},
        {"hw_lat[NET][collnet_chain][Simple]", 10.7, 14.0},
        {"hw_lat[NET][nvls][Simple]", 0.0, 18.0},
        {"hw_lat[NET][nvls_tree][Simple]", 0.0, 19.0},
        {"per_ch_max_tree_ll128[Hopper][N4]", 36.7, 29.0},
        {"per_ch_max_tree_ll128[Blackwell][N4]", 36.7, 29.0},
        {"per_ch_max_tree[Hopper][N4]", 33.0, 36.0},
        {"per_ch_max_tree[Blackwell][N4]", 33.0, 36.0},
        {"has_nvls_tree", false, true},
        {"nvls_ag_rs", true, false},
        {"net_overhead", false, true},
        {"ring_plateau[Ampere]", 1.9, 1.4},
        {"ring_plateau[Hopper]", 1.5, 1.4},
        {"ring_plateau[Blackwell]", 1.5, 1.4},
        {"plateau_per_channel", false, true},
        {"nvls_ratio", 0.75, 5.0 / 6.0},
        {"nvls_allreduce_sharp", false, true},
        {"nvls_min_gpus", 2.0, 3.0}}},
      // v2.19.4: CollNet/NVLS latencies into hwLat, tree Simple 28 us, NVLS AllGather/
      // ReduceScatter again.
      {"2.18", "2.19",
       {{"base_lat[collnet_direct][LL]", 6.8, 0.0},
        {"base_lat[collnet_direct][LL128]", 14.0, 0.0},
        {"base_lat[collnet_chain][LL]", 6.8, 0.0},
        {"base_lat[collnet_chain][LL128]", 14.0, 0.0},
        {"base_lat[nvls][Simple]", 23.0, 0.0},
        {"base_lat[nvls_tree][Simple]", 23.0, 0.0},
        {"hw_lat[NVLink][tree][Simple]", 4.0, 28.0},
        {"hw_lat[NVLink][collnet_direct][Simple]", 8.0, 3.7},
        {"hw_lat[NVLink][collnet_chain][Simple]", 4.75, 2.8},
        {"hw_lat[NVLink][nvls][Simple]", 0.0, 23.0},
        {"hw_lat[NVLink][nvls_tree][Simple]", 0.0, 23.0},
        {"hw_lat[PCI][tree][Simple]", 6.0, 28.0},
        {"hw_lat[PCI][collnet_direct][Simple]", 8.0, 3.7},
        {"hw_lat[PCI][collnet_chain][Simple]", 8.0, 2.8},
        {"hw_lat[NET][tree][Simple]", 14.0, 28.0},
        {"hw_lat[NET][collnet_direct][Simple]", 10.7, 31.0},
        {"hw_lat[NET][collnet_chain][Simple]", 14.0, 30.0},
        {"hw_lat[NET][nvls_tree][Simple]", 19.0, 14.0},
        {"nvls_ag_rs", false, true}}},
      // v2.20.5: CollNet Direct AllGather/ReduceScatter.
      {"2.19", "2.20", {{"collnet_ag_rs", false, true}}},
      // v2.21.5: NVLS latency 25 us, Hopper llMaxBws, ring LL at 1/2.
      {"2.20", "2.21",
       {{"hw_lat[NVLink][nvls][Simple]", 23.0, 25.0},
        {"hw_lat[NVLink][nvls_tree][Simple]", 23.0, 25.0},
        {"ll_max_bw[Hopper][N1]", 87.7, 141.0},
        {"ll_max_bw[Hopper][N2]", 22.5, 45.0},
        {"ll_max_bw[Hopper][N4]", 19.0, 35.0},
        {"ll_max_bw[Blackwell][N1]", 87.7, 141.0},
        {"ll_max_bw[Blackwell][N2]", 22.5, 45.0},
        {"ll_max_bw[Blackwell][N4]", 19.0, 35.0},
        {"ring_ll_half", false, true}}},
      {"2.21", "2.22", {}},
      // v2.23.4: tree Simple latencies, 2 (nNodes-1) inter-node steps, one-GPU-per-node
      // rules, AllGather/ReduceScatter ratios on rings only (and PAT, not modelled).
      {"2.22", "2.23",
       {{"base_lat[tree][Simple]", 0.0, 8.4},
        {"hw_lat[NVLink][tree][Simple]", 28.0, 4.0},
        {"hw_lat[PCI][tree][Simple]", 28.0, 4.0},
        {"hw_lat[NET][tree][Simple]", 28.0, 14.0},
        {"ring_ar_inter_2n", true, false},
        {"ring_ll128_ppn1_discount", true, false},
        {"ppn1_tree_net_latency", false, true},
        {"ag_rs_ratio_ring_only", false, true}}},
      {"2.23", "2.24", {}},
      // v2.25.1: Blackwell rows (2x Hopper), LL128 on sm100 and sm120.
      {"2.24", "2.25",
       {{"ll_max_bw[Blackwell][N1]", 141.0, 2 * 141.0},
        {"ll_max_bw[Blackwell][N2]", 45.0, 2 * 45.0},
        {"ll_max_bw[Blackwell][N4]", 35.0, 2 * 35.0},
        {"per_ch_max_ring_ll128[Blackwell][N1]", 36.7, 2 * 36.7},
        {"per_ch_max_ring_ll128[Blackwell][N2]", 36.7, 2 * 36.7},
        {"per_ch_max_ring_ll128[Blackwell][N4]", 36.7, 2 * 36.7},
        {"per_ch_max_tree_ll128[Blackwell][N1]", 36.7, 2 * 36.7},
        {"per_ch_max_tree_ll128[Blackwell][N2]", 36.7, 2 * 36.7},
        {"per_ch_max_tree_ll128[Blackwell][N4]", 29.0, 2 * 29.0},
        {"per_ch_max_tree[Blackwell][N1]", 38.7, 2 * 38.7},
        {"per_ch_max_tree[Blackwell][N2]", 41.4, 2 * 41.4},
        {"per_ch_max_tree[Blackwell][N4]", 36.0, 2 * 36.0},
        {"ll128_sms", "70,80,90", "70,80,90,100,120"},
        {"nvls_max_heads", 0.0, 32.0},
        {"nvls_ag_rs_arity_cap", false, true},
        {"nvls_channels_sm100_one_node", 16.0, 32.0},
        {"nvls_channels_sm100_nodes", 16.0, 32.0}}},
      {"2.25", "2.26", {}},
      // v2.27.7: LL128 on every sm70+, NVLS AllGather/ReduceScatter busBw.
      {"2.26", "2.27",
       {{"ll128_sms", "70,80,90,100,120", "sm70+"},
        {"nvls_ag_rs_ppn_bw", false, true},
        {"nvls_ag_rs_multinode", false, true},
        {"nvls_channels_sm100_one_node", 32.0, 24.0}}},
      // v2.28.9: the NVLS efficiency model, NVLSTree NET 20.9 us, measured Blackwell rows.
      {"2.27", "2.28",
       {{"era", "v2_20", "head"},
        {"hw_lat[NET][nvls_tree][Simple]", 14.0, 20.9},
        {"per_ch_max_ring_ll128[Blackwell][N2]", 2 * 36.7, 34.6},
        {"per_ch_max_tree_ll128[Blackwell][N1]", 2 * 36.7, 55.6},
        {"per_ch_max_tree_ll128[Blackwell][N2]", 2 * 36.7, 31.67},
        {"per_ch_max_tree_ll128[Blackwell][N4]", 2 * 29.0, 20.0},
        {"per_ch_max_tree[Blackwell][N1]", 2 * 38.7, 70.0},
        {"per_ch_max_tree[Blackwell][N2]", 2 * 41.4, 42.8},
        {"per_ch_max_tree[Blackwell][N4]", 2 * 36.0, 24.0},
        {"per_ch_max_nvls_tree[Hopper][N2]", 0.0, 57.7},
        {"per_ch_max_nvls_tree[Hopper][N4]", 0.0, 45.5},
        {"per_ch_max_nvls_tree[Blackwell][N2]", 0.0, 96.0},
        {"per_ch_max_nvls_tree[Blackwell][N4]", 0.0, 43.8},
        {"nvls_efficiency[Hopper]", 0.0, 0.85},
        {"nvls_efficiency[Blackwell]", 0.0, 0.74},
        {"nvls_ratio", 5.0 / 6.0, 0.0},
        {"nvls_min_gpus", 3.0, 2.0}}},
      // v2.29.7: Blackwell ring LL128 40 GB/s per channel.
      {"2.28", "2.29",
       {{"per_ch_max_ring_ll128[Blackwell][N1]", 2 * 36.7, 40.0},
        {"per_ch_max_ring_ll128[Blackwell][N2]", 34.6, 40.0},
        {"per_ch_max_ring_ll128[Blackwell][N4]", 2 * 36.7, 40.0}}},
      // v2.30.7: Blackwell NVLSTree N4 80 GB/s per channel.
      {"2.29", "2.30", {{"per_ch_max_nvls_tree[Blackwell][N4]", 43.8, 80.0}}},
  };
  return b;
}

TEST(NcclVersions, EachBoundaryChangesExactlyWhatNcclChanged) {
  const std::vector<std::string> keys = known_versions();
  ASSERT_EQ(boundaries().size(), keys.size() - 2);   // consecutive releases, "head" aside
  for (std::size_t i = 0; i < boundaries().size(); ++i) {
    const Boundary& b = boundaries()[i];
    ASSERT_EQ(b.from, keys[i]);
    ASSERT_EQ(b.to, keys[i + 1]);
    SCOPED_TRACE(std::string(b.from) + " -> " + b.to);
    EXPECT_EQ(changes(v(b.from), v(b.to)), b.changes);
    if (b.changes.empty()) {
      EXPECT_EQ(&v(b.from), &v(b.to));
    }
  }
}

TEST(NcclVersions, HeadKeepsTheHead2307Tables) {
  // tuning.cc @ v2.30.7 ncclTunerConstantsDefaults: a few entries of each table.
  const VersionConstants& h = head_version();
  EXPECT_EQ(h.era, Era::head);
  EXPECT_DOUBLE_EQ(h.base_lat[static_cast<int>(Algo::tree)][static_cast<int>(Proto::simple)], 8.4);
  EXPECT_DOUBLE_EQ(h.hw_lat[0][static_cast<int>(Algo::nvls)][static_cast<int>(Proto::simple)], 25);
  EXPECT_DOUBLE_EQ(h.hw_lat[2][static_cast<int>(Algo::nvls_tree)][static_cast<int>(Proto::simple)], 20.9);
  EXPECT_DOUBLE_EQ(h.ll_max_bw[3][0], 282.0);
  EXPECT_DOUBLE_EQ(h.per_ch_max_ring_ll128[3][1], 40.0);
  EXPECT_DOUBLE_EQ(h.per_ch_max_tree_ll128[3][1], 31.67);
  EXPECT_DOUBLE_EQ(h.per_ch_max_tree[3][2], 24.0);
  EXPECT_DOUBLE_EQ(h.per_ch_max_nvls_tree[1][2], 80.0);
  EXPECT_DOUBLE_EQ(h.nvls_efficiency[1], 0.74);
  EXPECT_TRUE(h.ll128_sms.empty());
}

// ---- What the switches do to the estimates ----

TEST(NcclVersions, HeadIsTheDefault) {
  const Tuning a = nccl_tune(CollectiveOp::allreduce, 1 << 26, h100(8));
  const Tuning b = nccl_tune(CollectiveOp::allreduce, 1 << 26, h100(8), {}, head_version());
  EXPECT_EQ(a.choice.algo, b.choice.algo);
  EXPECT_DOUBLE_EQ(a.choice.time_us, b.choice.time_us);
}

TEST(NcclVersions, V27RingSimpleLatencyAndA100Cap) {
  // v2.7.5: baseLat Ring/Simple 8.4 + (2(n-1) = 14) x hwLat NVLink Ring/Simple 3.4 = 56 us;
  // busBw = min(nCh x bwIntra, 235) on sm80, algBw = busBw x 8/14.
  const Tuning t = nccl_tune(CollectiveOp::allreduce, 1 << 30, a100(8), {}, v("2.7"));
  const Estimate e = pick(t, Algo::ring, Proto::simple);
  EXPECT_NEAR(e.latency_us, 8.4 + 14 * 3.4, 1e-9);
  EXPECT_NEAR(e.bus_bw, std::min(235.0, t.graphs.ring.channels * t.graphs.ring.bw_intra), 1e-9);
  EXPECT_NEAR(e.alg_bw, e.bus_bw * 8 / 14, 1e-9);
}

TEST(NcclVersions, MultiNodeRingLLLatencyPerRelease) {
  // 2 nodes x 8 A100, ring AllReduce LL: nsteps 30.
  const NcclSystem s = a100_nodes(2);
  auto lat = [&](const char* version) {
    return pick(nccl_tune(CollectiveOp::allreduce, 4096, s, {}, v(version)), Algo::ring, Proto::ll).latency_us;
  };
  EXPECT_NEAR(lat("2.6"), 3.6 + 30 * .9, 1e-9);                         // every hop at NET
  EXPECT_NEAR(lat("2.11"), 3.6 + 28 * .47 * 1.8 + 2 * 2.7, 1e-9);       // 2(nNodes-1) NET hops, LL x1.8
  EXPECT_NEAR(lat("2.12"), 3.6 + 26 * .47 * 1.8 + 4 * 2.7, 1e-9);       // 2 nNodes NET hops
  EXPECT_NEAR(lat("2.18"), 6.6 + 26 * 1.0 + 4 * 2.7, 1e-9);             // net overhead 1 us floor
  EXPECT_NEAR(lat("2.23"), 6.6 + 28 * 1.0 + 2 * 2.7, 1e-9);             // 2(nNodes-1) again
}

TEST(NcclVersions, RingPlateauPerRelease) {
  // 2 nodes x 8 H100, ring AllReduce Simple at 1 GiB: 8.4 + 26 x 3.4 + 4 x 9.6 = 135.2 us
  // in 2.16 and 2.17, x1.9 (2.7-2.16) or x1.5 on sm90 (2.17); 2.6 has no plateau.
  const NcclSystem s = across(h100(8), 2);
  auto lat = [&](const char* version) {
    return pick(nccl_tune(CollectiveOp::allreduce, 1 << 30, s, {}, v(version)), Algo::ring, Proto::simple).latency_us;
  };
  EXPECT_NEAR(lat("2.16"), 135.2 * 1.9, 1e-9);
  EXPECT_NEAR(lat("2.17"), 135.2 * 1.5, 1e-9);
  EXPECT_NEAR(lat("2.6"), 8.4 + 30 * 6.6, 1e-9);
}

TEST(NcclVersions, OneGpuPerNodeFrom223) {
  // 4 nodes x 1 A100, ring AllReduce: 2.22 counts 2 nNodes = 8 NET hops of 6 steps (NCCL's
  // own arithmetic), 2.23 six at the Tree NET LL latency 5.0 and drops LL128's x0.7.
  const NcclSystem s = across(a100(1), 4);
  const Tuning t22 = nccl_tune(CollectiveOp::allreduce, 1 << 20, s, {}, v("2.22"));
  const Tuning t23 = nccl_tune(CollectiveOp::allreduce, 1 << 20, s, {}, v("2.23"));
  EXPECT_NEAR(pick(t22, Algo::ring, Proto::ll).latency_us, 6.6 - 2 * 1.0 + 8 * 2.7, 1e-9);
  EXPECT_NEAR(pick(t23, Algo::ring, Proto::ll).latency_us, 6.6 + 6 * 5.0, 1e-9);
  const double graph = t22.graphs.ring.channels * t22.graphs.ring.bw_inter;
  const double cap = t22.graphs.ring.channels * 20.0;   // Ampere N4 perChMaxRingLL128Bws
  EXPECT_NEAR(pick(t22, Algo::ring, Proto::ll128).bus_bw, std::min(graph * 0.7, cap), 1e-9);
  EXPECT_NEAR(pick(t23, Algo::ring, Proto::ll128).bus_bw, std::min(graph * 0.92, cap), 1e-9);
}

TEST(NcclVersions, RingLLIsAQuarterOrThirdUntil220AndAHalfFrom221) {
  // One node of A100: AllReduce LL at 1/4, AllGather at 1/3 (2.20); both 1/2 (2.21, HEAD),
  // capped by llMaxBws Ampere-N1 87.7; latency 6.6 + 14 x 0.6 = 15 us.
  const NcclSystem s = a100(8);
  const Tuning v220 = nccl_tune(CollectiveOp::allreduce, 1 << 20, s, {}, v("2.20"));
  const double graph = v220.graphs.ring.channels * v220.graphs.ring.bw_intra;
  auto bus = [&](CollectiveOp op, const char* version) {
    return pick(nccl_tune(op, 1 << 20, s, {}, v(version)), Algo::ring, Proto::ll).bus_bw;
  };
  EXPECT_NEAR(pick(v220, Algo::ring, Proto::ll).latency_us, 15.0, 1e-9);
  EXPECT_NEAR(bus(CollectiveOp::allreduce, "2.20"), std::min(87.7, graph / 4), 1e-9);
  EXPECT_NEAR(bus(CollectiveOp::allgather, "2.20"), std::min(87.7, graph / 3), 1e-9);
  EXPECT_NEAR(bus(CollectiveOp::allreduce, "2.21"), std::min(87.7, graph / 2), 1e-9);
  EXPECT_NEAR(bus(CollectiveOp::allgather, "2.21"), std::min(87.7, graph / 2), 1e-9);
  EXPECT_NEAR(bus(CollectiveOp::allreduce, "head"), std::min(87.7, graph / 2), 1e-9);
}

TEST(NcclVersions, NvlsRatioAndLatencyPerRelease) {
  // AllReduce on 8 H100: latency baseLat 40 (2.17), hwLat NVLink 23 (2.20), 25 (HEAD);
  // algBw = busBw = nCh x min(bwIntra, bwInter) times 0.75 (2.17) or 5/6 (2.20).
  const NcclSystem s = h100(8);
  for (const auto& [version, latency, ratio] :
       {std::tuple{"2.17", 40.0, 0.75}, std::tuple{"2.20", 23.0, 5.0 / 6.0}}) {
    const Tuning t = nccl_tune(CollectiveOp::allreduce, 1 << 30, s, {}, v(version));
    const Estimate e = pick(t, Algo::nvls, Proto::simple);
    const Graph& g = t.graphs.nvls;
    EXPECT_NEAR(e.latency_us, latency, 1e-9) << version;
    EXPECT_NEAR(e.alg_bw, g.channels * std::min(g.bw_intra, g.bw_inter) * ratio, 1e-9) << version;
  }
  EXPECT_EQ(nccl_tune(CollectiveOp::allreduce, 1 << 30, s, {}, v("2.20")).choice.algo, Algo::nvls);
  EXPECT_NEAR(pick(nccl_tune(CollectiveOp::allreduce, 1 << 30, s), Algo::nvls, Proto::simple).latency_us, 25.0, 1e-9);
}

TEST(NcclVersions, NvlsAllGatherPerRelease) {
  // 2.18 offers NVLS for AllReduce only; 2.22 scales AllGather by 5/6, 2.26 does not (2.23+),
  // 2.27 takes bwIntra x 7/8 (ppn 8) against bwInter x 0.9.
  const NcclSystem s = h100(8);
  auto nvls = [&](const char* version) {
    const Tuning t = nccl_tune(CollectiveOp::allgather, 1 << 30, s, {}, v(version));
    for (const Estimate& e : t.estimates)
      if (e.algo == Algo::nvls) return std::optional<Estimate>(e);
    return std::optional<Estimate>();
  };
  EXPECT_FALSE(nvls("2.18").has_value());
  const Graph g = search_graphs(s).nvls;
  const double min_bw = g.channels * std::min(g.bw_intra, g.bw_inter);
  ASSERT_TRUE(nvls("2.22").has_value());
  EXPECT_NEAR(nvls("2.22")->alg_bw, min_bw * 5 / 6, 1e-9);
  EXPECT_NEAR(nvls("2.26")->alg_bw, min_bw, 1e-9);
  EXPECT_NEAR(nvls("2.27")->alg_bw, g.channels * std::min(g.bw_intra * 7 / 8, g.bw_inter * 0.9), 1e-9);
}

std::string nvls_why(CollectiveOp op, const NcclSystem& s, const char* version) {
  const Tuning t = nccl_tune(op, 1 << 30, s, {}, v(version));
  for (const Estimate& e : t.estimates)
    if (e.algo == Algo::nvls) return e.enabled ? "" : e.why_disabled;
  return "not offered";
}

TEST(NcclVersions, NvlsAcrossNodesPerRelease) {
  // enqueue.cc/tuning.cc: NVLS AllReduce across nodes needs SHARP from 2.18 (2.17: one node
  // only); AllGather/ReduceScatter stay on one node until 2.27, which adds SHARP with one NIC
  // per GPU (not modelled, so still off, saying so).
  NcclSystem s = across(h100(8), 2);
  EXPECT_NE(nvls_why(CollectiveOp::allreduce, s, "2.30").find("needs SHARP"), std::string::npos);
  s.collnet = true;
  EXPECT_EQ(nvls_why(CollectiveOp::allreduce, s, "2.18"), "");
  EXPECT_NE(nvls_why(CollectiveOp::allreduce, s, "2.17").find("one node only"), std::string::npos);
  EXPECT_NE(nvls_why(CollectiveOp::allgather, s, "2.26").find("one node only before NCCL 2.27"), std::string::npos);
  EXPECT_NE(nvls_why(CollectiveOp::allgather, s, "2.27").find("not modelled"), std::string::npos);
  s.nics_per_node = 4;
  EXPECT_NE(nvls_why(CollectiveOp::reduce_scatter, s, "2.30").find("one NIC per GPU"), std::string::npos);
}

TEST(NcclVersions, NvlsGpusPerNodeAndHeadsPerRelease) {
  // nvls.cc: 2 GPUs suffice in 2.17 and from 2.28.7, 3 from 2.18 to 2.28.3.
  EXPECT_EQ(nvls_why(CollectiveOp::allreduce, h100(2), "2.17"), "");
  EXPECT_NE(nvls_why(CollectiveOp::allreduce, h100(2), "2.27").find("3+ GPUs"), std::string::npos);
  EXPECT_EQ(nvls_why(CollectiveOp::allreduce, h100(2), "2.28"), "");
  // A 72-GPU NVLink domain: 2.25+ cap the NVLS graph at 32 heads (NCCL_MAX_NVLS_ARITY) and
  // run AllGather/ReduceScatter on it no longer; 2.24 tries one head per GPU.
  const NcclSystem nvl72 = node(100, 72, 18 * 40.1, true);
  EXPECT_EQ(search_graphs(nvl72, v("2.25").nvls_max_heads).nvls.channels, 32);
  EXPECT_EQ(search_graphs(nvl72, v("2.24").nvls_max_heads).nvls.channels, 0);   // 72 heads fit no speed
  EXPECT_NE(nvls_why(CollectiveOp::allgather, nvl72, "2.30").find("<= 32 GPUs"), std::string::npos);
  EXPECT_EQ(nvls_why(CollectiveOp::allreduce, nvl72, "2.30"), "");
}

TEST(NcclVersions, NvlsChannelsPerRelease) {
  // nvls.cc: 16 on sm90 always; sm100 32 from 2.25, 24 on one NVLink domain from 2.27.
  EXPECT_EQ(nvls_channels(v("2.30"), h100(8)), 16);
  const NcclSystem b200 = node(100, 8, 18 * 40.1, true);
  EXPECT_EQ(nvls_channels(v("2.24"), b200), 16);
  EXPECT_EQ(nvls_channels(v("2.25"), b200), 32);
  EXPECT_EQ(nvls_channels(v("2.27"), b200), 24);
  EXPECT_EQ(nvls_channels(v("2.27"), across(b200, 2)), 32);
}

TEST(NcclVersions, LL128OnByDefaultPerArchAndRelease) {
  // sm70 from 2.5, sm80 from 2.7, sm90 from 2.15, sm100 from 2.25, any sm70+ (sm86) from 2.27.
  auto ll128 = [](const NcclSystem& s, const char* version) {
    return pick(nccl_tune(CollectiveOp::allreduce, 1 << 20, s, {}, v(version)), Algo::ring, Proto::ll128).enabled;
  };
  const NcclSystem v100 = node(70, 8, 6 * 25.0, false), b200 = node(100, 8, 18 * 40.1, true),
                   a40 = node(86, 2, 4 * 14.0, false);
  EXPECT_FALSE(ll128(v100, "2.4"));
  EXPECT_TRUE(ll128(v100, "2.5"));
  EXPECT_FALSE(ll128(a100(8), "2.6"));
  EXPECT_TRUE(ll128(a100(8), "2.7"));
  EXPECT_FALSE(ll128(h100(8), "2.14"));
  EXPECT_TRUE(ll128(h100(8), "2.15"));
  EXPECT_FALSE(ll128(b200, "2.24"));
  EXPECT_TRUE(ll128(b200, "2.25"));
  EXPECT_FALSE(ll128(a40, "2.26"));
  EXPECT_TRUE(ll128(a40, "2.27"));
}

TEST(NcclVersions, AlgorithmsAppearWithTheirReleases) {
  const NcclSystem s = [] {
    NcclSystem x = across(h100(8), 2);
    x.collnet = true;
    return x;
  }();
  auto enabled = [&](CollectiveOp op, Algo a, const char* version) {
    for (const Estimate& e : nccl_tune(op, 1 << 26, s, {}, v(version)).estimates)
      if (e.algo == a && e.proto == Proto::simple) return e.enabled;
    return false;
  };
  EXPECT_FALSE(enabled(CollectiveOp::allreduce, Algo::collnet_direct, "2.5"));
  EXPECT_TRUE(enabled(CollectiveOp::allreduce, Algo::collnet_direct, "2.6"));
  EXPECT_FALSE(enabled(CollectiveOp::allreduce, Algo::collnet_chain, "2.13"));
  EXPECT_TRUE(enabled(CollectiveOp::allreduce, Algo::collnet_chain, "2.14"));
  EXPECT_FALSE(enabled(CollectiveOp::allreduce, Algo::nvls, "2.16"));
  EXPECT_FALSE(enabled(CollectiveOp::allreduce, Algo::nvls, "2.17"));   // one node only (nvls.cc)
  EXPECT_TRUE(enabled(CollectiveOp::allreduce, Algo::nvls, "2.18"));    // with SHARP
  EXPECT_FALSE(enabled(CollectiveOp::allreduce, Algo::nvls_tree, "2.17"));
  EXPECT_TRUE(enabled(CollectiveOp::allreduce, Algo::nvls_tree, "2.18"));
  EXPECT_FALSE(enabled(CollectiveOp::allgather, Algo::collnet_direct, "2.19"));
  EXPECT_TRUE(enabled(CollectiveOp::allgather, Algo::collnet_direct, "2.20"));
}

TEST(NcclVersions, NoNvlsBefore217AndNoLL128Before25) {
  const Tuning v27 = nccl_tune(CollectiveOp::allreduce, 1 << 30, h100(8), {}, v("2.7"));
  EXPECT_NE(v27.choice.algo, Algo::nvls);
  EXPECT_FALSE(pick(v27, Algo::nvls, Proto::simple).enabled);
  // v2.7.5 enables LL128 only on sm70/sm80; 2.4 has no LL128 at all.
  EXPECT_FALSE(pick(v27, Algo::ring, Proto::ll128).enabled);
  const Tuning v24 = nccl_tune(CollectiveOp::allreduce, 1 << 20, a100(8), {}, v("2.4"));
  EXPECT_FALSE(pick(v24, Algo::ring, Proto::ll128).enabled);
}

TEST(NcclVersions, V24TreeThresholdRule) {
  // One node: treeThreshold 0, always ring. 4 nodes x 8 NVLink ranks: ringlat 6 x 31 = 186,
  // treelat 15 x 2 + 4 x 7 = 58, treebw = 3/4 ringbw, so the tree runs up to
  // ringbw x 3 x 128 bytes with ringbw = 5000 x channels.
  const VersionConstants& v24 = v("2.4");
  EXPECT_EQ(nccl_tune(CollectiveOp::allreduce, 1024, a100(8), {}, v24).choice.algo, Algo::ring);
  const NcclSystem s = a100_nodes(4);
  const double threshold = 5000.0 * search_graphs(s).ring.channels * 3 * 128;
  EXPECT_EQ(nccl_tune(CollectiveOp::allreduce, threshold, s, {}, v24).choice.algo, Algo::tree);
  EXPECT_EQ(nccl_tune(CollectiveOp::allreduce, 2 * threshold, s, {}, v24).choice.algo, Algo::ring);
  // 2 nodes: treebw = 1.5 ringbw > ringbw, tree at every size.
  EXPECT_EQ(nccl_tune(CollectiveOp::allreduce, 1 << 30, a100_nodes(2), {}, v24).choice.algo, Algo::tree);
}

TEST(NcclVersions, V24LLThresholdRule) {
  // Ring AllReduce, 8 ranks: nt grows to 256, the LL threshold is nc x 256 x 8 x 64 bytes
  // with nc = bytes / (256 x 8 x 8) capped by the channels.
  const VersionConstants& v24 = v("2.4");
  const NcclSystem s = a100(8);
  const int ch = search_graphs(s).ring.channels;
  EXPECT_EQ(nccl_tune(CollectiveOp::allreduce, ch * 256.0 * 8 * 64, s, {}, v24).choice.proto, Proto::ll);
  EXPECT_EQ(nccl_tune(CollectiveOp::allreduce, ch * 256.0 * 8 * 64 + 1, s, {}, v24).choice.proto, Proto::simple);
}

}  // namespace
}  // namespace stepsim::models::nccl
