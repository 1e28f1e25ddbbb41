#include "workloads/trace.hpp"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "models/compression/compressed_schedules.hpp"
#include "platforms/config_error.hpp"

namespace stepsim::workloads {

const char* to_string(OpKind kind) {
  switch (kind) {
    case OpKind::kernel:
      return "kernel";
    case OpKind::collective:
      return "collective";
    case OpKind::send:
      return "send";
    case OpKind::recv:
      return "recv";
    case OpKind::memcpy:
      return "memcpy";
    case OpKind::cpu:
      return "cpu";
    case OpKind::record:
      return "record";
    case OpKind::wait:
      return "wait";
    case OpKind::sync:
      return "sync";
  }
  return "?";
}

namespace {

constexpr const char* kGeneratorFix = "a generator or importer produced an inconsistent trace: report it";

// Checks run program by program (a shared Program is checked once, naming the lowest rank that
// runs it), then rank by rank over per-program summaries, so a compact trace of 16k ranks costs
// one pass over its ops plus a few checks per rank.
class Validator {
 public:
  explicit Validator(const Trace& trace) : t_(trace) {}

  void run() {
    check_ranks();
    for (std::size_t g = 0; g < t_.groups.size(); ++g) check_group(static_cast<int>(g));
    for (std::size_t c = 0; c < t_.collectives.size(); ++c) check_collective(static_cast<int>(c));
    summaries_.resize(t_.programs.size());
    for (std::size_t p = 0; p < t_.programs.size(); ++p) check_program(static_cast<int>(p));
    for (int rank = 0; rank < t_.ranks; ++rank) check_rank(rank);
    check_collective_matching();
    check_p2p_matching();
  }

 private:
  // What one Program issues, gathered once for the per-rank checks.
  struct Summary {
    std::map<int, std::vector<int>> collectives_by_group;  ///< group -> op indices, in order
    std::map<int, int> widest_root_by_group;               ///< group -> op index with the largest root
    std::vector<int> p2p_ops;                              ///< send and recv op indices
  };

  std::string op_where(int rank, int program, int index) const {
    const Op& op = t_.programs[program].ops[index];
    const bool named = op.name >= 0 && op.name < static_cast<int>(t_.names.size());
    return fmt::format("{}: {}, programs[{}].ops[{}] ({}{})", t_.origin,
                       rank >= 0 ? fmt::format("rank {}", rank) : std::string("no rank"), program, index,
                       to_string(op.kind), named ? " '" + t_.names[op.name] + "'" : "");
  }
  [[noreturn]] void fail_op(int rank, int program, int index, const std::string& what, const std::string& fix) const {
    throw ConfigError(op_where(rank, program, index), what, fix);
  }
  [[noreturn]] void fail(const std::string& where, const std::string& what, const std::string& fix) const {
    throw ConfigError(t_.origin + (where.empty() ? "" : ": " + where), what, fix);
  }

  std::string describe(const CollectiveCall& call) const {
    return fmt::format("{} of {} (root {}, algo {})", models::to_string(call.op), format_size(call.bytes), call.root,
                       call.algorithm);
  }

  void check_ranks() {
    if (t_.ranks < 1) fail("", fmt::format("the trace has {} ranks", t_.ranks), "a trace needs at least one rank");
    if (static_cast<int>(t_.program_of_rank.size()) != t_.ranks)
      fail("program_of_rank", fmt::format("{} entries for {} ranks", t_.program_of_rank.size(), t_.ranks),
           kGeneratorFix);
    first_rank_.assign(t_.programs.size(), -1);
    for (int rank = t_.ranks - 1; rank >= 0; --rank) {
      const int p = t_.program_of_rank[rank];
      if (p < 0 || p >= static_cast<int>(t_.programs.size()))
        fail(fmt::format("rank {}", rank),
             fmt::format("program {} does not exist ({} programs)", p, t_.programs.size()), kGeneratorFix);
      first_rank_[p] = rank;
    }
  }

