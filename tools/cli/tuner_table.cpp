// `stepsim tuner-table`: the predicted best NCCL algorithm/protocol/channels per op and size
// range, as a CSV an NCCL tuner plugin can read (docs/sweep.md, "Tuner tables").
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>

#include "platforms/config_error.hpp"
#include "sim/collective_prediction.hpp"
#include "tools/cli/commands.hpp"
#include "tools/sweep/tuner_table.hpp"

namespace stepsim::cli {
namespace {

struct TunerArgs {
  PlatformArgs platform;
  std::string ops = "allreduce,allgather,reduce_scatter,broadcast,reduce";
  std::string min = "1KiB";
  std::string max = "8GiB";
  std::string algos;
  std::vector<std::string> algo_params;
  std::string out;
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

int run(const TunerArgs& args) {
  platforms::Platform platform = platforms::load_platform(args.platform.platform, args.platform.options);
  platforms::Allocation allocation = platforms::parse_allocation(args.platform.gpus, platform);
  sweep::TunerRequest request;
  for (const std::string& op : split(args.ops)) request.ops.push_back(models::parse_op(op, "--ops"));
  request.min_bytes = size_flag("--min", args.min, "1KiB or 8GiB");
  request.max_bytes = size_flag("--max", args.max, "1KiB or 8GiB");
  if (args.algos.empty()) {
    request.candidates = sweep::nccl_candidates();
  } else {
    for (const std::string& algo : split(args.algos)) {
      models::AlgorithmRegistry::instance().get(algo);   // an unknown name is a ConfigError listing the known ones
      request.candidates.push_back({algo, {}});
    }
  }
  models::AlgorithmOptions options;
  sim::add_algo_params(args.algo_params, options);
  const models::CollectiveContext ctx{platform, allocation, options};
  const std::string csv = sweep::tuner_table_csv(sweep::build_tuner_table(request, ctx));
  if (args.out.empty()) {
    std::cout << csv;
  } else {
    std::ofstream file(args.out);
    if (!(file << csv)) throw ConfigError("-o " + args.out, "cannot write the file", "name a writable path");
    std::cerr << fmt::format("{}: {} rows\n", args.out, std::count(csv.begin(), csv.end(), '\n') - 1);
  }
  return 0;
}

}  // namespace

Action add_tuner_table_command(CLI::App& command) {
  auto args = std::make_shared<TunerArgs>();
  add_platform_options(command, args->platform);
  command.add_option("--ops", args->ops, "Comma-separated collectives (default: the five NCCL's tuner API tunes)");
  command.add_option("--min", args->min, "Smallest size (default 1KiB); sizes double up to --max");
  command.add_option("--max", args->max, "Largest size (default 8GiB)");
  command.add_option("--algos", args->algos,
                     "Compare these stepsim algorithms (e.g. nccl,ring,tree,blink) instead of the default: every "
                     "NCCL algorithm x protocol forced one at a time, the only choices a tuner plugin can apply");
  command.add_option("--algo-param", args->algo_params, "key=value given to every candidate, e.g. version=2.18");
  command.add_option("-o,--out", args->out, "Write the CSV to FILE instead of stdout");
  return [args] { return run(*args); };
}

}  // namespace stepsim::cli
