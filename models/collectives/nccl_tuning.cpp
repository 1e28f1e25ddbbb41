/// @file NCCL's tuning model (src/graph/tuning.cc, search.cc, topo.h), see nccl_tuning.hpp.
/// Constants are NCCL HEAD's (2.30.7, papers.md §4) unless a comment names another version.
#include "models/collectives/nccl_tuning.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "platforms/config_error.hpp"

namespace stepsim::models::nccl {
namespace {

constexpr int kRing = static_cast<int>(Algo::ring);
constexpr double kInf = std::numeric_limits<double>::infinity();

int ai(Algo a) { return static_cast<int>(a); }
int pi(Proto p) { return static_cast<int>(p); }

// tuning.cc baseLat[algo][proto] (us): Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree.
constexpr double kBaseLat[kAlgos][kProtos] = {
    {6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}};

// tuning.cc hwLat[NVLINK|PCI|NET][algo][proto] (us).
constexpr double kHwLat[3][kAlgos][kProtos] = {
    {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 25}, {0, 0, 25}},
    {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0}},
    {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 20.9}}};

// tuning.cc llMaxBws[Volta, Ampere, Hopper, Blackwell][N1, N2, N4+]: single node indexes the
// row by GPU arch, multi-node by CPU vendor (row 0 Intel, row 1 AMD).
constexpr double kLlMaxBw[4][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
constexpr double kPerChMaxRingLL128Bw[4] = {20.0, 20.0, 36.7, 40.0};
constexpr double kPerChMaxTreeLL128Bw[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
constexpr double kPerChMaxTreeBw[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
// perChMaxNVLSTreeBws (Hopper, Blackwell; N1 unused) and nvlsEfficiency.
constexpr double kPerChMaxNvlsTreeBw[2][3] = {{0, 57.7, 45.5}, {0, 96.0, 80.0}};
constexpr double kNvlsEfficiency[2] = {0.85, 0.74};

// tuning.cc treeCorrectionFactor[proto][log2(bytes / 64)], 64 B .. 256 MiB (2.19-2.30).
constexpr double kTreeCorrection[kProtos][23] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};

// search.cc speed arrays (GB/s per channel), latest: intra-node graphs and graphs with a NIC.
const std::vector<double> kSpeedIntra = {40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3};
const std::vector<double> kSpeedInter = {48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4, 1.2, 0.24, 0.12};
const std::vector<double> kSpeedIntraSm90 = {60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3};
const std::vector<double> kSpeedInterSm90 = {48, 45, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12};
const std::vector<double> kSpeedIntraSm100 = {90, 80, 70, 60, 50, 45, 40, 30, 24, 20, 19, 18};
const std::vector<double> kSpeedInterSm100 = {96, 86, 80, 48, 45.1, 42, 40, 30, 24, 22, 20, 17.5,
                                              15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12};

// MAXCHANNELS / 2: the most channels a ring or tree search may return (2.19: MAXCHANNELS 32).
constexpr int kMaxGraphChannels = 16;

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

const std::vector<double>& speeds(int sm, bool inter) {
  if (sm >= 100) return inter ? kSpeedInterSm100 : kSpeedIntraSm100;
  if (sm >= 90) return inter ? kSpeedInterSm90 : kSpeedIntraSm90;
  return inter ? kSpeedInter : kSpeedIntra;
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
/// channel crosses each GPU once (intra_bw) and, off-node, one NIC (nic_bw).
Graph search_ring(const NcclSystem& sys) {
  const bool net = sys.nodes > 1;
  Graph best;
  for (double s : speeds(sys.sm, net)) {
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

double hw_latency(int path, Algo algo, Proto proto) { return kHwLat[path][ai(algo)][pi(proto)]; }
double base_latency(Algo algo, Proto proto) { return kBaseLat[ai(algo)][pi(proto)]; }

Graphs search_graphs(const NcclSystem& sys) {
  Graphs g;
  g.ring = search_ring(sys);
  g.tree = g.ring;
  if (sys.nodes > 1) {
    // search.cc pass 2 raises a tree's bwIntra up to twice its bwInter while every channel
    // still fits through the GPU (2 nodes and CollNet use bwIntra).
    for (double s : speeds(sys.sm, true))
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
    for (double s : speeds(sys.sm, net)) {
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

/// Whether NCCL implements `op` with `a` at all (tuning.cc skips the others) and `p` with `a`.
bool implements(CollectiveOp op, Algo a, Proto p) {
  const bool simple_only = a != Algo::ring && a != Algo::tree;
  if (simple_only && p != Proto::simple) return false;
  switch (op) {
    case CollectiveOp::allreduce: return true;
    case CollectiveOp::allgather:
    case CollectiveOp::reduce_scatter: return a == Algo::ring || a == Algo::nvls || a == Algo::collnet_direct;
    default: return a == Algo::ring;
  }
}

std::string disabled_reason(const NcclSystem& sys, Algo a, Proto p) {
  if (sys.ranks < 2) return "one rank";
  if (p == Proto::ll128) {
    // tuning.cc enables LL128 by default only on NVLink-class intra paths of sm70/80/90/100.
    const bool arch = sys.sm == 70 || sys.sm == 80 || sys.sm == 90 || sys.sm == 100;
    if (!arch) return "LL128 off by default on sm" + std::to_string(sys.sm);
    if (sys.intra != IntraPath::nvlink) return "LL128 off by default without NVLink";
  }
  switch (a) {
    case Algo::nvls:
      if (!sys.nvls) return "no NVLink SHARP (NVSwitch gen3+, sm90+)";
      if (sys.nodes > 1 && !sys.collnet) return "multi-node NVLS needs CollNet";
      if (sys.ppn < 2) return "NVLS needs 2+ GPUs per node";
      return "";
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

Estimate estimate(CollectiveOp op, double bytes, const NcclSystem& sys, const Graphs& graphs, Algo a, Proto p,
                  int forced_channels) {
  Estimate e;
  e.algo = a;
  e.proto = p;
  e.why_disabled = disabled_reason(sys, a, p);
  if (!e.why_disabled.empty()) return e;

  const int n = sys.ranks;
  const int nodes = sys.nodes;
  const double ppn = sys.ppn;
  const int row = arch_row(sys.sm);
  const int n_index = nodes <= 2 ? nodes - 1 : 2;
  const double ll_max = kLlMaxBw[nodes == 1 ? row : (sys.amd_cpu ? 1 : 0)][n_index];
  const bool collnet = a == Algo::collnet_direct || a == Algo::collnet_chain;
  const bool nvls = a == Algo::nvls || a == Algo::nvls_tree;
  const Graph& g = nvls ? graphs.nvls : a == Algo::ring ? graphs.ring : graphs.tree;
  if (g.channels == 0) {
    e.why_disabled = "no graph";
    return e;
  }
  e.channels = g.channels;
  const double nch = g.channels;

  // Bandwidth (tuning.cc ncclTopoTuneModel "Various model refinements").
  double bw = (nodes <= 2 || collnet) ? g.bw_intra : g.bw_inter;
  if (nvls) {
    const int nv = row >= 3 ? 1 : 0;   // Hopper row 0, Blackwell row 1
    const double factor = op == CollectiveOp::allreduce ? 2.0 : (ppn - 1) / ppn;
    bw = std::min(g.bw_intra * kNvlsEfficiency[nv] * (nch - 1) / nch * factor,
                  g.bw_inter * (a == Algo::nvls_tree && nodes <= 2 ? 2.0 : 1.0));
    if (a == Algo::nvls_tree) bw = std::min(bw, kPerChMaxNvlsTreeBw[nv][n_index]);
  }
  double bus = nch * bw;
  if (a == Algo::ring && p == Proto::ll) bus = std::min(ll_max, 0.5 * bus);
  if (a == Algo::ring && p == Proto::ll128)
    bus = std::min(bus * (ppn < 2 ? 0.7 : 0.92), nch * kPerChMaxRingLL128Bw[row]);
  if (a == Algo::tree) {
    bus = std::min(bus * 0.92, nch * kPerChMaxTreeBw[row][n_index]);
    if (p == Proto::ll) bus = std::min(bus / 3.8, ll_max);
    if (p == Proto::ll128)
      bus = std::min(bus * (nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), nch * kPerChMaxTreeLL128Bw[row][n_index]);
  }
  const bool ag_rs = op == CollectiveOp::allgather || op == CollectiveOp::reduce_scatter;
  if (a == Algo::collnet_direct) {
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
  if (a == Algo::ring || nvls) {
    if (!(nvls && ag_rs)) alg *= static_cast<double>(n) / op_steps(op, n);
  } else if (!ag_rs) {
    alg *= 0.5;
  }

  // Latency (tuning.cc), us.
  const int intra_row = sys.intra == IntraPath::nvlink ? 0 : 1;
  double intra_lat = kHwLat[intra_row][ai(a)][pi(p)];
  double inter_lat = kHwLat[2][ai(a)][pi(p)];
  double lat = kBaseLat[ai(a)][pi(p)];
  const int l2nodes = log2i(nodes);
  switch (a) {
    case Algo::ring:
      if (op == CollectiveOp::broadcast || op == CollectiveOp::reduce) {
        lat += kHwLat[nodes == 1 ? intra_row : 2][kRing][pi(p)];   // sameChannels rings
      } else {
        const int nsteps = op_steps(op, n);
        const int ninter = nodes == 1 ? 0 : op == CollectiveOp::allreduce ? 2 * (nodes - 1) : nodes - 1;
        double overhead = 0;
        if (nodes > 1) overhead = (sys.amd_cpu ? 2.0 : 1.0) * (p == Proto::simple ? 3.0 : 1.0);
        intra_lat = std::max(intra_lat, overhead);
        lat += (nsteps - ninter) * intra_lat + ninter * inter_lat;
      }
      break;
    case Algo::tree: lat += 2 * ((ppn - 1) * intra_lat + l2nodes * inter_lat); break;
    case Algo::collnet_direct:
      lat += 2 * (std::min(1.0, ppn - 1) * intra_lat + (ppn - 1) * 0.4) + inter_lat;
      break;
    case Algo::collnet_chain: lat += 2 * (ppn - 1) * intra_lat + inter_lat; break;
    case Algo::nvls: lat = intra_lat + (nodes > 1 ? inter_lat : 0); break;
    case Algo::nvls_tree: lat += intra_lat + 2 * l2nodes * inter_lat; break;
  }

  // ncclTopoGetAlgoTime (enqueue.cc / tuning.cc).
  if (a == Algo::tree) {
    const int log_size = log2i(std::max(1.0, std::floor(bytes / 64)));
    if (log_size < 23) alg *= kTreeCorrection[pi(p)][log_size];
  }
  if (forced_channels > 0) {
    alg = alg / nch * forced_channels;
    e.channels = forced_channels;
  }
  if (a == Algo::ring && p == Proto::simple && nodes > 1 && op == CollectiveOp::allreduce &&
      bytes / (nch * n) >= 64)
    lat *= sys.sm < 80 ? 1.9 : 1.4;   // "plateau effect of ring"
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
Estimate p2p_estimate(CollectiveOp op, double bytes, const NcclSystem& sys, const Graphs& graphs) {
  Estimate e;
  e.algo = Algo::ring;
  e.proto = Proto::simple;
  e.enabled = sys.ranks >= 2;
  e.channels = graphs.ring.channels;
  const double bw = (sys.nodes <= 2 ? graphs.ring.bw_intra : graphs.ring.bw_inter) * graphs.ring.channels;
  e.bus_bw = bw;
  // Per rank, alltoall sends (n-1)/n of its buffer to its peers; sendrecv all of it.
  e.alg_bw = op == CollectiveOp::alltoall ? bw * sys.ranks / std::max(1, sys.ranks - 1) : bw;
  e.latency_us = kBaseLat[kRing][pi(Proto::simple)] +
                 kHwLat[sys.nodes == 1 ? (sys.intra == IntraPath::nvlink ? 0 : 1) : 2][kRing][pi(Proto::simple)];
  e.time_us = e.latency_us + bytes / (1000.0 * e.alg_bw);
  return e;
}

}  // namespace

Tuning nccl_tune(CollectiveOp op, double bytes, const NcclSystem& sys, const Forced& forced) {
  Tuning t;
  t.graphs = search_graphs(sys);
  if (op == CollectiveOp::alltoall || op == CollectiveOp::sendrecv) {
    t.choice = p2p_estimate(op, bytes, sys, t.graphs);
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
      if (!implements(op, algo, proto)) continue;
      Estimate e = estimate(op, bytes, sys, t.graphs, algo, proto, forced.channels);
      t.estimates.push_back(e);
      if (!e.enabled) continue;
      if (forced.has_algo && forced.algo != algo) continue;
      if (forced.has_proto && forced.proto != proto) continue;
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
// transport/nvls.cc NCCL_NVLS_NCHANNELS 16, NCCL_NVLS_CHUNKSIZE 128 KiB.
constexpr int kNvlsChannels = 16;
constexpr double kNvlsChunk = 128.0 * 1024;
// tuning.cc maxThreads (NCCL_LL_MAX_NTHREADS, NCCL_LL128_MAX_NTHREADS,
// NCCL_SIMPLE_MAX_NTHREADS) and threadThresholds (NCCL_LL_THREAD_THRESHOLD,
// NCCL_LL128_THREAD_THRESHOLD, NCCL_SIMPLE_THREAD_THRESHOLD).
constexpr int kMaxThreads[kProtos] = {512, 640, 512};
constexpr int kThreadThreshold[kProtos] = {8, 8, 64};

}  // namespace

int launch_channels(Algo algo, Proto proto, double bytes, int ranks, int graph_channels) {
  if (algo == Algo::nvls || algo == Algo::nvls_tree) return kNvlsChannels;
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
