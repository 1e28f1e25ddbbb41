/// @file Blink's topology graph and tree packing (see blink_packing.hpp).
#include "models/collectives/blink_packing.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

namespace stepsim::models::blink {
namespace {

using platforms::LinkType;
using platforms::VertexKind;

constexpr double kInf = std::numeric_limits<double>::infinity();

bool any_nvlink(const platforms::Platform& p, const platforms::Route& route) {
  return std::any_of(route.hops.begin(), route.hops.end(),
                     [&](const platforms::Hop& hop) { return p.link(hop.link).type == LinkType::nvlink; });
}

bool only_nvlink(const platforms::Platform& p, const platforms::Route& route) {
  return std::all_of(route.hops.begin(), route.hops.end(),
                     [&](const platforms::Hop& hop) { return p.link(hop.link).type == LinkType::nvlink; });
}

/// The CPU on the GPU's socket in its node: where a copy staged through host memory lands
/// (pinned buffers on the sender's NUMA node). -1 when the node describes no CPU.
int host_cpu(const platforms::Platform& p, int gpu_vertex) {
  const int per_node = static_cast<int>(p.node().vertices.size());
  const int node = p.node_of_vertex(gpu_vertex);
  const int socket = p.vertex(gpu_vertex).socket;
  for (int i = 0; i < per_node; ++i) {
    const platforms::Vertex& v = p.node().vertices[static_cast<std::size_t>(i)];
    if (v.kind == VertexKind::cpu && v.socket == socket) return node * per_node + i;
  }
  return -1;
}

/// Interns the resources (link, direction) of a graph; a half-duplex link is one resource
/// for both directions, since both share its capacity.
class ResourceTable {
 public:
  ResourceTable(const platforms::Platform& p, std::vector<Resource>& out) : p_(p), out_(out) {}

  int of(const platforms::Hop& hop) {
    const platforms::Link link = p_.link(hop.link);
    const bool forward = hop.forward || link.half_duplex;
    const auto [it, fresh] = index_.try_emplace({hop.link, forward}, static_cast<int>(out_.size()));
    if (fresh) {
      Resource r;
      r.link = hop.link;
      r.forward = forward;
      r.from_vertex = forward ? link.a : link.b;
      r.to_vertex = forward ? link.b : link.a;
      r.capacity = link.bandwidth();
      r.lanes = link.lanes;
      r.latency = link.latency;
      r.half_duplex = link.half_duplex;
      out_.push_back(r);
    }
    return it->second;
  }

  void append(const platforms::Route& route, std::vector<int>& into) {
    for (const platforms::Hop& hop : route.hops) into.push_back(of(hop));
  }

