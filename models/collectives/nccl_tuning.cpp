/// @file NCCL's tuning model (src/graph/tuning.cc, search.cc, topo.h), see nccl_tuning.hpp.
/// Latency/bandwidth tables per NCCL release live in nccl_versions.cpp (HEAD 2.30.7 by default).
#include "models/collectives/nccl_tuning.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "models/collectives/nccl_versions.hpp"
#include "platforms/config_error.hpp"

namespace stepsim::models::nccl {
namespace {

constexpr int kRing = static_cast<int>(Algo::ring);
constexpr double kInf = std::numeric_limits<double>::infinity();

int ai(Algo a) { return static_cast<int>(a); }
int pi(Proto p) { return static_cast<int>(p); }

// Latency and bandwidth tables are per NCCL release: models/collectives/nccl_versions.cpp.

// search.cc speed arrays (GB/s per channel), latest: intra-node graphs and graphs with a NIC.
const std::vector<double> kSpeedIntra = {40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3};
const std::vector<double> kSpeedInter = {48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4, 1.2, 0.24, 0.12};
const std::vector<double> kSpeedIntraSm90 = {60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3};
const std::vector<double> kSpeedInterSm90 = {48, 45, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12};
const std::vector<double> kSpeedIntraSm100 = {90, 80, 70, 60, 50, 45, 40, 30, 24, 20, 19, 18};
const std::vector<double> kSpeedInterSm100 = {96, 86, 80, 48, 45.1, 42, 40, 30, 24, 22, 20, 17.5,
                                              15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12};

/// Row of the per-arch tables: Volta (and older), Ampere, Hopper, Blackwell.
int arch_row(int sm) { return sm >= 100 ? 3 : sm >= 90 ? 2 : sm >= 80 ? 1 : 0; }

int log2i(double x) {
  int l = 0;
  while (x >= 2) {
    x /= 2;
    ++l;
  }
  return l;
}

/// ncclTopoDupChannels: fast graphs get twice the channels at half the speed each.
Graph dup_channels(Graph g, int sm) {
  if (g.channels == 0 || g.bw_intra < 25.0) return g;
  if (sm > 80 && g.bw_intra < 50.0 && g.channels > 4) return g;
  const int dup = std::min(g.channels * 2, kMaxGraphChannels);
  const int div = (dup + g.channels - 1) / g.channels;
  g.bw_intra /= div;
  g.bw_inter /= div;
  g.channels = dup;
  return g;
}

/// The search keeps the graph with the most total bandwidth (channels x speed); every
/// channel crosses each GPU once (intra_bw) and, off-node, one NIC (nic_bw). On an NVLink
/// mesh the rings nccl_graph_search found are the graph.
Graph search_ring(const NcclSystem& sys) {
  if (sys.mesh_ring_channels > 0)
    return dup_channels({sys.mesh_ring_channels, sys.mesh_ring_bw, sys.mesh_ring_bw}, sys.sm);
  const bool net = sys.nodes > 1;
  Graph best;
  for (double s : search_speeds(sys.sm, net)) {
    int k = static_cast<int>(std::floor(sys.intra_bw / s + 1e-9));
    if (net) k = std::min(k, sys.nics_per_node * static_cast<int>(std::floor(sys.nic_bw / s + 1e-9)));
    k = std::min(k, kMaxGraphChannels);
    if (k >= 1 && k * s > best.channels * best.bw_intra + 1e-9) best = {k, s, s};
  }
  if (best.channels == 0) best = {1, 0.1, 0.1};   // search.cc's "simple order" fallback
  return dup_channels(best, sys.sm);
}

}  // namespace

const char* to_string(Algo algo) {
  switch (algo) {
    case Algo::tree: return "tree";
    case Algo::ring: return "ring";
    case Algo::collnet_direct: return "collnet_direct";
    case Algo::collnet_chain: return "collnet_chain";
    case Algo::nvls: return "nvls";
    case Algo::nvls_tree: return "nvls_tree";
  }
  return "?";
}

double wire_efficiency(Proto proto) {
  switch (proto) {
    case Proto::ll: return 8.0 / 16.0;
    case Proto::ll128: return 120.0 / 128.0;
    case Proto::simple: return 1.0;
  }
  return 1.0;
}

const char* to_string(Proto proto) {
  switch (proto) {
    case Proto::ll: return "LL";
    case Proto::ll128: return "LL128";
    case Proto::simple: return "Simple";
  }
  return "?";
}

namespace {
std::string lower_no_sep(const std::string& text) {
  std::string out;
  for (char c : text)
    if (c != '_' && c != '-') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}
}  // namespace

Algo parse_algo(const std::string& text) {
  const std::string key = lower_no_sep(text);
  if (key == "ring") return Algo::ring;
  if (key == "tree") return Algo::tree;
  if (key == "nvls") return Algo::nvls;
  if (key == "nvlstree") return Algo::nvls_tree;
  if (key == "collnet" || key == "collnetdirect") return Algo::collnet_direct;
  if (key == "collnetchain") return Algo::collnet_chain;
  throw ConfigError("algo=", "unknown NCCL algorithm '" + text + "'",
                    "use ring, tree, nvls, nvls_tree, collnet (= collnet_direct) or collnet_chain");
}

Proto parse_proto(const std::string& text) {
  const std::string key = lower_no_sep(text);
  if (key == "ll") return Proto::ll;
  if (key == "ll128") return Proto::ll128;
  if (key == "simple") return Proto::simple;
  throw ConfigError("proto=", "unknown NCCL protocol '" + text + "'", "use LL, LL128 or Simple");
}

double nvlink_bw_per_link(int sm) {
  // topo.h SM60_NVLINK_BW 18, SM70 20, SM80 20, SM86 12, SM90 20.6, SM100 40.1.
  if (sm >= 100) return 40.1;
  if (sm >= 90) return 20.6;
  if (sm == 86 || sm == 87 || sm == 89) return 12.0;
  if (sm >= 70) return 20.0;
  return 18.0;
}

double pcie_bw(int gen, int width) {
  const int code = gen >= 6 ? 480 : gen == 5 ? 240 : gen == 4 ? 120 : 60;
  return width * code / 80.0;
}

const std::vector<double>& search_speeds(int sm, bool inter) {
  if (sm >= 100) return inter ? kSpeedInterSm100 : kSpeedIntraSm100;
  if (sm >= 90) return inter ? kSpeedInterSm90 : kSpeedIntraSm90;
  return inter ? kSpeedInter : kSpeedIntra;
}

double hw_latency(int path, Algo algo, Proto proto) { return head_version().hw_lat[path][ai(algo)][pi(proto)]; }
double base_latency(Algo algo, Proto proto) { return head_version().base_lat[ai(algo)][pi(proto)]; }

Graphs search_graphs(const NcclSystem& sys, int max_nvls_heads) {
  Graphs g;
  g.ring = search_ring(sys);
  g.tree = g.ring;
  if (sys.nodes > 1) {
    // search.cc pass 2 raises a tree's bwIntra up to twice its bwInter while every channel
    // still fits through the GPU (2 nodes and CollNet use bwIntra).
    for (double s : search_speeds(sys.sm, true))
      if (s > g.tree.bw_intra && s <= 2 * g.tree.bw_inter + 1e-9 && g.tree.channels * s <= sys.intra_bw + 1e-9) {
        g.tree.bw_intra = s;
        break;
      }
  }
  if (sys.nvls) {
    // NVLS graphs have one head per local GPU (search.cc forces min = max = ngpus on one
    // node); every head channel pulls from every GPU, so channels x speed fits intra_bw.
    const bool net = sys.nodes > 1;
    int heads = sys.ppn;
    if (net) heads = std::min(heads, std::max(1, sys.nics_per_node));
    if (max_nvls_heads > 0) heads = std::min(heads, max_nvls_heads);
    for (double s : search_speeds(sys.sm, net)) {
      if (heads * s > sys.intra_bw + 1e-9) continue;
      if (net && s > sys.nic_bw + 1e-9) continue;
      // One node: no NIC leg, pass 2 raises bwInter to 2 x bwIntra, so it never limits.
      g.nvls = {heads, s, net ? s : 2 * s};
      break;
    }
  }
  return g;
}

namespace {

int op_steps(CollectiveOp op, int n) {
  if (op == CollectiveOp::allreduce) return 2 * (n - 1);
  if (op == CollectiveOp::allgather || op == CollectiveOp::reduce_scatter) return n - 1;
  return n;
}

/// Whether NCCL `v` implements `op` with `a` at all (tuning.cc skips the others) and `p`
/// with `a`.
bool implements(CollectiveOp op, Algo a, Proto p, const VersionConstants& v) {
  const bool simple_only = a != Algo::ring && a != Algo::tree;
  if (simple_only && p != Proto::simple) return false;
  switch (op) {
    case CollectiveOp::allreduce: return true;
    case CollectiveOp::allgather:
    case CollectiveOp::reduce_scatter:
      return a == Algo::ring || (a == Algo::nvls && v.nvls_ag_rs) || (a == Algo::collnet_direct && v.collnet_ag_rs);
    default: return a == Algo::ring;
  }
}

/// Why NCCL's NVLS algorithm does not run `op` here (enqueue.cc/tuning.cc/nvls.cc of v).
std::string nvls_disabled_reason(CollectiveOp op, const NcclSystem& sys, const VersionConstants& v) {
  if (!sys.nvls) return "no NVLink SHARP (NVSwitch gen3+, sm90+)";
  if (sys.ppn < v.nvls_min_gpus)
    return "NVLS needs " + std::to_string(v.nvls_min_gpus) + "+ GPUs per node in NCCL " + v.name;
  const bool ag_rs = op != CollectiveOp::allreduce;
  if (ag_rs && v.nvls_ag_rs_arity_cap && sys.ppn > 32) return "NVLS AllGather/ReduceScatter needs <= 32 GPUs per node";
  if (sys.nodes == 1) return "";
  if (!ag_rs) {
    if (!v.nvls_allreduce_sharp) return "NVLS AllReduce runs on one node only in NCCL " + v.name;
    return sys.collnet ? "" : "multi-node NVLS AllReduce needs SHARP (fabric.sharp); NVLSTree runs without it";
  }
  if (!v.nvls_ag_rs_multinode) return "NVLS AllGather/ReduceScatter run on one node only before NCCL 2.27";
  if (!sys.collnet) return "multi-node NVLS AllGather/ReduceScatter need SHARP (fabric.sharp)";
  if (sys.ppn > sys.nics_per_node) return "multi-node NVLS AllGather/ReduceScatter need one NIC per GPU";
  return "NVLS+SHARP AllGather/ReduceScatter across nodes (NCCL 2.27+) are not modelled";
}

std::string disabled_reason(CollectiveOp op, const NcclSystem& sys, Algo a, Proto p, const VersionConstants& v) {
  if (sys.ranks < 2) return "one rank";
  if (a == Algo::nvls && !v.has_nvls) return "no NVLS before NCCL 2.17";
  if (a == Algo::nvls_tree && !v.has_nvls_tree) return "no NVLSTree before NCCL 2.18";
  if ((a == Algo::collnet_direct || a == Algo::collnet_chain) && !v.has_collnet) return "no CollNet before NCCL 2.6";
  if (a == Algo::collnet_chain && !v.has_collnet_chain) return "no CollNet Chain before NCCL 2.14";
  if (p == Proto::ll128) {
    if (!v.has_ll128) return "no LL128 before NCCL 2.5";
    // tuning.cc enables LL128 by default only on NVLink-class intra paths of the archs it
    // tested: sm70 (2.5), sm80 (2.7), sm90 (2.15), sm100/120 (2.25), any sm70+ (2.27).
    const bool arch = v.ll128_sms.empty()
                          ? sys.sm >= 70
                          : std::find(v.ll128_sms.begin(), v.ll128_sms.end(), sys.sm) != v.ll128_sms.end();
    if (!arch) return "LL128 off by default on sm" + std::to_string(sys.sm);
    if (sys.intra != IntraPath::nvlink) return "LL128 off by default without NVLink";
  }
  switch (a) {
    case Algo::nvls: return nvls_disabled_reason(op, sys, v);
    case Algo::nvls_tree:
      if (!sys.nvls) return "no NVLink SHARP";
      if (sys.nodes < 2) return "NVLSTree is off on one node";
      return "";
    case Algo::collnet_direct:
      if (!sys.collnet || sys.nodes < 2) return "no SHARP fabric (CollNet)";
      if (!sys.nvswitch) return "CollNet Direct needs an NVSwitch";
      return "";
    case Algo::collnet_chain:
      if (!sys.collnet || sys.nodes < 2) return "no SHARP fabric (CollNet)";
      return "";
    default: return "";
  }
}

/// busBw of one (algo, proto) by the formulas of v's era (tuning.cc "Various model
/// refinements" of v2.7.5, v2.20.3 and HEAD).
struct BwInputs {
  CollectiveOp op;
  Algo a;
  Proto p;
  const NcclSystem& sys;
  const Graph& g;
  double ll_max;
  int row;
  int n_index;
};

/// Index of ll128MaxBwPerCh (2.7/2.8): Broadcast, Reduce, AllGather, ReduceScatter, AllReduce.
int ll128_coll(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::broadcast: return 0;
    case CollectiveOp::reduce: return 1;
    case CollectiveOp::allgather: return 2;
    case CollectiveOp::reduce_scatter: return 3;
    default: return 4;
  }
}

double bus_bw_v2_7(const BwInputs& in, const VersionConstants& v) {
  // v2.7.5: per-collective LL128 caps (v.ll128_per_coll) and fixed tree caps (nNodes > 2:
  // 80, 105 for sm80 LL128; else 110, 130).
  const double ll128_cap = v.ll128_per_coll[ll128_coll(in.op)];
  const bool cc80 = in.sys.sm == 80;
  const double nch = in.g.channels;
  double bus = nch * ((in.sys.nodes <= 2 || in.a == Algo::collnet_direct) ? in.g.bw_intra : in.g.bw_inter);
  if (cc80) bus = std::min(bus, 235.0);
  const bool multi_or_reduce = in.sys.nodes > 1 || in.op == CollectiveOp::allreduce || in.op == CollectiveOp::reduce;
  if (in.a == Algo::ring && in.p == Proto::ll) bus *= multi_or_reduce ? 1.0 / 4.0 : 1.0 / 3.0;
  if (in.a == Algo::ring && in.p == Proto::ll128)
    bus = std::min(bus * (in.sys.ppn < 2 ? 0.7 : 0.92), ll128_cap * nch);
  if (in.a == Algo::tree) {
    const bool ll128 = in.p == Proto::ll128;
    const double cap = in.sys.nodes > 2 ? (cc80 && ll128 ? 105.0 : 80.0) : (cc80 && ll128 ? 130.0 : 110.0);
    bus = std::min(bus * .9, cap);
    if (in.p == Proto::ll) bus *= 1.0 / 3.8;
    if (ll128) bus = std::min(bus * (in.sys.nodes == 1 ? 7.0 / 9.0 : 0.915), ll128_cap * nch * 7.0 / 9.0);
  }
  if (in.a == Algo::collnet_direct) bus *= in.p == Proto::ll ? .9 / 6.0 : in.p == Proto::ll128 ? 0 : .9;
  return bus;
}

/// v2.8.3 tuning.cc (920dbe5b) "Various model refinements": v2.7's shape, with LL capped by
/// llMaxBws and trees by perChMaxTreeBws per channel (the fixed 80/110 caps are gone) and
/// the tree LL128 cap without v2.7's 7/9.
double bus_bw_v2_8(const BwInputs& in, const VersionConstants& v) {
  const double ll128_cap = v.ll128_per_coll[ll128_coll(in.op)];
  const double nch = in.g.channels;
  double bus = nch * ((in.sys.nodes <= 2 || in.a == Algo::collnet_direct) ? in.g.bw_intra : in.g.bw_inter);
  if (in.sys.sm == 80) bus = std::min(bus, 235.0);
  const bool multi_or_reduce = in.sys.nodes > 1 || in.op == CollectiveOp::allreduce || in.op == CollectiveOp::reduce;
  if (in.a == Algo::ring && in.p == Proto::ll) bus = std::min(in.ll_max, bus * (multi_or_reduce ? 0.25 : 1.0 / 3.0));
  if (in.a == Algo::ring && in.p == Proto::ll128)
    bus = std::min(bus * (in.sys.ppn < 2 ? 0.7 : 0.92), ll128_cap * nch);
  if (in.a == Algo::tree) {
    bus = std::min(bus * .92, nch * v.per_ch_max_tree[in.row][in.n_index]);
    if (in.p == Proto::ll) bus = std::min(bus / 3.8, in.ll_max);
    if (in.p == Proto::ll128) bus = std::min(bus * (in.sys.nodes == 1 ? 7.0 / 9.0 : 0.915), ll128_cap * nch);
  }
  if (in.a == Algo::collnet_direct) bus *= in.p == Proto::ll ? .9 / 6.0 : in.p == Proto::ll128 ? 0 : .9;
  return bus;
}

double bus_bw_v2_20(const BwInputs& in, const VersionConstants& v) {
  const double nch = in.g.channels;
  const bool collnet = in.a == Algo::collnet_direct || in.a == Algo::collnet_chain;
  double bw = (in.sys.nodes <= 2 || collnet) ? in.g.bw_intra : in.g.bw_inter;
  if (in.a == Algo::nvls) bw = std::min(in.g.bw_intra, in.g.bw_inter);
  if (in.a == Algo::nvls && in.op != CollectiveOp::allreduce && v.nvls_ag_rs_ppn_bw) {
    // 2.27: AllGather/ReduceScatter move (ppn-1)/ppn of the data through the switch.
    const double ppn = in.sys.ppn;
    bw = std::min(in.g.bw_intra * (ppn - 1) / ppn, in.g.bw_inter * 0.9);
  }
  if (in.a == Algo::nvls_tree)
    bw = std::min(in.g.bw_intra, in.sys.nodes <= 2 ? in.g.bw_inter : in.g.bw_inter / 2);
  double bus = nch * bw;
  const bool multi_or_reduce = in.sys.nodes > 1 || in.op == CollectiveOp::allreduce || in.op == CollectiveOp::reduce;
  const double ll_share = v.ring_ll_half ? 0.5 : multi_or_reduce ? 0.25 : 1.0 / 3.0;
  if (in.a == Algo::ring && in.p == Proto::ll) bus = std::min(in.ll_max, bus * ll_share);
  const double ll128_share = v.ring_ll128_ppn1_discount && in.sys.ppn < 2 ? 0.7 : 0.92;
  if (in.a == Algo::ring && in.p == Proto::ll128)
    bus = std::min(bus * ll128_share, nch * v.per_ch_max_ring_ll128[in.row][in.n_index]);
  if (in.a == Algo::tree) {
    bus = std::min(bus * .92, nch * v.per_ch_max_tree[in.row][in.n_index]);
    if (in.p == Proto::ll) bus = std::min(bus / 3.8, in.ll_max);
    if (in.p == Proto::ll128)
      bus = std::min(bus * (in.sys.nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), nch * v.per_ch_max_tree_ll128[in.row][in.n_index]);
  }
  return bus;
}

double bus_bw_head(const BwInputs& in, const VersionConstants& v) {
  const double nch = in.g.channels;
  const double ppn = in.sys.ppn;
  const bool collnet = in.a == Algo::collnet_direct || in.a == Algo::collnet_chain;
  const bool nvls = in.a == Algo::nvls || in.a == Algo::nvls_tree;
  double bw = (in.sys.nodes <= 2 || collnet) ? in.g.bw_intra : in.g.bw_inter;
  if (nvls) {
    const int nv = in.row >= 3 ? 1 : 0;   // Hopper row 0, Blackwell row 1
    const double factor = in.op == CollectiveOp::allreduce ? 2.0 : (ppn - 1) / ppn;
    bw = std::min(in.g.bw_intra * v.nvls_efficiency[nv] * (nch - 1) / nch * factor,
                  in.g.bw_inter * (in.a == Algo::nvls_tree && in.sys.nodes <= 2 ? 2.0 : 1.0));
    if (in.a == Algo::nvls_tree) bw = std::min(bw, v.per_ch_max_nvls_tree[nv][in.n_index]);
  }
  double bus = nch * bw;
  if (in.a == Algo::ring && in.p == Proto::ll) bus = std::min(in.ll_max, 0.5 * bus);
  if (in.a == Algo::ring && in.p == Proto::ll128)
    bus = std::min(bus * 0.92, nch * v.per_ch_max_ring_ll128[in.row][in.n_index]);
  if (in.a == Algo::tree) {
    bus = std::min(bus * 0.92, nch * v.per_ch_max_tree[in.row][in.n_index]);
    if (in.p == Proto::ll) bus = std::min(bus / 3.8, in.ll_max);
    if (in.p == Proto::ll128)
      bus = std::min(bus * (in.sys.nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0),
                     nch * v.per_ch_max_tree_ll128[in.row][in.n_index]);
  }
  return bus;
}

Estimate estimate(CollectiveOp op, double bytes, const NcclSystem& sys, const Graphs& graphs, Algo a, Proto p,
                  int forced_channels, const VersionConstants& v) {
  Estimate e;
  e.algo = a;
  e.proto = p;
  e.why_disabled = disabled_reason(op, sys, a, p, v);
  if (!e.why_disabled.empty()) return e;

  const int n = sys.ranks;
  const int nodes = sys.nodes;
  const double ppn = sys.ppn;
  const int row = arch_row(sys.sm);
  const int n_index = nodes <= 2 ? nodes - 1 : 2;
  const double ll_max = v.ll_max_bw[nodes == 1 ? row : (sys.amd_cpu ? 1 : 0)][n_index];
  const bool nvls = a == Algo::nvls || a == Algo::nvls_tree;
  const Graph& g = nvls ? graphs.nvls : a == Algo::ring ? graphs.ring : graphs.tree;
  if (g.channels == 0) {
    e.why_disabled = "no graph";
    return e;
  }
  e.channels = g.channels;
  const double nch = g.channels;

  const BwInputs in{op, a, p, sys, g, ll_max, row, n_index};
  // 2.4-2.16 share v2.7's CollNet model and algorithm-bandwidth conversion; the latency
  // terms that changed between releases are VersionConstants switches.
  const bool old = v.era == Era::v2_4 || v.era == Era::v2_7 || v.era == Era::v2_8;
  double bus = v.era == Era::v2_8 ? bus_bw_v2_8(in, v)
               : old              ? bus_bw_v2_7(in, v)
               : v.era == Era::v2_20 ? bus_bw_v2_20(in, v)
                                     : bus_bw_head(in, v);
  const bool ag_rs = op == CollectiveOp::allgather || op == CollectiveOp::reduce_scatter;
  if (a == Algo::collnet_direct && !old) {
    if (ag_rs) {
      bus = ppn * std::min(g.bw_intra, 0.9 * g.bw_inter);
    } else {
      double f = ppn / nch;
      f -= (f - 1) / 2;
      bus /= f;
      if (sys.sm >= 90) bus *= 0.85;
    }
  }
  e.bus_bw = bus;
  double alg = bus;
  if (a == Algo::ring) {
    alg *= static_cast<double>(n) / op_steps(op, n);
  } else if (nvls && v.nvls_ratio > 0) {
    // 2.17-2.27: a fixed ratio (2.23+ keeps AllGather/ReduceScatter at busBw).
    if (!ag_rs || !v.ag_rs_ratio_ring_only) alg *= v.nvls_ratio;
  } else if (nvls) {
    if (!ag_rs) alg *= static_cast<double>(n) / op_steps(op, n);
  } else if (!ag_rs || old) {
    alg *= 0.5;
  }

  // Latency (tuning.cc), us.
  const int intra_row = sys.intra == IntraPath::nvlink ? 0 : 1;
  double intra_lat = v.hw_lat[intra_row][ai(a)][pi(p)];
  // One GPU per node exposes the network latency fully: 2.23+ price it by the Tree NET row.
  const Algo net_row = v.ppn1_tree_net_latency && sys.ppn == 1 ? Algo::tree : a;
  double inter_lat = v.hw_lat[2][ai(net_row)][pi(p)];
  // 2.7-2.17 charge intra-node LL hops x1.8 across nodes (2.18 put the net overhead instead).
  if (!v.ring_hops_all_net && !v.net_overhead && nodes > 1 && p == Proto::ll) intra_lat *= 1.8;
  double lat = v.base_lat[ai(a)][pi(p)];
  const int l2nodes = log2i(nodes);
  switch (a) {
    case Algo::ring:
      if (op == CollectiveOp::broadcast || op == CollectiveOp::reduce) {
        lat += v.hw_lat[nodes == 1 ? intra_row : 2][kRing][pi(p)];   // sameChannels rings
      } else {
        const int nsteps = op_steps(op, n);
        // AllReduce inter-node steps: 2 nNodes in 2.12-2.22, else 2 (nNodes-1); 2.5/2.6 price
        // every step of a multi-node ring at hwLat[NET].
        const int ar_inter = v.ring_ar_inter_2n ? 2 * nodes : 2 * (nodes - 1);
        const int ninter = nodes == 1           ? 0
                           : v.ring_hops_all_net ? nsteps
                           : op == CollectiveOp::allreduce ? ar_inter
                                                           : nodes - 1;
        double overhead = 0;   // getNetOverhead (2.18+)
        if (nodes > 1 && v.net_overhead) overhead = (sys.amd_cpu ? 2.0 : 1.0) * (p == Proto::simple ? 3.0 : 1.0);
        intra_lat = std::max(intra_lat, overhead);
        lat += (nsteps - ninter) * intra_lat + ninter * inter_lat;
      }
      break;
    case Algo::tree: lat += 2 * ((ppn - 1) * intra_lat + l2nodes * inter_lat); break;
    case Algo::collnet_direct:
      lat += old ? 2 * (ppn - 1) * intra_lat + inter_lat
                 : 2 * (std::min(1.0, ppn - 1) * intra_lat + (ppn - 1) * 0.4) + inter_lat;
      break;
    case Algo::collnet_chain: lat += 2 * (ppn - 1) * intra_lat + inter_lat; break;
    // 2.17/2.18 keep NVLS's latency in baseLat (40, 23 us), 2.19+ in hwLat (baseLat 0).
    case Algo::nvls: lat += intra_lat + (nodes > 1 ? inter_lat : 0); break;
    case Algo::nvls_tree: lat += intra_lat + 2 * l2nodes * inter_lat; break;
  }

  // ncclTopoGetAlgoTime (enqueue.cc / tuning.cc).
  if (a == Algo::tree) {
    const int log_size = log2i(std::max(1.0, std::floor(bytes / 64)));
    if (log_size < v.tree_correction_len) alg *= v.tree_correction[pi(p)][log_size];
  }
  if (forced_channels > 0) {
    alg = alg / nch * forced_channels;
    e.channels = forced_channels;
  }
  if (a == Algo::ring && p == Proto::simple && nodes > 1 && op == CollectiveOp::allreduce) {
    // "Plateau effect of ring" (2.7+): from nRanks/16 x 64 KiB, or from 64 B per channel and
    // rank (2.18+), latency x the arch's factor (1.9, 1.5 or 1.4).
    const bool plateau = v.plateau_per_channel ? bytes / (nch * n) >= 64 : bytes >= n / 16.0 * 65536;
    if (plateau) lat *= v.ring_plateau[row];
  }
  e.latency_us = lat;
  e.alg_bw = alg;
  e.enabled = alg > 0;
  if (!e.enabled) e.why_disabled = "zero bandwidth";
  e.time_us = lat + bytes / (1000.0 * alg);
  return e;
}

/// NCCL runs alltoall and sendrecv as grouped p2p: one Simple transfer to each peer over
/// the p2p channels, no tuning. Bandwidth: the ring graph's total per GPU (the same NVLink
/// or NIC the peers share); latency: one Simple ring hop (baseLat + hwLat, as a
/// sameChannels broadcast).
Estimate p2p_estimate(CollectiveOp op, double bytes, const NcclSystem& sys, const Graphs& graphs,
                      const VersionConstants& v) {
  Estimate e;
  e.algo = Algo::ring;
  e.proto = Proto::simple;
  e.enabled = sys.ranks >= 2;
  e.channels = graphs.ring.channels;
  const double bw = (sys.nodes <= 2 ? graphs.ring.bw_intra : graphs.ring.bw_inter) * graphs.ring.channels;
  e.bus_bw = bw;
  // Per rank, alltoall sends (n-1)/n of its buffer to its peers; sendrecv all of it.
  e.alg_bw = op == CollectiveOp::alltoall ? bw * sys.ranks / std::max(1, sys.ranks - 1) : bw;
  e.latency_us = v.base_lat[kRing][pi(Proto::simple)] +
                 v.hw_lat[sys.nodes == 1 ? (sys.intra == IntraPath::nvlink ? 0 : 1) : 2][kRing][pi(Proto::simple)];
  e.time_us = e.latency_us + bytes / (1000.0 * e.alg_bw);
  return e;
}

/// NCCL 2.4 init.cc ncclTreeThreshold: AllReduce uses the tree up to
/// ringbw*treebw/(ringbw-treebw)*(ringlat-treelat) bytes (never on one node); ringbw is
/// 5000 MB/s per channel with NVLink, else 5000; treebw 3/4 of it (x2 on 2 nodes), 2/3
/// without NVLink; ringlat 6 us per rank hop, treelat 15 us per log2(nodes) + 4 us per
/// local hop.
Algo v2_4_algo(CollectiveOp op, double bytes, const NcclSystem& sys, const Graphs& graphs) {
  if (op != CollectiveOp::allreduce || sys.nodes < 2) return Algo::ring;
  const bool nvlink = sys.intra == IntraPath::nvlink;
  const double ringbw = nvlink ? 5000.0 * graphs.ring.channels : 5000.0;
  double treebw = nvlink ? ringbw * 3 / 4 : ringbw * 2 / 3;
  if (nvlink && sys.nodes == 2) treebw *= 2;
  const double ringlat = 6.0 * (sys.ranks - 1);
  const double treelat = 15.0 * log2i(sys.nodes) + 4.0 * (sys.ranks / sys.nodes - 1);
  if (ringlat <= treelat) return Algo::ring;
  if (treebw > ringbw) return Algo::tree;
  return bytes <= ringbw * treebw / (ringbw - treebw) * (ringlat - treelat) ? Algo::tree : Algo::ring;
}

/// NCCL 2.4 enqueue.cc getKernelInfo: LL up to nc x nt x nchunksPerLoop x perThreadThreshold
/// bytes, with nt doubled from NCCL_LL_MIN_NTHREADS 64 to NCCL_LL_MAX_NTHREADS 256 while a
/// thread has more than NCCL_LL_CHANNEL_THRESHOLD 8 B, nc = bytes / (nt x nchunks x 8)
/// capped by the channels, perThreadThreshold NCCL_THREAD_THRESHOLD 64 (x4 for trees);
/// nchunksPerLoop is nRanks for ring AllReduce/AllGather/ReduceScatter, else 1 (2.4 core.h).
Proto v2_4_proto(CollectiveOp op, double bytes, const NcclSystem& sys, const Graphs& graphs, Algo algo) {
  const bool ring_pattern = algo == Algo::ring && (op == CollectiveOp::allreduce || op == CollectiveOp::allgather ||
                                                   op == CollectiveOp::reduce_scatter);
  const double nchunks = ring_pattern ? sys.ranks : 1;
  double nt = 64;
  while (std::ceil(bytes / (nt * nchunks)) > 8 && nt * 2 <= 256) nt *= 2;
  const double nc = std::clamp(std::ceil(bytes / (nt * nchunks * 8)), 1.0, std::max(1.0, 1.0 * graphs.ring.channels));
  const double threshold = nc * nt * nchunks * 64 * (algo == Algo::tree ? 4 : 1);
  return bytes <= threshold ? Proto::ll : Proto::simple;
}

}  // namespace

