#include "tools/plan/planner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <exception>
#include <iterator>
#include <map>
#include <thread>
#include <tuple>

#include "platforms/config_error.hpp"
#include "sim/collective_prediction.hpp"
#include "sim/engine.hpp"
#include "sim/replay.hpp"
#include "workloads/generators/transformer_estimate.hpp"
#include "workloads/generators/transformer_memory.hpp"
#include "workloads/mesh.hpp"
#include "workloads/workload.hpp"

namespace stepsim::plan {
namespace {

using workloads::transformer::CollectiveCost;
using workloads::transformer::LayoutGroup;

// The platform with as many nodes as `gpus` needs (all of one node's GPUs, or the first `gpus`).
struct Job {
  platforms::Platform platform;
  platforms::Allocation allocation;
};

// Stated limits: beyond them a plan would price collectives over more ranks than any run
// stepsim has been checked against, or enumerate micro-batch splits by the million.
constexpr int kMaxGpus = 32768;
constexpr int kMaxGlobalBatch = 1 << 20;

Job make_job(const PlanRequest& r) {
  if (r.gpus < 1 || r.gpus > kMaxGpus)
    throw ConfigError("--gpus " + std::to_string(r.gpus), fmt::format("a plan takes 1 to {} GPUs", kMaxGpus),
                      "write e.g. --gpus 256");
  platforms::PlatformOptions probe = r.platform_options;
  probe.nodes = 1;
  const int per_node = platforms::load_platform(r.platform, probe).gpus_per_node();
  platforms::PlatformOptions options = r.platform_options;
  if (r.gpus > per_node && r.gpus % per_node != 0)
    throw ConfigError("--gpus " + std::to_string(r.gpus),
                      fmt::format("{} nodes of {} GPUs cannot hold {} GPUs", r.platform, per_node, r.gpus),
                      fmt::format("use a multiple of {} (whole nodes), or at most {}", per_node, per_node));
  options.nodes = std::max(1, r.gpus / per_node);
  platforms::Platform platform = platforms::load_platform(r.platform, options);
  platforms::Allocation allocation =
      platforms::parse_allocation(r.gpus < per_node ? fmt::format("0-{}", r.gpus - 1) : "", platform);
  return {std::move(platform), std::move(allocation)};
}

// The model's sections, as the fsdp generator reads them.
Space read_space(const PlanRequest& r, const Job& job) {
  const workloads::WorkloadDocument w = workloads::load_workload_document(r.model, r.model_overrides);
  const platforms::YamlReader& reader = w.reader;
  if (w.kind != "fsdp" || (w.doc["framework"] && w.doc["framework"].Scalar() != "torchtitan"))
    throw ConfigError(reader.origin(), "stepsim plan lays out torchtitan transformers (kind: fsdp); this is kind: " + w.kind,
                      "plan a workload of kind fsdp, e.g. llama3-70b");
  Space s;
  s.model = workloads::transformer::read_model(w.doc, reader);
  if (s.model.moe.enabled())
    throw ConfigError(reader.origin(), "stepsim plan does not lay out mixture-of-experts models yet",
                      "simulate each layout with `stepsim simulate` (parallelism.ep), or plan a dense model");
  s.training = workloads::transformer::read_training(w.doc, reader);
  s.gpus = r.gpus;
  s.gpus_per_node = std::min(r.gpus, job.platform.gpus_per_node());
  s.global_batch = r.global_batch;
  s.sequence = r.sequence > 0 ? r.sequence : s.training.sequence;
  s.fp8 = job.platform.gpu().fp8_flops > 0;
  if (s.global_batch < 1 || s.global_batch > kMaxGlobalBatch)
    throw ConfigError("--global-batch " + std::to_string(s.global_batch),
                      fmt::format("a step takes 1 to {} sequences", kMaxGlobalBatch), "write e.g. --global-batch 512");
  return s;
}

// Prices a layout's collectives with NCCL's model on its groups' GPUs (the groups of rank 0;
// the mesh places every other group alike), memoised across layouts by the mesh's degrees.
class Pricer {
 public:
  explicit Pricer(const Job& job) : job_(job), engine_(sim::make_engine("analytical")) {}