 private:
  const platforms::Platform& p_;
  std::vector<Resource>& out_;
  std::map<std::pair<int, bool>, int> index_;
};

bool allowed(const Arc& arc, Links links) {
  return links == Links::all || (links == Links::nvlink) == (arc.kind == ArcKind::nvlink);
}

/// A tree edge candidate in tree orientation (parent `from`, child `to`) with what it loads.
struct OArc {
  int from = 0;
  int to = 0;
  std::vector<std::pair<int, int>> load;  ///< (resource, times)
  int down = -1;                          ///< graph arc carrying data parent -> child
  int up = -1;                            ///< graph arc carrying data child -> parent
};

std::vector<std::pair<int, int>> count_resources(const std::vector<int>& resources) {
  std::map<int, int> times;
  for (int r : resources) ++times[r];
  return {times.begin(), times.end()};
}

/// The arc back from a's head to its tail of a's kind; the reverse direction of the same
/// physical link when there is one.
int reverse_arc(const Graph& g, int a, Links links) {
  const Arc& arc = g.arcs[static_cast<std::size_t>(a)];
  int found = -1;
  for (int b = 0; b < static_cast<int>(g.arcs.size()); ++b) {
    const Arc& back = g.arcs[static_cast<std::size_t>(b)];
    if (back.from != arc.to || back.to != arc.from || back.kind != arc.kind || !allowed(back, links)) continue;
    const Resource& first = g.resources[static_cast<std::size_t>(arc.resources.front())];
    const Resource& back_first = g.resources[static_cast<std::size_t>(back.resources.front())];
    if (first.link == back_first.link) return b;
    if (found < 0) found = b;
  }
  return found;
}

std::vector<OArc> oriented(const Graph& g, Links links, Flow flow) {
  std::vector<OArc> out;
  for (int a = 0; a < static_cast<int>(g.arcs.size()); ++a) {
    const Arc& arc = g.arcs[static_cast<std::size_t>(a)];
    if (!allowed(arc, links)) continue;
    if (flow == Flow::down) {
      out.push_back({arc.from, arc.to, count_resources(arc.resources), a, -1});
    } else if (flow == Flow::up) {
      out.push_back({arc.to, arc.from, count_resources(arc.resources), -1, a});
    } else if (const int back = reverse_arc(g, a, links); back >= 0) {
      std::vector<int> both = arc.resources;
      const std::vector<int>& rs = g.arcs[static_cast<std::size_t>(back)].resources;
      both.insert(both.end(), rs.begin(), rs.end());
      out.push_back({arc.from, arc.to, count_resources(both), a, back});
    }
  }
  return out;
}

bool spans(int n, int root, const std::vector<OArc>& arcs) {
  std::vector<char> seen(static_cast<std::size_t>(n), 0);
  std::deque<int> queue{root};
  seen[static_cast<std::size_t>(root)] = 1;
  int reached = 1;
  while (!queue.empty()) {
    const int x = queue.front();
    queue.pop_front();
    for (const OArc& a : arcs)
      if (a.from == x && !seen[static_cast<std::size_t>(a.to)]) {
        seen[static_cast<std::size_t>(a.to)] = 1;
        ++reached;
        queue.push_back(a.to);
      }
  }
  return reached == n;
}

struct Edge {
  int from = 0;
  int to = 0;
  double cost = 0;
};

/// Chu–Liu / Edmonds minimum-cost arborescence rooted at `root` over vertices [0, n):
/// indices into `edges`, one entering every vertex but the root; empty when some vertex
/// cannot be reached. Contracts each cycle of cheapest in-edges, recurses, then expands
/// the cycle minus the edge the recursion's choice replaces.
std::optional<std::vector<int>> min_arborescence(int n, int root, const std::vector<Edge>& edges) {
  std::vector<double> best(static_cast<std::size_t>(n), kInf);
  std::vector<int> in(static_cast<std::size_t>(n), -1);
  for (int k = 0; k < static_cast<int>(edges.size()); ++k) {
    const Edge& e = edges[static_cast<std::size_t>(k)];
    if (e.from == e.to || e.to == root) continue;
    if (e.cost < best[static_cast<std::size_t>(e.to)]) {
      best[static_cast<std::size_t>(e.to)] = e.cost;
      in[static_cast<std::size_t>(e.to)] = k;
    }
  }
  for (int v = 0; v < n; ++v)
    if (v != root && in[static_cast<std::size_t>(v)] < 0) return std::nullopt;

  auto from_of = [&](int v) { return edges[static_cast<std::size_t>(in[static_cast<std::size_t>(v)])].from; };
  std::vector<int> comp(static_cast<std::size_t>(n), -1);
  std::vector<int> seen(static_cast<std::size_t>(n), -1);
  int cycles = 0;
  for (int v = 0; v < n; ++v) {
    int x = v;
    while (x != root && seen[static_cast<std::size_t>(x)] < 0) {
      seen[static_cast<std::size_t>(x)] = v;
      x = from_of(x);
    }
    if (x == root || seen[static_cast<std::size_t>(x)] != v || comp[static_cast<std::size_t>(x)] >= 0) continue;
    int y = x;
    do {
      comp[static_cast<std::size_t>(y)] = cycles;
      y = from_of(y);
    } while (y != x);
    ++cycles;
  }
  std::vector<int> result;
  if (cycles == 0) {
    for (int v = 0; v < n; ++v)
      if (v != root) result.push_back(in[static_cast<std::size_t>(v)]);
    return result;
  }
  int count = cycles;
  for (int& c : comp)
    if (c < 0) c = count++;
  std::vector<Edge> contracted;
  std::vector<int> origin;
  for (int k = 0; k < static_cast<int>(edges.size()); ++k) {
    const Edge& e = edges[static_cast<std::size_t>(k)];
    const int cu = comp[static_cast<std::size_t>(e.from)];
    const int cv = comp[static_cast<std::size_t>(e.to)];
    if (cu == cv) continue;
    contracted.push_back({cu, cv, e.cost - (cv < cycles ? best[static_cast<std::size_t>(e.to)] : 0.0)});
    origin.push_back(k);
  }
  const auto sub = min_arborescence(count, comp[static_cast<std::size_t>(root)], contracted);
  if (!sub) return std::nullopt;
  std::vector<int> entry(static_cast<std::size_t>(cycles), -1);
  for (int c : *sub) {
    const int k = origin[static_cast<std::size_t>(c)];
    result.push_back(k);
    const int to = edges[static_cast<std::size_t>(k)].to;
    if (comp[static_cast<std::size_t>(to)] < cycles)
      entry[static_cast<std::size_t>(comp[static_cast<std::size_t>(to)])] = to;
  }
  for (int v = 0; v < n; ++v) {
    const int c = comp[static_cast<std::size_t>(v)];
    if (c < cycles && v != entry[static_cast<std::size_t>(c)]) result.push_back(in[static_cast<std::size_t>(v)]);
  }
  return result;
}

/// A tree as the oriented arc entering each vertex (-1 at the root).
using Entering = std::vector<int>;

Tree make_tree(const std::vector<OArc>& arcs, const Entering& entering, int root, double weight) {
  const std::size_t n = entering.size();
  Tree t;
  t.root = root;
  t.parent.assign(n, -1);
  t.down.assign(n, -1);
  t.up.assign(n, -1);
  t.weight = weight;
  for (std::size_t v = 0; v < n; ++v) {
    if (entering[v] < 0) continue;
    const OArc& a = arcs[static_cast<std::size_t>(entering[v])];
    t.parent[v] = a.from;
    t.down[v] = a.down;
    t.up[v] = a.up;
  }
  return t;
}

/// Resource loads of one tree, as (resource, times).
std::map<int, int> tree_load(const std::vector<OArc>& arcs, const Entering& entering) {
  std::map<int, int> load;
  for (int a : entering)
    if (a >= 0)
      for (const auto& [r, times] : arcs[static_cast<std::size_t>(a)].load) load[r] += times;
  return load;
}

struct Candidate {
  Entering entering;
  double weight = 0;
};

/// Garg & Könemann (1998) fractional packing: prices y_e = delta / c_e; repeatedly route
/// the bottleneck amount on the cheapest arborescence and raise the prices of what it
/// loads by (1 + eps * share), until sum c_e y_e >= 1; dividing by log_{1+eps}((1+eps)/delta)
/// makes the packing feasible and (1 - eps)^3-optimal.
std::vector<Candidate> garg_konemann(const Graph& g, const std::vector<OArc>& arcs, int root, double eps) {
  const int n = g.vertices();
  std::set<int> used;
  for (const OArc& a : arcs)
    for (const auto& [r, times] : a.load) used.insert(r);
  const double m = static_cast<double>(used.size());
  const double delta = (1 + eps) * std::pow((1 + eps) * m, -1.0 / eps);
  std::vector<double> price(g.resources.size(), 0.0);
  auto capacity = [&](int r) { return g.resources[static_cast<std::size_t>(r)].capacity; };
  for (int r : used) price[static_cast<std::size_t>(r)] = delta / capacity(r);
  double total = m * delta;
  const double phases = std::log((1 + eps) / delta) / std::log1p(eps);
  // Every iteration raises the price of its bottleneck resource by 1 + eps and no price
  // passes (1 + eps) / c_e before the loop ends: at most m * phases iterations.
  const double bound = m * (std::ceil(phases) + 1);

  std::vector<Candidate> candidates;
  std::map<Entering, std::size_t> index;
  std::vector<Edge> edges(arcs.size());
  for (double iteration = 0; total < 1; ++iteration) {
    if (iteration > bound) throw std::logic_error("blink MWU exceeded its iteration bound");
    for (std::size_t a = 0; a < arcs.size(); ++a) {
      double cost = 0;
      for (const auto& [r, times] : arcs[a].load) cost += times * price[static_cast<std::size_t>(r)];
      edges[a] = {arcs[a].from, arcs[a].to, cost};
    }
    const auto chosen = min_arborescence(n, root, edges);
    if (!chosen) throw std::logic_error("blink MWU: the arcs stopped spanning the graph");
    Entering entering(static_cast<std::size_t>(n), -1);
    for (int a : *chosen) entering[static_cast<std::size_t>(arcs[static_cast<std::size_t>(a)].to)] = a;
    const std::map<int, int> load = tree_load(arcs, entering);
    double amount = kInf;
    for (const auto& [r, times] : load) amount = std::min(amount, capacity(r) / times);
    for (const auto& [r, times] : load) {
      const double before = price[static_cast<std::size_t>(r)];
      price[static_cast<std::size_t>(r)] *= 1 + eps * amount * times / capacity(r);
      total += capacity(r) * (price[static_cast<std::size_t>(r)] - before);
    }
    const auto [it, fresh] = index.try_emplace(entering, candidates.size());
    if (fresh) candidates.push_back({entering, 0});
    candidates[it->second].weight += amount;
  }
  // The scaling is feasible in exact arithmetic; rounding is caught by the worst overload.
  std::vector<double> use(g.resources.size(), 0.0);
  for (Candidate& c : candidates) {
    c.weight /= phases;
    for (const auto& [r, times] : tree_load(arcs, c.entering)) use[static_cast<std::size_t>(r)] += c.weight * times;
  }
  double overload = 1;
  for (int r : used) overload = std::max(overload, use[static_cast<std::size_t>(r)] / capacity(r));
  for (Candidate& c : candidates) c.weight /= overload;
  return candidates;
}

/// Dense simplex (Bland's rule, so it cannot cycle) for max sum(x) s.t. A x <= b, x >= 0
/// with b >= 0: the slack basis is feasible, so no first phase is needed.
std::vector<double> max_sum(const std::vector<std::vector<double>>& a, const std::vector<double>& b, std::size_t cols) {
  constexpr double kEps = 1e-12;
  constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  const std::size_t rows = a.size();
  const std::size_t rhs = cols + rows;   // last column of the tableau
  std::vector<std::vector<double>> t(rows + 1, std::vector<double>(rhs + 1, 0.0));
  std::vector<std::size_t> basis(rows);
  for (std::size_t i = 0; i < rows; ++i) {
    std::copy(a[i].begin(), a[i].end(), t[i].begin());
    t[i][cols + i] = 1;
    t[i][rhs] = b[i];
    basis[i] = cols + i;
  }
  std::vector<double>& objective = t[rows];
  std::fill(objective.begin(), objective.begin() + static_cast<std::ptrdiff_t>(cols), -1.0);
  while (true) {
    std::size_t enter = kNone;
    for (std::size_t j = 0; j < rhs && enter == kNone; ++j)
      if (objective[j] < -kEps) enter = j;
    if (enter == kNone) break;
    // Minimum ratio; among ties the row whose basic variable has the lowest index (Bland).
    double ratio = kInf;
    for (std::size_t i = 0; i < rows; ++i)
      if (t[i][enter] > kEps) ratio = std::min(ratio, t[i][rhs] / t[i][enter]);
    std::size_t leave = kNone;
    for (std::size_t i = 0; i < rows; ++i) {
      if (t[i][enter] <= kEps || t[i][rhs] / t[i][enter] > ratio + kEps) continue;
      if (leave == kNone || basis[i] < basis[leave]) leave = i;
    }
    if (leave == kNone) throw std::logic_error("blink LP is unbounded: a tree loads no resource");
    std::vector<double>& pivot = t[leave];
    const double p = pivot[enter];
    for (double& x : pivot) x /= p;
    for (std::size_t i = 0; i <= rows; ++i) {
      const double f = t[i][enter];
      if (i == leave || f == 0) continue;
      for (std::size_t j = 0; j <= rhs; ++j) t[i][j] -= f * pivot[j];
    }
    basis[leave] = enter;
  }
  std::vector<double> x(cols, 0.0);
  for (std::size_t i = 0; i < rows; ++i)
    if (basis[i] < cols) x[basis[i]] = std::max(0.0, t[i][rhs]);
  return x;
}

/// The best weights of the trees `chosen` (indices into `candidates`) under the capacities.
std::vector<double> lp_weights(const Graph& g, const std::vector<OArc>& arcs, const std::vector<Candidate>& candidates,
                               const std::vector<int>& chosen) {
  std::map<int, std::size_t> row_of;
  std::vector<std::map<int, int>> loads;
  for (int c : chosen) {
    loads.push_back(tree_load(arcs, candidates[static_cast<std::size_t>(c)].entering));
    for (const auto& [r, times] : loads.back()) row_of.try_emplace(r, row_of.size());
  }
  double scale = 0;
  for (const auto& [r, row] : row_of) scale = std::max(scale, g.resources[static_cast<std::size_t>(r)].capacity);
  std::vector<std::vector<double>> a(row_of.size(), std::vector<double>(chosen.size(), 0.0));
  std::vector<double> b(row_of.size(), 0.0);
  for (const auto& [r, row] : row_of) b[row] = g.resources[static_cast<std::size_t>(r)].capacity / scale;
  for (std::size_t j = 0; j < chosen.size(); ++j)
    for (const auto& [r, times] : loads[j]) a[row_of.at(r)][j] = times;
  std::vector<double> x = max_sum(a, b, chosen.size());
  for (double& w : x) w *= scale;
  return x;
}

double sum(const std::vector<double>& xs) {
  double s = 0;
  for (double x : xs) s += x;
  return s;
}

/// Max-flow (Edmonds–Karp) on a dense capacity matrix, stopping once `enough`: lanes (int) for
/// the integral packing, bandwidths (double) for the bounds.
template <class Capacity>
Capacity max_flow(std::vector<Capacity> cap, int n, int s, int t,
                  Capacity enough = std::numeric_limits<Capacity>::max()) {
  Capacity flow = 0;
  std::vector<int> prev(static_cast<std::size_t>(n));
  while (flow < enough) {
    std::fill(prev.begin(), prev.end(), -1);
    prev[static_cast<std::size_t>(s)] = s;
    std::deque<int> queue{s};
    while (!queue.empty() && prev[static_cast<std::size_t>(t)] < 0) {
      const int x = queue.front();
      queue.pop_front();
      for (int y = 0; y < n; ++y)
        if (prev[static_cast<std::size_t>(y)] < 0 && cap[static_cast<std::size_t>(x * n + y)] > 0) {
          prev[static_cast<std::size_t>(y)] = x;
          queue.push_back(y);
        }
    }
    if (prev[static_cast<std::size_t>(t)] < 0) break;
    Capacity push = enough - flow;
    for (int y = t; y != s; y = prev[static_cast<std::size_t>(y)])
      push = std::min(push, cap[static_cast<std::size_t>(prev[static_cast<std::size_t>(y)] * n + y)]);
    for (int y = t; y != s; y = prev[static_cast<std::size_t>(y)]) {
      cap[static_cast<std::size_t>(prev[static_cast<std::size_t>(y)] * n + y)] -= push;
      cap[static_cast<std::size_t>(y * n + prev[static_cast<std::size_t>(y)])] += push;
    }
    flow += push;
  }
  return flow;
}

/// Smallest root-to-vertex max-flow in lanes, capped at `enough`.
int root_connectivity(int n, int root, const std::vector<OArc>& arcs, const std::vector<int>& lanes, int enough) {
  std::vector<int> cap(static_cast<std::size_t>(n * n), 0);
  for (std::size_t a = 0; a < arcs.size(); ++a)
    cap[static_cast<std::size_t>(arcs[a].from * n + arcs[a].to)] += lanes[a];
  int least = enough;
  for (int v = 0; v < n; ++v)
    if (v != root) least = std::min(least, max_flow(cap, n, root, v, least));
  return least;
}

/// Edmonds' integral case: every oriented arc loads one resource once, no other arc loads
/// it, and every resource has the same per-lane rate. Returns lanes per arc and that rate.
std::optional<std::pair<std::vector<int>, double>> integral_lanes(const Graph& g, const std::vector<OArc>& arcs) {
  std::set<int> seen;
  std::vector<int> lanes;
  double unit = 0;
  for (const OArc& a : arcs) {
    if (a.load.size() != 1 || a.load.front().second != 1) return std::nullopt;
    const int r = a.load.front().first;
    if (!seen.insert(r).second) return std::nullopt;
    const Resource& res = g.resources[static_cast<std::size_t>(r)];
    const double per_lane = res.capacity / res.lanes;
    if (unit == 0) unit = per_lane;
    if (std::abs(per_lane - unit) > 1e-9 * unit) return std::nullopt;
    lanes.push_back(res.lanes);
  }
  return std::pair{lanes, unit};
}

/// Lovász's (1976) proof of Edmonds' branching theorem, run as an algorithm: with root
/// connectivity k, grow one arborescence arc by arc, taking an arc (u in tree, v not) only
/// if the remaining lanes still give connectivity k - 1 from the root (the lemma guarantees
/// such an arc exists); repeat on what is left. Arcs from shallow vertices are tried first
/// so the trees stay shallow (a shorter pipeline).
std::vector<Entering> edmonds_trees(int n, int root, const std::vector<OArc>& arcs, std::vector<int> lanes) {
  const int k = root_connectivity(n, root, arcs, lanes, std::numeric_limits<int>::max());
  std::vector<Entering> trees;
  for (int t = 0; t < k; ++t) {
    const int need = k - t - 1;
    Entering entering(static_cast<std::size_t>(n), -1);
    std::vector<int> depth(static_cast<std::size_t>(n), -1);
    depth[static_cast<std::size_t>(root)] = 0;
    for (int added = 1; added < n; ++added) {
      std::vector<int> candidates;
      for (int a = 0; a < static_cast<int>(arcs.size()); ++a) {
        const OArc& arc = arcs[static_cast<std::size_t>(a)];
        if (depth[static_cast<std::size_t>(arc.from)] >= 0 && depth[static_cast<std::size_t>(arc.to)] < 0 &&
            lanes[static_cast<std::size_t>(a)] > 0)
          candidates.push_back(a);
      }
      std::stable_sort(candidates.begin(), candidates.end(), [&](int x, int y) {
        const int dx = depth[static_cast<std::size_t>(arcs[static_cast<std::size_t>(x)].from)];
        const int dy = depth[static_cast<std::size_t>(arcs[static_cast<std::size_t>(y)].from)];
        if (dx != dy) return dx < dy;
        return lanes[static_cast<std::size_t>(x)] > lanes[static_cast<std::size_t>(y)];
      });
      bool grown = false;
      for (int a : candidates) {
        --lanes[static_cast<std::size_t>(a)];
        if (root_connectivity(n, root, arcs, lanes, need) >= need) {
          const OArc& arc = arcs[static_cast<std::size_t>(a)];
          entering[static_cast<std::size_t>(arc.to)] = a;
          depth[static_cast<std::size_t>(arc.to)] = depth[static_cast<std::size_t>(arc.from)] + 1;
          grown = true;
          break;
        }
        ++lanes[static_cast<std::size_t>(a)];
      }
      if (!grown) throw std::logic_error("blink: no arc keeps the root connectivity (Lovász's lemma violated)");
    }
    trees.push_back(std::move(entering));
  }
  return trees;
}

Packing from_candidates(const std::vector<OArc>& arcs, const std::vector<Candidate>& candidates,
                        const std::vector<int>& chosen, const std::vector<double>& weights, int root) {
  Packing p;
  p.method = "mwu";
  for (std::size_t j = 0; j < chosen.size(); ++j) {
    if (!(weights[j] > 0)) continue;
    p.trees.push_back(make_tree(arcs, candidates[static_cast<std::size_t>(chosen[j])].entering, root, weights[j]));
    p.rate += weights[j];
  }
  return p;
}


}  // namespace

Graph topology_graph(const CollectiveContext& ctx, const std::vector<int>& ranks) {
  const platforms::Platform& p = ctx.platform;
  Graph g;
  g.ranks = ranks;
  std::map<int, int> vertex_of;
  for (int r : ranks) {
    vertex_of[ctx.gpu_vertex(r)] = static_cast<int>(g.platform_vertex.size());
    g.platform_vertex.push_back(ctx.gpu_vertex(r));
  }
  const int n = g.vertices();
  ResourceTable table(p, g.resources);
  std::vector<char> direct(static_cast<std::size_t>(n * n), 0);
  if (n > 0) {
    // Node-local link i of node m has id m * links-per-node + i (platform.hpp).
    const int per_node = static_cast<int>(p.node().links.size());
    const int first = p.node_of_vertex(g.platform_vertex.front()) * per_node;
    for (int id = first; id < first + per_node; ++id) {
      const platforms::Link link = p.link(id);
      const auto a = vertex_of.find(link.a);
      const auto b = vertex_of.find(link.b);
      if (link.type != LinkType::nvlink || a == vertex_of.end() || b == vertex_of.end()) continue;
      g.arcs.push_back({a->second, b->second, ArcKind::nvlink, {table.of({id, true})}, -1});
      g.arcs.push_back({b->second, a->second, ArcKind::nvlink, {table.of({id, false})}, -1});
      direct[static_cast<std::size_t>(a->second * n + b->second)] = 1;
      direct[static_cast<std::size_t>(b->second * n + a->second)] = 1;
    }
  }
  for (int u = 0; u < n; ++u)
    for (int v = 0; v < n; ++v) {
      if (u == v) continue;
      const platforms::Route& route =
          p.route(g.platform_vertex[static_cast<std::size_t>(u)], g.platform_vertex[static_cast<std::size_t>(v)]);
      if (!any_nvlink(p, route)) {
        Arc arc{u, v, ArcKind::pcie, {}, -1};
        table.append(route, arc.resources);
        g.arcs.push_back(std::move(arc));
        continue;
      }
      if (!direct[static_cast<std::size_t>(u * n + v)] && only_nvlink(p, route)) {
        Arc arc{u, v, ArcKind::nvlink, {}, -1};
        table.append(route, arc.resources);
        g.arcs.push_back(std::move(arc));
      }
      const int cpu = host_cpu(p, g.platform_vertex[static_cast<std::size_t>(u)]);
      if (cpu < 0) continue;
      const platforms::Route& to_host = p.route(g.platform_vertex[static_cast<std::size_t>(u)], cpu);
      const platforms::Route& from_host = p.route(cpu, g.platform_vertex[static_cast<std::size_t>(v)]);
      if (any_nvlink(p, to_host) || any_nvlink(p, from_host)) continue;
      Arc arc{u, v, ArcKind::pcie, {}, cpu, static_cast<int>(to_host.hops.size())};
      table.append(to_host, arc.resources);
      table.append(from_host, arc.resources);
      g.arcs.push_back(std::move(arc));
    }
  return g;
}

Packing mwu_packing(const Graph& g, Links links, Flow flow, int root, double epsilon) {
  const std::vector<OArc> arcs = oriented(g, links, flow);
  if (g.vertices() < 2 || !spans(g.vertices(), root, arcs)) return {};
  const std::vector<Candidate> candidates = garg_konemann(g, arcs, root, epsilon);
  std::vector<int> all(candidates.size());
  std::vector<double> weights(candidates.size());
  for (std::size_t j = 0; j < candidates.size(); ++j) {
    all[j] = static_cast<int>(j);
    weights[j] = candidates[j].weight;
  }
  Packing p = from_candidates(arcs, candidates, all, weights, root);
  p.mwu_trees = static_cast<int>(candidates.size());
  p.mwu_rate = p.rate;
  return p;
}

Packing pack_trees(const Graph& g, Links links, Flow flow, int root, const PackOptions& options) {
  const int n = g.vertices();
  const std::vector<OArc> arcs = oriented(g, links, flow);
  if (n < 2 || !spans(n, root, arcs)) return {};
  if (const auto integral = integral_lanes(g, arcs)) {
    Packing p;
    p.method = "edmonds";
    for (const Entering& entering : edmonds_trees(n, root, arcs, integral->first)) {
      p.trees.push_back(make_tree(arcs, entering, root, integral->second));
      p.rate += integral->second;
    }
    return p;
  }
  const std::vector<Candidate> candidates = garg_konemann(g, arcs, root, options.epsilon);
  double mwu_rate = 0;
  for (const Candidate& c : candidates) mwu_rate += c.weight;
  std::vector<int> chosen(candidates.size());
  for (std::size_t j = 0; j < candidates.size(); ++j) chosen[j] = static_cast<int>(j);
  std::vector<double> weights = lp_weights(g, arcs, candidates, chosen);
  const double best = sum(weights);
  // Keep the trees of the basic optimum, then drop the lightest while the optimum over the
  // rest stays within the tolerance of the best.
  std::vector<int> kept;
  std::vector<double> kept_weights;
  for (std::size_t j = 0; j < chosen.size(); ++j)
    if (weights[j] > 1e-12 * best) {
      kept.push_back(chosen[j]);
      kept_weights.push_back(weights[j]);
    }
  std::vector<std::size_t> order(kept.size());
  for (std::size_t j = 0; j < order.size(); ++j) order[j] = j;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t x, std::size_t y) { return kept_weights[x] < kept_weights[y]; });
  std::vector<char> dropped(kept.size(), 0);
  for (std::size_t j : order) {
    std::vector<int> trial;
    for (std::size_t i = 0; i < kept.size(); ++i)
      if (i != j && !dropped[i]) trial.push_back(kept[i]);
    if (trial.empty()) break;
    if (sum(lp_weights(g, arcs, candidates, trial)) >= (1 - options.tolerance) * best) dropped[j] = 1;
  }
  std::vector<int> final_set;
  for (std::size_t i = 0; i < kept.size(); ++i)
    if (!dropped[i]) final_set.push_back(kept[i]);
  Packing p = from_candidates(arcs, candidates, final_set, lp_weights(g, arcs, candidates, final_set), root);
  p.mwu_trees = static_cast<int>(candidates.size());
  p.mwu_rate = mwu_rate;
  return p;
}