Tuning nccl_tune(CollectiveOp op, double bytes, const NcclSystem& sys, const Forced& forced) {
  return nccl_tune(op, bytes, sys, forced, head_version());
}

Tuning nccl_tune(CollectiveOp op, double bytes, const NcclSystem& sys, const Forced& forced,
                 const VersionConstants& version) {
  Tuning t;
  t.graphs = search_graphs(sys, version.nvls_max_heads);
  if (op == CollectiveOp::alltoall || op == CollectiveOp::sendrecv) {
    t.choice = p2p_estimate(op, bytes, sys, t.graphs, version);
    if (forced.channels > 0) {
      t.choice.alg_bw = t.choice.alg_bw / t.choice.channels * forced.channels;
      t.choice.channels = forced.channels;
      t.choice.time_us = t.choice.latency_us + bytes / (1000.0 * t.choice.alg_bw);
    }
    t.estimates.push_back(t.choice);
    return t;
  }
  bool found = false;
  for (int a = 0; a < kAlgos; ++a)
    for (int p = 0; p < kProtos; ++p) {
      const Algo algo = static_cast<Algo>(a);
      const Proto proto = static_cast<Proto>(p);
      if (!implements(op, algo, proto, version)) continue;
      Estimate e = estimate(op, bytes, sys, t.graphs, algo, proto, forced.channels, version);
      if (e.enabled && !forced.has_proto && !sys.plugin_protocols[p]) {
        e.enabled = false;
        e.why_disabled = "the net plugin sets NCCL_PROTO without it (fabric.nccl_protocols)";
      }
      t.estimates.push_back(e);
      if (!e.enabled) continue;
      if (forced.has_algo && forced.algo != algo) continue;
      if (forced.has_proto && forced.proto != proto) continue;
      if (version.era == Era::v2_4 && !(forced.has_algo && forced.has_proto)) {
        // NCCL 2.4 has no argmin: its thresholds pick the pair (forced parts stay forced).
        const Algo want_algo = forced.has_algo ? forced.algo : v2_4_algo(op, bytes, sys, t.graphs);
        const Proto want_proto = forced.has_proto ? forced.proto : v2_4_proto(op, bytes, sys, t.graphs, want_algo);
        if (algo != want_algo || proto != want_proto) continue;
      }
      if (!found || e.time_us < t.choice.time_us) {
        t.choice = e;
        found = true;
      }
    }
  if (!found) {
    std::string why;
    for (const Estimate& e : t.estimates)
      if ((!forced.has_algo || e.algo == forced.algo) && (!forced.has_proto || e.proto == forced.proto))
        why += std::string(why.empty() ? "" : "; ") + to_string(e.algo) + "/" + to_string(e.proto) + ": " +
               e.why_disabled;
    if (why.empty()) why = "NCCL does not implement that combination for " + std::string(to_string(op));
    throw ConfigError("--algo nccl", "no enabled NCCL algorithm/protocol: " + why,
                      "drop or change the algo=/proto= options");
  }
  return t;
}

