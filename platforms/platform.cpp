#include "platforms/platform.hpp"

#include <algorithm>
#include <limits>
#include <queue>
#include <stdexcept>
#include <tuple>

#include "platforms/config_error.hpp"

namespace stepsim::platforms {

const char* to_string(LinkType type) {
  switch (type) {
    case LinkType::nvlink: return "nvlink";
    case LinkType::pcie: return "pcie";
    case LinkType::inter_socket: return "inter_socket";
    case LinkType::network: return "network";
  }
  return "?";
}

const char* to_string(VertexKind kind) {
  switch (kind) {
    case VertexKind::gpu: return "gpu";
    case VertexKind::nvswitch: return "nvswitch";
    case VertexKind::pcie_switch: return "pcie_switch";
    case VertexKind::cpu: return "cpu";
    case VertexKind::nic: return "nic";
    case VertexKind::fabric_switch: return "fabric_switch";
  }
  return "?";
}

const char* to_string(GpuArch arch) {
  switch (arch) {
    case GpuArch::pascal: return "pascal";
    case GpuArch::volta: return "volta";
    case GpuArch::turing: return "turing";
    case GpuArch::ampere: return "ampere";
    case GpuArch::hopper: return "hopper";
    case GpuArch::blackwell: return "blackwell";
  }
  return "?";
}

const char* to_string(FabricKind kind) {
  switch (kind) {
    case FabricKind::none: return "none";
    case FabricKind::fat_tree: return "fat-tree";
    case FabricKind::rail_optimized: return "rail-optimized";
  }
  return "?";
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Route preference: wider first, then lower latency, then fewer hops.
bool better(const Route& a, const Route& b) {
  if (a.bandwidth != b.bandwidth) return a.bandwidth > b.bandwidth;
  if (a.latency != b.latency) return a.latency < b.latency;
  return a.hops.size() < b.hops.size();
}

Route empty_route() {
  Route r;
  r.bandwidth = kInf;  // a vertex reaching itself is not limited by any link
  return r;
}

struct Edge {
  int link;
  int to;
  bool forward;
};

// All routes inside one node template. Widest-then-shortest is not isotone, so a single
// Dijkstra over (bandwidth, latency, hops) labels can pick a wrong path; instead, per source:
// (1) a widest-path pass finds each destination's best bottleneck W, then (2) for each distinct
// W a (latency, hops) Dijkstra restricted to links of bandwidth >= W finds the path.
// GPUs never forward traffic, so they are expanded only as the source.
class TemplateRoutes {
 public:
  explicit TemplateRoutes(const NodeTemplate& node) : node_(node), n_(static_cast<int>(node.vertices.size())) {
    adjacency_.resize(n_);
    for (int l = 0; l < static_cast<int>(node.links.size()); ++l) {
      const Link& link = node.links[l];
      adjacency_[link.a].push_back({l, link.b, true});
      adjacency_[link.b].push_back({l, link.a, false});
    }
    routes_.resize(static_cast<std::size_t>(n_) * n_);
    reachable_.assign(static_cast<std::size_t>(n_) * n_, false);
    for (int s = 0; s < n_; ++s) compute_from(s);
    for (const auto& [a, b] : node.p2p_disabled) {
      divert_through_host(a, b);
      divert_through_host(b, a);
    }
  }

  bool reachable(int a, int b) const { return reachable_[index(a, b)]; }
  const Route& route(int a, int b) const { return routes_[index(a, b)]; }

 private:
  std::size_t index(int a, int b) const { return static_cast<std::size_t>(a) * n_ + b; }
  bool transits(int v, int source) const {
    return v == source || node_.vertices[v].kind != VertexKind::gpu;
  }

  void compute_from(int s) {
    std::vector<double> width(n_, 0.0);
    width[s] = kInf;
    using WidthItem = std::pair<double, int>;
    std::priority_queue<WidthItem> open;  // max-heap on width
    open.push({kInf, s});
    std::vector<bool> done(n_, false);
    while (!open.empty()) {
      auto [w, v] = open.top();
      open.pop();
      if (done[v]) continue;
      done[v] = true;
      if (!transits(v, s)) continue;
      for (const Edge& e : adjacency_[v]) {
        double nw = std::min(w, node_.links[e.link].bandwidth());
        if (nw > width[e.to]) {
          width[e.to] = nw;
          open.push({nw, e.to});
        }
      }
    }
    std::vector<double> thresholds;
    for (int t = 0; t < n_; ++t)
      if (t != s && width[t] > 0) thresholds.push_back(width[t]);
    std::sort(thresholds.begin(), thresholds.end());
    thresholds.erase(std::unique(thresholds.begin(), thresholds.end()), thresholds.end());
    reachable_[index(s, s)] = true;
    routes_[index(s, s)] = empty_route();
    for (double threshold : thresholds) shortest_within(s, threshold, width);
  }

  void shortest_within(int s, double threshold, const std::vector<double>& width) {
    struct Label {
      double latency = kInf;
      std::size_t hops = 0;
      Edge via{-1, -1, true};
      int prev = -1;
    };
    std::vector<Label> label(n_);
    label[s].latency = 0;
    using Item = std::tuple<double, std::size_t, int>;  // min-heap on (latency, hops, vertex)
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> open;
    open.push({0.0, 0, s});
    std::vector<bool> done(n_, false);
    while (!open.empty()) {
      auto [lat, hops, v] = open.top();
      open.pop();
      if (done[v]) continue;
      done[v] = true;
      if (!transits(v, s)) continue;
      for (const Edge& e : adjacency_[v]) {
        const Link& link = node_.links[e.link];
        if (link.bandwidth() < threshold) continue;
        double nl = lat + link.latency;
        Label& to = label[e.to];
        if (nl < to.latency || (nl == to.latency && hops + 1 < to.hops)) {
          to = {nl, hops + 1, e, v};
          open.push({nl, hops + 1, e.to});
        }
      }
    }
    for (int t = 0; t < n_; ++t) {
      if (t == s || width[t] != threshold) continue;
      Route r;
      r.bandwidth = threshold;
      r.latency = label[t].latency;
      for (int v = t; v != s; v = label[v].prev) {
        const Link& link = node_.links[label[v].via.link];
        r.hops.push_back({label[v].via.link, label[v].via.forward});
        r.worst = std::max(r.worst, link.type);
      }
      std::reverse(r.hops.begin(), r.hops.end());
      routes_[index(s, t)] = std::move(r);
      reachable_[index(s, t)] = true;
    }
  }

  // A GPU pair without peer-to-peer: NCCL diverts its path through the CPU nearest the
  // destination (paths.cc ncclTopoComputePaths, "Divert all traffic through the CPU":
  // addInterStep(CPU ncclGetLocalCpu(dst), src, dst)), so the route is the source's route up to
  // that CPU and the CPU's route down to the destination, both halves charged. Without a CPU
  // the pair has no route.
  void divert_through_host(int from, int to) {
    int cpu = -1;
    for (int v = 0; v < n_; ++v)
      if (node_.vertices[v].kind == VertexKind::cpu && reachable(from, v) && reachable(v, to) &&
          (cpu < 0 || better(route(to, v), route(to, cpu))))
        cpu = v;
    reachable_[index(from, to)] = cpu >= 0;
    if (cpu < 0) return;
    Route diverted = route(from, cpu);
    append(diverted, route(cpu, to));
    routes_[index(from, to)] = std::move(diverted);
  }

  const NodeTemplate& node_;
  int n_;
  std::vector<std::vector<Edge>> adjacency_;
  std::vector<Route> routes_;
  std::vector<bool> reachable_;
};

}  // namespace

bool p2p_disabled(const NodeTemplate& node, int a, int b) {
  const std::pair<int, int> pair = std::minmax(a, b);
  return std::find(node.p2p_disabled.begin(), node.p2p_disabled.end(), pair) != node.p2p_disabled.end();
}

void append(Route& route, const Route& tail) {
  route.hops.insert(route.hops.end(), tail.hops.begin(), tail.hops.end());
  route.latency += tail.latency;
  route.bandwidth = std::min(route.bandwidth, tail.bandwidth);
  route.worst = std::max(route.worst, tail.worst);
}

// Fabric layout (global ids after all nodes' vertices and links), with P nodes per leaf group
// (Fabric::nodes_per_leaf, default every node) and G = ceil(nodes / P) groups:
//  fat_tree:       leaf g = vertex F+g, joined by NIC r of node n (g = n / P) through link
//                  N+n*R+r; with G > 1 a spine F+G and uplinks N+nodes*R+g (leaf g <-> spine).
//  rail_optimized: leaf (g, r) = vertex F+g*R+r, joined by NIC r of every node of group g through
//                  link N+n*R+r; spine F+G*R and uplinks N+nodes*R+g*R+r.
// With one group this is the single switch (fat tree) or one switch per rail plus a spine. The
// spine, when there is one, is the last fabric vertex (the SHARP aggregation point of CollNet).
// The fabric is a tree, so a fabric route is: up to the lowest common ancestor, then down.
struct Platform::Impl {
  // Impl keeps its own copy: it is shared between copies of a Platform, which may outlive the
  // Platform it was built for.
  const NodeTemplate node_copy;
  const NodeTemplate* node;
  TemplateRoutes routes;
  std::vector<int> nearest_nic;  ///< per template vertex: index into node.nics, -1 if none reachable
  int V = 0, L = 0, R = 0, nodes = 0;
  FabricKind kind = FabricKind::none;
  Fabric fabric;
  int nodes_per_leaf = 0;   ///< P: nodes of one leaf group
  int leaves_per_group = 0; ///< 1 (fat tree) or R (one leaf per rail)
  int leaves = 0;           ///< G x leaves_per_group
  bool has_spine = false;
  BytesPerSecond uplink_bandwidth = 0;
  mutable std::mutex mutex;
  mutable std::unordered_map<std::uint64_t, std::unique_ptr<Route>> cache;

