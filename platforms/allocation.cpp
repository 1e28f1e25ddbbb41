#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <string_view>

#include "platforms/config_error.hpp"
#include "platforms/platform.hpp"

namespace stepsim::platforms {

int Allocation::nodes(const Platform& platform) const {
  std::set<int> seen;
  for (int g : gpus) seen.insert(platform.node_of_gpu(g));
  return static_cast<int>(seen.size());
}

int Allocation::max_ranks_per_node(const Platform& platform) const {
  std::map<int, int> per_node;
  int best = 0;
  for (int g : gpus) best = std::max(best, ++per_node[platform.node_of_gpu(g)]);
  return best;
}

namespace {

constexpr const char* kForms = "write e.g. 0,1,4 or 0-3 (global GPU indices) or n0:0-2,n1:0-4 (node:local GPUs)";

[[noreturn]] void fail(const std::string& what, const std::string& fix = kForms) {
  throw ConfigError("--gpus", what, fix);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

int parse_index(std::string_view text, std::string_view item) {
  int value = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < 0)
    fail(std::string("'").append(item).append("' is not a GPU index or range"));
  return value;
}

}  // namespace

// Grammar: items separated by commas, each `A` or `A-B` (inclusive). An item prefixed `nK:`
// switches to node-local indices on node K, and un-prefixed items after it stay on node K, so
// `n1:0,2` means GPUs 0 and 2 of node 1; items before any prefix are global GPU indices.
// Rank order is the order written.
Allocation parse_allocation(const std::string& text, const Platform& platform) {
  Allocation alloc;
  if (trim(text).empty()) {
    for (int g = 0; g < platform.gpu_count(); ++g) alloc.gpus.push_back(g);
    return alloc;
  }
  std::set<int> seen;
  int node = -1;  // -1: global indices
  std::string_view rest = text;
  while (true) {
    std::size_t comma = rest.find(',');
    std::string_view item = trim(rest.substr(0, comma));
    if (item.empty()) fail("empty item in '" + text + "'");
    if (item.front() == 'n') {
      std::size_t colon = item.find(':');
      if (colon == std::string_view::npos) fail("'" + std::string(item) + "' lacks ':' after the node");
      node = parse_index(trim(item.substr(1, colon - 1)), item);
      if (node >= platform.nodes())
        fail(std::string("'").append(item).append("': node ").append(std::to_string(node)).append(" is out of range"),
             "the platform has nodes n0-n" + std::to_string(platform.nodes() - 1) + " (add --nodes N for more)");
      item = trim(item.substr(colon + 1));
    }
    std::size_t dash = item.find('-');
    int first = parse_index(trim(item.substr(0, dash)), item);
    int last = dash == std::string_view::npos ? first : parse_index(trim(item.substr(dash + 1)), item);
    if (last < first) fail("range '" + std::string(item) + "' runs backwards", "write the lower index first");
    const int limit = node < 0 ? platform.gpu_count() : platform.gpus_per_node();
    for (int i = first; i <= last; ++i) {
      if (i >= limit)
        fail("GPU " + std::to_string(i) + (node < 0 ? "" : " of node " + std::to_string(node)) + " is out of range",
             "valid indices are 0-" + std::to_string(limit - 1) +
                 (node < 0 ? " (global)" : " (per node)"));
      int g = node < 0 ? i : node * platform.gpus_per_node() + i;
      if (!seen.insert(g).second)
        fail("GPU " + std::to_string(g) + " is listed twice", "list each GPU once");
      alloc.gpus.push_back(g);
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return alloc;
}

}  // namespace stepsim::platforms
