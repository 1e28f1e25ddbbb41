// `stepsim plan`: which torchtitan layout of a model fits a GPU count and is fastest (docs/plan.md).
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "models/compute/kernel.hpp"
#include "tools/cli/commands.hpp"
#include "tools/plan/planner.hpp"

namespace stepsim::cli {
namespace {

struct PlanArgs {
  std::string platform;
  std::string model;
  std::vector<std::string> overrides;
  std::string fabric;
  int gpus = 0;
  int global_batch = 0;
  int sequence = 0;
  int top = 5;
  int retime = 10;
  std::string engine = "analytical";
  std::string format = "text";
};

constexpr double kGiB = 1024.0 * 1024 * 1024;

struct Row {
  const plan::Candidate& c;
  const plan::PlanResult& r;
  double time() const { return c.replay->iteration_time; }
  double tokens_per_gpu() const { return r.tokens_per_step() / r.space.gpus / time(); }
  double mfu(const platforms::GpuModel& gpu) const {
    const auto it = plan::iteration_layout(r.space, c.layout);
    // torchtitan's count (6 N + 12 L H d S per token), over the GPU's dense bf16 peak.
    const double per_token = workloads::transformer::model_flops_per_iteration(it.model, it.training) /
                             (it.training.tokens() * it.training.gradient_accumulation);
    return per_token * tokens_per_gpu() / models::peak_flops(gpu, models::Dtype::bf16);
  }
};

void text(const plan::PlanResult& r, const platforms::GpuModel& gpu, int top, std::ostream& out) {
  out << fmt::format("{} on {} x {} GPUs, global batch {} x {} tokens\n", r.model, r.space.gpus, r.platform,
                     r.space.global_batch, r.space.sequence);
  out << fmt::format("{} layouts, {} fit gpu.memory ({:.1f} GiB); the {} fastest estimates re-timed by the replay\n",
                     r.layouts, r.fit, gpu.memory / kGiB, r.retimed.size());
  out << fmt::format("{:<4} {:>10} {:>10} {:>12} {:>6} {:>9} {:>9}  {}\n", "rank", "iter (s)", "estimate",
                     "tokens/s/GPU", "MFU", "need GiB", "exposed", "layout");
  for (std::size_t i = 0; i < r.retimed.size() && static_cast<int>(i) < top; ++i) {
    const Row row{r.retimed[i], r};
    out << fmt::format("{:<4} {:>10.4f} {:>10.4f} {:>12.0f} {:>5.1f}% {:>9.1f} {:>8.1f}%  {}\n", i + 1, row.time(),
                       row.c.estimate_s, row.tokens_per_gpu(), 100 * row.mfu(gpu), row.c.memory.required() / kGiB,
                       100 * row.c.replay->breakdown.exposed_communication / row.time(), row.c.layout.label());
  }
  for (const std::string& note : r.notes) out << "note: " << note << "\n";
}

nlohmann::json json(const plan::PlanResult& r, const platforms::GpuModel& gpu, int top) {
  nlohmann::json layouts = nlohmann::json::array();
  for (std::size_t i = 0; i < r.retimed.size() && static_cast<int>(i) < top; ++i) {
    const Row row{r.retimed[i], r};
    const sim::Breakdown& b = row.c.replay->breakdown;
    layouts.push_back({{"layout", row.c.layout.label()},
                       {"overrides", row.c.layout.overrides(r.space.sequence)},
                       {"iteration_time_s", row.time()},
                       {"estimate_s", row.c.estimate_s},
                       {"tokens_per_gpu_per_s", row.tokens_per_gpu()},
                       {"mfu_bf16", row.mfu(gpu)},
                       {"peak_memory_bytes", row.c.memory.peak},
                       {"required_memory_bytes", row.c.memory.required()},
                       {"breakdown",
                        {{"compute_s", b.compute},
                         {"communication_s", b.communication},
                         {"exposed_communication_s", b.exposed_communication},
                         {"idle_s", b.idle}}}});
  }
  return {{"platform", r.platform},
          {"model", r.model},
          {"gpus", r.space.gpus},
          {"global_batch", r.space.global_batch},
          {"sequence", r.space.sequence},
          {"layouts", r.layouts},
          {"fit", r.fit},
          {"top", layouts},
          {"notes", r.notes}};
}

void csv(const plan::PlanResult& r, const platforms::GpuModel& gpu, int top, std::ostream& out) {
  out << "rank,layout,iteration_time_s,estimate_s,tokens_per_gpu_per_s,mfu_bf16,peak_memory_bytes,"
         "exposed_communication_s\n";
  for (std::size_t i = 0; i < r.retimed.size() && static_cast<int>(i) < top; ++i) {
    const Row row{r.retimed[i], r};
    out << fmt::format("{},\"{}\",{},{},{},{},{},{}\n", i + 1, row.c.layout.label(), row.time(), row.c.estimate_s,
                       row.tokens_per_gpu(), row.mfu(gpu), row.c.memory.peak,
                       row.c.replay->breakdown.exposed_communication);
  }
}

}  // namespace

Action add_plan_command(CLI::App& command) {
  auto args = std::make_shared<PlanArgs>();
  command.add_option("platform", args->platform, "Platform preset name (see `stepsim presets`) or YAML file")
      ->required();
  command.add_option("model", args->model, "Workload preset or file of kind fsdp whose model: is laid out")->required();
  command.add_option("--gpus", args->gpus, "GPUs of the job (whole nodes beyond one)")
      ->required()
      ->check(whole_number(1, 1 << 17));
  command.add_option("--global-batch", args->global_batch, "Sequences per optimizer step")
      ->required()
      ->check(whole_number(1, 1 << 24));
  command.add_option("--seq", args->sequence, "Tokens per sequence (default: the model's training.sequence)")
      ->check(whole_number(1, 1 << 24));
  command.add_option("--top", args->top, "Layouts to print")->check(whole_number(1, 1000000));
  command.add_option("--retime", args->retime, "Fastest estimates re-timed by the full replay")
      ->check(whole_number(1, 1000));
  command.add_option("--engine", args->engine, "Engine of the re-timing replay: analytical or event")
      ->check(CLI::IsMember({"analytical", "event"}));
  command.add_option("--fabric", args->fabric, "Inter-node fabric: fat-tree or rail-optimized")
      ->check(CLI::IsMember({"fat-tree", "rail-optimized"}));
  add_param_option(command, args->overrides, "workload.training.max_norm=0 (workload.*: the model file)");
  command.add_option("--format", args->format, "Output format")->check(CLI::IsMember({"text", "json", "csv"}));
  return [args] {
    plan::PlanRequest r;
    r.platform = args->platform;
    r.platform_options.fabric = args->fabric;
    for (const std::string& o : args->overrides) {
      if (o.rfind("workload.", 0) == 0)
        r.model_overrides.push_back(o.substr(9));
      else
        r.platform_options.overrides.push_back(o);
    }
    r.model = args->model;
    r.gpus = args->gpus;
    r.global_batch = args->global_batch;
    r.sequence = args->sequence;
    r.retime = std::max(args->retime, args->top);
    r.engine = args->engine;
    const plan::PlanResult result = plan::run_plan(r);
    // Wall time on stderr: stdout is the same bit for bit on every run.
    std::cerr << fmt::format("{}: {} layouts pruned and estimated in {:.2f} s ({:.0f} layouts/s)\n", r.model,
                             result.layouts, result.estimate_seconds,
                             result.estimate_seconds > 0 ? result.layouts / result.estimate_seconds : 0.0);
    platforms::PlatformOptions options = r.platform_options;
    const platforms::GpuModel gpu = platforms::load_platform(r.platform, options).gpu();
    if (args->format == "json")
      std::cout << json(result, gpu, args->top).dump(2) << "\n";
    else if (args->format == "csv")
      csv(result, gpu, args->top, std::cout);
    else
      text(result, gpu, args->top, std::cout);
    return result.retimed.empty() ? 2 : 0;
  };
}

}  // namespace stepsim::cli
