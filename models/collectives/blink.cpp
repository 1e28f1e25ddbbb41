/// @file Blink (Wang et al., "Blink: Fast and Generic Collectives for Distributed ML", MLSys
/// 2020; papers.md §1): collectives over spanning trees packed on the links a job actually
/// has (blink_packing.hpp) instead of rings, which fall back to PCIe on allocations without
/// an NVLink ring.
///  - broadcast / reduce: the trees rooted at the root, data down them (reduce: up, over the
///    reverse arcs); every tree's share is cut into chunks forwarded hop by hop, so every
///    level of every tree works at once after the fill.
///  - allgather / reduce-scatter: every rank broadcasts its block over its own trees
///    (receives its block's reduction over them), all ranks at once.
///  - allreduce, the three-phase protocol: in each server, every partition of the buffer is
///    reduced up undirected trees to its owner GPU; the owners of a partition on all servers
///    allreduce it in a ring over the network (reduce-scatter, then allgather); each owner
///    broadcasts it down the same trees. Reduce and broadcast load opposite directions of
///    every tree link, so chunk j's broadcast overlaps chunk j+1's reduction. One server:
///    one partition, owned by the GPU whose trees are shallowest. Servers share partitions
///    through their NICs: one owner per NIC that their GPUs' traffic leaves through.
///  - NVSwitch servers (DGX-2): one-hop trees. Broadcast: n - 1 trees root -> i -> rest;
///    allreduce on one server: partition k reduced at GPU k and broadcast from it, two hops.
///  - NVLink + PCIe: the NVLink trees and the PCIe trees (copies staged through host memory
///    where a GPU pair has NVLink) are packed apart; where NVLink does not span the server,
///    trees are packed over both at once.
///
/// Strands. Packings weigh trees arbitrarily, but a Schedule cuts every block into equal
/// pieces and engines split a link evenly among the steps crossing it. So the buffer is cut
/// into S equal strands (pieces, each its own channel) and every tree carries a whole number
/// of them; a tree with more strands gets proportionally more of a shared link. S, the
/// strands' trees and the chunk count minimise the estimated finish time (bandwidth,
/// pipeline fill, latency): this is the split that makes NVLink and PCIe finish together,
/// and it leaves PCIe trees idle where their latency outweighs their bandwidth.
///
/// Options (--algo-param): pcie=on|off (default on) adds the PCIe trees. --channels N fixes
/// the number of strands; --chunk sets the bytes the busiest tree forwards per hop.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

#include "models/collectives/blink_packing.hpp"
#include "models/collectives/lowering.hpp"
#include "platforms/config_error.hpp"

