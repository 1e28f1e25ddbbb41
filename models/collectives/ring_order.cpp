#include "models/collectives/ring_order.hpp"

#include <algorithm>
#include <limits>

#include "models/collectives/lowering.hpp"

namespace stepsim::models {
namespace {

/// Depth-first search in lexicographic order keeping the best bottleneck seen; a branch
/// whose bottleneck is already no better than the best cannot win (the bottleneck only
/// shrinks as the path grows, and an equal one loses the lexicographic tie-break).
class WidestSearch {
 public:
  WidestSearch(const std::vector<std::vector<double>>& bw, bool closed) : bw_(bw), closed_(closed) {
    const int n = static_cast<int>(bw.size());
    for (int i = 0; i < n; ++i) best_.push_back(i);
    best_value_ = value(best_);
    used_.assign(static_cast<std::size_t>(n), false);
  }

  std::vector<int> run() {
    path_ = {0};
    used_[0] = true;
    extend(std::numeric_limits<double>::infinity());
    return best_;
  }

 private:
  double value(const std::vector<int>& order) const {
    double narrowest = std::numeric_limits<double>::infinity();
    const std::size_t n = order.size();
    for (std::size_t i = 0; i + 1 < n; ++i) narrowest = std::min(narrowest, hop(order[i], order[i + 1]));
    if (closed_ && n > 1) narrowest = std::min(narrowest, hop(order.back(), order.front()));
    return narrowest;
  }
  double hop(int a, int b) const { return bw_[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)]; }

  void extend(double narrowest) {
    if (narrowest <= best_value_) return;
    const std::size_t n = bw_.size();
    if (path_.size() == n) {
      if (closed_) narrowest = std::min(narrowest, hop(path_.back(), path_.front()));
      if (narrowest > best_value_) {
        best_value_ = narrowest;
        best_ = path_;
      }
      return;
    }
    for (std::size_t next = 0; next < n; ++next) {
      if (used_[next]) continue;
      used_[next] = true;
      path_.push_back(static_cast<int>(next));
      extend(std::min(narrowest, hop(path_[path_.size() - 2], static_cast<int>(next))));
      path_.pop_back();
      used_[next] = false;
    }
  }

  const std::vector<std::vector<double>>& bw_;
  bool closed_;
  std::vector<int> best_;
  double best_value_ = 0;
  std::vector<int> path_;
  std::vector<bool> used_;
};

}  // namespace

std::vector<int> widest_order(const CollectiveContext& ctx, const std::vector<int>& ranks, bool closed) {
  const std::size_t n = ranks.size();
  if (n <= 2 || n > static_cast<std::size_t>(kExhaustiveRingRanks)) return ranks;
  std::vector<std::vector<double>> bw(n, std::vector<double>(n, 0));
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = 0; b < n; ++b)
      if (a != b) bw[a][b] = ctx.route(ranks[a], ranks[b]).bandwidth;
  std::vector<int> order;
  for (int index : WidestSearch(bw, closed).run()) order.push_back(ranks[static_cast<std::size_t>(index)]);
  return order;
}

namespace {

/// Narrowest hop of `order` walked as an open path.
double path_bottleneck(const CollectiveContext& ctx, const std::vector<int>& order) {
  double narrowest = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i + 1 < order.size(); ++i) narrowest = std::min(narrowest, ctx.route(order[i], order[i + 1]).bandwidth);
  return narrowest;
}

}  // namespace

int default_ring_channels(const CollectiveContext& ctx) {
  const std::vector<std::vector<int>> nodes = lowering::ranks_by_node(ctx);
  if (nodes.size() == 1) return 1;
  std::size_t smallest = nodes.front().size();
  for (const auto& node : nodes) smallest = std::min(smallest, node.size());
  const std::size_t nics = std::max<std::size_t>(1, ctx.platform.node().nics.size());
  return static_cast<int>(std::min(nics, smallest));
}

std::vector<std::vector<int>> channel_ring_orders(const CollectiveContext& ctx, int channels) {
  const std::vector<std::vector<int>> nodes = lowering::ranks_by_node(ctx);
  if (nodes.size() == 1 || channels == 1)
    return std::vector<std::vector<int>>(static_cast<std::size_t>(channels), ring_order(ctx));
  std::vector<std::vector<int>> rings(static_cast<std::size_t>(channels));
  for (const auto& node : nodes) {
    const std::vector<int> path = widest_order(ctx, node, false);
    const std::vector<int> cycle = widest_order(ctx, node, true);
    const double widest = path_bottleneck(ctx, path);
    const int len = static_cast<int>(cycle.size());
    for (int c = 0; c < channels; ++c) {
      std::vector<int> order = cycle;
      std::rotate(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(c) * len / channels, order.end());
      if (path_bottleneck(ctx, order) < widest) order = path;
      rings[static_cast<std::size_t>(c)].insert(rings[static_cast<std::size_t>(c)].end(), order.begin(), order.end());
    }
  }
  return rings;
}

std::vector<int> ring_order(const CollectiveContext& ctx) {
  const std::vector<std::vector<int>> nodes = lowering::ranks_by_node(ctx);
  if (nodes.size() == 1) return widest_order(ctx, nodes.front(), true);
  std::vector<int> order;
  for (const auto& node : nodes)
    for (int r : widest_order(ctx, node, false)) order.push_back(r);
  return order;
}

}  // namespace stepsim::models
