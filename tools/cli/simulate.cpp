// `stepsim simulate`: one training iteration of a workload on a platform, replayed on an
// engine; reports the iteration time, where it went, the critical path and the busiest links.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "platforms/config_error.hpp"
#include "sim/replay.hpp"
#include "tools/cli/commands.hpp"
#include "workloads/workload.hpp"

namespace stepsim::cli {
namespace {

struct SimulateArgs {
  PlatformArgs platform;
  std::string workload;
  std::string engine = "analytical";
  std::string timeline;
  std::string format = "text";
  int top = 10;
  bool allow_oom = false;
};

constexpr double kGiB = 1024.0 * 1024 * 1024;

nlohmann::json terms_json(const models::MemoryTerms& terms) {
  nlohmann::json j = nlohmann::json::object();
  for (models::MemoryTerm t : models::kMemoryTerms) j[models::to_string(t)] = terms[t];
  return j;
}

/// `memory` of the JSON report (issue 21's schema): the worst rank's peak and breakdown, and
/// every group of ranks (pipeline stage) with its own.
nlohmann::json memory_json(const models::MemoryReport& m) {
  const models::RankMemory& worst = m.worst();
  nlohmann::json groups = nlohmann::json::array();
  for (const models::RankMemory& g : m.groups)
    groups.push_back({{"label", g.label},
                      {"ranks", g.ranks},
                      {"peak_bytes", g.peak},
                      {"allocated_bytes", g.allocated},
                      {"reserved_bytes", g.reserved},
                      {"moment", g.moment},
                      {"breakdown", terms_json(g.at_peak)}});
  return {{"peak_bytes", worst.peak},
          {"peak_rank", worst.ranks.empty() ? -1 : worst.ranks.front()},
          {"capacity_bytes", m.capacity},
          {"fits", m.fits()},
          {"required_bytes", worst.required()},
          {"allocated_bytes", worst.allocated},
          {"reserved_bytes", worst.reserved},
          {"moment", worst.moment},
          {"breakdown", terms_json(worst.at_peak)},
          {"per_group", groups},
          {"notes", m.notes}};
}

void memory_text(const models::MemoryReport& m, std::ostream& out) {
  const models::RankMemory& worst = m.worst();
  const char* verdict = !m.fits() ? "DOES NOT FIT" : m.tight() ? "fits without the allocator's usual cache" : "fits";
  out << fmt::format("peak memory per GPU     {:>12.2f} GiB of {:.2f} GiB ({}; {}, at the {})\n", worst.peak / kGiB,
                     m.capacity / kGiB, verdict, worst.label, worst.moment);
  for (models::MemoryTerm t : models::kMemoryTerms)
    out << fmt::format("  {:<22} {:>12.2f} GiB\n", models::to_string(t), worst.at_peak[t] / kGiB);
  if (m.groups.size() > 1) {
    out << "  per stage (peak GiB):";
    for (const models::RankMemory& g : m.groups) out << fmt::format(" {:.1f}", g.peak / kGiB);
    out << "\n";
  }
}

/// `-p workload.KEY=VALUE` goes to the workload, every other `-p` to the platform: one flag
/// and one dotted-path namespace for sweeps.
std::vector<std::string> take_workload_overrides(std::vector<std::string>& overrides) {
  static const std::string prefix = "workload.";
  std::vector<std::string> workload;
  std::erase_if(overrides, [&](const std::string& o) {
    if (o.rfind(prefix, 0) != 0) return false;
    workload.push_back(o.substr(prefix.size()));
    return true;
  });
  return workload;
}

nlohmann::json breakdown_json(const sim::Breakdown& b) {
  nlohmann::json groups = nlohmann::json::object();
  for (const auto& [name, time] : b.by_group)
    groups[name] = {{"communication_s", time.communication}, {"exposed_communication_s", time.exposed}};
  return {{"compute_s", b.compute},
          {"communication_s", b.communication},
          {"exposed_communication_s", b.exposed_communication},
          {"idle_s", b.idle},
          {"by_group", groups}};
}

struct Report {
  const SimulateArgs& args;
  const platforms::Platform& platform;
  int nodes;
  const workloads::Trace& trace;
  const sim::Prediction& prediction;