namespace stepsim::models {
namespace {

using blink::Flow;
using blink::Graph;
using blink::Links;
using blink::Tree;

/// Most strands unless a group has more trees: one strand is then 2 % of the buffer, finer
/// than the split between trees needs.
constexpr int kMaxStrands = 48;
/// Most servers: the cross-server phase stores a ring per partition, servers^2 steps a chunk.
constexpr int kMaxServers = 32;
/// Bound on the steps a schedule stores (tens of MiB of Steps); chunks are cut to fit it.
constexpr std::int64_t kMaxSteps = std::int64_t{1} << 20;

bool use_pcie(const AlgorithmOptions& options) {
  for (const auto& [key, value] : options.extra) {
    if (key != "pcie")
      throw ConfigError("--algo blink option '" + key + "'", "unknown option", "blink accepts pcie=on|off");
    if (value != "on" && value != "off")
      throw ConfigError("--algo blink option 'pcie'", "expected on or off, got '" + value + "'",
                        "write pcie=off for NVLink trees only");
  }
  const auto it = options.extra.find("pcie");
  return it == options.extra.end() || it->second == "on";
}

std::string gbps(double rate) { return fmt::format("{:.1f} GB/s", rate / kGB); }

bool through_nvswitch(const platforms::Platform& p, const platforms::Route& route) {
  return std::any_of(route.hops.begin(), route.hops.end(), [&](const platforms::Hop& hop) {
    const platforms::Link link = p.link(hop.link);
    return p.vertex(link.a).kind == platforms::VertexKind::nvswitch ||
           p.vertex(link.b).kind == platforms::VertexKind::nvswitch;
  });
}

/// Whether every pair of the server's GPUs meets through an NVSwitch: a one-hop crossbar.
bool switched(const CollectiveContext& ctx, const std::vector<int>& ranks) {
  if (ranks.size() < 2) return false;
  for (int a : ranks)
    for (int b : ranks)
      if (a != b && !through_nvswitch(ctx.platform, ctx.route(a, b))) return false;
  return true;
}

int nvlink_arc(const Graph& g, int from, int to) {
  for (int a = 0; a < static_cast<int>(g.arcs.size()); ++a) {
    const blink::Arc& arc = g.arcs[static_cast<std::size_t>(a)];
    if (arc.from == from && arc.to == to && arc.kind == blink::ArcKind::nvlink) return a;
  }
  throw std::logic_error("blink: GPUs on one NVSwitch without an NVLink arc");
}

/// The one-hop star at `root` on a crossbar: every other GPU is its child, both directions.
Tree star(const Graph& g, int root) {
  const std::size_t n = static_cast<std::size_t>(g.vertices());
  Tree t;
  t.root = root;
  t.parent.assign(n, -1);
  t.down.assign(n, -1);
  t.up.assign(n, -1);
  for (int x = 0; x < g.vertices(); ++x) {
    if (x == root) continue;
    t.parent[static_cast<std::size_t>(x)] = root;
    t.down[static_cast<std::size_t>(x)] = nvlink_arc(g, root, x);
    t.up[static_cast<std::size_t>(x)] = nvlink_arc(g, x, root);
  }
  // Its rate alone: the busiest port it loads (the root's, n - 1 times) at full capacity.
  const std::vector<int> load = blink::resource_load(g, t, Flow::both);
  t.weight = INFINITY;
  for (std::size_t r = 0; r < load.size(); ++r)
    if (load[r] > 0) t.weight = std::min(t.weight, g.resources[r].capacity / load[r]);
  return t;
}

/// NVLink trees, then PCIe trees when asked; trees over both kinds of link at once where
/// NVLink alone does not span the server from `root`.
std::vector<Tree> packed_trees(const Graph& g, Flow flow, int root, bool pcie, std::vector<std::string>& notes) {
  const std::string at = "rank " + std::to_string(g.ranks[static_cast<std::size_t>(root)]);
  std::vector<Tree> trees;
  auto add = [&](const blink::Packing& p, const std::string& what) {
    if (p.trees.empty()) {
      notes.push_back(fmt::format("no {} trees at {}: those links do not span the GPUs", what, at));
      return;
    }
    notes.push_back(fmt::format("{} trees at {}: {} ({}), {}", what, at, p.trees.size(), p.method, gbps(p.rate)));
    trees.insert(trees.end(), p.trees.begin(), p.trees.end());
  };
  const blink::Packing nvlink = blink::pack_trees(g, Links::nvlink, flow, root);
  if (nvlink.trees.empty()) {
    add(blink::pack_trees(g, Links::all, flow, root), "NVLink is disconnected; NVLink+PCIe");
    return trees;
  }
  add(nvlink, "NVLink");
  if (pcie) add(blink::pack_trees(g, Links::pcie, flow, root), "PCIe");
  return trees;
}

/// Vertices of a tree, parents before children.
std::vector<int> top_down(const Tree& t) {
  std::vector<int> order{t.root};
  for (std::size_t i = 0; i < order.size(); ++i)
    for (std::size_t v = 0; v < t.parent.size(); ++v)
      if (t.parent[v] == order[i]) order.push_back(static_cast<int>(v));
  return order;
}

/// Steps a copy over arc `a` takes: one, or two through a host buffer.
int arc_hops(const Graph& g, int a) { return g.arcs[static_cast<std::size_t>(a)].relay >= 0 ? 2 : 1; }

/// The resources of hop `h` of arc `a` (the leg before or after its relay).
std::vector<int> leg(const Graph& g, int a, int h) {
  const blink::Arc& arc = g.arcs[static_cast<std::size_t>(a)];
  if (arc.relay < 0) return arc.resources;
  const auto split = arc.resources.begin() + arc.first_leg;
  return h == 0 ? std::vector<int>(arc.resources.begin(), split) : std::vector<int>(split, arc.resources.end());
}

/// Pipeline stages of a tree: a chunk leaves vertex v going down at stage depth(parent) and
/// going up at stage height(v), each edge taking as many stages as its copy takes steps.
struct Layout {
  std::vector<int> order;  ///< parents before children
  std::vector<int> hops;   ///< per vertex: steps of the edge from its parent
  std::vector<int> depth;
  std::vector<int> height;
};

Layout layout(const Graph& g, const Tree& t) {
  const std::size_t n = t.parent.size();
  Layout l{top_down(t), std::vector<int>(n, 0), std::vector<int>(n, 0), std::vector<int>(n, 0)};
  for (int v : l.order) {
    if (v == t.root) continue;
    const std::size_t i = static_cast<std::size_t>(v);
    for (int a : {t.down[i], t.up[i]})
      if (a >= 0) l.hops[i] = std::max(l.hops[i], arc_hops(g, a));
    l.depth[i] = l.depth[static_cast<std::size_t>(t.parent[i])] + l.hops[i];
  }
  for (auto it = l.order.rbegin(); it != l.order.rend(); ++it) {
    if (*it == t.root) continue;
    const std::size_t i = static_cast<std::size_t>(*it);
    int& above = l.height[static_cast<std::size_t>(t.parent[i])];
    above = std::max(above, l.height[i] + l.hops[i]);
  }
  return l;
}

/// Stage at which a Flow::both tree's broadcast starts: after the reduction reached the
/// root and `gap` more stages (the cross-server ring of the three-phase protocol).
int down_offset(const Layout& l, const Tree& t, Flow flow, int gap) {
  return flow == Flow::both ? l.height[static_cast<std::size_t>(t.root)] + gap : 0;
}

/// What a strand costs on one tree: per pipeline stage, the resources one chunk's steps
/// load (as the lowering lays them out), and the slowest hop's latency.
struct TreeCost {
  std::vector<std::vector<std::pair<int, int>>> stage_load;  ///< per stage: (resource, times)
  Seconds hop_latency = 0;
  int hops = 0;  ///< steps one chunk of one strand takes through the tree
  double weight = 0;
};

TreeCost tree_cost(const Graph& g, const Tree& t, Flow flow, int gap) {
  const Layout l = layout(g, t);
  TreeCost c;
  c.weight = t.weight;
  std::vector<std::map<int, int>> stages;
  auto add = [&](int stage, int a) {
    for (int h = 0; h < arc_hops(g, a); ++h) {
      if (static_cast<int>(stages.size()) <= stage + h) stages.resize(static_cast<std::size_t>(stage + h) + 1);
      Seconds latency = 0;
      for (int r : leg(g, a, h)) {
        ++stages[static_cast<std::size_t>(stage + h)][r];
        latency += g.resources[static_cast<std::size_t>(r)].latency;
      }
      c.hop_latency = std::max(c.hop_latency, latency);
      ++c.hops;
    }
  };
  const int offset = down_offset(l, t, flow, gap);
  for (int v : l.order) {
    if (v == t.root) continue;
    const std::size_t i = static_cast<std::size_t>(v);
    if (flow != Flow::down) add(l.height[i], t.up[i]);
    if (flow != Flow::up) add(offset + l.depth[static_cast<std::size_t>(t.parent[i])], t.down[i]);
  }
  for (const std::map<int, int>& stage : stages) c.stage_load.emplace_back(stage.begin(), stage.end());
  return c;
}

/// Trees sharing the strands: one root's, or one server's.
struct Group {
  const Graph* graph = nullptr;
  std::vector<TreeCost> trees;
  Bytes bytes = 0;  ///< what one strand pass carries through the group's trees (cells x chunks)
};

/// Strands per tree for `pieces` strands: the buffer split by tree weights (each tree the
/// floor of its share), the remaining strands one by one where the busiest resource they
/// would load stays least busy relative to its capacity (ties: the largest unmet share).
std::vector<int> split_strands(const Group& group, int pieces) {
  const Graph& g = *group.graph;
  double total = 0;
  for (const TreeCost& t : group.trees) total += t.weight;
  std::vector<double> share(group.trees.size());
  std::vector<int> counts(group.trees.size());
  std::vector<std::vector<int>> load(group.trees.size(), std::vector<int>(g.resources.size(), 0));
  std::vector<double> busy(g.resources.size(), 0.0);
  for (std::size_t i = 0; i < group.trees.size(); ++i)
    for (const auto& stage : group.trees[i].stage_load)
      for (const auto& [r, times] : stage) load[i][static_cast<std::size_t>(r)] += times;
  int given = 0;
  for (std::size_t i = 0; i < group.trees.size(); ++i) {
    share[i] = pieces * group.trees[i].weight / total;
    counts[i] = static_cast<int>(std::floor(share[i]));
    given += counts[i];
    for (std::size_t r = 0; r < busy.size(); ++r) busy[r] += counts[i] * load[i][r];
  }
  for (; given < pieces; ++given) {
    std::size_t best = 0;
    double best_peak = INFINITY;
    for (std::size_t i = 0; i < group.trees.size(); ++i) {
      double peak = 0;
      for (std::size_t r = 0; r < busy.size(); ++r)
        if (load[i][r] > 0) peak = std::max(peak, (busy[r] + load[i][r]) / g.resources[r].capacity);
      if (peak < best_peak * (1 - 1e-12) ||
          (peak <= best_peak * (1 + 1e-12) && share[i] - counts[i] > share[best] - counts[best])) {
        best = i;
        best_peak = peak;
      }
    }
    ++counts[best];
    for (std::size_t r = 0; r < busy.size(); ++r) busy[r] += load[best][r];
  }
  return counts;
}

/// The schedule's time as the analytical engine prices it: round r holds stage s of chunk
/// r - s of every strand, and a resource's capacity is split among the round's steps that
/// cross it; a strand's step lasts its busiest resource's bytes over capacity plus a hop's
/// latency, and each tree's strands advance on their own (dataflow), so the time is the
/// slowest tree's sum of its rounds. Steady-state rounds (every stage busy) are alike and
/// priced once.
Seconds estimate(const std::vector<Group>& groups, const std::vector<std::vector<int>>& counts, int pieces,
                 int chunks) {
  int stages = 0;
  std::map<const Graph*, std::vector<double>> bytes;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    bytes[groups[g].graph].assign(groups[g].graph->resources.size(), 0.0);
    for (std::size_t i = 0; i < counts[g].size(); ++i)
      if (counts[g][i] > 0) stages = std::max(stages, static_cast<int>(groups[g].trees[i].stage_load.size()));
  }
  std::vector<std::vector<Seconds>> busy(groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g) busy[g].assign(counts[g].size(), 0.0);
  // Active stages of a tree in round r: those whose chunk r - stage exists.
  auto active = [&](const TreeCost& t, int r) {
    return std::pair{std::max(0, r - chunks + 1), std::min(r, static_cast<int>(t.stage_load.size()) - 1)};
  };
  auto add_round = [&](int r, double times) {
    for (auto& [graph, b] : bytes) std::fill(b.begin(), b.end(), 0.0);
    for (std::size_t g = 0; g < groups.size(); ++g) {
      std::vector<double>& b = bytes[groups[g].graph];
      const Bytes cell = groups[g].bytes / pieces / chunks;
      for (std::size_t i = 0; i < counts[g].size(); ++i) {
        if (counts[g][i] == 0) continue;
        const auto [low, high] = active(groups[g].trees[i], r);
        for (int st = low; st <= high; ++st)
          for (const auto& [res, n] : groups[g].trees[i].stage_load[static_cast<std::size_t>(st)])
            b[static_cast<std::size_t>(res)] += counts[g][i] * n * cell;
      }
    }
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const Graph& graph = *groups[g].graph;
      const std::vector<double>& b = bytes[groups[g].graph];
      for (std::size_t i = 0; i < counts[g].size(); ++i) {
        if (counts[g][i] == 0) continue;
        const TreeCost& t = groups[g].trees[i];
        const auto [low, high] = active(t, r);
        double peak = 0;
        for (int st = low; st <= high; ++st)
          for (const auto& [res, n] : t.stage_load[static_cast<std::size_t>(st)])
            peak = std::max(peak,
                            b[static_cast<std::size_t>(res)] / graph.resources[static_cast<std::size_t>(res)].capacity);
        if (peak > 0) busy[g][i] += times * (peak + t.hop_latency);
      }
    }
  };
  if (chunks >= stages) {
    for (int r = 0; r + 1 < stages; ++r) {
      add_round(r, 1);
      add_round(chunks + r, 1);
    }
    add_round(stages - 1, chunks - stages + 1);
  } else {
    for (int r = 0; r < chunks + stages - 1; ++r) add_round(r, 1);
  }
  Seconds slowest = 0;
  for (const std::vector<Seconds>& b : busy)
    for (Seconds t : b) slowest = std::max(slowest, t);
  // No schedule beats its busiest resource's total bytes over its capacity. The rounds above
  // miss steps of different rounds that overlap in time (roots whose trees pass a link at
  // different stages), so this bound is kept as a floor.
  for (auto& [graph, b] : bytes) std::fill(b.begin(), b.end(), 0.0);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    std::vector<double>& b = bytes[groups[g].graph];
    for (std::size_t i = 0; i < counts[g].size(); ++i)
      for (const auto& stage : groups[g].trees[i].stage_load)
        for (const auto& [res, n] : stage)
          b[static_cast<std::size_t>(res)] += counts[g][i] * n * groups[g].bytes / pieces;
  }
  for (const auto& [graph, b] : bytes)
    for (std::size_t res = 0; res < b.size(); ++res)
      slowest = std::max(slowest, b[res] / graph->resources[res].capacity);
  return slowest;
}

