#pragma once
/// @file The platform: GPUs, switches, NICs and the links between them, built from a node
/// template replicated over `nodes` servers and joined by a fabric.
///
/// Indexing contract (engines and algorithms rely on it):
///  - GPU g (global) = node * gpus_per_node() + local index; schedules' ranks map to GPUs
///    through an Allocation.
///  - Vertex v (global): node-local vertex i of node n is `n * node.vertices.size() + i`;
///    fabric vertices follow after all nodes. Link ids follow the same scheme.
///  - A link is full duplex unless `half_duplex`: `bandwidth()` is per direction and the two
///    directions share no capacity. A Hop names a link and the direction it is crossed in.
///  - Routes never transit through a GPU (GPUs do not forward), prefer the widest path (on
///    achieved figures, Link::bandwidth()), then the lowest latency, then the fewest hops;
///    inter-node routes leave through the NIC nearest to the source GPU and enter through the
///    NIC nearest to the destination GPU.
///    One exception: in a rail-optimized fabric with `Fabric::pxn`, a GPU whose own NIC is on
///    another rail than the destination's first crosses NVLink to the GPU with the destination's
///    local index and leaves through that GPU's NIC (NCCL's PXN), so the route stays on one rail.
///  - A GPU pair without peer-to-peer (NodeTemplate::p2p_disabled) is routed through host
///    memory: to the CPU nearest the destination, then down to it, as NCCL diverts it.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "platforms/calibration.hpp"
#include "platforms/units.hpp"

namespace stepsim::platforms {

/// @brief Physical class of a link. NCCL picks latencies by the worst class on a path.
enum class LinkType { nvlink, pcie, inter_socket, network };
const char* to_string(LinkType type);

enum class VertexKind { gpu, nvswitch, pcie_switch, cpu, nic, fabric_switch };
const char* to_string(VertexKind kind);

/// @brief GPU architecture generations, in NCCL's order of its tuning tables.
enum class GpuArch { pascal, volta, turing, ampere, hopper, blackwell };
const char* to_string(GpuArch arch);

/// @brief A GPU model's figures (every one cited in the preset that defines it).
struct GpuModel {
  std::string name;            ///< e.g. "H100-SXM5-80GB"
  GpuArch arch = GpuArch::volta;
  int sm_version = 70;         ///< 60, 70, 75, 80, 90, 100
  int sm_count = 0;
  Bytes memory = 0;
  BytesPerSecond hbm_bandwidth = 0;
  /// Measured fraction of hbm_bandwidth that streaming kernels reach (0 = the architecture's
  /// figure, models/compute/roofline.cpp)
  double hbm_efficiency = 0;
  Bytes l2_size = 0;
  BytesPerSecond l2_bandwidth = 0;   ///< measured L2 hit bandwidth (compute models' L2 roof)
  double fp32_flops = 0;       ///< dense FLOP/s
  double tf32_flops = 0;
  double fp16_flops = 0;       ///< dense tensor-core FLOP/s (also bf16 where supported)
  double bf16_flops = 0;
  double fp8_flops = 0;
  BytesPerSecond nvlink_bandwidth_per_link = 0;  ///< per direction, one NVLink
  int nvlinks = 0;                               ///< NVLinks per GPU
  /// Power (watts; 0 = not known): the board limit the GPU runs under (default its TDP), the
  /// TDP, and two measured draws the power-limit model needs (models/compute/kernel.cpp,
  /// power_clock_scale): compute-heavy training at the TDP, and idle at full clock.
  double power_limit_watts = 0;
  double tdp_watts = 0;
  double training_power_watts = 0;
  double idle_power_watts = 0;
  /// GEMM efficiency per dtype name fitted by `stepsim calibrate` (platform `calibration`
  /// section); dtypes absent here use the architecture's table (models/compute/roofline.cpp).
  std::map<std::string, double> gemm_efficiency;
  /// Compression codec name -> multiplier of its modelled throughput, fitted by `stepsim
  /// calibrate` (platform `calibration.codecs`); absent codecs keep their cited figures.
  std::map<std::string, double> codec_throughput_scale;
};

struct Vertex {
  std::string name;            ///< node-local name, e.g. "gpu3", "pcie_sw1", "nvswitch", "nic0"
  VertexKind kind = VertexKind::gpu;
  int local_gpu = -1;          ///< for GPUs: index within the node
  int socket = 0;              ///< CPU socket this vertex hangs off (for NCCL path types)
  bool reduces_in_network = false;  ///< NVSwitch with NVLink SHARP (NVLS) or a SHARP switch
  /// CPUs: the rate of a host-device copy of pageable memory, which the driver stages through a
  /// pinned buffer with the CPU copying every byte (0 = not given)
  BytesPerSecond pageable_copy_bandwidth = 0;
};

struct Link {
  std::string name;
  LinkType type = LinkType::nvlink;
  int a = -1, b = -1;          ///< vertex ids (node-local in a NodeTemplate, global in Platform)
  /// Per direction, all parallel lanes together, as the hardware is rated (the platform file's
  /// `bandwidth`): what NCCL detects and sizes its graphs from (link counts, port rates).
  BytesPerSecond datasheet_bandwidth = 0;
  /// The share of the rated figures that transfers achieve: the file's `achieved_fraction` times
  /// calibration's `bandwidth_scale` for the link's type (which may take it above 1).
  double achieved_fraction = 1;
  Seconds latency = 0;
  int lanes = 1;               ///< parallel physical links bundled here (NV2 pair = 2)
  /// Both directions share one capacity: a resource that is not a full-duplex wire, such as
  /// copies staged through host memory when GPU peer-to-peer is off.
  bool half_duplex = false;
  /// Half duplex only: the total the resource carries while both directions are busy, where
  /// that is less than one direction alone, rated like `datasheet_bandwidth`; 0: the one-way
  /// figure either way. Linear sharing cannot express this (one flow would be capped at the
  /// two-way total), so the engines take it per schedule: a schedule that crosses the link both
  /// ways gets it.
  BytesPerSecond datasheet_two_way_bandwidth = 0;