double root_cut(const Graph& g, Links links, Flow flow, int root) {
  if (flow == Flow::both) throw std::invalid_argument("blink::root_cut bounds one direction; use partition_bound");
  std::map<int, int> index;
  for (int v : g.platform_vertex) index.try_emplace(v, static_cast<int>(index.size()));
  std::set<int> seen;
  for (const Arc& arc : g.arcs)
    if (allowed(arc, links))
      for (int r : arc.resources)
        if (seen.insert(r).second) {
          const Resource& res = g.resources[static_cast<std::size_t>(r)];
          index.try_emplace(res.from_vertex, static_cast<int>(index.size()));
          index.try_emplace(res.to_vertex, static_cast<int>(index.size()));
        }
  const int n = static_cast<int>(index.size());
  std::vector<double> cap(static_cast<std::size_t>(n * n), 0.0);
  for (int r : seen) {
    const Resource& res = g.resources[static_cast<std::size_t>(r)];
    const int a = index.at(res.from_vertex);
    const int b = index.at(res.to_vertex);
    cap[static_cast<std::size_t>(a * n + b)] += res.capacity;
    if (res.half_duplex) cap[static_cast<std::size_t>(b * n + a)] += res.capacity;
  }
  double least = kInf;
  const int s = index.at(g.platform_vertex[static_cast<std::size_t>(root)]);
  for (int v = 0; v < g.vertices(); ++v) {
    if (v == root) continue;
    const int t = index.at(g.platform_vertex[static_cast<std::size_t>(v)]);
    least = std::min(least, flow == Flow::down ? max_flow(cap, n, s, t) : max_flow(cap, n, t, s));
  }
  return least;
}

