// Kineto trace -> stepsim workload trace (docs/trace.md) of one profiled iteration.
//
// Time model: the trace sets `launch: {cpu_launch: 0us, kernel_gap: 0us}` and writes the
// measured CPU time between the ends of consecutive launch calls as `cpu` ops, so replayed
// launches are issued when the profiled ones returned. GPU work keeps its measured duration
// (`gpu:` ops); NCCL kernels become collectives, priced by stepsim's model. A kernel that
// started later than both its launch and its stream's previous work, right after work on
// another stream ended, waited for that work: that wait becomes a record/wait pair.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>

#include "platforms/config_error.hpp"
#include "platforms/yaml_reader.hpp"
#include "validation/importers/kineto.hpp"

namespace stepsim::validation {
namespace {

// ordered_json keeps keys as written, so every op starts with its kind key (docs/trace.md).
using json = nlohmann::ordered_json;

constexpr double kLateUs = 5;   ///< a start later than expected by more than this needs a cause
constexpr double kLinkUs = 20;  ///< ...and another stream's work that ended at most this before it

/// A duration in whole nanoseconds: Kineto's timestamps carry ns, and differences of large
/// timestamps would otherwise show binary noise ("57.6328125us").
std::string micros(double us) {
  char buffer[64];
  auto end = std::to_chars(buffer, buffer + sizeof buffer, std::round(us * 1000) / 1000).ptr;
  return std::string(buffer, end) + "us";
}

/// Kernel names are whole C++ signatures: drop the return type and the parameter list (the
/// last balanced "(...)"; "(anonymous namespace)" inside the name stays).
std::string short_name(const std::string& name) {
  std::string out = name.rfind("void ", 0) == 0 ? name.substr(5) : name;
  if (!out.empty() && out.back() == ')') {
    int depth = 0;
    for (std::size_t i = out.size(); i-- > 0;) {
      depth += out[i] == ')' ? 1 : out[i] == '(' ? -1 : 0;
      if (depth == 0) {
        if (i > 0) out.resize(i);
        break;
      }
    }
  }
  if (out.size() > 100) out = out.substr(0, 97) + "...";
  return out;
}

/// One iteration's window on the CPU timeline.
struct Window {
  double begin = 0, end = 0;
  std::string label;
};

Window pick_window(const KinetoProfile& profile, int step, std::vector<std::string>& notes) {
  if (step >= 0) {
    const std::string name = "ProfilerStep#" + std::to_string(step);
    for (const KinetoEvent& s : profile.steps)
      if (s.name == name) return {s.ts, s.end(), name};
    std::vector<std::string> names;
    for (const KinetoEvent& s : profile.steps) names.push_back(s.name);
    throw ConfigError(profile.origin + ": --step " + std::to_string(step), "the trace has no " + name,
                      names.empty() ? "leave --step out: the trace has no ProfilerStep annotations"
                                    : "pick one of: " + platforms::join(names));
  }
  if (!profile.steps.empty()) return {profile.steps.back().ts, profile.steps.back().end(), profile.steps.back().name};
  Window whole{1e300, -1e300, "the whole trace"};
  for (const KinetoEvent& e : profile.api_calls) whole.begin = std::min(whole.begin, e.ts), whole.end = std::max(whole.end, e.end());
  for (const KinetoEvent& e : profile.gpu_events) whole.end = std::max(whole.end, e.end());
  notes.push_back(profile.origin + ": no ProfilerStep#N annotation; the whole trace is one iteration");
  return whole;
}

/// The process groups of the workload: `world`, or a declared group per torch process group.
class Groups {
 public:
  Groups(int world, bool compact) : world_(world), compact_(compact) {}

  /// Name of the group running `call` on `rank`; "" when its members cannot be written.
  std::string resolve(const NcclCall& call, const KinetoProfile& profile) {
    std::vector<int> ranks = call.ranks;
    if (ranks.empty()) {
      auto it = profile.group_ranks.find(call.group);
      if (it != profile.group_ranks.end()) ranks = it->second;
      else if (call.group_size == world_)
        for (int r = 0; r < world_; ++r) ranks.push_back(r);
    }
    if (ranks.empty() || static_cast<int>(ranks.size()) != call.group_size) return "";
    std::sort(ranks.begin(), ranks.end());
    if (static_cast<int>(ranks.size()) == world_ && ranks.front() == 0 && ranks.back() == world_ - 1) return "world";
    const std::string name = "pg" + (call.group.empty() ? std::string("x") : call.group);
    if (!compact_) {
      json& lists = declared_[name];
      if (!lists.is_array()) lists = json::array();
      if (std::find(lists.begin(), lists.end(), json(ranks)) == lists.end()) lists.push_back(ranks);
      return name;
    }
    // One program for every rank: the group must be a torch-style family that the one list
    // seen here determines: blocks of `size` ranks, `stride` apart.
    const int size = static_cast<int>(ranks.size());
    const int stride = size > 1 ? ranks[1] - ranks[0] : 1;
    for (int i = 1; i < size; ++i)
      if (ranks[i] - ranks[i - 1] != stride) return "";
    const int block = size * stride;
    if (stride < 1 || world_ % block != 0 || (stride == 1 && ranks[0] % size != 0) || ranks[0] % block >= stride) return "";
    json family = {{"size", size}};
    if (stride > 1) family["stride"] = stride;
    declared_[name] = family;
    return name;
  }
  const json& declared() const { return declared_; }

