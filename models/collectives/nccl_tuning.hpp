#pragma once
/// @file NCCL's tuning model as pure functions: the graphs its topology search would find,
/// and for every (algorithm, protocol) the latency and bandwidth of src/graph/tuning.cc.
///
/// Sources (papers.md §4, read at NCCL HEAD 5067397c = 2.30.7, and src/graph/search.cc,
/// src/graph/topo.h, src/enqueue.cc at 2.19-2.30): every constant below names the NCCL table
/// it copies. Units follow NCCL inside this file: latency in microseconds, bandwidth in
/// GB/s (1e9 B/s); the public results convert to stepsim's seconds and bytes/s.
///
/// Contract: `nccl_tune` is deterministic and depends only on its inputs; it never reads a
/// platform (models/collectives/nccl_topology.hpp derives NcclSystem from one).
#include <array>
#include <string>
#include <vector>

#include "models/schedule.hpp"

namespace stepsim::models::nccl {

/// @brief NCCL's algorithms (order of NCCL_ALGO_*: the tie-break order of its argmin).
enum class Algo { tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree };
/// @brief NCCL's protocols (order of NCCL_PROTO_*).
enum class Proto { ll, ll128, simple };
constexpr int kAlgos = 6;
constexpr int kProtos = 3;

const char* to_string(Algo algo);
const char* to_string(Proto proto);
/// @brief Data bytes per wire byte of a protocol (device.h): LL carries 8 B of data per
/// 16 B line, LL128 120 B per 128 B line, Simple all.
double wire_efficiency(Proto proto);
/// @brief Parses ring|tree|nvls|nvls_tree|nvlstree|collnet|collnet_direct|collnet_chain
/// (case-insensitive); throws ConfigError naming `algo=` otherwise.
Algo parse_algo(const std::string& text);
/// @brief Parses LL|LL128|Simple (case-insensitive); throws ConfigError naming `proto=`.
Proto parse_proto(const std::string& text);

/// @brief NCCL's path class of the intra-node graph (topo.h PATH_NVL... collapsed to the
/// three hwLat rows it selects).
enum class IntraPath { nvlink, pcie };

/// @brief What NCCL's topology detection would see, in NCCL's own figures.
struct NcclSystem {
  int sm = 90;                  ///< compute capability x10 (60, 70, 80, 90, 100)
  int ranks = 1;
  int nodes = 1;
  int ppn = 1;                  ///< ranks per node (NCCL assumes equal; we use the max)
  IntraPath intra = IntraPath::nvlink;
  bool nvswitch = false;        ///< GPUs reach each other through an NVSwitch
  double intra_bw = 0;          ///< GB/s one GPU can push into the intra-node graph
                                ///< (NCCL's per-NVLink figure x links, or its PCIe figure)
  double nic_bw = 0;            ///< GB/s per NIC (NCCL's NET bandwidth = port speed / 8)
  int nics_per_node = 0;
  bool nvls = false;            ///< NVSwitch with NVLink SHARP (NCCL nvlsSupport)
  bool collnet = false;         ///< SHARP in the fabric (NCCL collNetSupport)
  bool amd_cpu = false;         ///< NCCL's CPU vendor: AMD rows of llMaxBws, 2 us net overhead
  int mesh_ring_channels = 0;   ///< rings NCCL's search found on an NVLink mesh (0: none,
                                ///< the ring graph follows from intra_bw)
  double mesh_ring_bw = 0;      ///< GB/s per ring of that search
  /// Protocols the net plugin leaves enabled (its NCCL_PROTO, Fabric::nccl_protocols; a
  /// forced proto= overrides it as a user's NCCL_PROTO would). Indexed by Proto.
  bool plugin_protocols[kProtos] = {true, true, true};
};

/// @brief One graph as ncclTopoCompute leaves it (search.cc): channels and per-channel GB/s.
struct Graph {
  int channels = 0;
  double bw_intra = 0;
  double bw_inter = 0;
};

/// @brief The graphs for ring, tree, NVLS (and CollNet, which shares the tree's).
struct Graphs {
  Graph ring;
  Graph tree;
  Graph nvls;
};

/// @brief Emulates ncclTopoCompute's speed search: the speed (from the per-arch speed
/// arrays) and channel count with the largest total, ties to the higher speed, then
/// ncclTopoDupChannels; NVLS graphs use one channel per local GPU.
/// `max_nvls_heads` caps the NVLS graph's heads (NCCL_MAX_NVLS_ARITY from 2.25; 0: none).
Graphs search_graphs(const NcclSystem& sys, int max_nvls_heads = 0);

/// @brief NCCL's estimate for one (algorithm, protocol).
struct Estimate {
  Algo algo = Algo::ring;
  Proto proto = Proto::simple;
  bool enabled = false;
  std::string why_disabled;
  int channels = 0;
  double latency_us = 0;        ///< comm->latencies (x the ring plateau factor where applied)
  double bus_bw = 0;            ///< GB/s before the algorithm-bandwidth conversion
  double alg_bw = 0;            ///< GB/s comm->bandwidths (x treeCorrectionFactor)
  double time_us = 0;           ///< latency + bytes / (1000 alg_bw)
};

/// @brief Forced choices (options.extra algo=/proto=, options.channels).
struct Forced {
  bool has_algo = false;
  Algo algo = Algo::ring;
  bool has_proto = false;
  Proto proto = Proto::simple;
  int channels = 0;
};

struct Tuning {
  Graphs graphs;
  std::vector<Estimate> estimates;   ///< every (algo, proto), NCCL's order
  Estimate choice;
};

/// @brief Every (algo, proto) estimate for `op` on `bytes` (nccl-tests size) and NCCL's
/// argmin among the enabled ones (strictly smaller wins, NCCL's iteration order), within
/// the forced subset. Throws ConfigError when nothing is enabled for a forced choice.
/// alltoall and sendrecv are p2p in NCCL: they get the ring Simple estimate of p2p
/// (one step to each peer) and are never tuned.
Tuning nccl_tune(CollectiveOp op, double bytes, const NcclSystem& sys, const Forced& forced = {});

struct VersionConstants;   // models/collectives/nccl_versions.hpp
/// @brief `nccl_tune` with the constants and selection rules of one NCCL release (the
/// overload above uses HEAD). For 2.4 the choice follows its tree/LL thresholds, not argmin.
Tuning nccl_tune(CollectiveOp op, double bytes, const NcclSystem& sys, const Forced& forced,
                 const VersionConstants& version);

/// @brief Channels NCCL launches for the chosen (algo, proto) on `bytes` (enqueue.cc
/// topoGetAlgoInfo, 2.19-2.30): rings and trees drop channels while
/// bytes < channels x maxThreads x threadThreshold (tuning.cc: maxThreads LL 512, LL128 640,
/// Simple 512; threadThreshold LL 8 x nRanks for rings else 8, LL128 8, Simple 64);
/// NVLS and NVLSTree use `nvls_channels` (NCCL_NVLS_NCHANNELS of the release, see
/// nccl_versions.hpp nvls_channels); CollNet keeps the graph's.
int launch_channels(Algo algo, Proto proto, double bytes, int ranks, int graph_channels, int nvls_channels);

/// @brief NCCL's loop count per channel (enqueue.cc calcCollChunking, 2.19-2.30):
/// ceil(bytes / (channels x chunksPerLoop x chunkSize)), with the Simple step of 512 KiB
/// (4 MiB buffer / NCCL_STEPS 8), LL 32 KiB of data per step, LL128 576000 B, the NVLS
/// chunk (128 KiB, NCCL_NVLS_CHUNKSIZE) shrunk for small messages as calcCollChunking
/// does, and the tree LL128 chunk halving. Every loop is one pipeline chunk of the
/// lowered schedule, so the engines charge NCCL's pipeline fill.
int loop_count(CollectiveOp op, Algo algo, Proto proto, double bytes, const NcclSystem& sys, int channels);

/// @brief MAXCHANNELS / 2: the most channels a ring or tree search may return (2.19+:
/// MAXCHANNELS 32).
constexpr int kMaxGraphChannels = 16;
/// @brief search.cc's per-channel speed array (GB/s, descending) for an SM version:
/// speedArrayIntra for intra-node graphs, speedArrayInter for graphs with a NIC.
const std::vector<double>& search_speeds(int sm, bool inter);

/// @brief NCCL's per-NVLink bandwidth (topo.h ncclTopoNVLinkBw) for an SM version.
double nvlink_bw_per_link(int sm);
/// @brief NCCL's PCIe figure (topo.h): width * (60|120|240|480 for Gen3..6) / 80 GB/s.
double pcie_bw(int gen, int width);

/// @brief hwLat[path][algo][proto] of tuning.cc at HEAD; path 0 NVLink, 1 PCI, 2 NET
/// (other releases: VersionConstants::hw_lat).
double hw_latency(int path, Algo algo, Proto proto);
/// @brief baseLat[algo][proto] of tuning.cc at HEAD.
double base_latency(Algo algo, Proto proto);

}  // namespace stepsim::models::nccl