std::optional<double> partition_bound(const Graph& g, Links links) {
  const int n = g.vertices();
  if (n < 2 || n > 10) return std::nullopt;
  std::set<int> seen;
  std::vector<double> directed(static_cast<std::size_t>(n * n), 0.0);
  for (const Arc& arc : g.arcs) {
    if (!allowed(arc, links)) continue;
    if (arc.resources.size() != 1 || !seen.insert(arc.resources.front()).second) return std::nullopt;
    directed[static_cast<std::size_t>(arc.from * n + arc.to)] +=
        g.resources[static_cast<std::size_t>(arc.resources.front())].capacity;
  }
  // A tree edge loads both directions, so an undirected pair offers the smaller of the two.
  std::vector<double> pair(static_cast<std::size_t>(n * n), 0.0);
  for (int u = 0; u < n; ++u)
    for (int v = 0; v < n; ++v)
      pair[static_cast<std::size_t>(u * n + v)] =
          std::min(directed[static_cast<std::size_t>(u * n + v)], directed[static_cast<std::size_t>(v * n + u)]);
  // Every set partition as a restricted growth string: label[0] = 0, label[i] <= max so far + 1.
  std::vector<int> label(static_cast<std::size_t>(n), 0);
  double best = kInf;
  while (true) {
    const int parts = *std::max_element(label.begin(), label.end()) + 1;
    if (parts >= 2) {
      double crossing = 0;
      for (int u = 0; u < n; ++u)
        for (int v = u + 1; v < n; ++v)
          if (label[static_cast<std::size_t>(u)] != label[static_cast<std::size_t>(v)])
            crossing += pair[static_cast<std::size_t>(u * n + v)];
      best = std::min(best, crossing / (parts - 1));
    }
    int i = n - 1;
    for (; i > 0; --i) {
      const int top = *std::max_element(label.begin(), label.begin() + i);
      if (label[static_cast<std::size_t>(i)] <= top) break;
    }
    if (i == 0) break;
    ++label[static_cast<std::size_t>(i)];
    for (int j = i + 1; j < n; ++j) label[static_cast<std::size_t>(j)] = 0;
  }
  return best;
}

