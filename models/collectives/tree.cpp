/// @file Binary-tree collectives as NCCL builds them (src/graph/trees.cc, ncclGetBtree and
/// ncclGetDtree; Sanders, Speck & Träff 2009 for the two-tree idea): allreduce over a double
/// binary tree, each tree carrying half of the data, reduce up then broadcast down, pipelined
/// in chunks of options.chunk_bytes (default lowering::kDefaultChunkBytes, NCCL Simple's
/// 512 KiB pipeline step); broadcast and reduce over one pipelined binary tree at the root.
///
/// NCCL builds its trees over nodes with a chain inside each node; here the trees span the
/// ranks directly, which is the same thing with one rank per node. Each tree runs on its own
/// channels (2 x options.channels in all), as NCCL gives each tree its own channels.
#include <algorithm>
#include <functional>

#include "models/collectives/lowering.hpp"

namespace stepsim::models {
namespace {

/// A rooted tree over real ranks with what pipelining needs: heights and depths.
struct Tree {
  int root = 0;
  std::vector<int> parent;                  ///< -1 at the root
  std::vector<std::vector<int>> children;
  std::vector<int> height;                  ///< 0 at leaves
  std::vector<int> depth;                   ///< 0 at the root

  /// NCCL's btree over virtual ranks 0..n-1, placed on real rank real(v). In ncclGetBtree
  /// a rank's parent flips its lowest set bit off and the next one on, or just drops the
  /// lowest bit when that leaves the range; rank 0 is the root.
  static Tree btree(int n, const std::function<int(int)>& real) {
    Tree t;
    t.root = real(0);
    t.parent.assign(static_cast<std::size_t>(n), -1);
    t.children.assign(static_cast<std::size_t>(n), {});
    for (int v = 1; v < n; ++v) {
      const int bit = v & -v;
      int up = (v ^ bit) | (bit << 1);
      if (up >= n) up = v ^ bit;
      t.parent[static_cast<std::size_t>(real(v))] = real(up);
      t.children[static_cast<std::size_t>(real(up))].push_back(real(v));
    }
    t.height.assign(static_cast<std::size_t>(n), 0);
    t.depth.assign(static_cast<std::size_t>(n), 0);
    t.measure(t.root, 0);
    return t;
  }

 private:
  int measure(int x, int d) {
    depth[static_cast<std::size_t>(x)] = d;
    int h = 0;
    for (int child : children[static_cast<std::size_t>(x)]) h = std::max(h, 1 + measure(child, d + 1));
    return height[static_cast<std::size_t>(x)] = h;
  }
};

/// Rounds of a pipelined pass over one tree on one channel (piece = channel = lane). Up: a
/// rank sends chunk j to its parent in round j + height, after its whole subtree did. Down:
/// a rank sends chunk j to its children in round `offset` + j + depth, right after it got it.
struct TreePass {
  Schedule& s;
  std::vector<Round>& rounds;

  void add(int round, const Step& step) {
    if (static_cast<int>(rounds.size()) <= round) rounds.resize(static_cast<std::size_t>(round) + 1);
    rounds[static_cast<std::size_t>(round)].steps.push_back(step);
  }
  void up(const Tree& t, int lane) {
    for (int j = 0; j < s.num_blocks; ++j)
      for (int x = 0; x < s.spec.ranks; ++x)
        if (x != t.root)
          add(j + t.height[static_cast<std::size_t>(x)],
              lowering::step(s, x, t.parent[static_cast<std::size_t>(x)], j, 1, lane, Combine::reduce, lane));
  }
  void down(const Tree& t, int lane, int offset) {
    for (int j = 0; j < s.num_blocks; ++j)
      for (int x = 0; x < s.spec.ranks; ++x)
        for (int child : t.children[static_cast<std::size_t>(x)])
          add(offset + j + t.depth[static_cast<std::size_t>(x)],
              lowering::step(s, x, child, j, 1, lane, Combine::replace, lane));
  }
};

class DoubleBinaryTree : public Algorithm {
 public:
  bool supports(const CollectiveSpec& spec, const CollectiveContext&, std::string* why_not) const override {
    if (spec.op == CollectiveOp::allreduce || spec.op == CollectiveOp::broadcast || spec.op == CollectiveOp::reduce)
      return true;
    if (why_not)
      *why_not = "trees implement allreduce, broadcast and reduce (as in NCCL), not " +
                 std::string(to_string(spec.op)) + "; use " +
                 (spec.op == CollectiveOp::alltoall || spec.op == CollectiveOp::sendrecv ? "'direct'" : "'ring'");
    return false;
  }

  Schedule lower(const CollectiveSpec& spec, const CollectiveContext& ctx) const override {
    lowering::require(*this, "tree", spec, ctx);
    const int n = spec.ranks;
    const int channels = lowering::channel_count(ctx);
    std::vector<Round> rounds;
    if (spec.op != CollectiveOp::allreduce) {
      const int chunks = lowering::chunk_count(ctx, spec.bytes, channels);
      Schedule s = lowering::start(spec, "tree", chunks, channels, channels);
      const Tree t = Tree::btree(n, [&](int v) { return (v + spec.root) % n; });
      TreePass pass{s, rounds};
      for (int c = 0; c < channels; ++c) {
        if (spec.op == CollectiveOp::broadcast) pass.down(t, c, 0);
        else pass.up(t, c);
      }
      std::erase_if(rounds, [](const Round& r) { return r.steps.empty(); });
      s.rounds = std::move(rounds);
      s.notes.push_back(std::to_string(chunks) + " pipeline chunks per channel");
      return s;
    }
    // ncclGetDtree: the second tree mirrors the first (even n) or shifts it by one (odd n),
    // so a rank that is inner in one tree is a leaf in the other.
    const Tree first = Tree::btree(n, [](int v) { return v; });
    const Tree second =
        Tree::btree(n, [n](int v) { return n % 2 == 1 ? (v + 1) % n : n - 1 - v; });
    const int lanes = 2 * channels;
    const int chunks = lowering::chunk_count(ctx, spec.bytes, lanes);
    Schedule s = lowering::start(spec, "tree", chunks, lanes, lanes);
    TreePass pass{s, rounds};
    for (int c = 0; c < channels; ++c)
      for (int which = 0; which < 2; ++which) {
        const Tree& t = which == 0 ? first : second;
        const int lane = 2 * c + which;
        pass.up(t, lane);
        pass.down(t, lane, t.height[static_cast<std::size_t>(t.root)]);
      }
    std::erase_if(rounds, [](const Round& r) { return r.steps.empty(); });
    s.rounds = std::move(rounds);
    s.notes.push_back(std::to_string(chunks) + " pipeline chunks per tree and channel");
    return s;
  }
};

}  // namespace

STEPSIM_REGISTER_ALGORITHM(DoubleBinaryTree, "tree",
                           "NCCL double binary tree allreduce, pipelined binary-tree broadcast/reduce", {})

}  // namespace stepsim::models