struct Strands {
  int pieces = 1;
  int chunks = 1;
  std::vector<std::vector<int>> tree_of_piece;  ///< per group: the tree each strand takes
};

/// Strands, their trees and chunks for the groups, by the estimate (ties: fewer strands,
/// then fewer chunks). --channels fixes the strands. Chunks: with --chunk, or where the
/// estimate cannot see the whole schedule (`search_chunks` false: the three-phase network
/// ring is outside the servers' graphs, and only a pipeline overlaps it with the trees),
/// such that the tree with most strands forwards about chunk_bytes per step; otherwise the
/// count (powers of two) the estimate likes best, as Blink tunes its chunk size (papers.md
/// §1): deep trees want many chunks to fill their pipeline, one-hop trees few, since every
/// step pays a hop's latency. Chunks stay within kMaxChunks and the step budget
/// (`steps_per_piece_chunk` x pieces x chunks <= kMaxSteps).
Strands choose_strands(const CollectiveContext& ctx, const std::vector<Group>& groups,
                       std::int64_t steps_per_piece_chunk, bool search_chunks) {
  Bytes bytes = 0;
  int trees = 1;
  for (const Group& group : groups) {
    bytes = std::max(bytes, group.bytes);
    trees = std::max(trees, static_cast<int>(group.trees.size()));
  }
  // At least a strand per tree of the biggest group (a crossbar's n - 1 broadcast trees).
  const int first = ctx.options.channels > 0 ? ctx.options.channels : 1;
  const int last = ctx.options.channels > 0 ? ctx.options.channels : std::max(kMaxStrands, trees);
  const Bytes chunk = ctx.options.chunk_bytes > 0 ? ctx.options.chunk_bytes : lowering::kDefaultChunkBytes;

  Strands best;
  std::vector<std::vector<int>> best_counts;
  Seconds best_time = INFINITY;
  for (int pieces = first; pieces <= last; ++pieces) {
    std::vector<std::vector<int>> counts;
    int most = 1;
    for (const Group& group : groups) {
      counts.push_back(split_strands(group, pieces));
      most = std::max(most, *std::max_element(counts.back().begin(), counts.back().end()));
    }
    const std::int64_t budget = kMaxSteps / std::max<std::int64_t>(1, steps_per_piece_chunk * pieces);
    const int most_chunks = static_cast<int>(std::clamp<std::int64_t>(budget, 1, lowering::kMaxChunks));
    // A fixed chunk size is compared before the step budget cuts it, so that the budget
    // (tighter with more strands) cannot pass for a gain of fewer chunks.
    std::vector<std::pair<int, int>> tries;  // (chunks compared, chunks lowered)
    if (ctx.options.chunk_bytes > 0 || !search_chunks) {
      const double wanted =
          std::clamp(std::ceil(bytes * most / pieces / chunk), 1.0, static_cast<double>(lowering::kMaxChunks));
      tries.emplace_back(static_cast<int>(wanted), std::min(static_cast<int>(wanted), most_chunks));
    } else {
      for (int chunks = 1; chunks <= most_chunks; chunks *= 2) tries.emplace_back(chunks, chunks);
    }
    for (const auto& [compared, lowered] : tries)
      if (const Seconds time = estimate(groups, counts, pieces, compared); time < best_time * (1 - 1e-9)) {
        best_time = time;
        best.pieces = pieces;
        best.chunks = lowered;
        best_counts = counts;
      }
  }
  for (const std::vector<int>& c : best_counts) {
    std::vector<int> of_piece;
    for (std::size_t t = 0; t < c.size(); ++t)
      of_piece.insert(of_piece.end(), static_cast<std::size_t>(c[t]), static_cast<int>(t));
    best.tree_of_piece.push_back(std::move(of_piece));
  }
  return best;
}