namespace {

// Buffers and steps (src/include/device.h, collectives.h, 2.19-2.30): NCCL_STEPS 8; Simple
// buffer 4 MiB; LL buffer NCCL_LL_LINES_PER_THREAD 8 x NCCL_LL_MAX_NTHREADS 512 x 8 steps x
// 16 B lines, half of it data; LL128 buffer NCCL_LL128_ELEMS_PER_THREAD 120 x
// NCCL_LL128_MAX_NTHREADS 640 x 8 steps x 8 B, 15 of every 16 elements data.
constexpr double kSimpleStep = 4.0 * 1024 * 1024 / 8;
constexpr double kLLChunk = 8.0 * 512 * 8 * 16 / 8 / 2;
constexpr double kLL128Chunk = 120.0 * 640 * 8 * 8 / 8 / 16 * 15;
// transport/nvls.cc NCCL_NVLS_CHUNKSIZE 128 KiB.
constexpr double kNvlsChunk = 128.0 * 1024;
// tuning.cc maxThreads (NCCL_LL_MAX_NTHREADS, NCCL_LL128_MAX_NTHREADS,
// NCCL_SIMPLE_MAX_NTHREADS) and threadThresholds (NCCL_LL_THREAD_THRESHOLD,
// NCCL_LL128_THREAD_THRESHOLD, NCCL_SIMPLE_THREAD_THRESHOLD).
constexpr int kMaxThreads[kProtos] = {512, 640, 512};
constexpr int kThreadThreshold[kProtos] = {8, 8, 64};

}  // namespace