  workloads::transformer::CollectivePricer for_layout(const Layout& l) {
    const Degrees degrees{l.dp_replicate, l.dp_shard, l.cp, l.tp, l.pp};
    if (groups_.find(degrees) == groups_.end()) groups_.emplace(degrees, groups_of(l));
    return [this, degrees](LayoutGroup group, models::CollectiveOp op, Bytes bytes) {
      const auto key = std::make_tuple(degrees, group, op, bytes);
      auto it = cache_.find(key);
      if (it == cache_.end()) it = cache_.emplace(key, price(groups_.at(degrees).at(group), op, bytes)).first;
      return it->second;
    };
  }

 private:
  using Degrees = std::array<int, 5>;

  std::map<LayoutGroup, std::vector<int>> groups_of(const Layout& l) const {
    workloads::Parallelism par;
    par.dp_replicate = l.dp_replicate;
    par.dp_shard = l.dp_shard;
    par.cp = l.cp;
    par.tp = l.tp;
    par.pp = l.pp;
    const workloads::DeviceMesh mesh = workloads::dense_mesh(par);
    // Rank 0's subgroup along `axes` (mesh order, outermost first), as GPUs.
    const auto gpus_of = [&](std::vector<std::string> axes) {
      std::vector<int> ranks = {0};
      for (const std::string& axis : axes) {
        std::vector<int> next;
        for (int r : ranks)
          for (int v = 0; v < mesh.size(axis); ++v) next.push_back(mesh.with(r, axis, v));
        ranks = std::move(next);
      }
      std::vector<int> gpus;
      for (int rank : ranks) gpus.push_back(job_.allocation.gpus.at(static_cast<std::size_t>(rank)));
      return gpus;
    };
    std::map<LayoutGroup, std::vector<int>> groups = {{LayoutGroup::tp, gpus_of({"tp"})},
                                                      {LayoutGroup::cp, gpus_of({"cp"})},
                                                      {LayoutGroup::fsdp, gpus_of({"dp_shard", "cp"})},
                                                      {LayoutGroup::replicate, gpus_of({"dp_replicate"})},
                                                      {LayoutGroup::pp, gpus_of({"pp"})}};
    if (groups[LayoutGroup::pp].size() > 2) groups[LayoutGroup::pp].resize(2);  // one hop
    return groups;
  }

  CollectiveCost price(const std::vector<int>& gpus, models::CollectiveOp op, Bytes bytes) {
    if (gpus.size() < 2 || bytes <= 0) return {};
    const platforms::Allocation allocation{gpus};
    const models::CollectiveContext ctx{job_.platform, allocation, {}};
    const models::CollectiveSpec spec{op, static_cast<int>(gpus.size()), bytes, 0};
    const sim::CollectivePrediction p = sim::predict_collective("nccl", spec, ctx, *engine_);
    return {p.result.time, p.schedule.channels};
  }

