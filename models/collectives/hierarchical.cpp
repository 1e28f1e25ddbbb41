/// @file Two-level collectives (intra-node then inter-node, as in Horovod's hierarchical
/// allreduce and NCCL's tree/ring split; ASTRA-sim's per-dimension algorithm lists): the
/// GPUs of a node form a ring, and GPUs at the same ring position on every node form a
/// "rail" ring across nodes, so each GPU's network traffic is 1/G of the data.
///  - allreduce: intra-node reduce-scatter of G shards, inter-node ring allreduce of each
///    shard along its rail, intra-node allgather.
///  - allgather: inter-node allgather along the rails, then intra-node allgather of the
///    rails' blocks. reduce_scatter: the mirror image (intra first, then rails).
///  - broadcast: pipelined chain across nodes along the root's rail, then inside each node.
///    reduce: the mirror image.
#include <algorithm>

#include "models/collectives/lowering.hpp"
#include "models/collectives/ring_order.hpp"

namespace stepsim::models {
namespace {

using lowering::CellRun;

/// The GPUs of the allocation as a grid: node_rings[m][i] is the rank at ring position i on
/// node m; rails[i][m] the same rank seen from rail i.
struct Grid {
  std::vector<std::vector<int>> node_rings;
  std::vector<std::vector<int>> rails;

  explicit Grid(const CollectiveContext& ctx) {
    for (const auto& ranks : lowering::ranks_by_node(ctx)) node_rings.push_back(widest_order(ctx, ranks, true));
    rails.assign(node_rings.front().size(), {});
    for (const auto& ring : node_rings)
      for (std::size_t i = 0; i < ring.size(); ++i) rails[i].push_back(ring[i]);
  }

  /// Rail i's blocks (block = rank, as allgather/reduce-scatter define them) as runs.
  std::vector<CellRun> rail_blocks(int i, int piece) const {
    std::vector<int> blocks = rails[static_cast<std::size_t>(i)];
    std::sort(blocks.begin(), blocks.end());
    std::vector<CellRun> runs;
    for (int b : blocks) {
      if (!runs.empty() && runs.back().block + runs.back().count == b) ++runs.back().count;
      else runs.push_back({b, 1, piece});
    }
    return runs;
  }
};

std::vector<int> rotated(std::vector<int> ring, std::size_t first) {
  std::rotate(ring.begin(), ring.begin() + static_cast<long>(first), ring.end());
  return ring;
}

class Hierarchical : public Algorithm {
 public:
  bool supports(const CollectiveSpec& spec, const CollectiveContext& ctx, std::string* why_not) const override {
    auto no = [&](std::string why) {
      if (why_not) *why_not = std::move(why);
      return false;
    };
    if (spec.op == CollectiveOp::alltoall || spec.op == CollectiveOp::sendrecv)
      return no("no two-level form of " + std::string(to_string(spec.op)) + "; use 'direct'");
    const auto nodes = lowering::ranks_by_node(ctx);
    if (nodes.size() < 2) return no("the allocation spans one node, so there is no inter-node level; use 'ring'");
    for (const auto& node : nodes)
      if (node.size() != nodes.front().size())
        return no("GPUs per node differ (" + std::to_string(nodes.front().size()) + " vs " +
                  std::to_string(node.size()) + "); the rails across nodes need the same count on every node");
    return true;
  }

  Schedule lower(const CollectiveSpec& spec, const CollectiveContext& ctx) const override {
    lowering::require(*this, "hierarchical", spec, ctx);
    const Grid g(ctx);
    const int nodes = static_cast<int>(g.node_rings.size());
    const int local = static_cast<int>(g.rails.size());
    const int channels = lowering::channel_count(ctx);
    Schedule s;
    switch (spec.op) {
      case CollectiveOp::allreduce: {
        // Blocks index the inter-node part, pieces the shard (and channel): shard i of the
        // intra-node phases is piece i*C + c across all blocks, so both phases are one step
        // per hop, and the rail phases shift blocks uniformly (compact form).
        s = lowering::start(spec, "hierarchical", nodes, local * channels, channels);
        const lowering::Owned shard = [&](int, int i, int c) {
          return std::vector<CellRun>{{0, nodes, i * channels + c}};
        };
        const lowering::Owned part = [&](int rail, int m, int c) {
          return std::vector<CellRun>{{m, 1, rail * channels + c}};
        };
        lowering::append_ring_pass(s, g.node_rings, shard, Combine::reduce, 1);
        lowering::append_ring_pass(s, g.rails, part, Combine::reduce, 1);
        lowering::append_ring_pass(s, g.rails, part, Combine::replace, 0);
        lowering::append_ring_pass(s, g.node_rings, shard, Combine::replace, 0);
        break;
      }
      case CollectiveOp::allgather:
      case CollectiveOp::reduce_scatter: {
        s = lowering::start(spec, "hierarchical", spec.ranks, channels, channels);
        const lowering::Owned own = [&](int rail, int m, int c) {
          return std::vector<CellRun>{{g.rails[static_cast<std::size_t>(rail)][static_cast<std::size_t>(m)], 1, c}};
        };
        const lowering::Owned column = [&](int, int i, int c) { return g.rail_blocks(i, c); };
        if (spec.op == CollectiveOp::allgather) {
          lowering::append_ring_pass(s, g.rails, own, Combine::replace, 0);
          lowering::append_ring_pass(s, g.node_rings, column, Combine::replace, 0);
        } else {
          lowering::append_ring_pass(s, g.node_rings, column, Combine::reduce, 1);
          lowering::append_ring_pass(s, g.rails, own, Combine::reduce, 1);
        }
        break;
      }
      case CollectiveOp::broadcast:
      case CollectiveOp::reduce: {
        const int chunks = lowering::chunk_count(ctx, spec.bytes, channels);
        s = lowering::start(spec, "hierarchical", chunks, channels, channels);
        std::size_t root_node = 0, root_pos = 0;
        for (std::size_t m = 0; m < g.node_rings.size(); ++m)
          for (std::size_t i = 0; i < g.node_rings[m].size(); ++i)
            if (g.node_rings[m][i] == spec.root) root_node = m, root_pos = i;
        const bool broadcast = spec.op == CollectiveOp::broadcast;
        // Broadcast chains start at the root's node / position; reduce chains end there.
        const std::size_t shift = broadcast ? 0 : 1;
        const std::vector<int> rail = rotated(g.rails[root_pos], (root_node + shift) % nodes);
        std::vector<std::vector<int>> inside;
        for (const auto& ring : g.node_rings) inside.push_back(rotated(ring, (root_pos + shift) % local));
        if (broadcast) {
          lowering::append_chains(s, {rail}, Combine::replace);
          lowering::append_chains(s, inside, Combine::replace);
        } else {
          lowering::append_chains(s, inside, Combine::reduce);
          lowering::append_chains(s, {rail}, Combine::reduce);
        }
        s.notes.push_back(std::to_string(chunks) + " pipeline chunks per channel");
        break;
      }
      case CollectiveOp::alltoall:
      case CollectiveOp::sendrecv: break;   // refused by require()
    }
    s.notes.push_back(std::to_string(nodes) + " nodes x " + std::to_string(local) + " GPUs");
    return s;
  }
};

}  // namespace

STEPSIM_REGISTER_ALGORITHM(Hierarchical, "hierarchical",
                           "two-level: intra-node ring, inter-node rings per local GPU (rails), intra-node ring", {})

}  // namespace stepsim::models