  Impl(const NodeTemplate& n, int node_count, const Fabric& f)
      : node_copy(n), node(&node_copy), routes(node_copy), V(static_cast<int>(n.vertices.size())), L(static_cast<int>(n.links.size())),
        R(static_cast<int>(n.nics.size())), nodes(node_count), kind(n.nics.empty() ? FabricKind::none : f.kind),
        fabric(f) {
    // Nearest NIC per vertex. GPUs that tie on several NICs (two GPUs and two NICs under one
    // PCIe switch) are spread over them in GPU order, as NCCL gives each GPU its own NIC.
    nearest_nic.assign(V, -1);
    std::map<std::vector<int>, int> sharing;  // tied NIC set -> GPUs already placed on it
    for (int v = 0; v < V; ++v) {
      std::vector<int> tied;
      for (int r = 0; r < R; ++r) {
        if (!routes.reachable(v, n.nics[r])) continue;
        if (tied.empty() || better(routes.route(v, n.nics[r]), routes.route(v, n.nics[tied[0]]))) tied = {r};
        else if (!better(routes.route(v, n.nics[tied[0]]), routes.route(v, n.nics[r]))) tied.push_back(r);
      }
      if (tied.empty()) continue;
      int k = n.vertices[v].kind == VertexKind::gpu ? sharing[tied]++ : 0;
      nearest_nic[v] = tied[static_cast<std::size_t>(k) % tied.size()];
    }
    if (kind == FabricKind::none) return;
    nodes_per_leaf = f.nodes_per_leaf > 0 ? f.nodes_per_leaf : nodes;
    const int groups = nodes_per_leaf >= nodes ? 1 : (nodes + nodes_per_leaf - 1) / nodes_per_leaf;
    leaves_per_group = kind == FabricKind::rail_optimized ? R : 1;
    leaves = groups * leaves_per_group;
    has_spine = kind == FabricKind::rail_optimized || groups > 1;
    // A leaf's uplinks are sized for every down port it was built with (P nodes' NICs on it),
    // whether or not the last group is full: a switch keeps its cables.
    const int nics_per_node_on_leaf = kind == FabricKind::rail_optimized ? 1 : R;
    uplink_bandwidth = fabric.nic_bandwidth * nodes_per_leaf * nics_per_node_on_leaf / fabric.oversubscription;
  }

