#pragma once
/// @file Blink's topology graph and spanning-tree packing (Wang et al., "Blink: Fast and
/// Generic Collectives for Distributed ML", MLSys 2020, §3; papers.md §1).
///
/// Graph. The vertices are the GPUs of one server in the job; the arcs are the transfers
/// trees may use between them, each naming the directed physical resources (platform link,
/// direction) it loads:
///  - NVLink arcs: every NVLink between two of the GPUs, one arc per direction, capacity =
///    the link's per-direction bandwidth (lanes x per-lane rate); GPU pairs that meet only
///    through an NVSwitch get one arc over that route (its ports are shared resources).
///  - PCIe arcs: GPU pairs the platform routes over PCIe / CPU use that route; GPU pairs
///    joined by NVLink (a peer copy between them would take the NVLink) stage the copy
///    through host memory at the sender's CPU (`relay`), two routes in a row.
///
/// Packing. The rate of a broadcast from `root` is the largest total weight of spanning
/// arborescences rooted there that fits every resource's capacity. Edmonds (1973) bounds it
/// by the minimum root cut and attains it on graphs whose arcs are dedicated links of
/// integral multiplicity (every NVLink graph of the DGX-1 presets): there, exactly
/// k = min cut / lane arc-disjoint trees exist and Lovász's (1976) constructive proof of the
/// theorem builds them, one lane each, so the rate equals the bound with the fewest trees.
/// Everywhere else (PCIe routes sharing switch uplinks, NVSwitch ports, allreduce trees that
/// load both directions of every link) no such theorem holds and the packing follows Blink:
/// a multiplicative-weights (Garg & Könemann 1998) fractional packing that repeatedly adds
/// the minimum-cost arborescence (Chu–Liu / Edmonds) under exponential resource prices,
/// then a linear program over the trees it found (a basic optimal solution uses at most one
/// tree per tight resource) and a greedy removal of the lightest trees while the LP optimum
/// stays within `tolerance` of the optimum over all of them.
///
/// Contract: pure and deterministic; vertex i of a Graph is rank `ranks[i]` of the
/// collective; rates and capacities in bytes/s.
#include <optional>
#include <string>
#include <vector>

#include "models/algorithm.hpp"

namespace stepsim::models::blink {

/// @brief A platform link crossed in one direction.
struct Resource {
  int link = -1;
  bool forward = true;
  int from_vertex = -1;         ///< platform vertex the direction leaves
  int to_vertex = -1;           ///< platform vertex it enters
  BytesPerSecond capacity = 0;  ///< per direction, all lanes together
  int lanes = 1;
  Seconds latency = 0;
  bool half_duplex = false;  ///< one capacity for both directions (one resource)
};

enum class ArcKind { nvlink, pcie };

/// @brief A GPU-to-GPU transfer between graph vertices.
struct Arc {
  int from = 0;
  int to = 0;
  ArcKind kind = ArcKind::nvlink;
  std::vector<int> resources;  ///< every resource crossed, repeated if crossed twice
  int relay = -1;              ///< platform vertex (host CPU) the copy is staged at, or -1
  int first_leg = 0;           ///< with a relay: how many of `resources` lie before it
};

/// @brief The topology graph of one server's GPUs in the job.
struct Graph {
  std::vector<int> ranks;            ///< vertex i is collective rank ranks[i]
  std::vector<int> platform_vertex;  ///< and platform vertex platform_vertex[i]
  std::vector<Arc> arcs;
  std::vector<Resource> resources;
  int vertices() const { return static_cast<int>(ranks.size()); }
};

/// @brief Builds the graph of `ranks`, which must all sit on one server.
Graph topology_graph(const CollectiveContext& ctx, const std::vector<int>& ranks);

/// @brief Which arcs a packing may use.
enum class Links { nvlink, pcie, all };
/// @brief How trees carry data: down from the root (broadcast), up to it (reduce), or both
/// (allreduce: reduce up, broadcast down, so every tree edge loads both link directions).
enum class Flow { down, up, both };

/// @brief One spanning tree of a Graph.
struct Tree {
  int root = 0;
  std::vector<int> parent;  ///< per vertex, -1 at the root
  std::vector<int> down;    ///< per vertex: the arc parent -> v (-1 at the root or for Flow::up)
  std::vector<int> up;      ///< per vertex: the arc v -> parent (-1 at the root or for Flow::down)
  double weight = 0;        ///< bytes/s this tree carries in the packing
};

/// @brief A set of trees and how it was found.
struct Packing {
  std::vector<Tree> trees;
  double rate = 0;      ///< sum of the trees' weights, bytes/s
  std::string method;   ///< "edmonds" (integral, exact) or "mwu" (MWU + LP + pruning)
  int mwu_trees = 0;    ///< distinct trees MWU generated (0 for "edmonds")
  double mwu_rate = 0;  ///< MWU's own (scaled) rate before the LP (0 for "edmonds")
};

struct PackOptions {
  double epsilon = 0.1;     ///< MWU accuracy: its rate is at least (1 - epsilon)^3 x optimum
  double tolerance = 0.01;  ///< pruning keeps the LP rate within this fraction of the best
};

/// @brief Packs spanning trees of the `links` arcs rooted at vertex `root` for `flow`.
/// Returns an empty packing (rate 0) when those arcs do not span the graph from the root.
Packing pack_trees(const Graph& g, Links links, Flow flow, int root, const PackOptions& options = {});

/// @brief MWU alone (no LP, no pruning): what the pruning starts from, for reports and tests.
Packing mwu_packing(const Graph& g, Links links, Flow flow, int root, double epsilon);

/// @brief Edmonds' bound for Flow::down (up): the smallest max-flow from the root to
/// (from) any other vertex through the platform links that the `links` arcs use; switches
/// and CPUs on those paths forward, GPUs outside the graph do not.
double root_cut(const Graph& g, Links links, Flow flow, int root);

/// @brief Flow::both bound on graphs whose arcs are dedicated links (every NVLink graph
/// without NVSwitch): the fractional spanning-tree packing number of Nash-Williams and
/// Tutte, min over vertex partitions P of (capacity of the links crossing P) / (|P| - 1).
/// Empty when arcs share resources or the graph has more than 10 vertices.
std::optional<double> partition_bound(const Graph& g, Links links);

/// @brief Whether the `links` arcs reach every vertex from every other.
bool strongly_connected(const Graph& g, Links links);
/// @brief Whether the `links` arcs hold a Hamiltonian cycle (2 vertices: arcs both ways).
bool has_hamiltonian_cycle(const Graph& g, Links links);

/// @brief The same undirected tree rooted at `root` (a Flow::both tree: every edge has
/// both arcs).
Tree reroot(const Tree& tree, int root);

/// @brief How many times `tree` loads each resource of `g` under `flow`.
std::vector<int> resource_load(const Graph& g, const Tree& tree, Flow flow);

/// @brief "0->1 0->3 3->2 ..." in ranks (each tree edge parent->child).
std::string describe(const Graph& g, const Tree& tree);

}  // namespace stepsim::models::blink