  double throughput() const { return trace.work.items_per_rank / prediction.iteration_time; }
  double mfu() const {
    const double peak = models::peak_flops(platform.gpu(), models::Dtype::bf16);
    return peak > 0 ? trace.work.model_flops_per_rank / prediction.iteration_time / peak : 0;
  }
  /// The replay's notes start with the trace's.
  const std::vector<std::string>& notes() const { return prediction.notes; }
  std::vector<sim::LinkReport> busiest_links() const {
    std::vector<sim::LinkReport> links = prediction.links;
    std::stable_sort(links.begin(), links.end(),
                     [](const auto& a, const auto& b) { return a.utilisation > b.utilisation; });
    if (static_cast<int>(links.size()) > args.top) links.resize(args.top);
    return links;
  }

  nlohmann::json json() const {
    const sim::Prediction& p = prediction;
    nlohmann::json path = nlohmann::json::array();
    for (const auto& e : p.critical_path)
      path.push_back({{"name", e.name}, {"kind", e.kind}, {"count", e.count}, {"time_s", e.time}});
    nlohmann::json links = nlohmann::json::array();
    for (const auto& l : p.links)
      links.push_back({{"link", l.link}, {"name", l.name}, {"type", l.type}, {"bytes_forward", l.bytes_forward},
                       {"bytes_backward", l.bytes_backward}, {"utilisation", l.utilisation}});
    nlohmann::json j = {{"platform", platform.name()},
                        {"workload", trace.origin},
                        {"engine", p.engine},
                        {"ranks", p.ranks},
                        {"nodes", nodes},
                        {"iteration_time_s", p.iteration_time},
                        {"breakdown", breakdown_json(p.breakdown)},
                        {"slowest_rank", p.slowest_rank},
                        {"slowest_rank_breakdown", breakdown_json(p.slowest_rank_breakdown)},
                        {"critical_path", path},
                        {"links", links},
                        {"ops_replayed", p.ops_replayed},
                        {"notes", notes()}};
    if (trace.work.items_per_rank > 0) {
      j["throughput"] = {{"item", trace.work.item}, {"per_gpu_per_s", throughput()}};
    }
    if (trace.work.model_flops_per_rank > 0) j["mfu_bf16"] = mfu();
    if (trace.memory) j["memory"] = memory_json(*trace.memory);
    if (!p.compression.empty()) {
      nlohmann::json compression = nlohmann::json::array();
      for (const auto& c : p.compression) {
        nlohmann::json entry = {{"op", c.op},
                                {"codec", c.codec},
                                {"mode", c.mode},
                                {"calls", c.calls},
                                {"bytes", c.bytes},
                                {"error_bound_per_call", c.error_bound_per_call},
                                {"error_bound_per_iteration", c.error_bound}};
        if (c.mode == "p2p") entry["threshold_bytes"] = c.threshold;
        compression.push_back(entry);
      }
      j["compression"] = compression;
    }
    return j;
  }