  void check_group(int g) {
    const ProcessGroup& group = t_.groups[g];
    const std::string where = fmt::format("group '{}'", group.name);
    if (static_cast<int>(group.subgroup_of_rank.size()) != t_.ranks)
      fail(where, fmt::format("subgroup_of_rank has {} entries for {} ranks", group.subgroup_of_rank.size(), t_.ranks),
           kGeneratorFix);
    std::vector<int> seen(t_.ranks, -1);
    for (std::size_t s = 0; s < group.subgroups.size(); ++s) {
      if (group.subgroups[s].empty())
        fail(where, fmt::format("subgroup {} is empty", s), "give every subgroup at least one rank");
      for (int rank : group.subgroups[s]) {
        if (rank < 0 || rank >= t_.ranks)
          fail(where, fmt::format("subgroup {} holds rank {}, outside the trace's ranks 0-{}", s, rank, t_.ranks - 1),
               "list only ranks of the job");
        if (seen[rank] >= 0)
          fail(where, fmt::format("rank {} is in subgroups {} and {}", rank, seen[rank], s),
               "subgroups of one group must be disjoint (and list a rank once): make another group for overlapping "
               "sets");
        seen[rank] = static_cast<int>(s);
      }
    }
    for (int rank = 0; rank < t_.ranks; ++rank)
      if (group.subgroup_of_rank[rank] != seen[rank])
        fail(where,
             fmt::format("subgroup_of_rank[{}] is {} but the subgroups put rank {} in {}", rank,
                         group.subgroup_of_rank[rank], rank, seen[rank]),
             kGeneratorFix);
  }

  void check_collective(int c) {
    const CollectiveCall& call = t_.collectives[c];
    const std::string where = fmt::format("collectives[{}] ({})", c, models::to_string(call.op));
    if (call.group < 0 || call.group >= static_cast<int>(t_.groups.size()))
      fail(where, fmt::format("group {} does not exist ({} groups)", call.group, t_.groups.size()), kGeneratorFix);
    if (!(call.bytes > 0) || !std::isfinite(call.bytes))
      fail(where, fmt::format("size must be > 0, got {} bytes", call.bytes), "give the collective a positive size");
    if (call.root < 0) fail(where, fmt::format("root {} is negative", call.root), "use a rank within the subgroup");
    const auto algorithms = models::AlgorithmRegistry::instance().all();
    bool known = false;
    std::string names;
    for (const models::AlgorithmInfo* info : algorithms) {
      known = known || info->name == call.algorithm;
      names += (names.empty() ? "" : ", ") + info->name;
    }
    if (!known) fail(where, "unknown algorithm '" + call.algorithm + "'", "use one of: " + names);
    const models::CompressionOptions& compression = call.options.compression;
    if (compression.codec.empty()) return;
    models::parse_codec(compression.codec, t_.origin + ": " + where + " compression");
    if (!(compression.threshold >= 0))
      fail(where, fmt::format("compression threshold {} is negative", compression.threshold), "use a size >= 0");
    const std::string why = models::compression_unsupported(compression, call.algorithm, call.op);
    if (!why.empty()) fail(where, why, "use the ring algorithm, or point-to-point compression");
  }

  void check_stream(int rank, int p, int i, int stream, bool optional) const {
    const Program& program = t_.programs[p];
    if ((optional && stream == -1) || (stream >= 0 && stream < static_cast<int>(program.streams.size()))) return;
    fail_op(rank, p, i,
            fmt::format("stream {} does not exist (the program has {} streams)", stream, program.streams.size()),
            kGeneratorFix);
  }

  // The CPU waits for a copy of pageable memory; the trace says so with the sync after it, so that
  // every engine and the critical path see the wait as an op of its own.
  void check_pageable_copy(int rank, int p, int i) const {
    const Program& program = t_.programs[p];
    const Op& op = program.ops[static_cast<std::size_t>(i)];
    if (op.memcpy == MemcpyKind::device_to_device)
      fail_op(rank, p, i, "a device-to-device copy has no host memory to be pageable",
              "drop host_memory, or make the copy h2d or d2h");
    const std::size_t next = static_cast<std::size_t>(i) + 1;
    const bool synced = next < program.ops.size() && program.ops[next].kind == OpKind::sync &&
                        program.ops[next].stream == op.stream && program.ops[next].event < 0;
    if (!synced)
      fail_op(rank, p, i,
              "a copy of pageable host memory returns only once the driver has staged all of it, so the CPU waits "
              "for it, and the op after it is not a sync on its stream",
              fmt::format("add `{{sync: stream, stream: {}}}` right after it, or copy from pinned memory",
                          program.streams[static_cast<std::size_t>(op.stream)]));
  }