  int fabric_vertex_count() const { return leaves + (has_spine ? 1 : 0); }
  int fabric_link_count() const {
    if (kind == FabricKind::none) return 0;
    return nodes * R + (has_spine ? leaves : 0);
  }
  int first_fabric_vertex() const { return nodes * V; }
  int first_fabric_link() const { return nodes * L; }
  int spine_vertex() const { return first_fabric_vertex() + leaves; }
  /// Leaf index (0..leaves-1) that NIC r of node n joins.
  int leaf_of(int n, int r) const {
    return (n / nodes_per_leaf) * leaves_per_group + (kind == FabricKind::rail_optimized ? r : 0);
  }

  std::string leaf_name(int leaf) const {
    const bool one_group = leaves == leaves_per_group;
    if (kind == FabricKind::fat_tree) return one_group ? "fabric_switch" : "leaf" + std::to_string(leaf);
    const std::string rail = "rail" + std::to_string(leaf % R);
    return one_group ? rail : "leaf" + std::to_string(leaf / R) + "." + rail;
  }
  std::string fabric_vertex_name(int k) const { return k < leaves ? leaf_name(k) : "spine"; }

  Link fabric_link(int id) const {
    int k = id - first_fabric_link();
    Link link;
    link.type = LinkType::network;
    link.achieved_fraction = fabric.nic_achieved_fraction;
    if (k < nodes * R) {
      int n = k / R, r = k % R;
      link.name = "node" + std::to_string(n) + "." + node->vertices[node->nics[r]].name + "-fabric";
      link.a = n * V + node->nics[r];
      link.b = first_fabric_vertex() + leaf_of(n, r);
      link.datasheet_bandwidth = fabric.nic_bandwidth;
      // Half the NIC's one-way latency on each end, plus half a switch crossing per link, so a
      // NIC-switch-NIC path costs nic_latency + switch_latency.
      link.latency = fabric.nic_latency / 2 + fabric.switch_latency / 2;
    } else {
      int leaf = k - nodes * R;
      link.name = leaf_name(leaf) + "-spine";
      link.a = first_fabric_vertex() + leaf;
      link.b = spine_vertex();
      link.datasheet_bandwidth = uplink_bandwidth;
      // Half the leaf's crossing and half the spine's: NIC-leaf-spine-leaf-NIC crosses three.
      link.latency = fabric.switch_latency;
    }
    return link;
  }

