/// @file The allocation census (see blink_census.hpp).
#include "models/collectives/blink_census.hpp"

#include <numeric>

namespace stepsim::models::blink {

std::vector<std::vector<int>> allocations_of(int gpus_per_node, int size) {
  std::vector<std::vector<int>> out;
  if (size < 1 || size > gpus_per_node) return out;
  std::vector<int> pick(static_cast<std::size_t>(size));
  std::iota(pick.begin(), pick.end(), 0);
  while (true) {
    out.push_back(pick);
    int i = size - 1;
    while (i >= 0 && pick[static_cast<std::size_t>(i)] == gpus_per_node - size + i) --i;
    if (i < 0) return out;
    ++pick[static_cast<std::size_t>(i)];
    for (int j = i + 1; j < size; ++j) pick[static_cast<std::size_t>(j)] = pick[static_cast<std::size_t>(j - 1)] + 1;
  }
}

AllocationCensus census_allocation(const platforms::Platform& platform, const std::vector<int>& gpus) {
  const platforms::Allocation allocation{gpus};
  const CollectiveContext ctx{platform, allocation, {}};
  std::vector<int> ranks(gpus.size());
  std::iota(ranks.begin(), ranks.end(), 0);
  const Graph g = topology_graph(ctx, ranks);

  AllocationCensus c;
  c.gpus = gpus;
  c.nvlink_ring = has_hamiltonian_cycle(g, Links::nvlink);
  c.nvlink_connected = strongly_connected(g, Links::nvlink);
  // Where NVLink alone cannot span the GPUs, trees need the PCIe paths too (as blink does).
  const Links links = c.nvlink_connected ? Links::nvlink : Links::all;
  for (int root = 0; root < g.vertices(); ++root) {
    const Packing p = pack_trees(g, links, Flow::down, root);
    const Packing mwu = mwu_packing(g, links, Flow::down, root, PackOptions{}.epsilon);
    c.roots.push_back({gpus[static_cast<std::size_t>(root)], p.rate, root_cut(g, links, Flow::down, root),
                       static_cast<int>(p.trees.size()), p.method, mwu.rate, mwu.mwu_trees});
  }
  if (c.nvlink_connected && g.vertices() >= 2) {
    const Packing p = pack_trees(g, Links::nvlink, Flow::both, 0);
    c.allreduce_rate = p.rate;
    c.allreduce_trees = static_cast<int>(p.trees.size());
    c.allreduce_bound = partition_bound(g, Links::nvlink).value_or(0.0);
  }
  return c;
}

}  // namespace stepsim::models::blink