bool strongly_connected(const Graph& g, Links links) {
  const int n = g.vertices();
  if (n == 0) return true;
  for (const bool forward : {true, false}) {
    std::vector<char> seen(static_cast<std::size_t>(n), 0);
    std::deque<int> queue{0};
    seen[0] = 1;
    int reached = 1;
    while (!queue.empty()) {
      const int x = queue.front();
      queue.pop_front();
      for (const Arc& arc : g.arcs) {
        if (!allowed(arc, links) || (forward ? arc.from : arc.to) != x) continue;
        const int y = forward ? arc.to : arc.from;
        if (seen[static_cast<std::size_t>(y)]) continue;
        seen[static_cast<std::size_t>(y)] = 1;
        ++reached;
        queue.push_back(y);
      }
    }
    if (reached != n) return false;
  }
  return true;
}

bool has_hamiltonian_cycle(const Graph& g, Links links) {
  const int n = g.vertices();
  if (n < 2) return false;
  std::vector<char> adjacent(static_cast<std::size_t>(n * n), 0);
  for (const Arc& arc : g.arcs)
    if (allowed(arc, links)) adjacent[static_cast<std::size_t>(arc.from * n + arc.to)] = 1;
  std::vector<char> used(static_cast<std::size_t>(n), 0);
  used[0] = 1;
  // Depth-first search over paths from vertex 0 (n is a server's GPU count).
  auto extend = [&](auto&& self, int at, int length) -> bool {
    if (length == n) return adjacent[static_cast<std::size_t>(at * n)] != 0;
    for (int next = 1; next < n; ++next) {
      if (used[static_cast<std::size_t>(next)] || !adjacent[static_cast<std::size_t>(at * n + next)]) continue;
      used[static_cast<std::size_t>(next)] = 1;
      if (self(self, next, length + 1)) return true;
      used[static_cast<std::size_t>(next)] = 0;
    }
    return false;
  };
  return extend(extend, 0, 1);
}