/// Steps into the schedule's rounds, with relay endpoints for copies staged in host memory.
class Emitter {
 public:
  explicit Emitter(Schedule& s) : s_(s) {}

  /// The endpoints the data of graph arc `a` crosses: its two ranks, with the host buffer
  /// between them when the copy is staged. Every (relay, from, to) gets its own endpoint, so
  /// no two copies ever share a staging cell.
  std::vector<int> path(const Graph& g, int a) {
    const blink::Arc& arc = g.arcs[static_cast<std::size_t>(a)];
    const int from = g.ranks[static_cast<std::size_t>(arc.from)];
    const int to = g.ranks[static_cast<std::size_t>(arc.to)];
    if (arc.relay < 0) return {from, to};
    const auto [it, fresh] =
        relays_.try_emplace({arc.relay, from, to}, s_.spec.ranks + static_cast<int>(s_.switch_vertices.size()));
    if (fresh) s_.switch_vertices.push_back(arc.relay);
    return {from, it->second, to};
  }

  void send(int round, int src, int dst, int block, int count, int piece, Combine combine, int channel) {
    if (static_cast<int>(s_.rounds.size()) <= round) s_.rounds.resize(static_cast<std::size_t>(round) + 1);
    s_.rounds[static_cast<std::size_t>(round)].steps.push_back(
        lowering::step(s_, src, dst, block, count, piece, combine, channel));
  }

