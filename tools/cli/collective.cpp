// `stepsim collective`: lower one collective with a named algorithm (or every algorithm, for
// --algo best), run it on an engine and report time, algbw and busbw as nccl-tests defines them.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "models/algorithm.hpp"
#include "models/checker.hpp"
#include "platforms/config_error.hpp"
#include "sim/engine.hpp"
#include "tools/cli/commands.hpp"

namespace stepsim::cli {
namespace {

struct CollectiveArgs {
  PlatformArgs platform;
  std::string op;
  std::string size;
  std::string algo = "nccl";
  std::string engine = "analytical";
  std::string format = "text";
  int root = 0;
  int channels = 0;
  std::string chunk;
  std::vector<std::string> algo_params;
  bool check = false;
};

struct Outcome {
  std::string algo;
  models::Schedule schedule;
  sim::CollectiveResult result;
};

models::AlgorithmOptions algorithm_options(const CollectiveArgs& args) {
  models::AlgorithmOptions options;
  options.channels = args.channels;
  if (!args.chunk.empty()) {
    try {
      options.chunk_bytes = parse_size(args.chunk);
    } catch (const std::invalid_argument& e) {
      throw ConfigError("--chunk", e.what(), "write a size such as 512KiB");
    }
  }
  for (const std::string& kv : args.algo_params) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ConfigError("--algo-param", "'" + kv + "' is not key=value", "write e.g. --algo-param proto=LL128");
    options.extra[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return options;
}

/// @brief Lowers with a supported algorithm (see supports()), optionally proves the schedule,
/// and runs it on the engine.
Outcome run_supported(const std::string& name, const models::Algorithm& algorithm,
                      const models::CollectiveSpec& spec, const models::CollectiveContext& ctx,
                      sim::Engine& engine, bool check) {
  models::Schedule schedule = algorithm.lower(spec, ctx);
  if (check) {
    if (auto violation = models::check_schedule(schedule))
      throw std::logic_error("schedule of '" + name + "' fails the data-movement check: " + *violation);
  }
  sim::CollectiveResult result = engine.run(schedule, {ctx.platform, ctx.allocation});
  return {name, std::move(schedule), std::move(result)};
}

nlohmann::json to_json(const Outcome& o, const models::CollectiveSpec& spec, int nodes,
                       const std::string& engine) {
  const double algbw = spec.bytes / o.result.time / kGB;
  nlohmann::json j = {
      {"op", models::to_string(spec.op)},
      {"algo", o.algo},
      {"ranks", spec.ranks},
      {"nodes", nodes},
      {"size_bytes", spec.bytes},
      {"time_s", o.result.time},
      {"algbw_GBps", algbw},
      {"busbw_GBps", algbw * models::busbw_factor(spec.op, spec.ranks)},
      {"engine", engine},
      {"schedule", o.schedule.algorithm},
      {"protocol", o.schedule.protocol.name},
      {"channels", o.schedule.channels},
      {"steps", o.schedule.expanded_step_count()},
      {"notes", o.schedule.notes},
  };
  if (spec.op == models::CollectiveOp::broadcast || spec.op == models::CollectiveOp::reduce)
    j["root"] = spec.root;
  return j;
}

void print_text(const Outcome& o, const models::CollectiveSpec& spec, const PlatformArgs& p, int nodes,
                const std::string& engine) {
  const double algbw = spec.bytes / o.result.time / kGB;
  std::cout << fmt::format("{} of {} on {} ({} ranks, {} node{}), engine {}\n", models::to_string(spec.op),
                           format_size(spec.bytes), p.platform, spec.ranks, nodes, nodes == 1 ? "" : "s",
                           engine);
  std::cout << fmt::format("  algorithm  {} ({}, protocol {}, {} channel{})\n", o.algo, o.schedule.algorithm,
                           o.schedule.protocol.name, o.schedule.channels, o.schedule.channels == 1 ? "" : "s");
  std::cout << fmt::format("  time       {:.3f} us\n", o.result.time * 1e6);
  std::cout << fmt::format("  algbw      {:.2f} GB/s\n", algbw);
  std::cout << fmt::format("  busbw      {:.2f} GB/s\n", algbw * models::busbw_factor(spec.op, spec.ranks));
  for (const std::string& note : o.schedule.notes) std::cout << "  note       " << note << "\n";
}

int run(const CollectiveArgs& args) {
  platforms::Platform platform = platforms::load_platform(args.platform.platform, args.platform.options);
  platforms::Allocation allocation = platforms::parse_allocation(args.platform.gpus, platform);
  models::CollectiveSpec spec;
  spec.op = models::parse_op(args.op);
  spec.ranks = allocation.ranks();
  spec.root = args.root;
  try {
    spec.bytes = parse_size(args.size);
  } catch (const std::invalid_argument& e) {
    throw ConfigError("--size", e.what(), "write a size such as 8, 64KiB, 1GiB or 1e9");
  }
  if (spec.bytes <= 0) throw ConfigError("--size", "size must be > 0", "write a positive size such as 1MiB");
  if (spec.bytes != std::floor(spec.bytes))
    throw ConfigError("--size", fmt::format("size must be a whole number of bytes, got {}", spec.bytes),
                      "write e.g. 1KiB or 1536");
  if (spec.ranks < 2)
    throw ConfigError("--gpus", "a collective needs at least 2 ranks, got " + std::to_string(spec.ranks),
                      "select 2 or more GPUs");
  if (spec.root < 0 || spec.root >= spec.ranks)
    throw ConfigError("--root", fmt::format("root {} is not a rank (0..{})", spec.root, spec.ranks - 1),
                      "choose a rank in range");
  const models::CollectiveContext ctx{platform, allocation, algorithm_options(args)};
  auto engine = sim::make_engine(args.engine);
  const int nodes = allocation.nodes(platform);

  std::optional<Outcome> best;
  std::vector<std::pair<std::string, double>> candidates;
  if (args.algo == "best") {
    for (const models::AlgorithmInfo* info : models::AlgorithmRegistry::instance().all()) {
      const auto algorithm = info->make();
      if (!algorithm->supports(spec, ctx, nullptr)) continue;
      Outcome o = run_supported(info->name, *algorithm, spec, ctx, *engine, args.check);
      candidates.emplace_back(o.algo, o.result.time);
      if (!best || o.result.time < best->result.time) best = std::move(o);
    }
    if (!best) throw ConfigError("--op", "no algorithm supports this collective here", "check --gpus and --op");
  } else {
    const auto algorithm = models::AlgorithmRegistry::instance().get(args.algo).make();
    std::string why_not;
    if (!algorithm->supports(spec, ctx, &why_not))
      throw ConfigError("--algo", fmt::format("algorithm '{}' cannot run {} here: {}", args.algo,
                                              models::to_string(spec.op), why_not),
                        "choose another algorithm or --algo best");
    best = run_supported(args.algo, *algorithm, spec, ctx, *engine, args.check);
  }

  if (args.format == "json") {
    nlohmann::json j = to_json(*best, spec, nodes, engine->name());
    if (!candidates.empty()) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& [name, time] : candidates) list.push_back({{"algo", name}, {"time_s", time}});
      j["candidates"] = list;
    }
    std::cout << j.dump(2) << "\n";
  } else {
    print_text(*best, spec, args.platform, nodes, engine->name());
    std::sort(candidates.begin(), candidates.end(),
              [](const auto& a, const auto& b) { return a.second < b.second; });
    for (const auto& [name, time] : candidates)
      std::cout << fmt::format("  candidate  {:<14} {:.3f} us\n", name, time * 1e6);
  }
  return 0;
}

}  // namespace

