/// @file Schedules for NCCL's algorithms (see nccl_lower.hpp). Structure follows NCCL's
/// device code: src/device/all_reduce.h (ring: reduce-scatter then allgather over n-1 steps
/// each; tree: reduce up, broadcast down; NVLS: multimem reduce in the switch, multicast back;
/// CollNet: node head <-> SHARP), src/device/broadcast.h / reduce.h (ring chains) and
/// src/device/sendrecv.h (p2p), and src/graph/trees.cc (double binary tree over nodes).
#include "models/collectives/nccl_lower.hpp"

#include <algorithm>
#include <functional>
#include <map>

#include "models/collectives/lowering.hpp"
#include "models/collectives/nccl_topology.hpp"
#include "models/collectives/ring_order.hpp"

namespace stepsim::models::nccl {
namespace {

/// Thread groups of a split pipeline (all_reduce.h runTreeSplit): reduce up, broadcast down.
constexpr int kUpLane = 0;
constexpr int kDownLane = 1;

std::vector<int> concat(const std::vector<std::vector<int>>& parts) {
  std::vector<int> out;
  for (const auto& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

/// Parent of node index j in tree t of NCCL's double binary tree (trees.cc builds two
/// complementary trees; we use a heap over node indices and its mirror image, so most
/// nodes that are inner in one tree are leaves in the other). -1 for the root.
int node_parent(int j, int nodes, int tree) {
  if (tree == 0) return j == 0 ? -1 : (j - 1) / 2;
  const int m = nodes - 1 - j;
  return m == 0 ? -1 : nodes - 1 - (m - 1) / 2;
}

int node_depth(int j, int nodes, int tree) {
  int d = 0;
  for (int p = node_parent(j, nodes, tree); p >= 0; p = node_parent(p, nodes, tree)) ++d;
  return d;
}

/// Endpoint of each node's NVSwitch (ranks + i), in the schedule's switch_vertices.
std::vector<int> add_node_switches(Schedule& s, const CollectiveContext& ctx,
                                   const std::vector<std::vector<int>>& nodes) {
  std::vector<int> endpoint;
  for (const auto& ranks : nodes) {
    s.switch_vertices.push_back(ctx.platform.nvswitch_vertex(ctx.node_of(ranks.front())));
    endpoint.push_back(s.spec.ranks + static_cast<int>(s.switch_vertices.size()) - 1);
  }
  return endpoint;
}

}  // namespace

std::vector<std::vector<std::vector<int>>> channel_node_orders(const CollectiveContext& ctx, int channels) {
  if (const MeshRings mesh = nccl_mesh_rings(ctx, nvb_paths(ctx)); mesh.channels > 0) {
    // NCCL's own rings on an NVLink mesh, one per channel; ncclTopoDupChannels repeats
    // them in order when the graph has more channels than rings.
    std::vector<std::vector<std::vector<int>>> out;
    for (int c = 0; c < channels; ++c)
      out.push_back({mesh.rings[static_cast<std::size_t>(c) % mesh.rings.size()]});
    return out;
  }
  const std::vector<std::vector<int>> nodes = lowering::ranks_by_node(ctx);
  std::vector<std::vector<int>> base;
  for (const auto& node : nodes) base.push_back(widest_order(ctx, node, nodes.size() == 1));
  const int nics = std::max(1, static_cast<int>(ctx.platform.node().nics.size()));
  std::vector<std::vector<std::vector<int>>> out;
  for (int c = 0; c < channels; ++c) {
    std::vector<std::vector<int>> orders = base;
    if (nodes.size() > 1)
      for (auto& order : orders) {
        const int len = static_cast<int>(order.size());
        std::rotate(order.begin(), order.begin() + ((c % nics) * len / nics) % len, order.end());
      }
    out.push_back(std::move(orders));
  }
  return out;
}

void append_staged(Schedule& s, const std::vector<std::vector<StagedEdge>>& per_channel, int chunks) {
  const int depth = staged_depth(per_channel);
  // Rounds depth-1 .. chunks-1 hold every edge, each on the chunk one after the previous
  // round's: one compact round repeated with block_shift 1 (fill and drain stay explicit).
  const int steady_first = depth - 1, steady_last = chunks - 1;
  for (int t = 0; t + 1 < chunks + depth; ++t) {
    Round round;
    for (std::size_t c = 0; c < per_channel.size(); ++c)
      for (const StagedEdge& e : per_channel[c]) {
        const int chunk = t - e.stage;
        if (chunk < 0 || chunk >= chunks) continue;
        const int ch = static_cast<int>(c);
        Step step = lowering::step(s, e.src, e.dst, chunk, 1, ch, e.combine, ch);
        step.src_lane = e.src_lane;
        step.dst_lane = e.dst_lane;
        round.steps.push_back(step);
      }
    if (t == steady_first && steady_last > steady_first) {
      round.repeat = steady_last - steady_first + 1;
      round.block_shift = 1;
      t = steady_last;
    }
    if (!round.steps.empty()) s.rounds.push_back(std::move(round));
  }
}

int staged_depth(const std::vector<std::vector<StagedEdge>>& per_channel) {
  int depth = 0;
  for (const auto& edges : per_channel)
    for (const StagedEdge& e : edges) depth = std::max(depth, e.stage + 1);
  return depth;
}

Schedule lower_ring(const CollectiveSpec& spec, const CollectiveContext& ctx, int channels) {
  const int n = spec.ranks;
  Schedule s = lowering::start(spec, "nccl:ring", n, channels, channels);
  if (n < 2) return s;
  const auto per_channel = channel_node_orders(ctx, channels);
  std::vector<std::vector<int>> rings;
  for (const auto& orders : per_channel) rings.push_back(concat(orders));
  const bool uniform = std::all_of(rings.begin(), rings.end(), [&](const auto& r) { return r == rings.front(); });
  // Position p owns the block of the rank standing there: its allgather input and its
  // reduce-scatter output (NCCL's ring: step k sends the chunk of position p - k - 1).
  const lowering::Owned at_position = uniform ? lowering::Owned{} : lowering::own_by_position(s, rings);
  auto pass = [&](Combine combine, int offset) {
    if (uniform) {
      const std::vector<int>& ring = rings.front();
      lowering::append_ring_pass(
          s, {ring}, [&](int, int p, int c) { return std::vector<lowering::CellRun>{{ring[static_cast<std::size_t>(p)], 1, c}}; },
          combine, offset);
      return;
    }
    // Differing rings per channel: blocks indexed by ring position (allgather/reduce-scatter
    // record each position's rank as the block's owner), so every pass is one compact Round
    // however the rings differ.
    lowering::append_channel_ring_pass(s, rings, at_position, combine, offset);
  };
  if (spec.op != CollectiveOp::allgather) pass(Combine::reduce, 1);
  if (spec.op != CollectiveOp::reduce_scatter) pass(Combine::replace, 0);
  return s;
}

Schedule lower_chain(const CollectiveSpec& spec, const CollectiveContext& ctx, int channels,
                     const ChunkPolicy& chunks) {
  const int n = spec.ranks;
  const bool broadcast = spec.op == CollectiveOp::broadcast;
  std::vector<std::vector<StagedEdge>> edges;
  for (const auto& orders : channel_node_orders(ctx, channels)) {
    std::vector<int> chain = concat(orders);
    auto root = std::find(chain.begin(), chain.end(), spec.root);
    // Broadcast flows from the root; reduce flows into it (it is last).
    std::rotate(chain.begin(), broadcast ? root : root + 1, chain.end());
    std::vector<StagedEdge> e;
    for (int i = 0; i + 1 < n; ++i)
      e.push_back({chain[static_cast<std::size_t>(i)], chain[static_cast<std::size_t>(i) + 1],
                   broadcast ? Combine::replace : Combine::reduce, i});
    edges.push_back(std::move(e));
  }
  const int k = n < 2 ? 1 : chunks(staged_depth(edges));
  Schedule s = lowering::start(spec, "nccl:ring", k, channels, channels);
  append_staged(s, edges, k);
  return s;
}

Schedule lower_tree(const CollectiveSpec& spec, const CollectiveContext& ctx, int channels,
                    const ChunkPolicy& chunks) {
  std::vector<std::vector<StagedEdge>> edges;
  const auto per_channel = channel_node_orders(ctx, channels);
  for (int c = 0; c < channels; ++c) {
    const auto& orders = per_channel[static_cast<std::size_t>(c)];
    const int nodes = static_cast<int>(orders.size());
    const int tree = channels > 1 ? c % 2 : 0;
    // Rank-level tree: the node's chain hangs off its head (orders[j][0]); heads follow
    // the node tree.
    std::map<int, int> parent;
    std::map<int, int> depth;
    std::vector<int> by_depth(static_cast<std::size_t>(nodes));
    for (int j = 0; j < nodes; ++j) by_depth[static_cast<std::size_t>(j)] = j;
    std::stable_sort(by_depth.begin(), by_depth.end(), [&](int a, int b) {
      return node_depth(a, nodes, tree) < node_depth(b, nodes, tree);
    });
    for (int j : by_depth) {
      const std::vector<int>& chain = orders[static_cast<std::size_t>(j)];
      const int pj = node_parent(j, nodes, tree);
      const int head = chain.front();
      parent[head] = pj < 0 ? -1 : orders[static_cast<std::size_t>(pj)].front();
      depth[head] = pj < 0 ? 0 : depth[parent[head]] + 1;
      for (std::size_t i = 1; i < chain.size(); ++i) {
        parent[chain[i]] = chain[i - 1];
        depth[chain[i]] = depth[chain[i - 1]] + 1;
      }
    }
    int dm = 0;
    for (const auto& [r, d] : depth) dm = std::max(dm, d);
    std::vector<StagedEdge> e;
    for (const auto& [r, p] : parent) {
      if (p < 0) continue;
      const int down_lane = parent[p] < 0 ? kUpLane : kDownLane;   // the root has one group
      e.push_back({r, p, Combine::reduce, dm - depth[r], kUpLane, kUpLane});
      e.push_back({p, r, Combine::replace, dm + depth[r] - 1, down_lane, kDownLane});
    }
    edges.push_back(std::move(e));
  }
  const int k = spec.ranks < 2 ? 1 : chunks(staged_depth(edges));
  Schedule s = lowering::start(spec, "nccl:tree", k, channels, channels);
  s.lanes = 2;
  append_staged(s, edges, k);
  return s;
}

namespace {

Schedule lower_nvls_gather_scatter(const CollectiveSpec& spec, const CollectiveContext& ctx, int channels,
                                   const ChunkPolicy& chunks) {
  // all_gather.h / reduce_scatter.h NVLS on one node: a rank multicasts its block through the
  // switch (multimem.st) to every rank, or the switch reduces a block from every rank
  // (multimem.ld_reduce) for its owner. Block j * n + r is rank r's part of chunk j.
  const int n = spec.ranks;
  const bool gather = spec.op == CollectiveOp::allgather;
  const int k = chunks(2);
  Schedule s = lowering::start(spec, "nccl:nvls", n * k, channels, channels);
  const int sw = add_node_switches(s, ctx, lowering::ranks_by_node(ctx)).front();
  auto stage = [&](int which, int chunk, Round& round) {
    for (int c = 0; c < channels; ++c)
      for (int r = 0; r < n; ++r) {
        const int block = chunk * n + r;
        if (which == 0) {
          if (gather) round.steps.push_back(lowering::step(s, r, sw, block, 1, c, Combine::replace, c));
          else
            for (int q = 0; q < n; ++q) round.steps.push_back(lowering::step(s, q, sw, block, 1, c, Combine::reduce, c));
        } else if (gather) {
          for (int q = 0; q < n; ++q)
            if (q != r) round.steps.push_back(lowering::step(s, sw, q, block, 1, c, Combine::replace, c));
        } else {
          round.steps.push_back(lowering::step(s, sw, r, block, 1, c, Combine::replace, c));
        }
      }
  };
  Round fill, drain;
  stage(0, 0, fill);
  s.rounds.push_back(std::move(fill));
  if (k > 1) {
    Round steady;   // chunk j + 1 enters the switch while chunk j leaves it
    stage(0, 1, steady);
    stage(1, 0, steady);
    steady.repeat = k - 1;
    steady.block_shift = n;
    s.rounds.push_back(std::move(steady));
  }
  stage(1, k - 1, drain);
  s.rounds.push_back(std::move(drain));
  return s;
}

}  // namespace

Schedule lower_nvls(const CollectiveSpec& spec, const CollectiveContext& ctx, int channels,
                    const ChunkPolicy& chunks) {
  // Across nodes the tuning offers NVLS for AllReduce only (nvls_disabled_reason).
  if (spec.op != CollectiveOp::allreduce) return lower_nvls_gather_scatter(spec, ctx, channels, chunks);
  Schedule s = lowering::start(spec, "nccl:nvls", 1, channels, channels);
  const std::vector<std::vector<int>> nodes = lowering::ranks_by_node(ctx);
  const std::vector<int> sw = add_node_switches(s, ctx, nodes);
  const int nn = static_cast<int>(nodes.size());
  std::vector<std::vector<StagedEdge>> edges;
  const auto per_channel = channel_node_orders(ctx, channels);
  for (int c = 0; c < channels; ++c) {
    const auto& orders = per_channel[static_cast<std::size_t>(c)];
    std::vector<StagedEdge> e;
    if (nn == 1) {
      // multimem.ld_reduce / st: every rank's contribution reduces in the switch, which
      // multicasts the sum to every rank. NCCL's scatter, reduce and gather warps run
      // concurrently here too, but this form keeps one lane: the NVLS handover
      // (nccl_slices.cpp, 3.5 us) was fitted on it, and two lanes without a re-fit move
      // azure-h100 from 5.5 to 14.1 % (sizes >= 1 MiB).
      for (int r : orders.front()) {
        e.push_back({r, sw[0], Combine::reduce, 0});
        e.push_back({sw[0], r, Combine::replace, 1});
      }
    } else {
      // NVLSTree: node sums meet over a tree of the channel's head GPUs. NCCL runs the way up
      // (scatter into the switch, reduce from it, send to the parent) and the way down
      // (receive from the parent, multicast, gather) in thread groups of their own
      // (all_reduce.h, NVLS_TREE: scatter/reduce/bcast/gather warps), so they are two lanes;
      // the root's reduce group also broadcasts.
      const int tree = channels > 1 ? c % 2 : 0;
      int dn = 0;
      for (int j = 0; j < nn; ++j) dn = std::max(dn, node_depth(j, nn, tree));
      for (int j = 0; j < nn; ++j) {
        const std::vector<int>& local = orders[static_cast<std::size_t>(j)];
        const int head = local.front();
        const int d = node_depth(j, nn, tree);
        const int pj = node_parent(j, nn, tree);
        // The head keeps its own contribution and receives the rest of its node's sum as a
        // reduction: a replace here would be unordered with a child head's reduction into the
        // same cell (nothing in the dependency contract orders the two).
        const int head_down = pj < 0 ? kUpLane : kDownLane;
        const int sw_j = sw[static_cast<std::size_t>(j)];
        if (local.size() > 1) {
          for (int r : local)
            if (r != head) e.push_back({r, sw_j, Combine::reduce, 0, kUpLane, kUpLane});
          e.push_back({sw_j, head, Combine::reduce, 1, kUpLane, kUpLane});
        }
        if (pj >= 0) {
          const int phead = orders[static_cast<std::size_t>(pj)].front();
          const int parent_down = node_parent(pj, nn, tree) < 0 ? kUpLane : kDownLane;
          e.push_back({head, phead, Combine::reduce, 2 + dn - d, kUpLane, kUpLane});
          e.push_back({phead, head, Combine::replace, 2 + dn + d - 1, parent_down, kDownLane});
        }
        if (local.size() > 1) {
          e.push_back({head, sw_j, Combine::replace, 2 + dn + d, head_down, kDownLane});
          for (int r : local)
            if (r != head) e.push_back({sw_j, r, Combine::replace, 3 + dn + d, kDownLane, kDownLane});
        }
      }
    }
    edges.push_back(std::move(e));
  }
  const int k = spec.ranks < 2 ? 1 : chunks(staged_depth(edges));
  s.num_blocks = k;
  s.block_bytes = spec.bytes / k;
  if (nn > 1) s.lanes = 2;
  append_staged(s, edges, k);
  return s;
}

Schedule lower_collnet(const CollectiveSpec& spec, const CollectiveContext& ctx, int channels,
                       const ChunkPolicy& chunks, bool chain) {
  Schedule s = lowering::start(spec, chain ? "nccl:collnet_chain" : "nccl:collnet_direct", 1, channels, channels);
  // The SHARP aggregation point: the fabric's top switch (the last fabric vertex).
  s.switch_vertices.push_back(ctx.platform.vertex_count() - 1);
  const int sharp = spec.ranks;
  std::vector<std::vector<StagedEdge>> edges;
  for (const auto& orders : channel_node_orders(ctx, channels)) {
    std::vector<StagedEdge> e;
    int longest = 1;
    for (const auto& local : orders) longest = std::max(longest, static_cast<int>(local.size()));
    const int up = chain ? longest - 1 : 1;   // stages to gather a node's sum at its head
    for (const auto& local : orders) {
      const int head = local.front();
      const int len = static_cast<int>(local.size());
      for (int i = 1; i < len; ++i) {
        const int from = local[static_cast<std::size_t>(i)];
        const int to = chain ? local[static_cast<std::size_t>(i) - 1] : head;
        // Chain: the tail starts so that every link fires right after its upstream one.
        e.push_back({from, to, Combine::reduce, chain ? up - i : 0});
        e.push_back({to, from, Combine::replace, chain ? up + 1 + i : up + 2});
      }
      e.push_back({head, sharp, Combine::reduce, up});
      e.push_back({sharp, head, Combine::replace, up + 1});
    }
    edges.push_back(std::move(e));
  }
  const int k = spec.ranks < 2 ? 1 : chunks(staged_depth(edges));
  s.num_blocks = k;
  s.block_bytes = spec.bytes / k;
  append_staged(s, edges, k);
  return s;
}

Schedule lower_p2p(const CollectiveSpec& spec, const CollectiveContext&, int channels) {
  const int n = spec.ranks;
  const bool a2a = spec.op == CollectiveOp::alltoall;
  Schedule s = lowering::start(spec, "nccl:p2p", a2a ? n * n : n, channels, channels);
  if (n < 2) return s;
  Round round;
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < channels; ++c) {
      if (!a2a) {
        round.steps.push_back(lowering::step(s, r, (r + 1) % n, r, 1, c, Combine::replace, c));
        continue;
      }
      for (int d = 0; d < n; ++d)
        if (d != r) round.steps.push_back(lowering::step(s, r, d, r * n + d, 1, c, Combine::replace, c));
    }
  s.rounds.push_back(std::move(round));
  return s;
}

}  // namespace stepsim::models::nccl