 private:
  int world_;
  bool compact_;
  json declared_ = json::object();
};

struct GpuOp {
  std::size_t index;  ///< in the program's ops
  std::string stream;
  double end;
};

/// One rank's program for the iteration in `window`.
json build_program(const KinetoProfile& profile, const Window& window, Groups& groups, std::vector<std::string>& notes) {
  std::map<std::int64_t, const KinetoEvent*> launched;
  for (const KinetoEvent& e : profile.gpu_events)
    if (e.correlation >= 0) launched[e.correlation] = &e;

  std::vector<json> ops;
  std::map<std::size_t, std::string> record_after;  // op index -> event recorded right after it
  std::vector<std::string> streams;
  std::map<std::string, double> stream_end;
  std::map<std::string, std::vector<GpuOp>> stream_ops;  // per stream, in stream (and end) order
  double cpu = window.begin;
  int timed_collectives = 0, waits = 0, gpu_count = 0;
  auto cpu_until = [&](double t) {
    if (t > cpu) ops.push_back({{"cpu", micros(t - cpu)}});
    cpu = std::max(cpu, t);
  };
  for (const KinetoEvent& call : profile.api_calls) {
    if (call.ts < window.begin || call.ts >= window.end) continue;
    if (call.name == "cudaDeviceSynchronize") {
      cpu_until(call.ts);
      ops.push_back({{"sync", "device"}});
      cpu = std::max(cpu, call.end());
      continue;
    }
    auto it = launched.find(call.correlation);
    if (it == launched.end()) continue;
    const KinetoEvent& g = *it->second;
    cpu_until(call.end());
    std::string stream = "s";  // appended, not "s" + ...: GCC 12 warns falsely on that (bug 105329)
    stream += std::to_string(g.tid);
    if (std::find(streams.begin(), streams.end(), stream) == streams.end()) {
      streams.push_back(stream);
      stream_end[stream] = -1e300;
    }
    const double expected = std::max(call.end(), stream_end[stream]);
    if (g.ts - expected > kLateUs) {
      const GpuOp* cause = nullptr;
      for (const auto& [other, list] : stream_ops) {
        if (other == stream) continue;
        for (auto x = list.rbegin(); x != list.rend() && x->end > expected; ++x)
          if (x->end <= g.ts && g.ts - x->end <= kLinkUs && (!cause || x->end > cause->end)) cause = &*x;
      }
      if (cause) {
        auto [rec, added] = record_after.emplace(cause->index, "e" + std::to_string(cause->index));
        ops.push_back({{"wait", rec->second}, {"stream", stream}});
        ++waits;
      }
    }
    json op;
    std::optional<NcclCall> nccl = is_nccl_kernel(g) ? nccl_call(g) : std::nullopt;
    std::string group = nccl && !nccl->op.empty() && nccl->size_bytes > 0 ? groups.resolve(*nccl, profile) : "";
    if (!group.empty()) {
      op = {{"collective", nccl->op}, {"stream", stream}, {"size", static_cast<std::int64_t>(nccl->size_bytes)},
            {"name", nccl->collective}};
      if (group != "world") op["group"] = group;
    } else {
      if (is_nccl_kernel(g)) ++timed_collectives;
      op = {{"gpu", micros(g.dur)}, {"stream", stream}, {"name", g.cat == "kernel" ? short_name(g.name) : g.name}};
    }
    ops.push_back(op);
    ++gpu_count;
    stream_ops[stream].push_back({ops.size() - 1, stream, g.end()});
    stream_end[stream] = g.end();
  }
  if (gpu_count == 0)
    throw ConfigError(profile.origin, window.label + " launched no GPU work the trace recorded",
                      "profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] or pick another --step");
  cpu_until(window.end);

  json program_ops = json::array();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    program_ops.push_back(ops[i]);
    if (auto it = record_after.find(i); it != record_after.end())
      program_ops.push_back({{"record", it->second}, {"stream", ops[i]["stream"]}});
  }
  const std::string who = profile.origin + " (" + window.label + ")";
  if (timed_collectives > 0)
    notes.push_back(who + ": " + std::to_string(timed_collectives) +
                    " NCCL kernel(s) without a usable collective (send/recv, no torch metadata, or a process group "
                    "one program cannot describe) kept at their measured time");
  if (waits > 0) notes.push_back(who + ": " + std::to_string(waits) + " cross-stream wait(s) inferred from the timeline");
  return {{"streams", streams}, {"ops", program_ops}};
}

}  // namespace