  const Job& job_;
  std::unique_ptr<sim::Engine> engine_;
  std::map<Degrees, std::map<LayoutGroup, std::vector<int>>> groups_;
  std::map<std::tuple<Degrees, LayoutGroup, models::CollectiveOp, Bytes>, CollectiveCost> cache_;
};

// The stages whose peaks bound every stage's: the first (the embedding, the most micro-batches in
// flight), the second (the first without the embedding: torchtitan's split gives the first
// chunks the remainder blocks, so no later middle stage holds more blocks, and each holds fewer
// micro-batches) and the last (the head, the loss and the outputs the pipeline keeps).
std::vector<int> walked_stages(int pp) {
  std::vector<int> stages = {0};
  if (pp > 2) stages.push_back(1);
  if (pp > 1) stages.push_back(pp - 1);
  return stages;
}

int communicators(const Layout& l) {
  int n = 0;
  for (int degree : {l.tp, l.cp, l.pp, l.dp_shard * l.cp, l.dp_replicate}) n += degree > 1 ? 1 : 0;
  return n;
}

}  // namespace

PlanResult run_plan(const PlanRequest& r) {
  const Job job = make_job(r);
  PlanResult result;
  result.space = read_space(r, job);
  result.platform = job.platform.name();
  result.model = r.model;
  const platforms::GpuModel& gpu = job.platform.gpu();
  const workloads::LaunchModel launch;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<Layout> layouts = enumerate_layouts(result.space);
  result.layouts = static_cast<long>(layouts.size());
  // Layouts are independent: contiguous slices on the machine's cores, each with its own pricer
  // and pass cache, joined in enumeration order (the result does not depend on the split).
  const int threads = static_cast<int>(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, 16));
  std::vector<std::vector<Candidate>> slices(static_cast<std::size_t>(threads));
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(threads));
  const auto evaluate = [&](int slice) {
    try {
      Pricer pricer(job);
      std::map<std::tuple<int, int, int, int, int>, workloads::transformer::PassTimes> passes;
      const std::size_t begin = layouts.size() * slice / threads, end = layouts.size() * (slice + 1) / threads;
      for (std::size_t i = begin; i < end; ++i) {
        const Layout& l = layouts[i];
        const workloads::transformer::IterationLayout it = iteration_layout(result.space, l);
        const models::MemoryReport memory =
            workloads::transformer::transformer_memory(it, walked_stages(l.pp), gpu, communicators(l));
        if (!memory.fits()) continue;
        const auto price = pricer.for_layout(l);
        const auto key = std::make_tuple(l.tp, l.cp, l.micro_batch, static_cast<int>(l.checkpointing),
                                         static_cast<int>(l.precision));
        auto found = passes.find(key);
        if (found == passes.end())
          found = passes.emplace(key, workloads::transformer::pass_times(it, gpu, launch, price)).first;
        const double estimate =
            workloads::transformer::estimate_iteration(it, found->second, gpu, launch, price).iteration;
        slices[static_cast<std::size_t>(slice)].push_back({l, estimate, memory.worst(), std::nullopt});
      }
    } catch (...) {
      errors[static_cast<std::size_t>(slice)] = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; ++t) workers.emplace_back(evaluate, t);
  evaluate(0);
  for (std::thread& w : workers) w.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  std::vector<Candidate> fitting;
  for (std::vector<Candidate>& slice : slices) std::move(slice.begin(), slice.end(), std::back_inserter(fitting));
  result.fit = static_cast<long>(fitting.size());
  if (layouts.empty())
    throw ConfigError("--global-batch " + std::to_string(r.global_batch),
                      fmt::format("no layout of {} on {} GPUs splits {} sequences of {} tokens", r.model, r.gpus,
                                  r.global_batch, result.space.sequence),
                      "use a global batch that a data-parallel degree divides (a multiple of the GPU count always "
                      "works), or a sequence length divisible by 2");
  if (fitting.empty())
    throw ConfigError(r.model,
                      fmt::format("none of the {} layouts on {} GPUs fits gpu.memory ({:.1f} GiB)", layouts.size(),
                                  r.gpus, gpu.memory / (1024.0 * 1024 * 1024)),
                      "use more GPUs, a smaller global batch or sequence, or GPUs with more memory");
  result.estimate_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::stable_sort(fitting.begin(), fitting.end(),
                   [](const Candidate& a, const Candidate& b) { return a.estimate_s < b.estimate_s; });
  if (static_cast<int>(fitting.size()) > r.retime) fitting.resize(static_cast<std::size_t>(std::max(0, r.retime)));
  sim::ReplayOptions options;
  options.engine = r.engine;
  for (Candidate& c : fitting) {
    std::vector<std::string> overrides = r.model_overrides;
    for (const std::string& o : c.layout.overrides(result.space.sequence)) overrides.push_back(o);
    try {
      const workloads::Trace trace = workloads::load_workload(r.model, {job.platform, job.allocation}, overrides);
      c.replay = sim::replay(trace, {job.platform, job.allocation}, options);
      result.retimed.push_back(std::move(c));
    } catch (const ConfigError& e) {
      result.notes.push_back(fmt::format("{}: not re-timed: {}", c.layout.label(), e.what()));
    }
  }
  std::stable_sort(result.retimed.begin(), result.retimed.end(), [](const Candidate& a, const Candidate& b) {
    return a.replay->iteration_time < b.replay->iteration_time;
  });
  return result;
}

}  // namespace stepsim::plan