  void finish() {
    std::erase_if(s_.rounds, [](const Round& r) { return r.steps.empty(); });
  }

 private:
  Schedule& s_;
  std::map<std::tuple<int, int, int>, int> relays_;
};

/// A tree laid out on schedule endpoints: its stages and each edge's endpoint path.
struct Placed {
  const Tree* tree = nullptr;
  Layout stages;
  std::vector<std::vector<int>> down;  ///< per vertex: endpoints parent .. v
  std::vector<std::vector<int>> up;    ///< per vertex: endpoints v .. parent
  int root_height() const { return stages.height[static_cast<std::size_t>(tree->root)]; }
};

Placed place(Emitter& e, const Graph& g, const Tree& t) {
  Placed p{&t, layout(g, t), std::vector<std::vector<int>>(t.parent.size()),
           std::vector<std::vector<int>>(t.parent.size())};
  for (int v : p.stages.order) {
    if (v == t.root) continue;
    const std::size_t i = static_cast<std::size_t>(v);
    if (t.down[i] >= 0) p.down[i] = e.path(g, t.down[i]);
    if (t.up[i] >= 0) p.up[i] = e.path(g, t.up[i]);
  }
  return p;
}

/// The trees some strand takes, laid out (a tree without strands gets no staging endpoints).
std::map<int, Placed> place_used(Emitter& e, const Graph& g, const std::vector<Tree>& trees,
                                 const std::vector<int>& tree_of_piece) {
  std::map<int, Placed> placed;
  for (int t : tree_of_piece)
    if (!placed.contains(t)) placed.emplace(t, place(e, g, trees[static_cast<std::size_t>(t)]));
  return placed;
}

/// The cells chunk j of a strand moves: (first block, block count).
using CellsOf = std::function<std::pair<int, int>(int chunk)>;

/// Chunk j leaves vertex v's parent at stage offset + j + depth(parent) and crosses the
/// edge's path one endpoint per round, so every level forwards a different chunk at once.
void down_pass(Emitter& e, const Placed& t, int piece, int channel, int offset, int chunks, const CellsOf& cells) {
  for (int j = 0; j < chunks; ++j) {
    const auto [block, count] = cells(j);
    for (int v : t.stages.order) {
      if (v == t.tree->root) continue;
      const std::vector<int>& path = t.down[static_cast<std::size_t>(v)];
      const int start =
          offset + j + t.stages.depth[static_cast<std::size_t>(t.tree->parent[static_cast<std::size_t>(v)])];
      for (std::size_t h = 0; h + 1 < path.size(); ++h)
        e.send(start + static_cast<int>(h), path[h], path[h + 1], block, count, piece, Combine::replace, channel);
    }
  }
}

/// Chunk j leaves v at stage offset + j + height(v), once its whole subtree has reached v;
/// a staging buffer takes the partial sum as is and the parent adds it to its own.
void up_pass(Emitter& e, const Placed& t, int piece, int channel, int offset, int chunks, const CellsOf& cells) {
  for (int j = 0; j < chunks; ++j) {
    const auto [block, count] = cells(j);
    for (int v : t.stages.order) {
      if (v == t.tree->root) continue;
      const std::vector<int>& path = t.up[static_cast<std::size_t>(v)];
      const int start = offset + j + t.stages.height[static_cast<std::size_t>(v)];
      for (std::size_t h = 0; h + 1 < path.size(); ++h)
        e.send(start + static_cast<int>(h), path[h], path[h + 1], block, count, piece,
               h + 2 == path.size() ? Combine::reduce : Combine::replace, channel);
    }
  }
}

