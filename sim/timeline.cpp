#include "sim/timeline.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace stepsim::sim {
namespace {

using workloads::Op;
using workloads::OpKind;

std::string escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", static_cast<int>(c));
        else out += c;
    }
  }
  return out;
}

/// Whole nanoseconds: rounding both ends of every slice the same way keeps the slices of a
/// thread nested (an op never starts before its predecessor ended).
std::int64_t nanoseconds(Seconds t) { return std::llround(t * 1e9); }

/// A duration or time in µs with three decimals, written from whole nanoseconds.
struct Micros {
  std::int64_t ns;
};

}  // namespace
}  // namespace stepsim::sim

template <>
struct fmt::formatter<stepsim::sim::Micros> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  template <class Context>
  auto format(const stepsim::sim::Micros& t, Context& ctx) const {
    return fmt::format_to(ctx.out(), "{}.{:03}", t.ns / 1000, t.ns % 1000);
  }
};

namespace stepsim::sim {
namespace {

/// Streams the JSON in chunks: a 1024-rank timeline has millions of events.
class Writer {
 public:
  explicit Writer(std::ostream& out) : out_(out) {}
  ~Writer() { flush(); }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  template <class... Args>
  void event(fmt::format_string<Args...> format, Args&&... args) {
    buffer_.append(std::string_view(first_ ? "\n" : ",\n"));
    first_ = false;
    fmt::format_to(fmt::appender(buffer_), format, std::forward<Args>(args)...);
    if (buffer_.size() > (1 << 20)) flush();
  }
  void raw(std::string_view text) { buffer_.append(text); }
  void flush() {
    out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    buffer_.clear();
  }

 private:
  std::ostream& out_;
  fmt::memory_buffer buffer_;
  bool first_ = true;
};

const char* memcpy_direction(workloads::MemcpyKind kind) {
  switch (kind) {
    case workloads::MemcpyKind::host_to_device: return "host_to_device";
    case workloads::MemcpyKind::device_to_host: return "device_to_host";
    case workloads::MemcpyKind::device_to_device: return "device_to_device";
  }
  return "?";
}

/// Escaped names and `args` objects, built once each: a 1024-rank timeline repeats every one
/// of them for every rank.
class Texts {
 public:
  explicit Texts(const ReplayCore& core) : core_(core), args_(static_cast<std::size_t>(core.meeting_count())) {
    const workloads::Trace& trace = core.trace();
    for (const std::string& name : trace.names) names_.push_back(escape(name));
    for (std::size_t k = 0; k < trace.kernels.size(); ++k) {
      const models::KernelCost& cost = core.plan().kernel(static_cast<int>(k));
      kernels_.push_back(fmt::format(R"J({{"kernel":"{}","flops":{},"bytes":{},"bound":"{}"}})J",
                                     escape(trace.kernels[k].kind), cost.flops, cost.bytes, escape(cost.bound)));
    }
  }

  std::string_view name(const Op& op) const {
    return op.name >= 0 ? std::string_view(names_[static_cast<std::size_t>(op.name)]) : workloads::to_string(op.kind);
  }

  /// The op's `args` object.
  std::string_view args(int rank, int index, const Op& op) {
    switch (op.kind) {
      case OpKind::kernel:
        return op.kernel >= 0 ? std::string_view(kernels_[static_cast<std::size_t>(op.kernel)]) : "{}";
      case OpKind::memcpy:
        scratch_ = fmt::format(R"J({{"bytes":{},"direction":"{}"}})J", op.bytes, memcpy_direction(op.memcpy));
        return scratch_;
      case OpKind::collective:
      case OpKind::send:
      case OpKind::recv: {
        // The same for every member, except a send/recv's peer.
        const int instance = core_.meeting_of(rank, index);
        std::string& text = args_[static_cast<std::size_t>(instance)];
        if (text.empty()) text = meeting_args(instance, op);
        if (op.kind == OpKind::collective) return text;
        scratch_ = fmt::format(R"J({{"peer":{},{})J", workloads::peer_rank(core_.trace(), rank, op),
                               std::string_view(text).substr(1));
        return scratch_;
      }
      default:
        return "{}";
    }
  }

 private:
  std::string meeting_args(int instance, const Op& op) const {
    const ReplayCore::Meeting meeting = core_.meeting(instance);
    const Micros started{nanoseconds(meeting.begin)};
    if (op.kind != OpKind::collective)
      return fmt::format(R"J({{"bytes":{},"index":{},"started_us":{}}})J", op.bytes, meeting.ordinal, started);
    const workloads::Trace& trace = core_.trace();
    const workloads::CollectiveCall& call = trace.collectives[static_cast<std::size_t>(op.collective)];
    return fmt::format(
        R"J({{"op":"{}","bytes":{},"algorithm":"{}","group":"{}","index":{},"ranks":{},"started_us":{}}})J",
        models::to_string(call.op), call.bytes,
        meeting.schedule ? escape(meeting.schedule->schedule.algorithm) : std::string("none (one rank)"),
        escape(trace.groups[static_cast<std::size_t>(call.group)].name), meeting.ordinal, meeting.members, started);
  }