json kineto_workload(const std::vector<KinetoProfile>& profiles, const KinetoOptions& options,
                     std::vector<std::string>& notes) {
  if (profiles.empty()) throw std::logic_error("kineto_workload: no profiles");
  const bool compact = profiles.size() == 1;
  int world = compact ? profiles[0].world_size : static_cast<int>(profiles.size());
  if (compact && world <= 0) {
    world = 1;
    for (const KinetoEvent& e : profiles[0].gpu_events)
      if (std::optional<NcclCall> call = is_nccl_kernel(e) ? nccl_call(e) : std::nullopt)
        world = std::max(world, call->group_size);
  }
  Groups groups(world, compact);
  json programs = json::array();
  std::set<int> ranks_seen;
  std::string labels;
  for (std::size_t i = 0; i < profiles.size(); ++i) {
    const KinetoProfile& profile = profiles[i];
    const Window window = pick_window(profile, options.step, notes);
    json program = build_program(profile, window, groups, notes);
    if (compact) {
      program["ranks"] = "all";
    } else {
      const int rank = profile.rank >= 0 ? profile.rank : static_cast<int>(i);
      if (rank >= world || !ranks_seen.insert(rank).second)
        throw ConfigError(profile.origin, "rank " + std::to_string(rank) + " is outside 0.." + std::to_string(world - 1) +
                                              " or given twice",
                          "pass one trace per rank of the job, each once");
      program["ranks"] = json::array({rank});
    }
    programs.push_back({{"ranks", program["ranks"]}, {"streams", program["streams"]}, {"ops", program["ops"]}});
    labels = window.label;
  }
  json trace = {{"version", 1},
                {"kind", "trace"},
                {"description", labels + " of " + profiles[0].origin + (compact ? "" : " and the other ranks' traces") +
                                    " (stepsim import kineto): GPU work at its measured time, collectives priced by stepsim"},
                {"ranks", world},
                {"launch", {{"cpu_launch", "0us"}, {"kernel_gap", "0us"}}}};
  if (!groups.declared().empty()) trace["groups"] = groups.declared();
  trace["programs"] = programs;
  return trace;
}

namespace {

YAML::Node to_yaml(const json& value, bool flow) {
  YAML::Node node;
  if (value.is_object()) {
    for (auto it = value.begin(); it != value.end(); ++it) node[it.key()] = to_yaml(it.value(), false);
    if (flow) node.SetStyle(YAML::EmitterStyle::Flow);
  } else if (value.is_array()) {
    node = YAML::Node(YAML::NodeType::Sequence);
    bool scalars = std::all_of(value.begin(), value.end(), [](const json& v) { return v.is_primitive(); });
    for (const json& item : value) node.push_back(to_yaml(item, true));
    if (scalars) node.SetStyle(YAML::EmitterStyle::Flow);
  } else if (value.is_string()) {
    node = value.get<std::string>();
  } else {
    node = value.dump();
  }
  return node;
}

}  // namespace

std::string format_workload(const json& workload, const std::string& path) {
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) return workload.dump(1) + "\n";
  YAML::Emitter out;
  out << YAML::Comment("stepsim workload trace (docs/trace.md), written by stepsim import kineto");
  // Block style down to each op, which is one flow map per line.
  out << YAML::BeginMap;
  for (const char* key : {"version", "kind", "description", "ranks", "launch", "groups", "programs"}) {
    if (!workload.contains(key)) continue;
    out << YAML::Key << key << YAML::Value;
    if (std::string(key) != "programs") {
      out << to_yaml(workload[key], std::string(key) == "launch");
      continue;
    }
    out << YAML::BeginSeq;
    for (const json& program : workload["programs"]) {
      out << YAML::BeginMap;
      for (const char* part : {"ranks", "streams", "ops"}) out << YAML::Key << part << YAML::Value << to_yaml(program[part], false);
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace stepsim::validation