  void check_event(int rank, int p, int i, int event, const std::vector<bool>& recorded, const char* verb) const {
    const Program& program = t_.programs[p];
    if (event < 0 || event >= static_cast<int>(program.events.size()))
      fail_op(rank, p, i,
              fmt::format("event {} does not exist (the program has {} events)", event, program.events.size()),
              kGeneratorFix);
    if (!recorded[event])
      fail_op(rank, p, i, std::string(verb) + " on event '" + program.events[event] + "' before any record of it",
              "record the event earlier in CPU order: a wait or sync on an event never recorded before it would block "
              "forever");
  }

  void check_program(int p) {
    const Program& program = t_.programs[p];
    const int rank = first_rank_[p];
    Summary& summary = summaries_[p];
    std::vector<bool> recorded(program.events.size(), false);
    for (int i = 0; i < static_cast<int>(program.ops.size()); ++i) {
      const Op& op = program.ops[i];
      if (op.name < -1 || op.name >= static_cast<int>(t_.names.size()))
        fail_op(rank, p, i, fmt::format("name {} does not exist ({} names)", op.name, t_.names.size()), kGeneratorFix);
      switch (op.kind) {
        case OpKind::kernel:
          check_stream(rank, p, i, op.stream, false);
          if (op.kernel == -1 && (!std::isfinite(op.duration) || op.duration < 0))
            fail_op(rank, p, i, fmt::format("duration {} s is not a time", op.duration), "give a duration >= 0");
          if (op.kernel < -1 || op.kernel >= static_cast<int>(t_.kernels.size()))
            fail_op(rank, p, i, fmt::format("kernel {} does not exist ({} kernels)", op.kernel, t_.kernels.size()),
                    kGeneratorFix);
          break;
        case OpKind::collective:
          check_stream(rank, p, i, op.stream, false);
          if (op.collective < 0 || op.collective >= static_cast<int>(t_.collectives.size()))
            fail_op(rank, p, i,
                    fmt::format("collective {} does not exist ({} collectives)", op.collective, t_.collectives.size()),
                    kGeneratorFix);
          {
            const CollectiveCall& call = t_.collectives[op.collective];
            summary.collectives_by_group[call.group].push_back(i);
            auto [widest, added] = summary.widest_root_by_group.try_emplace(call.group, i);
            if (!added && call.root > t_.collectives[program.ops[widest->second].collective].root) widest->second = i;
          }
          break;
        case OpKind::send:
        case OpKind::recv:
          check_stream(rank, p, i, op.stream, false);
          if (op.group >= static_cast<int>(t_.groups.size()))
            fail_op(rank, p, i, fmt::format("group #{} is not one of the trace's {} groups", op.group, t_.groups.size()),
                    "name a declared group");
          if (op.group < 0 && (op.peer < 0 || op.peer >= t_.ranks))
            fail_op(rank, p, i, fmt::format("peer {} is outside the trace's ranks 0-{}", op.peer, t_.ranks - 1),
                    "name a rank of the job");
          if (!(op.bytes > 0) || !std::isfinite(op.bytes))
            fail_op(rank, p, i, fmt::format("size must be > 0, got {} bytes", op.bytes), "give a positive size");
          summary.p2p_ops.push_back(i);
          break;
        case OpKind::memcpy:
          check_stream(rank, p, i, op.stream, false);
          if (!(op.bytes > 0) || !std::isfinite(op.bytes))
            fail_op(rank, p, i, fmt::format("size must be > 0, got {} bytes", op.bytes), "give a positive size");
          if (op.host_memory == HostMemory::pageable) check_pageable_copy(rank, p, i);
          break;
        case OpKind::cpu:
          if (!std::isfinite(op.duration) || op.duration < 0)
            fail_op(rank, p, i, fmt::format("duration {} s is not a time", op.duration), "give a duration >= 0");
          break;
        case OpKind::record:
          check_stream(rank, p, i, op.stream, false);
          if (op.event < 0 || op.event >= static_cast<int>(program.events.size()))
            fail_op(rank, p, i,
                    fmt::format("event {} does not exist (the program has {} events)", op.event, program.events.size()),
                    kGeneratorFix);
          recorded[op.event] = true;
          break;
        case OpKind::wait:
          check_stream(rank, p, i, op.stream, false);
          check_event(rank, p, i, op.event, recorded, "wait");
          break;
        case OpKind::sync:
          check_stream(rank, p, i, op.stream, true);
          if (op.event != -1) check_event(rank, p, i, op.event, recorded, "sync");
          if (op.stream != -1 && op.event != -1)
            fail_op(rank, p, i, "sync names both a stream and an event", "sync on one of them, or on the device");
          break;
      }
    }
  }