/// Notes: the strands, and the first trees with their weights and edges.
void describe_trees(Schedule& s, const Graph& g, const std::vector<Tree>& trees,
                    const std::vector<int>& tree_of_piece) {
  std::vector<int> strands(trees.size(), 0);
  for (int t : tree_of_piece) ++strands[static_cast<std::size_t>(t)];
  for (std::size_t t = 0; t < trees.size() && t < 8; ++t)
    s.notes.push_back(fmt::format("tree {} ({}, {} strand{}): {}", t, gbps(trees[t].weight), strands[t],
                                  strands[t] == 1 ? "" : "s", blink::describe(g, trees[t])));
}

class Blink : public Algorithm {
 public:
  bool supports(const CollectiveSpec& spec, const CollectiveContext& ctx, std::string* why_not) const override {
    auto no = [&](std::string why) {
      if (why_not) *why_not = std::move(why);
      return false;
    };
    if (spec.ranks < 2) return no("trees need at least 2 ranks");
    if (spec.op == CollectiveOp::alltoall || spec.op == CollectiveOp::sendrecv)
      return no("Blink packs spanning trees, and " + std::string(to_string(spec.op)) +
                " has no tree form; use 'direct'");
    const int nodes = ctx.allocation.nodes(ctx.platform);
    if (nodes > 1 && spec.op != CollectiveOp::allreduce)
      return no(
          "across servers Blink runs allreduce only (its three-phase protocol); use 'hierarchical' or 'ring' for " +
          std::string(to_string(spec.op)));
    if (nodes > kMaxServers)
      return no(
          fmt::format("the three-phase schedule keeps a ring per partition across servers (servers^2 steps per "
                      "chunk), so at most {} servers; use 'hierarchical' or 'nccl'",
                      kMaxServers));
    return true;
  }

  Schedule lower(const CollectiveSpec& spec, const CollectiveContext& ctx) const override {
    lowering::require(*this, "blink", spec, ctx);
    const bool pcie = use_pcie(ctx.options);
    if (spec.op == CollectiveOp::allreduce) return allreduce(spec, ctx, pcie);
    return rooted(spec, ctx, pcie);
  }

 private:
  /// Broadcast and reduce at the root; allgather and reduce-scatter at every rank at once.
  static Schedule rooted(const CollectiveSpec& spec, const CollectiveContext& ctx, bool pcie) {
    const int n = spec.ranks;
    std::vector<int> ranks(static_cast<std::size_t>(n));
    std::iota(ranks.begin(), ranks.end(), 0);
    const Graph g = blink::topology_graph(ctx, ranks);
    const bool every_rank = spec.op == CollectiveOp::allgather || spec.op == CollectiveOp::reduce_scatter;
    const Flow flow = spec.op == CollectiveOp::broadcast || spec.op == CollectiveOp::allgather ? Flow::down : Flow::up;
    const bool crossbar = switched(ctx, ranks);
    std::vector<int> roots = every_rank ? ranks : std::vector<int>{spec.root};

    std::vector<std::string> notes;
    std::vector<std::vector<Tree>> trees;
    std::vector<Group> groups;
    std::int64_t steps = 0;
    for (int root : roots) {
      std::vector<Tree> at;
      if (crossbar && every_rank) {
        at.push_back(star(g, root));
      } else if (crossbar) {
        // Root -> i -> every other GPU: the root sends each byte once, GPU i forwards its
        // 1/(n-1) share to the others, so every port carries at most the whole buffer.
        for (int i = 0; i < n; ++i)
          if (i != root) at.push_back(blink::reroot(star(g, i), root));
      } else {
        std::vector<std::string> packed;
        at = packed_trees(g, flow, root, pcie, packed);
        if (!every_rank || root == 0) notes.insert(notes.end(), packed.begin(), packed.end());
      }
      Group group{&g, {}, every_rank ? spec.bytes / n : spec.bytes};
      int most_hops = 0;
      for (const Tree& t : at) {
        group.trees.push_back(tree_cost(g, t, flow, 0));
        most_hops = std::max(most_hops, group.trees.back().hops);
      }
      steps += most_hops;
      trees.push_back(std::move(at));
      groups.push_back(std::move(group));
    }
    if (crossbar)
      notes.push_back(every_rank ? "NVSwitch: one-hop star per rank" : "NVSwitch: trees root -> i -> all");
    else if (every_rank)
      notes.push_back("every rank runs its own trees at once (rank 0's shown)");
    const Strands strands = choose_strands(ctx, groups, steps, true);
    const int chunks = strands.chunks;
    const int pieces = strands.pieces;
    Schedule s = lowering::start(spec, "blink", every_rank ? n * chunks : chunks, pieces, pieces);
    s.notes = std::move(notes);
    s.notes.push_back(fmt::format("{} strands, {} chunks each", pieces, chunks));
    Emitter e(s);
    for (std::size_t i = 0; i < roots.size(); ++i) {
      const int root = roots[i];
      const std::map<int, Placed> placed = place_used(e, g, trees[i], strands.tree_of_piece[i]);
      const CellsOf cells = [&](int j) { return every_rank ? std::pair{j * n + root, 1} : std::pair{j, 1}; };
      for (int p = 0; p < pieces; ++p) {
        const Placed& t = placed.at(strands.tree_of_piece[i][static_cast<std::size_t>(p)]);
        if (flow == Flow::down)
          down_pass(e, t, p, p, 0, chunks, cells);
        else
          up_pass(e, t, p, p, 0, chunks, cells);
      }
      if (!every_rank) describe_trees(s, g, trees[i], strands.tree_of_piece[i]);
    }
    e.finish();
    return s;
  }