  // Parent in the fabric tree of a NIC or fabric vertex: (parent vertex, uplink id), or (-1,-1).
  std::pair<int, int> parent(int v) const {
    int f = first_fabric_vertex();
    if (v < f) {
      int n = v / V, local = v % V;
      auto it = std::find(node->nics.begin(), node->nics.end(), local);
      int r = static_cast<int>(it - node->nics.begin());
      return {f + leaf_of(n, r), first_fabric_link() + n * R + r};
    }
    if (has_spine && v < spine_vertex()) return {spine_vertex(), first_fabric_link() + nodes * R + (v - f)};
    return {-1, -1};
  }

  Route fabric_route(int from, int to) const {
    std::vector<std::pair<int, int>> up_from{{from, -1}}, up_to{{to, -1}};
    for (auto p = parent(from); p.first >= 0; p = parent(p.first)) up_from.push_back(p);
    for (auto p = parent(to); p.first >= 0; p = parent(p.first)) up_to.push_back(p);
    Route r = empty_route();
    r.worst = LinkType::network;
    std::size_t i = 0, j = 0;
    // Find the lowest common ancestor: the first vertex of up_from also on up_to.
    for (i = 0; i < up_from.size(); ++i) {
      auto it = std::find_if(up_to.begin(), up_to.end(), [&](auto& p) { return p.first == up_from[i].first; });
      if (it != up_to.end()) {
        j = static_cast<std::size_t>(it - up_to.begin());
        break;
      }
    }
    auto add = [&](int link_id, bool forward) {
      Link link = fabric_link(link_id);
      r.hops.push_back({link_id, forward});
      r.latency += link.latency;
      r.bandwidth = std::min(r.bandwidth, link.bandwidth());
    };
    for (std::size_t k = 1; k <= i; ++k) add(up_from[k].second, true);
    for (std::size_t k = j; k >= 1; --k) add(up_to[k].second, false);
    return r;
  }

  // NCCL's PXN for a GPU `source` sending to the GPU of another node at template vertex
  // `destination` (search.cc ncclTopoGetNetDev, NCCL_P2P_PXN_LEVEL 2, the default): the sender
  // uses the NIC of its own node's GPU with the destination's device index, relaying through
  // that GPU when it is NVLink-connected to the sender (paths[GPU] <= PATH_NVL) and reaches the
  // NIC without a CPU (paths[NET] <= PATH_PXB); net.cc's receiver uses its own NIC. Modelled on
  // rail-optimized fabrics only, where it keeps a cross-rail transfer off the spine (on a fat
  // tree a node's NICs share one leaf, so the relay would move the same bytes over the same
  // fabric links). Returns the relay's template vertex, or -1 for the direct route.
  int pxn_relay(int source, int destination) const {
    if (kind != FabricKind::rail_optimized || !fabric.pxn) return -1;
    if (node->vertices[source].kind != VertexKind::gpu || node->vertices[destination].kind != VertexKind::gpu) return -1;
    const int rail = nearest_nic[destination];
    if (source == destination || rail < 0 || rail == nearest_nic[source]) return -1;
    if (!routes.reachable(source, destination) || routes.route(source, destination).worst != LinkType::nvlink) return -1;
    for (const Hop& hop : routes.route(destination, node->nics[rail]).hops)
      for (int v : {node->links[hop.link].a, node->links[hop.link].b})
        if (node->vertices[v].kind == VertexKind::cpu) return -1;
    return destination;
  }