Tree reroot(const Tree& tree, int root) {
  const std::size_t n = tree.parent.size();
  std::vector<std::vector<int>> neighbours(n);
  for (std::size_t v = 0; v < n; ++v)
    if (tree.parent[v] >= 0) {
      neighbours[v].push_back(tree.parent[v]);
      neighbours[static_cast<std::size_t>(tree.parent[v])].push_back(static_cast<int>(v));
    }
  // The arc x -> y of edge {x, y}: down[y] when x was y's parent, up[x] when y was x's.
  auto arc = [&](int x, int y) {
    return tree.parent[static_cast<std::size_t>(y)] == x ? tree.down[static_cast<std::size_t>(y)]
                                                         : tree.up[static_cast<std::size_t>(x)];
  };
  Tree t;
  t.root = root;
  t.weight = tree.weight;
  t.parent.assign(n, -1);
  t.down.assign(n, -1);
  t.up.assign(n, -1);
  std::vector<char> seen(n, 0);
  seen[static_cast<std::size_t>(root)] = 1;
  std::deque<int> queue{root};
  while (!queue.empty()) {
    const int x = queue.front();
    queue.pop_front();
    for (int y : neighbours[static_cast<std::size_t>(x)]) {
      if (seen[static_cast<std::size_t>(y)]) continue;
      seen[static_cast<std::size_t>(y)] = 1;
      t.parent[static_cast<std::size_t>(y)] = x;
      t.down[static_cast<std::size_t>(y)] = arc(x, y);
      t.up[static_cast<std::size_t>(y)] = arc(y, x);
      queue.push_back(y);
    }
  }
  return t;
}

