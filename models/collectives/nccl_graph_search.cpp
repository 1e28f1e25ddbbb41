/// @file NCCL's ring search on NVLink meshes (see nccl_graph_search.hpp).
#include "models/collectives/nccl_graph_search.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace stepsim::models::nccl {
namespace {

/// One ring hop's path: the directed links (a * gpus + b) it loads, and whether it goes
/// through another GPU.
struct Path {
  std::vector<int> links;
  double bw = 0;
  bool nvb = false;
};

/// A candidate ring: GPU order and the load it puts on each directed link it uses.
struct Cycle {
  std::vector<int> order;
  std::vector<int> links;   ///< with repeats: a link used twice is listed twice
};

/// paths.cc: a direct NVLink wins; otherwise (NVB) the widest two-hop NVLink path through
/// another GPU, ties to the lowest such GPU; no path = empty.
std::vector<Path> mesh_paths(const NvlinkMesh& mesh, bool nvb) {
  const int n = mesh.gpus;
  std::vector<Path> paths(static_cast<std::size_t>(n * n));
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      Path& p = paths[static_cast<std::size_t>(a * n + b)];
      if (mesh.at(a, b) > 0) {
        p = {{a * n + b}, mesh.at(a, b), false};
        continue;
      }
      if (!nvb) continue;
      for (int m = 0; m < n; ++m) {
        const double bw = std::min(mesh.at(a, m), mesh.at(m, b));
        if (m != a && m != b && bw > p.bw) p = {{a * n + m, m * n + b}, bw, true};
      }
    }
  return paths;
}

/// Every directed Hamiltonian cycle from GPU 0 whose hops all have a path.
std::vector<Cycle> hamiltonian_cycles(int n, const std::vector<Path>& paths) {
  std::vector<Cycle> out;
  std::vector<int> order = {0};
  std::vector<bool> used(static_cast<std::size_t>(n), false);
  used[0] = true;
  auto hop = [&](int a, int b) -> const Path& { return paths[static_cast<std::size_t>(a * n + b)]; };
  auto extend = [&](auto& self) -> void {
    const int last = order.back();
    if (static_cast<int>(order.size()) == n) {
      if (hop(last, 0).links.empty()) return;
      Cycle c{order, {}};
      for (int i = 0; i < n; ++i) {
        const Path& p = hop(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>((i + 1) % n)]);
        c.links.insert(c.links.end(), p.links.begin(), p.links.end());
      }
      out.push_back(std::move(c));
      return;
    }
    for (int g = 1; g < n; ++g) {
      if (used[static_cast<std::size_t>(g)] || hop(last, g).links.empty()) continue;
      used[static_cast<std::size_t>(g)] = true;
      order.push_back(g);
      self(self);
      order.pop_back();
      used[static_cast<std::size_t>(g)] = false;
    }
  };
  extend(extend);
  return out;
}

/// The most cycles (a multiset, up to `limit`) that fit the link capacities when each moves
/// `speed`: a link of capacity c carries floor(c / speed) of them (search.cc followPath
/// refuses a link whose remaining bandwidth is below the speed). Depth-first over cycles in
/// order, a cycle reusable; stops at the bound every GPU's outgoing capacity sets.
std::vector<int> pack_cycles(const NvlinkMesh& mesh, const std::vector<Cycle>& cycles, double speed, int limit) {
  const int n = mesh.gpus;
  std::vector<int> units(static_cast<std::size_t>(n * n), 0);
  for (std::size_t l = 0; l < units.size(); ++l) units[l] = static_cast<int>(std::floor(mesh.bw[l] / speed + 1e-9));
  // Every ring leaves every GPU once, so no GPU's outgoing units can be exceeded.
  int bound = limit;
  for (int a = 0; a < n; ++a) {
    int out = 0;
    for (int b = 0; b < n; ++b) out += units[static_cast<std::size_t>(a * n + b)];
    bound = std::min(bound, out);
  }
  std::vector<int> chosen, best;
  auto fits = [&](const Cycle& c) {
    bool ok = true;
    for (int l : c.links) ok = --units[static_cast<std::size_t>(l)] >= 0 && ok;
    if (!ok)
      for (int l : c.links) ++units[static_cast<std::size_t>(l)];
    return ok;
  };
  auto search = [&](auto& self, std::size_t from) -> void {
    if (chosen.size() > best.size()) best = chosen;
    if (static_cast<int>(best.size()) >= bound) return;
    for (std::size_t i = from; i < cycles.size(); ++i) {
      if (!fits(cycles[i])) continue;
      chosen.push_back(static_cast<int>(i));
      self(self, i);
      chosen.pop_back();
      for (int l : cycles[i].links) ++units[static_cast<std::size_t>(l)];
      if (static_cast<int>(best.size()) >= bound) return;
    }
  };
  search(search, 0);
  return best;
}

}  // namespace

MeshRings search_mesh_rings(const NvlinkMesh& mesh, const std::vector<double>& speeds, int max_channels, bool nvb) {
  if (mesh.gpus > kMaxMeshGpus) throw std::invalid_argument("search_mesh_rings: more GPUs than kMaxMeshGpus");
  MeshRings best;
  if (mesh.gpus < 2 || speeds.empty()) return best;
  // Path classes in NCCL's order: NVL, then NVB (each level also admits the lower ones).
  std::vector<std::vector<Cycle>> levels;
  levels.push_back(hamiltonian_cycles(mesh.gpus, mesh_paths(mesh, false)));
  if (nvb) levels.push_back(hamiltonian_cycles(mesh.gpus, mesh_paths(mesh, true)));
  // search.cc starts at the first speed no GPU-to-GPU path is narrower than (maxBw).
  double max_bw = 0;
  for (const Path& p : mesh_paths(mesh, nvb)) max_bw = std::max(max_bw, p.bw);
  std::size_t index = 0;
  while (index + 1 < speeds.size() && speeds[index] > max_bw) ++index;
  for (;; ++index) {
    const double speed = speeds[index];
    for (std::size_t level = 0; level < levels.size(); ++level) {
      // A wider path class is tried only while nothing, or only a wider-class graph, was found.
      if (level > 0 && best.channels > 0 && !best.nvb) break;
      const std::vector<int> picked = pack_cycles(mesh, levels[level], speed, max_channels);
      const double total = static_cast<double>(picked.size()) * speed;
      if (total <= best.channels * best.bw + 1e-9) continue;
      best = {static_cast<int>(picked.size()), speed, level > 0, {}};
      for (int i : picked) best.rings.push_back(levels[level][static_cast<std::size_t>(i)].order);
    }
    // ncclTopoCompute lowers the speed while nothing is found or the next speed is still
    // above 0.49 x the best graph's.
    if (index + 1 >= speeds.size() || (best.channels > 0 && speeds[index + 1] / best.bw <= 0.49)) break;
  }
  return best;
}

}  // namespace stepsim::models::nccl