  Route local_route(int node_index, int a, int b) const {
    Route r = routes.route(a, b);
    for (Hop& hop : r.hops) hop.link += node_index * L;
    return r;
  }
};

Platform::Platform(std::string name, GpuModel gpu, NodeTemplate node, int nodes, Fabric fabric)
    : name_(std::move(name)), gpu_(std::move(gpu)), node_(std::move(node)), nodes_(nodes), fabric_(std::move(fabric)) {
  const int V = static_cast<int>(node_.vertices.size());
  auto fail = [&](const std::string& what, const std::string& fix) { throw ConfigError(name_, what, fix); };
  if (nodes_ < 1) fail("nodes must be >= 1, got " + std::to_string(nodes_), "use nodes: 1 or more");
  if (node_.gpus.empty()) fail("the node has no GPUs", "add GPU vertices to the node");
  for (const Link& link : node_.links) {
    if (link.a < 0 || link.a >= V || link.b < 0 || link.b >= V || link.a == link.b)
      fail("link '" + link.name + "' has bad endpoints", "join two distinct vertices of the node");
    if (!(link.bandwidth() > 0)) fail("link '" + link.name + "' has no bandwidth", "give it a bandwidth > 0");
  }
  for (int g : node_.gpus)
    if (g < 0 || g >= V || node_.vertices[g].kind != VertexKind::gpu) throw std::logic_error("gpus[] must name GPU vertices");
  for (int n : node_.nics)
    if (n < 0 || n >= V || node_.vertices[n].kind != VertexKind::nic) throw std::logic_error("nics[] must name NIC vertices");
  if (nodes_ > 1 && (fabric_.kind == FabricKind::none || node_.nics.empty() || !(fabric_.nic_bandwidth > 0)))
    fail("a platform of " + std::to_string(nodes_) + " nodes needs NICs and a fabric",
         "add NIC vertices to the node and a fabric with a NIC bandwidth");
  if (fabric_.kind != FabricKind::none && !(fabric_.oversubscription >= 1))
    fail("fabric oversubscription must be >= 1, got " + std::to_string(fabric_.oversubscription),
         "use 1 for a non-blocking fabric, or the leaves' down:up bandwidth ratio");
  if (fabric_.nodes_per_leaf < 0)
    fail("fabric nodes_per_leaf must be >= 0, got " + std::to_string(fabric_.nodes_per_leaf),
         "use 0 (every node under one leaf) or the nodes one leaf switch holds");
  impl_ = std::make_shared<Impl>(node_, nodes_, fabric_);
  // Every GPU must reach every other GPU of its node, and a NIC when there are other nodes.
  for (int a : node_.gpus) {
    for (int b : node_.gpus) {
      if (impl_->routes.reachable(a, b)) continue;
      if (p2p_disabled(node_, a, b))
        fail("no route from " + node_.vertices[a].name + " to " + node_.vertices[b].name +
                 " through a CPU (their peer-to-peer is off, so their traffic goes through host memory)",
             "link a vertex of kind cpu to both GPUs' PCIe switches");
      fail("no route from " + node_.vertices[a].name + " to " + node_.vertices[b].name +
               " (GPUs do not forward traffic)",
           "connect them through a switch, a CPU or a direct link");
    }
    if (nodes_ > 1 && impl_->nearest_nic[a] < 0)
      fail("no route from " + node_.vertices[a].name + " to any NIC", "link the NICs to the GPUs' PCIe switches or CPUs");
  }
}

int Platform::vertex_count() const { return nodes_ * static_cast<int>(node_.vertices.size()) + impl_->fabric_vertex_count(); }
int Platform::link_count() const { return nodes_ * static_cast<int>(node_.links.size()) + impl_->fabric_link_count(); }

Vertex Platform::vertex(int id) const {
  if (id < 0 || id >= vertex_count()) throw std::out_of_range("vertex id " + std::to_string(id));
  const int V = impl_->V;
  if (id < nodes_ * V) return node_.vertices[id % V];
  int k = id - nodes_ * V;
  Vertex v;
  v.kind = VertexKind::fabric_switch;
  v.reduces_in_network = fabric_.sharp;
  v.name = impl_->fabric_vertex_name(k);
  return v;
}

Link Platform::link(int id) const {
  if (id < 0 || id >= link_count()) throw std::out_of_range("link id " + std::to_string(id));
  const int L = impl_->L, V = impl_->V;
  if (id >= nodes_ * L) return impl_->fabric_link(id);
  Link link = node_.links[id % L];
  int offset = (id / L) * V;
  link.a += offset;
  link.b += offset;
  return link;
}

int Platform::node_of_vertex(int id) const {
  if (id < 0 || id >= vertex_count()) throw std::out_of_range("vertex id " + std::to_string(id));
  return id < nodes_ * impl_->V ? id / impl_->V : -1;
}

int Platform::gpu_vertex(int gpu) const {
  if (gpu < 0 || gpu >= gpu_count()) throw std::out_of_range("GPU index " + std::to_string(gpu));
  return node_of_gpu(gpu) * impl_->V + node_.gpus[gpu % gpus_per_node()];
}

const Route& Platform::route(int from, int to) const {
  const int total = vertex_count();
  if (from < 0 || from >= total || to < 0 || to >= total)
    throw std::out_of_range("route between vertices " + std::to_string(from) + " and " + std::to_string(to));
  const std::uint64_t key = static_cast<std::uint64_t>(from) * static_cast<std::uint64_t>(total) + to;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  auto& slot = impl_->cache[key];
  if (slot) return *slot;

  const int V = impl_->V;
  const int from_node = node_of_vertex(from), to_node = node_of_vertex(to);
  auto no_route = [&]() {
    impl_->cache.erase(key);
    throw ConfigError(name_, "no route from " + vertex(from).name + " (node " + std::to_string(from_node) + ") to " +
                                 vertex(to).name + " (node " + std::to_string(to_node) + ")",
                      "connect the two vertices in the platform file");
  };
  Route r;
  if (from_node >= 0 && from_node == to_node) {
    if (!impl_->routes.reachable(from % V, to % V)) no_route();
    r = impl_->local_route(from_node, from % V, to % V);
  } else {
    if (impl_->kind == FabricKind::none) no_route();
    // Leave the node through the NIC nearest to the source (or, with PXN, through the NIC of the
    // GPU it relays to), enter through the one nearest the destination; a fabric vertex is its
    // own gateway.
    int exit_nic = from, entry_nic = to;
    r = empty_route();
    if (from_node >= 0) {
      const int relay = to_node >= 0 ? impl_->pxn_relay(from % V, to % V) : -1;
      const int first = relay >= 0 ? relay : from % V;
      int nic = impl_->nearest_nic[first];
      if (nic < 0) no_route();
      exit_nic = from_node * V + node_.nics[nic];
      if (relay >= 0) r = impl_->local_route(from_node, from % V, relay);
      append(r, impl_->local_route(from_node, first, node_.nics[nic]));
    }
    Route tail = empty_route();
    if (to_node >= 0) {
      int nic = impl_->nearest_nic[to % V];
      if (nic < 0 || !impl_->routes.reachable(node_.nics[nic], to % V)) no_route();
      entry_nic = to_node * V + node_.nics[nic];
      tail = impl_->local_route(to_node, node_.nics[nic], to % V);
    }
    append(r, impl_->fabric_route(exit_nic, entry_nic));
    append(r, tail);
  }
  slot = std::make_unique<Route>(std::move(r));
  return *slot;
}

bool Platform::has_nvls() const {
  int sw = nvswitch_vertex(0);
  return sw >= 0 && node_.vertices[sw].reduces_in_network;
}

int Platform::nvswitch_vertex(int node) const {
  if (node < 0 || node >= nodes_) throw std::out_of_range("node " + std::to_string(node));
  for (int v = 0; v < impl_->V; ++v)
    if (node_.vertices[v].kind == VertexKind::nvswitch) return node * impl_->V + v;
  return -1;
}

}  // namespace stepsim::platforms