int launch_channels(Algo algo, Proto proto, double bytes, int ranks, int graph_channels, int nvls_channels) {
  if (algo == Algo::nvls || algo == Algo::nvls_tree) return nvls_channels;
  if (algo != Algo::ring && algo != Algo::tree) return graph_channels;
  const double threshold =
      kThreadThreshold[pi(proto)] * (algo == Algo::ring && proto == Proto::ll ? std::max(1, ranks) : 1);
  int nc = std::max(1, graph_channels);
  while (nc >= 2 && bytes < nc * kMaxThreads[pi(proto)] * threshold) --nc;
  return nc;
}

int loop_count(CollectiveOp op, Algo algo, Proto proto, double bytes, const NcclSystem& sys, int channels) {
  const double nch = std::max(1, channels);
  const bool chain = op == CollectiveOp::broadcast || op == CollectiveOp::reduce;
  double chunk = proto == Proto::ll ? kLLChunk : proto == Proto::ll128 ? kLL128Chunk : kSimpleStep;
  double per_loop = 1;   // NCCL's nchunksPerLoop
  switch (algo) {
    case Algo::ring:
      // Ring Simple moves chunkSteps = 4 steps per chunk (ALLREDUCE/ALLGATHER/REDUCESCATTER
      // _CHUNKSTEPS = NCCL_STEPS / 2), broadcast and reduce one (BROADCAST/REDUCE_CHUNKSTEPS).
      if (proto == Proto::simple && !chain) chunk *= 4;
      if (!chain) per_loop = sys.ranks;
      break;
    case Algo::tree:
      if (proto == Proto::simple && op == CollectiveOp::allreduce) {
        // enqueue.cc (every release since 2.4): TreeUpDown halves the 512 KiB step until each
        // channel has 8x, 4x, 1x the tree's depth in chunks, down to 128, 64, 32 KiB; the depth
        // is the node's chain plus the node tree (channel->tree.depth = nRanks/nNodes - 1 +
        // log2i(nNodes)).
        const double depth = std::max(1, sys.ppn) - 1 + log2i(std::max(1, sys.nodes));
        while (std::floor(bytes / (nch * chunk)) < depth * 8 && chunk > 131072) chunk /= 2;
        while (std::floor(bytes / (nch * chunk)) < depth * 4 && chunk > 65536) chunk /= 2;
        while (std::floor(bytes / (nch * chunk)) < depth && chunk > 32768) chunk /= 2;
      }
      if (proto == Proto::ll128) {
        const double ppn = std::max(1, sys.ppn);
        const double nsteps = 1 + log2i(sys.nodes) + 0.1 * ppn;
        while (std::floor(bytes / (nch * chunk)) < nsteps * 64 / ppn && chunk > 131072) chunk /= 2;
        while (std::floor(bytes / (nch * chunk)) < nsteps * 16 / ppn && chunk > 32768) chunk /= 2;
      }
      break;
    case Algo::nvls: {
      per_loop = std::max(1, sys.ppn);   // nvls.nHeads: one head per local GPU
      const double ops = nch * per_loop;
      chunk = kNvlsChunk;
      if (bytes < 64 * ops * chunk && chunk > 65536) chunk = 65536;
      if (bytes < 8 * ops * chunk && chunk > 32768) chunk = 32768;
      if (bytes < 2 * ops * chunk && chunk > 16384) chunk = 16384;
      break;
    }
    case Algo::nvls_tree: {
      per_loop = std::max(1, sys.ppn);
      const double ops = nch * per_loop;
      chunk = sys.nodes >= 4 ? 65536 : kNvlsChunk;   // NCCL_NVLSTREE_MAX_CHUNKSIZE default
      if (bytes < 4 * ops * chunk && chunk > 65536) chunk = 65536;
      if (bytes < ops * chunk && chunk > 32768) chunk = 32768;
      break;
    }
    case Algo::collnet_direct: per_loop = std::max(1, sys.ppn); break;
    case Algo::collnet_chain: chunk = std::min(256.0 * 1024, chunk); break;
  }
  return static_cast<int>(std::max(1.0, std::ceil(bytes / (nch * per_loop * chunk))));
}

}  // namespace stepsim::models::nccl