Action add_collective_command(CLI::App& command) {
  auto args = std::make_shared<CollectiveArgs>();
  add_platform_options(command, args->platform);
  command.add_option("--op", args->op, "allgather, reduce_scatter, allreduce, broadcast, reduce, alltoall, sendrecv")
      ->required();
  command.add_option("--size", args->size, "nccl-tests size: 8, 64KiB, 1GiB, 1e9")->required();
  std::string algos;
  for (const models::AlgorithmInfo* info : models::AlgorithmRegistry::instance().all())
    algos += "\n    " + info->name + ": " + info->description;
  command.add_option("--algo", args->algo, "Algorithm (default nccl), or best:" + algos + "\n    best: the fastest predicted");
  command.add_option("--engine", args->engine, "analytical (closed form) or event (SimGrid flows)")
      ->check(CLI::IsMember({"analytical", "event"}));
  command.add_option("--root", args->root, "Root rank of broadcast/reduce");
  command.add_option("--channels", args->channels, "Parallel rings/trees (0 = the algorithm decides)")
      ->check(CLI::NonNegativeNumber);
  command.add_option("--chunk", args->chunk, "Pipeline chunk size for tree algorithms");
  command.add_option("--algo-param", args->algo_params, "Algorithm-specific key=value, e.g. proto=LL128");
  command.add_flag("--check", args->check, "Prove the schedule's data movement before running it");
  add_format_option(command, args->format);
  return [args] { return run(*args); };
}

}  // namespace stepsim::cli