  /// Per server: the GPUs grouped by the NIC their traffic to the next server leaves
  /// through (routes leave through the NIC nearest the GPU), NICs in vertex order.
  static std::vector<std::vector<int>> nic_groups(const CollectiveContext& ctx, const std::vector<int>& server,
                                                  int other) {
    std::map<int, std::vector<int>> by_nic;
    for (std::size_t v = 0; v < server.size(); ++v) {
      int nic = -1;
      for (const platforms::Hop& hop : ctx.route(server[v], other).hops) {
        const platforms::Link link = ctx.platform.link(hop.link);
        const int to = hop.forward ? link.b : link.a;
        if (ctx.platform.vertex(to).kind == platforms::VertexKind::nic) {
          nic = to;
          break;
        }
      }
      by_nic[nic].push_back(static_cast<int>(v));
    }
    std::vector<std::vector<int>> groups;
    for (auto& [nic, vertices] : by_nic) groups.push_back(std::move(vertices));
    return groups;
  }

  /// The three-phase allreduce (one server: reduce to the owner, broadcast back).
  static Schedule allreduce(const CollectiveSpec& spec, const CollectiveContext& ctx, bool pcie) {
    const std::vector<std::vector<int>> servers = lowering::ranks_by_node(ctx);
    const int count = static_cast<int>(servers.size());
    std::vector<Graph> graphs;
    std::vector<char> crossbar;
    std::vector<std::vector<Tree>> base(servers.size());
    std::vector<std::string> notes;
    // Across servers the owners' traffic leaves through their PCIe links to the NICs, the
    // slowest phase; PCIe trees would take those links from it, so only NVLink trees run.
    const bool pcie_trees = pcie && count == 1;
    for (std::size_t s = 0; s < servers.size(); ++s) {
      graphs.push_back(blink::topology_graph(ctx, servers[s]));
      crossbar.push_back(switched(ctx, servers[s]));
      if (servers[s].size() >= 2 && !crossbar[s]) base[s] = packed_trees(graphs[s], Flow::both, 0, pcie_trees, notes);
    }

    // Owners: owner[s][k] is the vertex of server s holding partition k.
    std::vector<std::vector<int>> owner(servers.size());
    int partitions = 1;
    if (count == 1 && crossbar[0]) {
      partitions = spec.ranks;
      for (int k = 0; k < partitions; ++k) owner[0].push_back(k);
    } else if (count == 1) {
      owner[0].push_back(shallowest_root(graphs[0], base[0]));
    } else {
      std::vector<std::vector<std::vector<int>>> by_nic;
      partitions = spec.ranks;
      for (std::size_t s = 0; s < servers.size(); ++s) {
        by_nic.push_back(nic_groups(ctx, servers[s], servers[(s + 1) % servers.size()].front()));
        partitions = std::min(partitions, static_cast<int>(by_nic.back().size()));
      }
      for (std::size_t s = 0; s < servers.size(); ++s)
        for (int k = 0; k < partitions; ++k) owner[s].push_back(by_nic[s][static_cast<std::size_t>(k)].front());
    }
    // trees[s][k]: server s's trees rooted at partition k's owner.
    std::vector<std::vector<std::vector<Tree>>> trees(servers.size());
    std::vector<Group> groups;
    std::vector<int> group_of(servers.size(), -1);
    std::int64_t steps = static_cast<std::int64_t>(partitions) * 2 * (count - 1) * count;
    for (std::size_t s = 0; s < servers.size(); ++s) {
      for (int k = 0; k < partitions; ++k) {
        std::vector<Tree> at;
        if (servers[s].size() >= 2 && crossbar[s]) at.push_back(star(graphs[s], owner[s][static_cast<std::size_t>(k)]));
        for (const Tree& t : base[s]) at.push_back(blink::reroot(t, owner[s][static_cast<std::size_t>(k)]));
        trees[s].push_back(std::move(at));
      }
      if (trees[s].front().empty()) continue;
      // A strand on tree i moves its cells of every partition, each over tree i rooted at
      // that partition's owner: its cost sums theirs.
      Group group{&graphs[s], {}, spec.bytes / partitions};
      for (std::size_t i = 0; i < trees[s].front().size(); ++i) {
        TreeCost sum;
        for (int k = 0; k < partitions; ++k) {
          const TreeCost c =
              tree_cost(graphs[s], trees[s][static_cast<std::size_t>(k)][i], Flow::both, 2 * (count - 1));
          if (sum.stage_load.size() < c.stage_load.size()) sum.stage_load.resize(c.stage_load.size());
          for (std::size_t st = 0; st < c.stage_load.size(); ++st)
            sum.stage_load[st].insert(sum.stage_load[st].end(), c.stage_load[st].begin(), c.stage_load[st].end());
          sum.hop_latency = std::max(sum.hop_latency, c.hop_latency);
          sum.hops += c.hops;
          sum.weight = c.weight;
        }
        group.trees.push_back(std::move(sum));
      }
      int most_hops = 0;
      for (const TreeCost& c : group.trees) most_hops = std::max(most_hops, c.hops);
      steps += most_hops;
      group_of[s] = static_cast<int>(groups.size());
      groups.push_back(std::move(group));
    }
    // Servers of one GPU have no trees; with none anywhere the owners' ring is all there is.
    Strands strands;
    if (groups.empty()) {
      strands.pieces = std::max(1, ctx.options.channels);
      strands.chunks = lowering::pipeline_chunk_count(ctx, spec.bytes / partitions, strands.pieces, 2 * (count - 1));
    } else {
      strands = choose_strands(ctx, groups, std::max<std::int64_t>(steps, 1), count == 1);
    }
    const int chunks = strands.chunks;
    const int pieces = strands.pieces;

    Schedule s = lowering::start(spec, "blink", partitions * chunks * count, pieces, pieces);
    s.notes = std::move(notes);
    if (count > 1)
      s.notes.push_back(fmt::format("three-phase: {} servers, {} partitions (one per NIC in use), ring across servers",
                                    count, partitions));
    else if (crossbar[0])
      s.notes.push_back("NVSwitch: partition k reduced at rank k, broadcast from it (one-hop stars)");
    else
      s.notes.push_back(fmt::format("reduce to rank {} and broadcast back over the same trees",
                                    servers[0][static_cast<std::size_t>(owner[0][0])]));
    s.notes.push_back(fmt::format("{} strands, {} chunks each", pieces, chunks));
    Emitter e(s);
    for (int k = 0; k < partitions; ++k) {
      const CellsOf cells = [&](int j) { return std::pair{(k * chunks + j) * count, count}; };
      std::vector<std::map<int, Placed>> placed(servers.size());
      int reduced = 0;  // stages until every server's owner holds chunk 0 reduced
      for (std::size_t srv = 0; srv < servers.size(); ++srv) {
        if (group_of[srv] < 0) continue;
        const std::vector<int>& tree_of_piece = strands.tree_of_piece[static_cast<std::size_t>(group_of[srv])];
        placed[srv] = place_used(e, graphs[srv], trees[srv][static_cast<std::size_t>(k)], tree_of_piece);
        for (const auto& [t, laid] : placed[srv]) reduced = std::max(reduced, laid.root_height());
      }
      for (int p = 0; p < pieces; ++p)
        for (std::size_t srv = 0; srv < servers.size(); ++srv) {
          if (group_of[srv] < 0) continue;
          const Placed& t = placed[srv].at(
              strands.tree_of_piece[static_cast<std::size_t>(group_of[srv])][static_cast<std::size_t>(p)]);
          up_pass(e, t, p, p, 0, chunks, cells);
          down_pass(e, t, p, p, reduced + 2 * (count - 1), chunks, cells);
        }
      // Ring allreduce of partition k among its owners, sub-block g of each chunk per server
      // (Patarasuk & Yuan 2009): position i sends g = i - t - 1 reducing, then g = i - t.
      auto owner_rank = [&](int i) {
        return servers[static_cast<std::size_t>(i)]
                      [static_cast<std::size_t>(owner[static_cast<std::size_t>(i)][static_cast<std::size_t>(k)])];
      };
      for (int j = 0; j < chunks; ++j)
        for (int p = 0; p < pieces; ++p)
          for (int t = 0; t + 1 < count; ++t)
            for (int i = 0; i < count; ++i) {
              const int next = (i + 1) % count;
              const int base = (k * chunks + j) * count;
              e.send(reduced + j + t, owner_rank(i), owner_rank(next), base + ((i - t - 1) % count + count) % count, 1,
                     p, Combine::reduce, p);
              e.send(reduced + j + count - 1 + t, owner_rank(i), owner_rank(next),
                     base + ((i - t) % count + count) % count, 1, p, Combine::replace, p);
            }
    }
    for (std::size_t srv = 0; srv < servers.size() && srv < 4; ++srv)
      if (group_of[srv] >= 0 && !trees[srv].front().empty())
        describe_trees(s, graphs[srv], trees[srv].front(),
                       strands.tree_of_piece[static_cast<std::size_t>(group_of[srv])]);
    e.finish();
    return s;
  }

  /// The vertex whose rerooted trees have the fewest pipeline stages (ties: lowest).
  static int shallowest_root(const Graph& g, const std::vector<Tree>& trees) {
    int best = 0;
    int best_stages = std::numeric_limits<int>::max();
    for (int v = 0; v < g.vertices(); ++v) {
      int stages = 0;
      for (const Tree& t : trees)
        stages = std::max(stages, static_cast<int>(tree_cost(g, blink::reroot(t, v), Flow::both, 0).stage_load.size()));
      if (stages < best_stages) {
        best = v;
        best_stages = stages;
      }
    }
    return best;
  }
};

}  // namespace

STEPSIM_REGISTER_ALGORITHM(
    Blink, "blink", "Blink (MLSys'20): packed spanning trees over NVLink + PCIe, three-phase allreduce across servers",
    {{"pcie", "on", "on|off: also pack trees over PCIe (off: NVLink trees only)"}})

}  // namespace stepsim::models