  const ReplayCore& core_;
  std::vector<std::string> names_;
  std::vector<std::string> kernels_;
  std::vector<std::string> args_;     ///< per meeting, built on first use
  std::string scratch_;
};

// The memory model's allocated bytes per rank as a counter track: each action of the rank's
// iteration (a chunk's forward or backward) steps up to its own peak when it starts and down to
// what it leaves when its last GPU op has finished (docs/memory.md).
void write_memory_track(Writer& w, const ReplayCore& core, const models::MemoryReport& memory) {
  const workloads::Trace& trace = core.trace();
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  for (int rank = 0; rank < trace.ranks; ++rank) {
    const models::RankMemory& group = memory.groups.at(static_cast<std::size_t>(memory.group_of_rank.at(rank)));
    if (group.action_last_op.size() != group.action_peak.size()) continue;
    const workloads::Program& program = trace.program(rank);
    Seconds done = 0;
    std::size_t action = 0;
    std::int64_t begin = 0;
    for (int i = 0; i < static_cast<int>(program.ops.size()) && action < group.action_last_op.size(); ++i) {
      const OpKind kind = program.ops[static_cast<std::size_t>(i)].kind;
      if (kind == OpKind::kernel || kind == OpKind::memcpy || kind == OpKind::collective || kind == OpKind::send ||
          kind == OpKind::recv)
        done = std::max(done, core.end(rank, i));
      if (i != group.action_last_op[action]) continue;
      w.event(R"J({{"ph":"C","pid":{},"ts":{},"name":"memory allocated","args":{{"GiB":{:.3f}}}}})J", rank,
              Micros{begin}, group.action_peak[action] / kGiB);
      begin = nanoseconds(done);
      w.event(R"J({{"ph":"C","pid":{},"ts":{},"name":"memory allocated","args":{{"GiB":{:.3f}}}}})J", rank,
              Micros{begin}, group.action_after[action] / kGiB);
      ++action;
    }
  }
}

}  // namespace

void write_timeline(std::ostream& out, const ReplayCore& core) {
  const workloads::Trace& trace = core.trace();
  const platforms::Platform& platform = core.placement().platform;
  Texts texts(core);
  Writer w(out);
  w.raw(R"J({"displayTimeUnit":"ns","traceEvents":[)J");
  for (int rank = 0; rank < trace.ranks; ++rank) {
    const workloads::Program& program = trace.program(rank);
    const int gpu = core.placement().allocation.gpus[static_cast<std::size_t>(rank)];
    w.event(R"J({{"ph":"M","name":"process_name","pid":{},"args":{{"name":"rank {} (gpu {}, node {})"}}}})J", rank,
            rank, gpu, platform.node_of_gpu(gpu));
    w.event(R"J({{"ph":"M","name":"process_sort_index","pid":{},"args":{{"sort_index":{}}}}})J", rank, rank);
    w.event(R"J({{"ph":"M","name":"thread_name","pid":{},"tid":0,"args":{{"name":"cpu"}}}})J", rank);
    for (std::size_t s = 0; s < program.streams.size(); ++s) {
      w.event(R"J({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":"{}"}}}})J", rank, s + 1,
              escape(program.streams[s]));
      w.event(R"J({{"ph":"M","name":"thread_sort_index","pid":{},"tid":{},"args":{{"sort_index":{}}}}})J", rank,
              s + 1, s + 1);
    }

    core.for_each_cpu_interval(rank, [&](int i, Seconds begin, Seconds finish) {
      const Op& op = program.ops[static_cast<std::size_t>(i)];
      if (op.kind == OpKind::record || op.kind == OpKind::wait) return;
      const char* category = op.kind == OpKind::cpu ? "cpu" : op.kind == OpKind::sync ? "sync" : "launch";
      const std::int64_t from = nanoseconds(begin);
      w.event(R"J({{"ph":"X","pid":{},"tid":0,"ts":{},"dur":{},"name":"{}","cat":"{}","args":{{"op":{}}}}})J", rank,
              Micros{from}, Micros{nanoseconds(finish) - from}, texts.name(op), category, i);
    });

    for (int i = 0; i < static_cast<int>(program.ops.size()); ++i) {
      const Op& op = program.ops[static_cast<std::size_t>(i)];
      if (op.kind != OpKind::kernel && op.kind != OpKind::memcpy && op.kind != OpKind::collective &&
          op.kind != OpKind::send && op.kind != OpKind::recv)
        continue;
      const std::int64_t from = nanoseconds(core.start(rank, i));
      w.event(R"J({{"ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"name":"{}","cat":"{}","args":{}}})J", rank,
              op.stream + 1, Micros{from}, Micros{nanoseconds(core.end(rank, i)) - from}, texts.name(op),
              workloads::to_string(op.kind), texts.args(rank, i, op));
    }
  }

  if (trace.memory) write_memory_track(w, core, *trace.memory);

  for (int instance = 0; instance < core.meeting_count(); ++instance) {
    const ReplayCore::Meeting meeting = core.meeting(instance);
    if (meeting.members < 2) continue;   // nothing to link
    const Micros ts{nanoseconds(meeting.begin)};
    for (int m = 0; m < meeting.members; ++m) {
      const auto [rank, i] = core.meeting_member(instance, m);
      const Op& op = trace.program(rank).ops[static_cast<std::size_t>(i)];
      w.event(R"J({{"ph":"{}","id":{},"pid":{},"tid":{},"ts":{},"name":"{}","cat":"{}","bp":"e"}})J",
              m == 0 ? "s" : m + 1 == meeting.members ? "f" : "t", instance, rank, op.stream + 1, ts, texts.name(op),
              workloads::to_string(op.kind));
    }
  }
  w.raw("\n]}\n");
}

}  // namespace stepsim::sim
