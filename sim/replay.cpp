#include "sim/replay.hpp"

#include <map>
#include <sstream>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "platforms/config_error.hpp"
#include "sim/child_process.hpp"
#include "sim/prepared_schedule.hpp"
#include "sim/replay_backend.hpp"
#include "sim/replay_compression.hpp"
#include "sim/replay_core.hpp"
#include "sim/timeline.hpp"

namespace stepsim::sim {
namespace {

using nlohmann::json;

/// Bytes per link and direction over the whole iteration: each distinct schedule's usage
/// (engine-independent, computed once) times the instances that ran it.
std::vector<LinkReport> link_reports(const ReplayCore& core, const ReplayPlan& plan, const Placement& placement,
                                     Seconds iteration_time) {
  std::map<int, std::pair<Bytes, Bytes>> bytes;
  for (const auto& planned : plan.schedules()) {
    const auto starts = static_cast<double>(core.schedule_starts()[static_cast<std::size_t>(planned->id)]);
    if (starts == 0) continue;
    for (const LinkUsage& usage : PreparedSchedule(planned->schedule, planned->placement).link_usage()) {
      auto& [forward, backward] = bytes[usage.link];
      forward += usage.bytes_forward * starts;
      backward += usage.bytes_backward * starts;
    }
  }
  const platforms::Platform& platform = placement.platform;
  const int node_links = platform.nodes() * static_cast<int>(platform.node().links.size());
  std::vector<LinkReport> reports;
  for (const auto& [id, directions] : bytes) {
    const platforms::Link link = platform.link(id);
    LinkReport report;
    report.link = id;
    // Node-local links carry their template's name; say which node's copy it is.
    report.name = platform.nodes() > 1 && id < node_links
                      ? fmt::format("node{}.{}", id / static_cast<int>(platform.node().links.size()), link.name)
                      : link.name;
    report.type = platforms::to_string(link.type);
    report.bytes_forward = directions.first;
    report.bytes_backward = directions.second;
    // A half-duplex link has one capacity for both directions (its two-way total when both
    // carried bytes and it has one).
    const Bytes busiest = link.half_duplex ? directions.first + directions.second
                                           : std::max(directions.first, directions.second);
    const BytesPerSecond capacity = link_capacity(link, directions.first > 0 && directions.second > 0);
    report.utilisation = iteration_time > 0 ? busiest / (capacity * iteration_time) : 0;
    reports.push_back(std::move(report));
  }
  return reports;
}

Prediction finish(const ReplayCore& core, const ReplayPlan& plan, const workloads::Trace& trace,
                  const Placement& placement, const std::string& engine) {
  Prediction p = core.prediction();
  p.engine = engine;
  p.links = link_reports(core, plan, placement, p.iteration_time);
  p.notes = trace.notes;
  if (engine == "analytical")
    p.notes.push_back("analytical engine: each collective and send/recv is timed alone, so concurrent "
                      "communication does not share links (the event engine shows contention)");
  if (core.replayed_ranks() < trace.ranks)
    p.notes.push_back(fmt::format("{} of {} ranks replayed: the others provably replay as one of them (same "
                                  "program, collective timings and peers) and report its times",
                                  core.replayed_ranks(), trace.ranks));
  return p;
}

// The event engine runs in a child process; its Prediction comes back as JSON (nlohmann
// writes doubles so that they read back bit for bit).
json breakdown_json(const Breakdown& b) {
  json groups = json::object();
  for (const auto& [name, time] : b.by_group) groups[name] = {time.communication, time.exposed};
  return {{"compute", b.compute}, {"communication", b.communication},
          {"exposed_communication", b.exposed_communication}, {"idle", b.idle}, {"by_group", groups}};
}

Breakdown breakdown_from(const json& j) {
  Breakdown b{j.at("compute").get<Seconds>(), j.at("communication").get<Seconds>(),
              j.at("exposed_communication").get<Seconds>(), j.at("idle").get<Seconds>(), {}};
  for (const auto& [name, time] : j.at("by_group").items())
    b.by_group[name] = {time.at(0).get<Seconds>(), time.at(1).get<Seconds>()};
  return b;
}

std::string encode(const Prediction& p) {
  json j = {{"engine", p.engine},
            {"ranks", p.ranks},
            {"iteration_time", p.iteration_time},
            {"slowest_rank", p.slowest_rank},
            {"rank_time", p.rank_time},
            {"breakdown", breakdown_json(p.breakdown)},
            {"slowest_rank_breakdown", breakdown_json(p.slowest_rank_breakdown)},
            {"ops_replayed", p.ops_replayed},
            {"notes", p.notes}};
  json& path = j["critical_path"] = json::array();
  for (const CriticalPathEntry& e : p.critical_path)
    path.push_back({{"name", e.name}, {"kind", e.kind}, {"count", e.count}, {"time", e.time}});
  json& links = j["links"] = json::array();
  for (const LinkReport& l : p.links)
    links.push_back({{"link", l.link},
                     {"name", l.name},
                     {"type", l.type},
                     {"bytes_forward", l.bytes_forward},
                     {"bytes_backward", l.bytes_backward},
                     {"utilisation", l.utilisation}});
  return j.dump();
}

Prediction decode(const std::string& text) {
  const json j = json::parse(text);
  Prediction p;
  p.engine = j.at("engine").get<std::string>();
  p.ranks = j.at("ranks").get<int>();
  p.iteration_time = j.at("iteration_time").get<Seconds>();
  p.slowest_rank = j.at("slowest_rank").get<int>();
  p.rank_time = j.at("rank_time").get<std::vector<Seconds>>();
  p.breakdown = breakdown_from(j.at("breakdown"));
  p.slowest_rank_breakdown = breakdown_from(j.at("slowest_rank_breakdown"));
  p.ops_replayed = j.at("ops_replayed").get<std::int64_t>();
  p.notes = j.at("notes").get<std::vector<std::string>>();
  for (const json& e : j.at("critical_path"))
    p.critical_path.push_back({e.at("name").get<std::string>(), e.at("kind").get<std::string>(),
                               e.at("count").get<int>(), e.at("time").get<Seconds>()});
  for (const json& l : j.at("links"))
    p.links.push_back({l.at("link").get<int>(), l.at("name").get<std::string>(), l.at("type").get<std::string>(),
                       l.at("bytes_forward").get<Bytes>(), l.at("bytes_backward").get<Bytes>(),
                       l.at("utilisation").get<double>()});
  return p;
}

/// Framing of the child's answer: a tag, a decimal length and a newline, then two fields:
/// 'P' prediction JSON + timeline text, or 'C' (a ConfigError) where + message.
std::string frame(char tag, const std::string& first, const std::string& second) {
  return tag + std::to_string(first.size()) + "\n" + first + second;
}

Prediction replay_in_child(const workloads::Trace& trace, const Placement& placement, ReplayPlan& plan,
                           ReplayCore& core, std::ostream* timeline) {
  const std::string answer = run_in_child([&] {
    const std::unique_ptr<ReplayBackend> backend = make_replay_backend("event");
    try {
      core.run(*backend);
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      return frame('C', e.where(), what.substr(std::min(what.size(), e.where().size() + 2)));
    }
    std::ostringstream text;
    if (timeline) write_timeline(text, core);
    return frame('P', encode(finish(core, plan, trace, placement, "event")), text.str());
  });
  const std::size_t newline = answer.find('\n');
  const std::size_t length = std::stoul(answer.substr(1, newline - 1));
  const std::string first = answer.substr(newline + 1, length);
  const std::string second = answer.substr(newline + 1 + length);
  // Rebuilt with the same where and text, the error reads exactly as the child's did.
  if (answer[0] == 'C') throw ConfigError(first, second, "");
  if (timeline) *timeline << second;
  return decode(first);
}

}  // namespace

Prediction replay(const workloads::Trace& trace, const Placement& placement, const ReplayOptions& options) {
  if (trace.ranks != placement.allocation.ranks())
    throw ConfigError(trace.origin,
                      fmt::format("the trace has {} ranks but the allocation has {} GPUs", trace.ranks,
                                  placement.allocation.ranks()),
                      fmt::format("allocate {} GPUs (--gpus, --nodes) or generate the workload for {} ranks",
                                  trace.ranks, placement.allocation.ranks()));
  // The event backend must be made in the child (SimGrid: one simulation per process); other
  // names are checked before any work.
  std::unique_ptr<ReplayBackend> backend;
  if (options.engine != "event") backend = make_replay_backend(options.engine);
  workloads::validate(trace);
  ReplayPlan plan(trace, placement);
  ReplayCore core(trace, placement, plan);
  Prediction p;
  if (backend) {
    // Ranks that replay alike run once (ReplayCore::run), unless a timeline shows every rank.
    // A trace that cannot finish is replayed whole again, so the report names every blocked rank.
    const bool fold = options.timeline == nullptr;
    std::unique_ptr<ReplayCore> whole;
    try {
      core.run(*backend, fold);
    } catch (const ConfigError&) {
      if (!fold) throw;
      whole = std::make_unique<ReplayCore>(trace, placement, plan);
      whole->run(*make_replay_backend(options.engine));
    }
    const ReplayCore& replayed = whole ? *whole : core;
    if (options.timeline) write_timeline(*options.timeline, replayed);
    p = finish(replayed, plan, trace, placement, options.engine);
  } else {
    p = replay_in_child(trace, placement, plan, core, options.timeline);
  }
  // Engine-independent, so computed here once for both paths.
  p.compression = compression_reports(trace, plan);
  return p;
}

}  // namespace stepsim::sim