  /// @brief What transfers get per direction (routes and engines): datasheet x achieved fraction.
  BytesPerSecond bandwidth() const { return datasheet_bandwidth * achieved_fraction; }
  /// @brief The achieved two-way total, 0 when the link has none.
  BytesPerSecond two_way_bandwidth() const { return datasheet_two_way_bandwidth * achieved_fraction; }
};

/// @brief One server: GPUs, switches, CPUs, NICs and their links, node-local indices.
struct NodeTemplate {
  std::vector<Vertex> vertices;
  std::vector<Link> links;
  std::vector<int> gpus;       ///< vertex ids of GPUs, by local GPU index
  std::vector<int> nics;       ///< vertex ids of NICs, by NIC index (rail)
  /// GPU vertex pairs (first < second) whose peer-to-peer is off (`nvidia-smi topo -p2p r` not
  /// OK): their traffic goes through host memory instead of turning inside a shared switch.
  std::vector<std::pair<int, int>> p2p_disabled;
};

/// @brief Whether GPU vertices `a` and `b` (node-local ids, either order) have peer-to-peer off.
bool p2p_disabled(const NodeTemplate& node, int a, int b);

enum class FabricKind { none, fat_tree, rail_optimized };
const char* to_string(FabricKind kind);

/// @brief How nodes are joined: every NIC has one link into a leaf switch (fat tree: one leaf per
/// `nodes_per_leaf` nodes; rail-optimized: one leaf per rail per `nodes_per_leaf` nodes), and
/// leaves join through one spine whose uplinks carry the leaf's down-port bandwidth over
/// `oversubscription`. A fat tree of one leaf has no spine.
struct Fabric {
  FabricKind kind = FabricKind::none;
  std::string nic_name;                ///< e.g. "ConnectX-7 NDR"
  BytesPerSecond nic_bandwidth = 0;    ///< per direction per NIC, as rated (NCCL's NET figure)
  double nic_achieved_fraction = 1;    ///< what the fabric's links achieve of it (Link::achieved_fraction)
  Seconds nic_latency = 0;             ///< NIC + cable, one way
  Seconds switch_latency = 0;          ///< per fabric switch crossed
  bool sharp = false;                  ///< in-network reduction (CollNet) available
  /// NCCL protocols the net plugin leaves enabled for the whole job (NCCL_PROTO it sets when
  /// the user has not; e.g. aws-ofi-nccl forces Simple on EFAv1); empty: all of NCCL's.
  std::vector<std::string> nccl_protocols;
  /// A leaf's down-port bandwidth over its uplink bandwidth to the spine (>= 1; 2 = 2:1 taper).
  double oversubscription = 1;
  /// Nodes whose NICs share a leaf (per rail when rail-optimized); 0: every node, one leaf.
  int nodes_per_leaf = 0;
  /// NCCL's PXN (off with NCCL_PXN_DISABLE=1): cross-rail routes relay over NVLink to the GPU
  /// that owns the destination rail's NIC instead of crossing the spine (rail-optimized only).
  bool pxn = true;
};

struct Hop {
  int link = -1;
  bool forward = true;         ///< crossed from link.a to link.b
};

/// @brief A path between two vertices with its alpha-beta summary.
struct Route {
  std::vector<Hop> hops;
  Seconds latency = 0;             ///< sum of link latencies
  BytesPerSecond bandwidth = 0;    ///< bottleneck bandwidth
  LinkType worst = LinkType::nvlink;  ///< slowest class crossed (nvlink < pcie < inter_socket < network)
};

/// @brief Extends `route` by `tail` (hops after it): latencies add, the narrower bottleneck
/// and the slower link class win.
void append(Route& route, const Route& tail);

/// Limits on what a platform file may describe, stated in the errors that enforce them. They lie
/// far beyond today's machines (a DGX node has ~40 vertices; the largest preset job, 512 GPUs,
/// is 64 nodes) and keep every build of routes (quadratic in a node's vertices) within seconds.
constexpr int kMaxNodeVertices = 1024;  ///< vertices of one node template
constexpr int kMaxNodes = 4096;         ///< servers of one platform
constexpr int kMaxLinkLanes = 64;       ///< bonded links of one link entry (an H100 has 18 NVLinks)

/// @brief A whole platform: `nodes` copies of one node template plus a fabric.
class Platform {
 public:
  Platform(std::string name, GpuModel gpu, NodeTemplate node, int nodes, Fabric fabric);