  void text(std::ostream& out) const {
    const sim::Prediction& p = prediction;
    const auto share = [&](Seconds t) { return 100.0 * t / p.iteration_time; };
    out << fmt::format("{} on {}: {} ranks on {} node(s), {} engine\n", trace.origin, platform.name(), p.ranks,
                       nodes, p.engine);
    out << fmt::format("iteration time          {:>12.6f} s\n", p.iteration_time);
    if (trace.work.items_per_rank > 0)
      out << fmt::format("throughput              {:>12.1f} {}/s per GPU\n", throughput(), trace.work.item);
    if (trace.work.model_flops_per_rank > 0)
      out << fmt::format("model FLOPs utilisation {:>11.1f} % of dense bf16 peak\n", 100 * mfu());
    if (trace.memory) memory_text(*trace.memory, out);
    out << "breakdown (mean over ranks):\n";
    const sim::Breakdown& b = p.breakdown;
    out << fmt::format("  compute                {:>12.6f} s  {:5.1f} %\n", b.compute, share(b.compute));
    out << fmt::format("  communication          {:>12.6f} s  {:5.1f} %\n", b.communication, share(b.communication));
    out << fmt::format("  exposed communication  {:>12.6f} s  {:5.1f} %\n", b.exposed_communication,
                       share(b.exposed_communication));
    for (const auto& [name, time] : b.by_group)
      out << fmt::format("    on {:<19} {:>12.6f} s  {:5.1f} %  (exposed {:.6f} s{})\n", name, time.communication,
                         share(time.communication), time.exposed,
                         name == "pp" ? ", the pipeline bubble included" : "");
    out << fmt::format("  idle                   {:>12.6f} s  {:5.1f} %\n", b.idle, share(b.idle));
    out << fmt::format("slowest rank {} ({:.6f} s)\n", p.slowest_rank, p.iteration_time);
    out << "critical path (time by op name):\n";
    const int path_rows = std::min<int>(args.top, static_cast<int>(p.critical_path.size()));
    std::size_t width = 28;
    for (int i = 0; i < path_rows; ++i) width = std::max(width, p.critical_path[i].name.size());
    for (int i = 0; i < path_rows; ++i) {
      const auto& e = p.critical_path[i];
      out << fmt::format("  {:<{}} {:<10} x{:<6} {:>12.6f} s  {:5.1f} %\n", e.name, width, e.kind, e.count, e.time,
                         share(e.time));
    }
    const auto links = busiest_links();
    if (!links.empty()) out << "busiest links:\n";
    for (const auto& l : links)
      out << fmt::format("  {:<28} {:<8} {:>10.3f} GB fwd {:>10.3f} GB bwd  {:5.1f} % busy\n", l.name, l.type,
                         l.bytes_forward / kGB, l.bytes_backward / kGB, 100 * l.utilisation);
    if (!p.compression.empty())
      out << "compression (max abs error bound, x the largest magnitude R of a collective's inputs):\n";
    for (const auto& c : p.compression)
      out << fmt::format("  {:<15} {} ({}{}): {} calls, {:.3f} GB; per call {:.3g} R, per iteration {:.3g} R\n", c.op,
                         c.codec, c.mode, c.mode == "p2p" ? ", messages from " + format_size(c.threshold) : "",
                         c.calls, c.bytes / kGB, c.error_bound_per_call, c.error_bound);
    for (const std::string& note : notes()) out << "note: " << note << "\n";
  }
};

}  // namespace

Action add_simulate_command(CLI::App& command) {
  auto args = std::make_shared<SimulateArgs>();
  add_platform_options(command, args->platform);
  command.add_option("workload", args->workload,
                     "Workload preset name (see `stepsim presets`), workload YAML or JSON trace file")
      ->required();
  command.add_option("--engine", args->engine, "analytical (closed form) or event (SimGrid, link contention)")
      ->check(CLI::IsMember({"analytical", "event"}));
  command.add_option("--timeline", args->timeline, "Write a Chrome-trace / Perfetto JSON timeline to FILE");
  command.add_option("--top", args->top, "Rows of critical path and links to print")->check(whole_number(1, 1000000));
  add_format_option(command, args->format);
  command.add_flag("--allow-oom", args->allow_oom,
                   "Time a workload whose peak memory exceeds gpu.memory instead of refusing it");
  command.footer("-p workload.KEY=VALUE overrides a workload key, e.g. -p workload.fsdp.strategy=HYBRID_SHARD;\n"
                 "other -p keys override the platform.");
  return [args] {
    std::vector<std::string> workload_overrides = take_workload_overrides(args->platform.options.overrides);
    platforms::Platform platform = platforms::load_platform(args->platform.platform, args->platform.options);
    platforms::Allocation allocation = platforms::parse_allocation(args->platform.gpus, platform);
    const workloads::JobContext job{platform, allocation};
    const workloads::Trace trace = workloads::load_workload(args->workload, job, workload_overrides);
    if (trace.memory && !args->allow_oom) {
      const std::string problem = models::does_not_fit(*trace.memory);
      if (!problem.empty())
        throw ConfigError(args->workload, "does not fit: " + problem,
                          "shard more (FSDP, tensor or pipeline parallelism), checkpoint more activations, lower "
                          "training.micro_batch, or pass --allow-oom to time it anyway");
    }

    std::ofstream timeline;
    sim::ReplayOptions options;
    options.engine = args->engine;
    if (!args->timeline.empty()) {
      timeline.open(args->timeline);
      if (!timeline)
        throw ConfigError("--timeline " + args->timeline, "cannot open the file for writing",
                          "name a writable path");
      options.timeline = &timeline;
    }
    const sim::Prediction prediction = sim::replay(trace, {platform, allocation}, options);
    const Report report{*args, platform, allocation.nodes(platform), trace, prediction};
    if (args->format == "json")
      std::cout << report.json().dump(2) << "\n";
    else
      report.text(std::cout);
    return 0;
  };
}

}  // namespace stepsim::cli