  void check_rank(int rank) {
    const int p = t_.program_of_rank[rank];
    const Program& program = t_.programs[p];
    for (const auto& [g, ops] : summaries_[p].collectives_by_group) {
      const ProcessGroup& group = t_.groups[g];
      const int s = group.subgroup_of_rank[rank];
      if (s < 0)
        fail_op(rank, p, ops.front(),
                fmt::format("rank {} issues a collective on group '{}' but is not a member", rank, group.name),
                fmt::format("add rank {} to a subgroup of '{}', or issue on a group that holds it", rank, group.name));
      const int size = static_cast<int>(group.subgroups[s].size());
      const int i = summaries_[p].widest_root_by_group.at(g);
      const int root = t_.collectives[program.ops[i].collective].root;
      if (root >= size)
        fail_op(rank, p, i,
                fmt::format("root {} is outside rank {}'s subgroup of '{}' ({} ranks)", root, rank, group.name, size),
                fmt::format("root is a rank within the subgroup: 0-{}", size - 1));
    }
    for (int i : summaries_[p].p2p_ops) {
      const Op& op = program.ops[i];
      const int peer = peer_rank(t_, rank, op);
      if (peer < 0)
        fail_op(rank, p, i,
                fmt::format("peer {} of group '{}' is not a rank of rank {}'s subgroup", op.peer,
                            t_.groups[static_cast<std::size_t>(op.group)].name, rank),
                "name a rank within the subgroup, or run the program only on the group's members");
      if (peer == rank)
        fail_op(rank, p, i, fmt::format("rank {} {}s to itself", rank, op.kind == OpKind::send ? "send" : "recv"),
                "name another rank as the peer (a rank's own data needs a memcpy, not a send)");
      auto& messages = op.kind == OpKind::send ? sends_[{rank, peer}] : recvs_[{peer, rank}];
      messages.push_back({rank, i});
    }
  }

  // NCCL matches the k-th collective a rank issues on a group with the k-th of every other
  // member of its subgroup; different counts or calls deadlock or corrupt the real job.
  void check_collective_matching() const {
    for (std::size_t g = 0; g < t_.groups.size(); ++g) {
      const ProcessGroup& group = t_.groups[g];
      for (std::size_t s = 0; s < group.subgroups.size(); ++s) {
        const std::vector<int>& members = group.subgroups[s];
        const int first = members.front();
        const std::vector<int>& reference = issued(first, static_cast<int>(g));
        std::set<int> compared = {t_.program_of_rank[first]};
        for (int rank : members) {
          if (!compared.insert(t_.program_of_rank[rank]).second) continue;
          const std::vector<int>& mine = issued(rank, static_cast<int>(g));
          if (mine.size() != reference.size())
            fail(fmt::format("group '{}' subgroup {}", group.name, s),
                 fmt::format("rank {} issues {} collectives on it but rank {} issues {}", first, reference.size(), rank,
                             mine.size()),
                 "every member of a subgroup must issue the same collectives in the same order (NCCL matches the "
                 "k-th call of each member)");
          for (std::size_t k = 0; k < mine.size(); ++k) {
            const CollectiveCall& a = call_at(first, reference[k]);
            const CollectiveCall& b = call_at(rank, mine[k]);
            if (a.op != b.op || a.bytes != b.bytes || a.root != b.root || a.algorithm != b.algorithm)
              fail_op(rank, t_.program_of_rank[rank], mine[k],
                      fmt::format("collective #{} on group '{}' is {} but rank {} issues {} ({})", k, group.name,
                                  describe(b), first, describe(a),
                                  op_where(first, t_.program_of_rank[first], reference[k])),
                      "matched collectives must agree on op, size, root and algo");
          }
        }
      }
    }
  }