  const std::string& name() const { return name_; }
  const GpuModel& gpu() const { return gpu_; }
  const NodeTemplate& node() const { return node_; }
  const Fabric& fabric() const { return fabric_; }
  int nodes() const { return nodes_; }
  int gpus_per_node() const { return static_cast<int>(node_.gpus.size()); }
  int gpu_count() const { return nodes_ * gpus_per_node(); }
  std::string cpu_vendor = "intel";   ///< NCCL's net overhead depends on it (intel, amd, arm)
  std::string source;                 ///< file or preset it came from
  Calibration calibration;            ///< fitted factors (empty = the preset's figures as cited)

  int vertex_count() const;
  int link_count() const;
  /// @brief Vertex and link by global id (fabric ones included).
  Vertex vertex(int id) const;
  Link link(int id) const;
  int node_of_vertex(int id) const;   ///< -1 for fabric vertices

  int gpu_vertex(int gpu) const;      ///< global vertex id of global GPU index
  int node_of_gpu(int gpu) const { return gpu / gpus_per_node(); }

  /// @brief Route between two global vertices (GPUs, or an NVSwitch for in-network steps).
  /// Thread-compatible; results are cached. Throws ConfigError when no route exists.
  const Route& route(int from_vertex, int to_vertex) const;

  /// @brief True when the node's GPUs sit on an NVSwitch with NVLink SHARP.
  bool has_nvls() const;
  /// @brief The node-local NVSwitch vertex (global id in node `node`), or -1.
  int nvswitch_vertex(int node) const;

 private:
  std::string name_;
  GpuModel gpu_;
  NodeTemplate node_;
  int nodes_;
  Fabric fabric_;
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

/// @brief The GPUs a job gets, in rank order (global GPU indices).
struct Allocation {
  std::vector<int> gpus;
  int ranks() const { return static_cast<int>(gpus.size()); }
  /// @brief Number of distinct nodes touched, and GPUs per node (max).
  int nodes(const Platform& platform) const;
  int max_ranks_per_node(const Platform& platform) const;
};

/// @brief Parses `0,1,4`, `0-3`, `n0:0-2,n1:0-4`; empty text = all GPUs of the platform.
/// Throws ConfigError naming `--gpus` for out-of-range or duplicate GPUs.
Allocation parse_allocation(const std::string& text, const Platform& platform);

}  // namespace stepsim::platforms
