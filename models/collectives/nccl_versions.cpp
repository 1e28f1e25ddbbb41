/// @file NCCL tuning constants per release, see nccl_versions.hpp. Every table names the
/// NCCL file and version it copies; rows are Volta, Ampere, Hopper, Blackwell.
#include "models/collectives/nccl_versions.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "platforms/config_error.hpp"

namespace stepsim::models::nccl {
namespace {

// treeCorrectionFactor of tuning.cc 2.8-2.30 (23 sizes, 64 B .. 256 MiB; unchanged between
// v2.20.3 and HEAD).
constexpr double kTreeCorrection23[kProtos][23] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};

/// NCCL HEAD 2.30.7 (5067397c, papers.md §4): ncclTunerConstantsDefaults.
/// Copies a constant table into the VersionConstants member of the same shape; the shared
/// type makes a shape mismatch a compile error instead of a silent partial copy.
template <class Table>
void fill(Table& member, const Table& table) {
  static_assert(std::is_array_v<Table>);
  std::memcpy(&member, &table, sizeof(Table));
}

VersionConstants make_head() {
  VersionConstants v{.name = "2.30", .source = "tuning.cc @ HEAD 2.30.7 (5067397c, papers.md §4)", .era = Era::head};
  const double base[kAlgos][kProtos] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}};
  const double hw[3][kAlgos][kProtos] = {
      {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 25}, {0, 0, 25}},
      {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0}},
      {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 20.9}}};
  const double ll[4][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
  const double ring_ll128[4] = {20.0, 20.0, 36.7, 40.0};
  const double tree_ll128[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
  const double tree[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
  const double nvls_tree[2][3] = {{0, 57.7, 45.5}, {0, 96.0, 80.0}};
  fill(v.base_lat, base);
  fill(v.hw_lat, hw);
  fill(v.ll_max_bw, ll);
  fill(v.per_ch_max_ring_ll128, ring_ll128);
  fill(v.per_ch_max_tree_ll128, tree_ll128);
  fill(v.per_ch_max_tree, tree);
  fill(v.per_ch_max_nvls_tree, nvls_tree);
  v.nvls_efficiency[0] = 0.85;
  v.nvls_efficiency[1] = 0.74;
  fill(v.tree_correction, kTreeCorrection23);
  v.has_nvls = v.has_nvls_tree = v.has_collnet_chain = true;
  v.ll128_sm100 = true;
  return v;
}

/// NCCL v2.20.3 tuning.cc (b6475625; the nearest stored version to 2.18.5/2.20.5: NVLSTree
/// exists, Hopper's llMaxBws row still equals Ampere's, no Blackwell rows, so sm100 uses
/// the Hopper row as compCapIndex does there).
VersionConstants make_2_20() {
  VersionConstants v{.name = "2.20", .source = "tuning.cc @ v2.20.3 (b6475625)", .era = Era::v2_20};
  const double base[kAlgos][kProtos] = {{6.8, 14.0, 0}, {6.6, 14.0, 8.4}};
  const double hw[3][kAlgos][kProtos] = {
      {{.6, 1.25, 28}, {.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 23}, {0, 0, 23}},
      {{1.0, 1.9, 28}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0}},
      {{5.0, 8.5, 28}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 14}}};
  const double ll[4][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {87.7, 22.5, 19.0}, {87.7, 22.5, 19.0}};
  const double ring_ll128[4] = {20.0, 20.0, 36.7, 36.7};
  const double tree_ll128[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {36.7, 36.7, 29.0}};
  const double tree[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {38.7, 41.4, 36.0}};
  fill(v.base_lat, base);
  fill(v.hw_lat, hw);
  fill(v.ll_max_bw, ll);
  fill(v.per_ch_max_ring_ll128, ring_ll128);
  fill(v.per_ch_max_tree_ll128, tree_ll128);
  fill(v.per_ch_max_tree, tree);
  fill(v.tree_correction, kTreeCorrection23);
  v.has_nvls = v.has_nvls_tree = v.has_collnet_chain = true;
  return v;
}

/// NCCL v2.7.5 tuning.cc (01afd20a; nearest stored to 2.7.8, whose baseLat/hwLat papers.md
/// §4 quotes identically): Tree, Ring, CollNet only. The fixed tree caps live in the v2_7
/// branch of nccl_tuning.cpp (they are not per-arch tables in this era).
VersionConstants make_2_7() {
  VersionConstants v{.name = "2.7", .source = "tuning.cc @ v2.7.5 (01afd20a)", .era = Era::v2_7};
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
  for (int p = 0; p < kProtos; ++p) std::copy(corr[p], corr[p] + 22, v.tree_correction[p]);
  v.tree_correction_len = 22;
  const double ll128[5] = {18.8, 12.0, 18.3, 15.2, 16.7};   // ll128MaxBwPerCh
  fill(v.ll128_per_coll, ll128);
  return v;
}

/// NCCL v2.8.3 tuning.cc (920dbe5b, makefiles/version.mk 2.8.3; the nearest stored to 2.8.4):
/// v2.7's baseLat and formulas with new tables: llMaxBws caps ring and tree LL,
/// perChMaxTreeBws caps trees per channel, hwLat NVLink Tree/LL128 1.25 and NET Tree/Simple
/// 28 (was 1.2 and 50), AllReduce LL128 16.9 GB/s per channel (was 16.7), 23 tree
/// correction sizes. Its two-row tables index by compCap80 (an all-sm80 job) for a single
/// node and by CPU vendor (Intel 0, AMD 1) across nodes, so Hopper and Blackwell take row 0.
VersionConstants make_2_8() {
  VersionConstants v{.name = "2.8", .source = "tuning.cc @ v2.8.3 (920dbe5b)", .era = Era::v2_8};
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
  return v;
}

/// NCCL 2.4 (init.cc ncclTreeThreshold, enqueue.cc getKernelInfo of the 2.4 era): no tuning
/// model and no LL128 (2.5+). Selection follows the 2.4 thresholds (nccl_tuning.cpp); the
/// latency and bandwidth the lowering needs come from the nearest stored model, v2.7.5.
VersionConstants make_2_4() {
  VersionConstants v = make_2_7();
  v.name = "2.4";
  v.source = "init.cc/enqueue.cc/core.h @ v2.4-era (thresholds); tuning.cc @ v2.7.5 (estimates)";
  v.era = Era::v2_4;
  v.has_ll128 = false;
  return v;
}

struct Entry {
  const char* key;
  const VersionConstants* constants;
};

const std::vector<Entry>& table() {
  static const VersionConstants v24 = make_2_4(), v27 = make_2_7(), v28 = make_2_8(), v220 = make_2_20(),
                                head = make_head();
  // Keys a data set may name, oldest first; each maps to the stored source nearest to it
  // (2.27-2.29 tuning.cc are not stored: HEAD is the nearest, same Blackwell rows and NVLS
  // efficiency model).
  static const std::vector<Entry> t = {
      {"2.4", &v24},   {"2.7", &v27},   {"2.8", &v28},   {"2.18", &v220}, {"2.19", &v220}, {"2.20", &v220},
      {"2.27", &head}, {"2.28", &head}, {"2.29", &head}, {"2.30", &head}, {"head", &head}};
  return t;
}

}  // namespace

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