  void check_p2p_matching() const {
    auto count = [](const auto& map, const std::pair<int, int>& key) {
      auto it = map.find(key);
      return it == map.end() ? std::size_t{0} : it->second.size();
    };
    const std::string fix =
        "pair every send with a recv posted by its peer, in the same order (an unmatched one "
        "deadlocks the replay)";
    for (const auto* map : {&sends_, &recvs_})
      for (const auto& [pair, messages] : *map) {
        const std::size_t n_send = count(sends_, pair), n_recv = count(recvs_, pair);
        if (n_send != n_recv)
          fail(fmt::format("ranks {} -> {}", pair.first, pair.second),
               fmt::format("rank {} sends {} messages to rank {} but rank {} posts {} recvs from rank {}", pair.first,
                           n_send, pair.second, pair.second, n_recv, pair.first),
               fix);
      }
    for (const auto& [pair, sends] : sends_) {
      const auto& recvs = recvs_.at(pair);
      for (std::size_t k = 0; k < sends.size(); ++k) {
        const Op& send = op_at(sends[k]);
        const Op& recv = op_at(recvs[k]);
        if (send.bytes != recv.bytes)
          fail_op(recvs[k].first, t_.program_of_rank[recvs[k].first], recvs[k].second,
                  fmt::format("message #{} from rank {} is {} but the recv expects {} ({})", k, pair.first,
                              format_size(send.bytes), format_size(recv.bytes),
                              op_where(sends[k].first, t_.program_of_rank[sends[k].first], sends[k].second)),
                  "give the matched send and recv the same size");
      }
    }
  }

  const std::vector<int>& issued(int rank, int group) const {
    static const std::vector<int> none;
    const auto& by_group = summaries_[t_.program_of_rank[rank]].collectives_by_group;
    auto it = by_group.find(group);
    return it == by_group.end() ? none : it->second;
  }
  const CollectiveCall& call_at(int rank, int op) const { return t_.collectives[t_.program(rank).ops[op].collective]; }
  const Op& op_at(const std::pair<int, int>& rank_op) const { return t_.program(rank_op.first).ops[rank_op.second]; }

  const Trace& t_;
  std::vector<int> first_rank_;  ///< lowest rank running each program, -1 for none
  std::vector<Summary> summaries_;
  /// (sender, receiver) -> (rank, op index) of each send / recv, in issue order.
  std::map<std::pair<int, int>, std::vector<std::pair<int, int>>> sends_, recvs_;
};

}  // namespace

int peer_rank(const Trace& trace, int rank, const Op& op) {
  if (op.group < 0) return op.peer;
  const ProcessGroup& g = trace.groups[static_cast<std::size_t>(op.group)];
  const int sub = g.subgroup_of_rank[static_cast<std::size_t>(rank)];
  if (sub < 0 || op.peer < 0) return -1;
  const std::vector<int>& members = g.subgroups[static_cast<std::size_t>(sub)];
  return op.peer < static_cast<int>(members.size()) ? members[static_cast<std::size_t>(op.peer)] : -1;
}

void validate(const Trace& trace) { Validator(trace).run(); }

}  // namespace stepsim::workloads
