// `stepsim collective`: lower one collective with a named algorithm (or every algorithm, for
// --algo best), run it on an engine and report time, algbw and busbw as nccl-tests defines them.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "models/algorithm.hpp"
#include "models/compression/codec.hpp"
#include "platforms/config_error.hpp"
#include "sim/collective_prediction.hpp"
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
  std::string runtime = "primitives";
  std::string compression;
  std::string compression_mode;
  std::string compression_threshold;
};

/// --compression CODEC[:k=v], --compression-mode, --compression-threshold into `options`.
void compression_options(const CollectiveArgs& args, models::AlgorithmOptions& options) {
  if (args.compression.empty()) {
    if (!args.compression_mode.empty() || !args.compression_threshold.empty())
      throw ConfigError(args.compression_mode.empty() ? "--compression-threshold" : "--compression-mode",
                        "given without --compression", "name a codec, e.g. --compression zfp:rate=8");
    return;
  }
  models::parse_codec(args.compression, "--compression");   // reject a bad codec before lowering
  options.compression.codec = args.compression;
  if (args.compression_mode == "p2p") options.compression.mode = models::CompressionMode::p2p;
  if (!args.compression_threshold.empty()) {
    options.compression.threshold = size_flag("--compression-threshold", args.compression_threshold);
  }
}

models::AlgorithmOptions algorithm_options(const CollectiveArgs& args) {
  models::AlgorithmOptions options;
  options.channels = args.channels;
  if (!args.chunk.empty()) {
    options.chunk_bytes = size_flag("--chunk", args.chunk, "512KiB");
    if (!(options.chunk_bytes > 0))
      throw ConfigError("--chunk", "must be > 0, got " + args.chunk,
                        "give a chunk size such as 512KiB, or omit --chunk for the algorithm's default");
  }
  sim::add_algo_params(args.algo_params, options);
  compression_options(args, options);
  options.ideal_runtime = args.runtime == "ideal";
  return options;
}

nlohmann::json to_json(const sim::CollectivePrediction& o, const models::CollectiveSpec& spec, int nodes,
                       const std::string& engine) {
  nlohmann::json j = {
      {"op", models::to_string(spec.op)},
      {"algo", o.algo},
      {"ranks", spec.ranks},
      {"nodes", nodes},
      {"size_bytes", spec.bytes},
      {"time_s", o.result.time},
      {"algbw_GBps", o.algbw_GBps()},
      {"busbw_GBps", o.busbw_GBps()},
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

void print_text(const sim::CollectivePrediction& o, const models::CollectiveSpec& spec, const PlatformArgs& p, int nodes,
                const std::string& engine) {
  std::cout << fmt::format("{} of {} on {} ({} ranks, {} node{}), engine {}\n", models::to_string(spec.op),
                           format_size(spec.bytes), p.platform, spec.ranks, nodes, nodes == 1 ? "" : "s",
                           engine);
  std::cout << fmt::format("  algorithm  {} ({}, protocol {}, {} channel{})\n", o.algo, o.schedule.algorithm,
                           o.schedule.protocol.name, o.schedule.channels, o.schedule.channels == 1 ? "" : "s");
  std::cout << fmt::format("  time       {:.3f} us\n", o.result.time * 1e6);
  std::cout << fmt::format("  algbw      {:.2f} GB/s\n", o.algbw_GBps());
  std::cout << fmt::format("  busbw      {:.2f} GB/s\n", o.busbw_GBps());
  for (const std::string& note : o.schedule.notes) std::cout << "  note       " << note << "\n";
}

int run(const CollectiveArgs& args) {
  platforms::Platform platform = platforms::load_platform(args.platform.platform, args.platform.options);
  platforms::Allocation allocation = platforms::parse_allocation(args.platform.gpus, platform);
  models::CollectiveSpec spec;
  spec.op = models::parse_op(args.op);
  spec.ranks = allocation.ranks();
  spec.root = args.root;
  spec.bytes = size_flag("--size", args.size, "8, 64KiB, 1GiB or 1e9");
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

  const sim::CollectivePrediction best = sim::predict_collective(args.algo, spec, ctx, *engine, args.check);

  if (args.format == "json") {
    nlohmann::json j = to_json(best, spec, nodes, engine->name());
    if (!best.candidates.empty()) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& [name, time] : best.candidates) list.push_back({{"algo", name}, {"time_s", time}});
      j["candidates"] = list;
    }
    std::cout << j.dump(2) << "\n";
  } else {
    print_text(best, spec, args.platform, nodes, engine->name());
    std::vector<std::pair<std::string, Seconds>> candidates = best.candidates;
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
      ->check(whole_number(0, 64));
  command.add_option("--chunk", args->chunk, "Pipeline chunk size for tree algorithms");
  command.add_option("--algo-param", args->algo_params, "Algorithm-specific key=value, e.g. proto=LL128");
  command.add_flag("--check", args->check, "Prove the schedule's data movement before running it");
  command.add_option("--runtime", args->runtime,
                     "primitives: non-NCCL algorithms run as kernels on NCCL's primitives (launch, per-step "
                     "sync, LL/LL128/Simple by size; default); ideal: the schedule alone, a lower bound")
      ->check(CLI::IsMember({"primitives", "ideal"}));
  std::string codecs;
  for (const models::CodecInfo* info : models::CodecRegistry::instance().all()) {
    codecs += "\n    " + info->name + ": " + info->description;
    for (const models::CodecParam& p : info->params)
      codecs += "\n      " + p.name + "=" + p.default_value + "  " + p.description;
  }
  command.add_option("--compression", args->compression, "Compress with CODEC[:key=value,...], e.g. zfp:rate=8:" + codecs);
  command.add_option("--compression-mode", args->compression_mode,
                     "collective (Zhou et al.'s compressed ring, --algo ring; default) or p2p (every message of at "
                     "least the threshold compressed by its sender, any algorithm)")
      ->check(CLI::IsMember({"p2p", "collective"}));
  command.add_option("--compression-threshold", args->compression_threshold,
                     "p2p: smallest message compressed (default 1MiB, MVAPICH-Plus)");
  add_format_option(command, args->format);
  return [args] { return run(*args); };
}

}  // namespace stepsim::cli