std::vector<int> resource_load(const Graph& g, const Tree& tree, Flow flow) {
  std::vector<int> load(g.resources.size(), 0);
  for (std::size_t v = 0; v < tree.parent.size(); ++v) {
    if (tree.parent[v] < 0) continue;
    for (int a : {flow != Flow::up ? tree.down[v] : -1, flow != Flow::down ? tree.up[v] : -1})
      if (a >= 0)
        for (int r : g.arcs[static_cast<std::size_t>(a)].resources) ++load[static_cast<std::size_t>(r)];
  }
  return load;
}

std::string describe(const Graph& g, const Tree& tree) {
  std::string text;
  std::deque<int> queue{tree.root};
  while (!queue.empty()) {
    const int x = queue.front();
    queue.pop_front();
    for (int v = 0; v < g.vertices(); ++v) {
      if (tree.parent[static_cast<std::size_t>(v)] != x) continue;
      const int a = tree.down[static_cast<std::size_t>(v)] >= 0 ? tree.down[static_cast<std::size_t>(v)]
                                                                : tree.up[static_cast<std::size_t>(v)];
      const bool pcie = g.arcs[static_cast<std::size_t>(a)].kind == ArcKind::pcie;
      if (!text.empty()) text += ' ';
      text += std::to_string(g.ranks[static_cast<std::size_t>(x)]) + (pcie ? "~>" : "->") +
              std::to_string(g.ranks[static_cast<std::size_t>(v)]);
      queue.push_back(v);
    }
  }
  return text;
}

}  // namespace stepsim::models::blink
