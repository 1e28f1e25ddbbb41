// `stepsim blink census`: every allocation of a server's GPUs, as Blink's motivation counts
// them (no NVLink ring, NVLink disconnected), with the packed tree rate from every root beside
// Edmonds' min-cut bound and the time the packing took.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "models/collectives/blink_census.hpp"
#include "platforms/config_error.hpp"
#include "tools/cli/commands.hpp"

namespace stepsim::cli {
namespace {

struct CensusArgs {
  std::string platform;
  platforms::PlatformOptions options;
  std::string sizes;
  std::string format = "text";
};

/// Whether a packed rate meets its bound within the census' 1 % tolerance.
bool meets(double rate, double bound) { return rate >= 0.99 * bound && rate <= bound * (1 + 1e-9); }

std::pair<int, int> parse_sizes(const std::string& text, int gpus) {
  if (text.empty()) return {2, gpus};
  int low = 0, high = 0;
  char dash = 0;
  std::istringstream in(text);
  if (in >> low) {
    if (in >> dash >> high) {
      if (dash != '-') low = 0;
    } else {
      high = low;
    }
  }
  if (low < 2 || high < low || high > gpus || !in.eof())
    throw ConfigError("--sizes", fmt::format("'{}' is not a range of allocation sizes in 2..{}", text, gpus),
                      fmt::format("write e.g. --sizes 3-{} or --sizes 5", gpus));
  return {low, high};
}

int run_census(const CensusArgs& args) {
  const platforms::Platform platform = platforms::load_platform(args.platform, args.options);
  const int gpus = platform.gpus_per_node();
  if (gpus > models::blink::kMaxCensusGpus)
    throw ConfigError("stepsim blink census",
                      fmt::format("the census enumerates every allocation of a server's GPUs, "
                                  "and '{}' has {} per server",
                                  platform.name(), gpus),
                      fmt::format("use a platform of at most {} GPUs per server", models::blink::kMaxCensusGpus));
  const auto [low, high] = parse_sizes(args.sizes, gpus);

  nlohmann::json rows = nlohmann::json::array();
  nlohmann::json allocations = nlohmann::json::array();
  double total_seconds = 0;
  double slowest = 0;
  std::vector<int> slowest_gpus;
  for (int size = low; size <= high; ++size) {
    int count = 0, no_ring = 0, disconnected = 0, roots = 0, at_bound = 0, fewest = 1 << 30, most = 0;
    int allreduce_at_bound = 0, allreduce_defined = 0;
    double worst_gap = 0;
    for (const std::vector<int>& pick : models::blink::allocations_of(gpus, size)) {
      const auto start = std::chrono::steady_clock::now();
      const models::blink::AllocationCensus c = models::blink::census_allocation(platform, pick);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      total_seconds += seconds;
      if (seconds > slowest) {
        slowest = seconds;
        slowest_gpus = pick;
      }
      ++count;
      no_ring += !c.nvlink_ring;
      disconnected += !c.nvlink_connected;
      nlohmann::json root_list = nlohmann::json::array();
      for (const models::blink::RootPacking& r : c.roots) {
        ++roots;
        at_bound += meets(r.rate, r.bound);
        worst_gap = std::max(worst_gap, 1 - r.rate / r.bound);
        if (c.nvlink_connected) {
          fewest = std::min(fewest, r.trees);
          most = std::max(most, r.trees);
        }
        root_list.push_back({{"gpu", r.gpu},
                             {"rate_GBps", r.rate / kGB},
                             {"bound_GBps", r.bound / kGB},
                             {"trees", r.trees},
                             {"method", r.method},
                             {"mwu_rate_GBps", r.mwu_rate / kGB},
                             {"mwu_trees", r.mwu_trees}});
      }
      if (c.allreduce_bound > 0) {
        ++allreduce_defined;
        allreduce_at_bound += meets(c.allreduce_rate, c.allreduce_bound);
      }
      allocations.push_back({{"gpus", c.gpus},
                             {"nvlink_ring", c.nvlink_ring},
                             {"nvlink_connected", c.nvlink_connected},
                             {"roots", root_list},
                             {"allreduce_rate_GBps", c.allreduce_rate / kGB},
                             {"allreduce_bound_GBps", c.allreduce_bound / kGB},
                             {"allreduce_trees", c.allreduce_trees},
                             {"seconds", seconds}});
    }
    rows.push_back({{"gpus", size},
                    {"allocations", count},
                    {"no_nvlink_ring", no_ring},
                    {"nvlink_disconnected", disconnected},
                    {"roots", roots},
                    {"roots_at_bound", at_bound},
                    {"worst_gap", worst_gap},
                    {"nvlink_trees_min", most == 0 ? 0 : fewest},
                    {"nvlink_trees_max", most},
                    {"allreduce_at_bound", allreduce_at_bound},
                    {"allreduce_with_bound", allreduce_defined}});
  }

  if (args.format == "json") {
    std::cout << nlohmann::json{{"platform", platform.name()}, {"gpus_per_node", gpus},    {"sizes", rows},
                                {"allocations", allocations},  {"seconds", total_seconds}, {"slowest_seconds", slowest},
                                {"slowest_gpus", slowest_gpus}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << fmt::format(
      "census of {} ({} GPUs per server): broadcast trees from every root, NVLink where it "
      "connects the GPUs, NVLink + PCIe where not\n",
      platform.name(), gpus);
  std::cout << fmt::format("{:>4} {:>11} {:>14} {:>12} {:>16} {:>12} {:>10} {:>14}\n", "GPUs", "allocations",
                           "no NVLink ring", "NVLink disc.", "rate=bound (1%)", "worst gap", "NVL trees",
                           "allreduce=bnd");
  for (const auto& r : rows)
    std::cout << fmt::format(
        "{:>4} {:>11} {:>14} {:>12} {:>16} {:>11.3f}% {:>10} {:>14}\n", r["gpus"].get<int>(),
        r["allocations"].get<int>(), r["no_nvlink_ring"].get<int>(), r["nvlink_disconnected"].get<int>(),
        fmt::format("{}/{}", r["roots_at_bound"].get<int>(), r["roots"].get<int>()), 100 * r["worst_gap"].get<double>(),
        fmt::format("{}-{}", r["nvlink_trees_min"].get<int>(), r["nvlink_trees_max"].get<int>()),
        fmt::format("{}/{}", r["allreduce_at_bound"].get<int>(), r["allreduce_with_bound"].get<int>()));
  std::string picked;
  for (int g : slowest_gpus) {
    if (!picked.empty()) picked += ',';
    picked += std::to_string(g);
  }
  std::cout << fmt::format("packing time: {:.2f} s in all, slowest allocation {:.3f} s (GPUs {})\n", total_seconds,
                           slowest, picked);
  return 0;
}

}  // namespace

Action add_blink_command(CLI::App& command) {
  command.require_subcommand(1);
  CLI::App* census = command.add_subcommand("census",
                                            "Every allocation of a server's GPUs: rings, connectivity, "
                                            "packed tree rates against Edmonds' bound");
  auto args = std::make_shared<CensusArgs>();
  census->add_option("platform", args->platform, "Platform preset name (see `stepsim presets`) or YAML file")
      ->required();
  add_param_option(*census, args->options.overrides, "gpu.model=P100-SXM2");
  census->add_option("--sizes", args->sizes, "Allocation sizes, e.g. 3-7 or 5 (default 2..GPUs per server)");
  add_format_option(*census, args->format);
  return [args, census] { return census->parsed() ? run_census(*args) : 0; };
}

}  // namespace stepsim::cli
