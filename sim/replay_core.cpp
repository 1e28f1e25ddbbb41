#include "sim/replay_core.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <string_view>
#include <tuple>

#include <fmt/format.h>

#include "models/algorithm.hpp"
#include "platforms/config_error.hpp"

namespace stepsim::sim {

using workloads::Op;
using workloads::OpKind;

namespace {

/// @brief "layers.12.attention" -> "layers.*.attention": the critical path adds up the same op
/// of every layer (or bucket), which is what a reader compares.
std::string fold_indices(const std::string& name) {
  std::string folded;
  std::size_t begin = 0;
  while (begin <= name.size()) {
    std::size_t end = name.find('.', begin);
    if (end == std::string::npos) end = name.size();
    const std::string_view segment(name.data() + begin, end - begin);
    const bool index = !segment.empty() && segment.find_first_not_of("0123456789") == std::string_view::npos;
    if (begin > 0) folded += '.';
    folded += index ? std::string_view("*") : segment;
    begin = end + 1;
  }
  return folded;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// ReplayCore
// ---------------------------------------------------------------------------------------------

namespace {

/// Global op id: id_base[rank] + op index (number_ops). 32 bits keep the per-op arrays small.
using OpId = std::int32_t;
/// pred of an op whose start was its issue time: the CPU chain determined it.
constexpr OpId kByCpu = -1;
constexpr Seconds kNotDone = -1;
/// A time no bound reaches: an SM hold's end before it is known, a stream that never starts
/// another collective.
constexpr Seconds kNever = std::numeric_limits<Seconds>::infinity();
/// ProgramInfo::ahead bits: some op at or after this stream position is communication / is
/// compute that SM holds slow down (a kernel or a device-to-device copy).
constexpr std::uint8_t kCommAhead = 1, kComputeAhead = 2;
/// How far a lower bound on a stream's next collective looks ahead (ops) and through waits
/// on other streams (depth); beyond them it stops with the bound found so far.
constexpr int kReachSteps = 16, kReachDepth = 3;

bool is_communication(OpKind kind) {
  return kind == OpKind::collective || kind == OpKind::send || kind == OpKind::recv;
}

/// What runs on the SMs left over by communication (workloads/trace.hpp, SM interference).
bool is_compute(const Op& op) {
  return op.kind == OpKind::kernel ||
         (op.kind == OpKind::memcpy && op.memcpy == workloads::MemcpyKind::device_to_device);
}

/// What the core precomputes once per Program (shared by every rank that runs it).
struct ProgramInfo {
  std::vector<std::int32_t> stream_begin;   ///< streams + 1 offsets into stream_ops
  std::vector<std::int32_t> stream_ops;     ///< op indices of each stream, in issue order
  std::vector<std::uint8_t> ahead;          ///< per stream_ops entry: kCommAhead | kComputeAhead
  std::vector<std::int32_t> position;       ///< per op: its index in its stream's list (-1: none)
  std::vector<std::int32_t> ordinal;        ///< per op: k-th collective on its group / send or recv with its peer
  std::vector<std::int32_t> slot;           ///< per op: collective: its group; send / recv: index in peers
  std::vector<Seconds> duration;            ///< per op: kernel, cpu, device copy time (host copies: per rank)
  std::vector<std::vector<std::int32_t>> group_ops;   ///< per trace group: the collective ops on it
  struct Peer {
    bool send = false;
    int peer = -1;
    int group = -1;                          ///< Op::group: `peer` within the rank's subgroup
    std::vector<std::int32_t> ops;
  };
  std::vector<Peer> peers;                  ///< distinct (direction, group, peer) of the sends and recvs
};

/// A collective or send/recv: the members that meet in it and how far they got.
struct Instance {
  const PlannedSchedule* schedule = nullptr;
  Seconds begin = 0;          ///< latest arrival so far (the start once all arrived)
  OpId last = -1;             ///< op of the latest arrival: what the start waited for
  std::int32_t arrived = 0;
  std::int32_t members = 0;
  std::int32_t group = -1;    ///< collective: Trace::groups index; send/recv: -1
  std::int32_t a = 0;         ///< collective: subgroup; send/recv: sender
  std::int32_t b = 0;         ///< send/recv: receiver
  std::int32_t slot_a = -1;   ///< send/recv: peer slot of the sends in the sender's program
  std::int32_t slot_b = -1;   ///< send/recv: peer slot of the recvs in the receiver's program
  std::int32_t ordinal = 0;
};

struct StreamState {
  Seconds last_end = 0;       ///< end of the previous op
  Seconds wake_time = -1;     ///< parked: when the latest wake asked for it is due; else -1
  OpId last = -1;             ///< the previous op, -1 before the first
  OpId waiting = -1;          ///< head is a wait for this record
  std::int32_t head = 0;      ///< next op to run (index into the program's stream list)
  std::int32_t issued = 0;    ///< ops the CPU has issued to this stream
  std::uint32_t wake_version = 0;   ///< bumped per wake asked for and when the head settles
  bool busy = false;          ///< head is a collective / send / recv in progress
  bool parked = false;        ///< head is compute whose end is not final yet (started, end tentative)
};

struct RankState {
  Seconds cpu = 0;
  std::int32_t pc = 0;        ///< next op the CPU issues
  std::int32_t parked = 0;    ///< streams of the rank that are parked
  bool blocked = false;       ///< in the sync at pc
};

/// SMs a started collective or send/recv holds on one member's GPU, from its start until that
/// member is done; or, for a codec step of it (`codec`), the whole GPU while the step runs.
struct Hold {
  Seconds begin = 0;
  Seconds end = kNever;       ///< kNever until known (event backend: at member_done); codec: always known
  std::int32_t channels = 0;
  std::int32_t instance = -1; ///< the collective's instance; -1 for a codec step
  bool codec = false;
};

/// A unit of pending work: run a rank's CPU (stream < 0) or advance one of its streams.
struct Work {
  std::int32_t rank;
  std::int32_t stream;
};

std::string list_ranks(const std::vector<int>& ranks) {
  constexpr std::size_t kShown = 8;
  std::string text;
  for (std::size_t i = 0; i < ranks.size() && i < kShown; ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > kShown) text += fmt::format(" and {} more", ranks.size() - kShown);
  return text;
}

}  // namespace

struct ReplayCore::Impl {
  Impl(const workloads::Trace& trace, ReplayPlan& prices, int sm_count);

  // Tables.
  const workloads::Trace& t;
  ReplayPlan& plan;
  std::vector<ProgramInfo> programs;
  std::int64_t total_ops = 0;               ///< op executions of the iteration, every rank's
  /// Per rank: its first op id (number_ops); a folded ghost shares its representative's ids.
  std::vector<std::int64_t> id_base;
  std::vector<std::int32_t> id_owner;       ///< ranks with ids of their own, in id order
  std::vector<std::int64_t> id_owner_first; ///< their first ids, increasing
  std::vector<std::int32_t> stream_base;    ///< ranks + 1
  std::vector<std::int32_t> event_base;     ///< ranks + 1
  std::vector<std::int32_t> peer_base;      ///< ranks + 1
  std::vector<std::int32_t> group_offset;   ///< groups + 1, into subgroup_first
  std::vector<std::int32_t> subgroup_first; ///< first instance of each (group, subgroup)
  std::vector<std::int32_t> peer_first;     ///< per rank peer slot: first instance of its rank pair
  std::vector<Instance> instances;

  // Run state.
  std::vector<Seconds> start;   ///< issue time until the op starts, then its start
  std::vector<Seconds> end;     ///< kNotDone until finished
  std::vector<OpId> pred;       ///< what determined the start; a wait's record until it starts
  std::vector<StreamState> streams;
  std::vector<RankState> ranks;
  std::vector<OpId> last_record;   ///< per rank and event: the latest record issued
  std::vector<Work> work;
  ReplayBackend* backend = nullptr;
  std::vector<std::int64_t>* starts = nullptr;
  Seconds now = 0;                        ///< the backend's time in the current callback

  // SM interference (workloads/trace.hpp): per rank, the holds that may still overlap a kernel.
  const int sm_count;
  std::vector<std::vector<Hold>> holds;

  const workloads::Program& program(int rank) const { return t.program(rank); }
  const ProgramInfo& info(int rank) const {
    return programs[static_cast<std::size_t>(t.program_of_rank[static_cast<std::size_t>(rank)])];
  }
  OpId id(int rank, int op) const { return static_cast<OpId>(id_base[static_cast<std::size_t>(rank)] + op); }
  std::pair<int, int> locate(OpId id) const {
    const auto it = std::upper_bound(id_owner_first.begin(), id_owner_first.end(), static_cast<std::int64_t>(id));
    const auto owner = static_cast<std::size_t>(it - id_owner_first.begin()) - 1;
    return {id_owner[owner], static_cast<int>(id - id_owner_first[owner])};
  }
  /// Numbers the ops of the ranks replayed (every rank, or the representatives when folded)
  /// and sizes the per-op state to them.
  void number_ops();
  StreamState& stream(int rank, int s) {
    return streams[static_cast<std::size_t>(stream_base[static_cast<std::size_t>(rank)] + s)];
  }
  const StreamState& stream(int rank, int s) const {
    return streams[static_cast<std::size_t>(stream_base[static_cast<std::size_t>(rank)] + s)];
  }
  int stream_count(int rank) const {
    return stream_base[static_cast<std::size_t>(rank) + 1] - stream_base[static_cast<std::size_t>(rank)];
  }
  int stream_length(int rank, int s) const {
    const ProgramInfo& p = info(rank);
    return p.stream_begin[static_cast<std::size_t>(s) + 1] - p.stream_begin[static_cast<std::size_t>(s)];
  }
  /// ProgramInfo::ahead at position `k` of stream `s` (0 past its end).
  std::uint8_t ahead(int rank, int s, int k) const {
    if (k == stream_length(rank, s)) return 0;
    const ProgramInfo& p = info(rank);
    return p.ahead[static_cast<std::size_t>(p.stream_begin[static_cast<std::size_t>(s)] + k)];
  }
  int instance_of(int rank, int op) const;
  /// (rank, op index) of member `member` of an instance; op -1 when its program has no such op.
  std::pair<int, int> member(const Instance& in, int member) const;
  std::string name_of(int rank, int op) const;
  std::string describe(int rank, int op) const;

  void build_programs();
  void build_collectives();
  void build_p2p();

  // Folding (see fold()): ranks that provably replay alike run once, as their representative.
  std::vector<std::int32_t> rep_of;   ///< per rank: its representative (itself for one); empty: not folded
  /// Per instance: where ghosts of its representative members meet (instance, member) and
  /// which representative they follow: they arrive there when it arrives here.
  struct Ghost {
    std::int32_t instance, member, representative;
  };
  std::vector<std::vector<Ghost>> ghosts;
  std::vector<char> live;             ///< per instance: has a representative member (runs)
  /// Per live instance with ghost members: its representative members (the ones to resume).
  std::vector<std::vector<std::int32_t>> replayed_members;
  std::int32_t collective_instances = 0;   ///< instances before the send/recv ones
  bool ghost(int rank) const { return !rep_of.empty() && rep_of[static_cast<std::size_t>(rank)] != rank; }
  int representative(int rank) const { return rep_of.empty() ? rank : rep_of[static_cast<std::size_t>(rank)]; }
  void fold(ReplayBackend& backend);
  /// Counts one member's arrival in an instance and starts it when it was the last.
  bool meet(int index, OpId me, Seconds at);

  // The state machine.
  void push(int rank, int s) { work.push_back({rank, s}); }
  void drain();
  void run_cpu(int rank);
  bool try_sync(int rank, int op);
  void enqueue(int rank, int s);
  void advance(int rank, int s);
  void fired(int rank, OpId record);
  /// When compute of isolated duration `work` that starts at `begin` on `rank` ends under the
  /// rank's known holds, and whether a hold whose end is unknown overlaps it.
  struct Timing {
    Seconds end;
    bool open;
  };
  Timing timed(int rank, Seconds begin, Seconds work) const;
  /// Lower bound on the start of any collective or send/recv of `rank` that has not started,
  /// for deciding the compute at the head of stream `decided` (see advance()).
  Seconds horizon(int rank, int decided) const;
  /// Lower bound on when stream `s` starts its next communication op (target < 0) or has
  /// finished every op before its position `target`.
  Seconds reach(int rank, int s, int target, int decided, int depth) const;
  /// Lower bound on when `rank`'s CPU issues its next op.
  Seconds cpu_floor(int rank, int decided) const;
  /// After holds were added to `rank`: drops those that can no longer matter and re-times its
  /// parked kernels.
  void holds_changed(int rank);
  /// A codec step of `instance` runs on member `member`'s GPU over [begin, end).
  void codec_busy(int instance, int member, Seconds begin, Seconds end);
  void push_parked(int rank, int except);
  void woken(ReplayBackend::Token token);
  /// Records a member's arrival; starts the schedule when it is the last. True when the
  /// instance has one member: nothing to move, it completes on arrival.
  bool arrive(int index, int rank, OpId me, Seconds at);
  void member_done(ReplayBackend::Token token, int member);

  bool finished(int rank) const;
  [[noreturn]] void deadlock() const;
  bool has_reached(int rank, int op) const;
  std::string blocked_stream(int rank, int s) const;
  std::string blocked_cpu(int rank) const;

  Seconds rank_time(int rank) const;
  Breakdown breakdown(int rank, Seconds iteration_time, std::vector<std::tuple<Seconds, Seconds, int>>& scratch) const;
  std::vector<CriticalPathEntry> critical_path(int rank) const;
};

ReplayCore::Impl::Impl(const workloads::Trace& trace, ReplayPlan& prices, int sms)
    : t(trace), plan(prices), sm_count(sms) {
  build_programs();
  const auto ranks_count = static_cast<std::size_t>(t.ranks);
  stream_base.assign(ranks_count + 1, 0);
  event_base.assign(ranks_count + 1, 0);
  peer_base.assign(ranks_count + 1, 0);
  for (std::size_t r = 0; r < ranks_count; ++r) {
    const workloads::Program& p = t.program(static_cast<int>(r));
    total_ops += static_cast<std::int64_t>(p.ops.size());
    stream_base[r + 1] = stream_base[r] + static_cast<std::int32_t>(p.streams.size());
    event_base[r + 1] = event_base[r] + static_cast<std::int32_t>(p.events.size());
    peer_base[r + 1] = peer_base[r] + static_cast<std::int32_t>(info(static_cast<int>(r)).peers.size());
  }
  constexpr std::int64_t kMaxOps = std::numeric_limits<OpId>::max();
  if (total_ops >= kMaxOps)
    throw ConfigError(t.origin, fmt::format("the iteration has {} op executions; a replay holds at most {}",
                                            total_ops, kMaxOps),
                      "replay fewer ranks or fewer ops per rank");
  build_collectives();
  build_p2p();

  streams.assign(static_cast<std::size_t>(stream_base.back()), StreamState{});
  ranks.assign(ranks_count, RankState{});
  last_record.assign(static_cast<std::size_t>(event_base.back()), -1);
  holds.resize(ranks_count);
}

void ReplayCore::Impl::build_programs() {
  programs.resize(t.programs.size());
  for (std::size_t p = 0; p < t.programs.size(); ++p) {
    const workloads::Program& program = t.programs[p];
    ProgramInfo& info = programs[p];
    const std::size_t n = program.ops.size();
    const std::size_t streams_count = program.streams.size();
    info.ordinal.assign(n, 0);
    info.slot.assign(n, -1);
    info.duration.assign(n, 0);
    info.group_ops.resize(t.groups.size());
    info.stream_begin.assign(streams_count + 1, 0);
    std::map<std::tuple<bool, int, int>, int> peer_slot;
    // plan.duration's rank only matters for host copies, which advance() prices per rank.
    for (std::size_t i = 0; i < n; ++i) {
      const Op& op = program.ops[i];
      if (op.kind != OpKind::cpu && op.kind != OpKind::sync) ++info.stream_begin[static_cast<std::size_t>(op.stream) + 1];
      switch (op.kind) {
        case OpKind::kernel:
        case OpKind::cpu:
          info.duration[i] = plan.duration(0, op);
          break;
        case OpKind::memcpy:
          if (op.memcpy == workloads::MemcpyKind::device_to_device) info.duration[i] = plan.duration(0, op);
          break;
        case OpKind::collective: {
          const int g = t.collectives[static_cast<std::size_t>(op.collective)].group;
          auto& ops = info.group_ops[static_cast<std::size_t>(g)];
          info.slot[i] = g;
          info.ordinal[i] = static_cast<std::int32_t>(ops.size());
          ops.push_back(static_cast<std::int32_t>(i));
          break;
        }
        case OpKind::send:
        case OpKind::recv: {
          const auto [it, added] =
              peer_slot.try_emplace({op.kind == OpKind::send, op.group, op.peer}, static_cast<int>(info.peers.size()));
          if (added) info.peers.push_back({op.kind == OpKind::send, op.peer, op.group, {}});
          auto& peer = info.peers[static_cast<std::size_t>(it->second)];
          info.slot[i] = it->second;
          info.ordinal[i] = static_cast<std::int32_t>(peer.ops.size());
          peer.ops.push_back(static_cast<std::int32_t>(i));
          break;
        }
        default:
          break;
      }
    }
    for (std::size_t s = 0; s < streams_count; ++s) info.stream_begin[s + 1] += info.stream_begin[s];
    info.stream_ops.assign(static_cast<std::size_t>(info.stream_begin.back()), 0);
    info.position.assign(n, -1);
    std::vector<std::int32_t> fill(info.stream_begin.begin(), info.stream_begin.end() - 1);
    for (std::size_t i = 0; i < n; ++i) {
      const Op& op = program.ops[i];
      if (op.kind == OpKind::cpu || op.kind == OpKind::sync) continue;
      const std::int32_t k = fill[static_cast<std::size_t>(op.stream)]++;
      info.stream_ops[static_cast<std::size_t>(k)] = static_cast<std::int32_t>(i);
      info.position[i] = k - info.stream_begin[static_cast<std::size_t>(op.stream)];
    }
    info.ahead.assign(info.stream_ops.size(), 0);
    for (std::size_t s = 0; s < streams_count; ++s) {
      std::uint8_t flags = 0;
      for (std::int32_t k = info.stream_begin[s + 1] - 1; k >= info.stream_begin[s]; --k) {
        const Op& op = program.ops[static_cast<std::size_t>(info.stream_ops[static_cast<std::size_t>(k)])];
        if (is_communication(op.kind)) flags |= kCommAhead;
        if (is_compute(op)) flags |= kComputeAhead;
        info.ahead[static_cast<std::size_t>(k)] = flags;
      }
    }
  }
}


void ReplayCore::Impl::build_collectives() {
  group_offset.assign(t.groups.size() + 1, 0);
  for (std::size_t g = 0; g < t.groups.size(); ++g)
    group_offset[g + 1] = group_offset[g] + static_cast<std::int32_t>(t.groups[g].subgroups.size());
  subgroup_first.assign(static_cast<std::size_t>(group_offset.back()), 0);
  std::vector<char> seen(t.programs.size(), 0);
  for (std::size_t g = 0; g < t.groups.size(); ++g) {
    const workloads::ProcessGroup& group = t.groups[g];
    for (std::size_t sg = 0; sg < group.subgroups.size(); ++sg) {
      // Members running the same program issue the same calls: compare one rank per program.
      std::vector<int> distinct;
      for (int rank : group.subgroups[sg]) {
        const auto p = static_cast<std::size_t>(t.program_of_rank[static_cast<std::size_t>(rank)]);
        if (!seen[p]) {
          seen[p] = 1;
          distinct.push_back(rank);
        }
      }
      std::size_t count = 0;
      for (int rank : distinct) {
        seen[static_cast<std::size_t>(t.program_of_rank[static_cast<std::size_t>(rank)])] = 0;
        count = std::max(count, info(rank).group_ops[g].size());
      }
      subgroup_first[static_cast<std::size_t>(group_offset[g]) + sg] = static_cast<std::int32_t>(instances.size());
      for (std::size_t k = 0; k < count; ++k) {
        int reference = -1;
        for (int rank : distinct) {
          const auto& ops = info(rank).group_ops[g];
          if (k >= ops.size()) continue;   // a member that never issues it: the run reports the deadlock
          if (reference < 0) {
            reference = rank;
            continue;
          }
          const int mine = program(rank).ops[static_cast<std::size_t>(ops[k])].collective;
          const int theirs = program(reference).ops[static_cast<std::size_t>(info(reference).group_ops[g][k])].collective;
          if (mine != theirs && t.collectives[static_cast<std::size_t>(mine)] != t.collectives[static_cast<std::size_t>(theirs)])
            throw ConfigError(t.origin,
                              fmt::format("mismatched collectives: #{} on group '{}' is {} on rank {} but {} on rank {}",
                                          k, group.name, describe(reference, info(reference).group_ops[g][k]),
                                          reference, describe(rank, ops[k]), rank),
                              "every member of a subgroup must issue the same collectives (op, size, root, "
                              "algorithm and its options, compression included) in the same order: NCCL matches "
                              "the k-th call of each");
        }
        Instance in;
        const int call = program(reference).ops[static_cast<std::size_t>(info(reference).group_ops[g][k])].collective;
        in.members = static_cast<std::int32_t>(group.subgroups[sg].size());
        if (in.members > 1) in.schedule = &plan.collective(call, static_cast<int>(sg));
        in.group = static_cast<std::int32_t>(g);
        in.a = static_cast<std::int32_t>(sg);
        in.ordinal = static_cast<std::int32_t>(k);
        instances.push_back(in);
      }
    }
  }
}

void ReplayCore::Impl::build_p2p() {
  collective_instances = static_cast<std::int32_t>(instances.size());
  // (sender, receiver) -> peer slot of the sends in the sender's program and of the recvs in
  // the receiver's; ordered, so instances are numbered deterministically.
  std::map<std::pair<int, int>, std::pair<int, int>> pairs;
  for (int rank = 0; rank < t.ranks; ++rank) {
    const auto& peers = info(rank).peers;
    for (std::size_t slot = 0; slot < peers.size(); ++slot) {
      const auto& peer = peers[slot];
      Op op;
      op.peer = peer.peer;
      op.group = peer.group;
      const int other = workloads::peer_rank(t, rank, op);
      auto key = peer.send ? std::pair{rank, other} : std::pair{other, rank};
      auto [it, added] = pairs.try_emplace(key, -1, -1);
      (peer.send ? it->second.first : it->second.second) = static_cast<int>(slot);
    }
  }
  peer_first.assign(static_cast<std::size_t>(peer_base.back()), 0);
  for (const auto& [ranks_pair, slots] : pairs) {
    const auto [sender, receiver] = ranks_pair;
    static const std::vector<std::int32_t> none;
    const auto& sends = slots.first >= 0 ? info(sender).peers[static_cast<std::size_t>(slots.first)].ops : none;
    const auto& recvs = slots.second >= 0 ? info(receiver).peers[static_cast<std::size_t>(slots.second)].ops : none;
    const auto first = static_cast<std::int32_t>(instances.size());
    if (slots.first >= 0) peer_first[static_cast<std::size_t>(peer_base[static_cast<std::size_t>(sender)] + slots.first)] = first;
    if (slots.second >= 0) peer_first[static_cast<std::size_t>(peer_base[static_cast<std::size_t>(receiver)] + slots.second)] = first;
    for (std::size_t k = 0; k < std::max(sends.size(), recvs.size()); ++k) {
      const Op* send = k < sends.size() ? &program(sender).ops[static_cast<std::size_t>(sends[k])] : nullptr;
      const Op* recv = k < recvs.size() ? &program(receiver).ops[static_cast<std::size_t>(recvs[k])] : nullptr;
      if (send && recv && send->bytes != recv->bytes)
        throw ConfigError(t.origin,
                          fmt::format("mismatched send/recv: message #{} from rank {} to rank {} is {} in {} but {} "
                                      "in {}",
                                      k, sender, receiver, format_size(send->bytes), describe(sender, sends[k]),
                                      format_size(recv->bytes), describe(receiver, recvs[k])),
                          "give the matched send and recv the same size");
      Instance in;
      in.schedule = &plan.p2p(sender, receiver, send ? send->bytes : recv->bytes);
      in.members = 2;
      in.a = sender;
      in.b = receiver;
      in.slot_a = slots.first;
      in.slot_b = slots.second;
      in.ordinal = static_cast<std::int32_t>(k);
      instances.push_back(in);
    }
  }
}

int ReplayCore::Impl::instance_of(int rank, int op) const {
  const ProgramInfo& p = info(rank);
  const auto i = static_cast<std::size_t>(op);
  if (program(rank).ops[i].kind == OpKind::collective) {
    const auto g = static_cast<std::size_t>(p.slot[i]);
    const int sg = t.groups[g].subgroup_of_rank[static_cast<std::size_t>(rank)];
    return subgroup_first[static_cast<std::size_t>(group_offset[g] + sg)] + p.ordinal[i];
  }
  return peer_first[static_cast<std::size_t>(peer_base[static_cast<std::size_t>(rank)] + p.slot[i])] + p.ordinal[i];
}

std::pair<int, int> ReplayCore::Impl::member(const Instance& in, int m) const {
  if (in.group >= 0) {
    const int rank = t.groups[static_cast<std::size_t>(in.group)].subgroups[static_cast<std::size_t>(in.a)][static_cast<std::size_t>(m)];
    const auto& ops = info(rank).group_ops[static_cast<std::size_t>(in.group)];
    return {rank, static_cast<std::size_t>(in.ordinal) < ops.size() ? ops[static_cast<std::size_t>(in.ordinal)] : -1};
  }
  const int rank = m == 0 ? in.a : in.b;
  const int slot = m == 0 ? in.slot_a : in.slot_b;
  if (slot < 0) return {rank, -1};
  const auto& ops = info(rank).peers[static_cast<std::size_t>(slot)].ops;
  return {rank, static_cast<std::size_t>(in.ordinal) < ops.size() ? ops[static_cast<std::size_t>(in.ordinal)] : -1};
}

std::string ReplayCore::Impl::name_of(int rank, int op) const {
  const Op& o = program(rank).ops[static_cast<std::size_t>(op)];
  return o.name >= 0 ? t.names[static_cast<std::size_t>(o.name)] : workloads::to_string(o.kind);
}

std::string ReplayCore::Impl::describe(int rank, int op) const {
  const Op& o = program(rank).ops[static_cast<std::size_t>(op)];
  const std::string name = o.name >= 0 ? " '" + t.names[static_cast<std::size_t>(o.name)] + "'" : "";
  if (o.kind != OpKind::collective) return workloads::to_string(o.kind) + name;
  const workloads::CollectiveCall& call = t.collectives[static_cast<std::size_t>(o.collective)];
  std::string text = fmt::format("{}{} of {}", models::to_string(call.op), name, format_size(call.bytes));
  if (call.op == models::CollectiveOp::broadcast || call.op == models::CollectiveOp::reduce)
    text += fmt::format(" (root {})", call.root);
  text += fmt::format(" with {}", call.algorithm);
  const models::CompressionOptions& compression = call.options.compression;
  if (!compression.codec.empty())
    text += fmt::format(", compressed {} ({})", compression.codec, models::to_string(compression.mode));
  return text;
}

// --- the state machine ------------------------------------------------------------------------

void ReplayCore::Impl::drain() {
  // FIFO over a growing vector: items pushed while draining run in the same pass.
  for (std::size_t next = 0; next < work.size(); ++next) {
    const Work item = work[next];
    if (item.stream < 0) run_cpu(item.rank);
    else advance(item.rank, item.stream);
  }
  work.clear();
}

void ReplayCore::Impl::run_cpu(int rank) {
  RankState& rs = ranks[static_cast<std::size_t>(rank)];
  const std::vector<Op>& ops = program(rank).ops;
  const ProgramInfo& p = info(rank);
  const auto n = static_cast<std::int32_t>(ops.size());
  if (rs.blocked) {
    if (!try_sync(rank, rs.pc)) return;
    rs.blocked = false;
    ++rs.pc;
  }
  // The CPU moves on: parked kernels' horizons may rise (their cpu_floor).
  if (rs.parked > 0) push_parked(rank, -1);
  const Seconds launch = t.launch.cpu_launch;
  const OpId base = id(rank, 0);
  for (; rs.pc < n; ++rs.pc) {
    const Op& op = ops[static_cast<std::size_t>(rs.pc)];
    const auto at = static_cast<std::size_t>(base + rs.pc);
    switch (op.kind) {
      case OpKind::cpu:
        start[at] = rs.cpu;
        rs.cpu += p.duration[static_cast<std::size_t>(rs.pc)];
        end[at] = rs.cpu;
        break;
      case OpKind::sync:
        start[at] = rs.cpu;
        if (!try_sync(rank, rs.pc)) {
          rs.blocked = true;
          return;
        }
        break;
      case OpKind::record:
        start[at] = rs.cpu;
        last_record[static_cast<std::size_t>(event_base[static_cast<std::size_t>(rank)] + op.event)] = base + rs.pc;
        enqueue(rank, op.stream);
        break;
      case OpKind::wait:
        start[at] = rs.cpu;
        pred[at] = last_record[static_cast<std::size_t>(event_base[static_cast<std::size_t>(rank)] + op.event)];
        enqueue(rank, op.stream);
        break;
      default:
        rs.cpu += launch;
        start[at] = rs.cpu;
        enqueue(rank, op.stream);
    }
  }
}

bool ReplayCore::Impl::try_sync(int rank, int op) {
  RankState& rs = ranks[static_cast<std::size_t>(rank)];
  const Op& o = program(rank).ops[static_cast<std::size_t>(op)];
  Seconds done = -std::numeric_limits<Seconds>::infinity();
  OpId who = kByCpu;
  if (o.event >= 0) {
    const OpId record = last_record[static_cast<std::size_t>(event_base[static_cast<std::size_t>(rank)] + o.event)];
    if (record >= 0) {
      if (end[static_cast<std::size_t>(record)] == kNotDone) return false;
      done = end[static_cast<std::size_t>(record)];
      who = record;
    }
  } else {
    const int first = o.stream >= 0 ? o.stream : 0;
    const int last = o.stream >= 0 ? o.stream + 1 : stream_count(rank);
    for (int s = first; s < last; ++s) {
      const StreamState& st = stream(rank, s);
      if (st.head < st.issued) return false;
      if (st.last >= 0 && st.last_end > done) {
        done = st.last_end;
        who = st.last;
      }
    }
  }
  const auto at = static_cast<std::size_t>(id(rank, op));
  if (done > rs.cpu) {
    rs.cpu = done;
    pred[at] = who;
  } else {
    pred[at] = kByCpu;
  }
  end[at] = rs.cpu;
  return true;
}

void ReplayCore::Impl::enqueue(int rank, int s) {
  StreamState& st = stream(rank, s);
  // A stream with earlier issued ops pending is blocked on them; it picks this one up later.
  if (st.head == st.issued++) advance(rank, s);
}

void ReplayCore::Impl::advance(int rank, int s) {
  StreamState& st = stream(rank, s);
  if (st.busy) return;
  const ProgramInfo& p = info(rank);
  const std::vector<Op>& ops = program(rank).ops;
  const std::int32_t* list = p.stream_ops.data() + p.stream_begin[static_cast<std::size_t>(s)];
  const OpId base = id(rank, 0);
  const Seconds gap = t.launch.kernel_gap;
  const std::int32_t first = st.head;
  // horizon(rank, s), computed when a kernel first needs it: nothing it reads changes while
  // this stream runs, but a record this stream fires (its waiters' bounds become finite).
  Seconds horizon_here = 0;
  bool horizon_known = false;
  while (st.head < st.issued) {
    const int i = list[st.head];
    const Op& op = ops[static_cast<std::size_t>(i)];
    const OpId me = base + i;
    const auto at = static_cast<std::size_t>(me);
    // Start: issued, previous op done (+ the GPU's per-kernel gap); ties go to the stream.
    Seconds begin = start[at];
    OpId why = kByCpu;
    const Seconds ready = st.last_end + (op.kind == OpKind::kernel ? gap : 0);
    if (st.last >= 0 && ready >= begin) {
      begin = ready;
      why = st.last;
    }
    Seconds finish = begin;
    if (is_compute(op)) {
      // Final when no SM hold can change it any more: it ends by now (every start before now
      // is known: starts are found at callbacks no later than them), or no hold whose end is
      // unknown overlaps it and no collective of this rank can start before it ends.
      const Timing timing = timed(rank, begin, p.duration[static_cast<std::size_t>(i)]);
      finish = timing.end;
      if (finish > now && sm_count > 1) {
        if (!timing.open && !horizon_known) {
          horizon_here = horizon(rank, s);
          horizon_known = true;
        }
        if (timing.open || finish > horizon_here) {
          // Parked until a later callback settles it; the wake at its tentative end does at
          // the latest (nothing known at that time can change it any more).
          start[at] = begin;
          pred[at] = why;
          if (!st.parked) {
            st.parked = true;
            ++ranks[static_cast<std::size_t>(rank)].parked;
          }
          if (st.wake_time != finish) {
            st.wake_time = finish;
            const auto global = static_cast<std::uint64_t>(stream_base[static_cast<std::size_t>(rank)] + s);
            backend->wake_at(finish, (static_cast<std::uint64_t>(++st.wake_version) << 32) | global);
          }
          break;
        }
      }
      if (st.parked) {
        st.parked = false;
        --ranks[static_cast<std::size_t>(rank)].parked;
        ++st.wake_version;   // its pending wake is stale now
        st.wake_time = -1;
      }
    } else if (op.kind == OpKind::memcpy) {
      finish = begin + plan.duration(rank, op);   // a host copy runs on a copy engine, not SMs
    } else if (op.kind == OpKind::wait) {
      const OpId record = pred[at];
      if (record >= 0) {
        const Seconds fired_at = end[static_cast<std::size_t>(record)];
        if (fired_at == kNotDone) {
          st.waiting = record;
          break;
        }
        if (fired_at > begin) {
          begin = fired_at;
          why = record;
        }
      }
      st.waiting = -1;
      finish = begin;
    } else if (is_communication(op.kind)) {
      if (!arrive(instance_of(rank, i), rank, me, begin)) {
        // The stream holds until the backend reports this member done.
        start[at] = begin;
        pred[at] = why;
        st.busy = true;
        break;
      }
      // Alone in its subgroup: NCCL copies an out-of-place call's buffer within the GPU.
      finish = begin + plan.one_rank_copy(op.collective);
    }
    start[at] = begin;
    end[at] = finish;
    pred[at] = why;
    st.last_end = finish;
    st.last = me;
    ++st.head;
    if (op.kind == OpKind::record) {
      fired(rank, me);
      horizon_known = false;
    }
  }
  if (st.head == first) return;
  // Finished ops may release a CPU blocked in a stream or device sync, and raise the horizon
  // of the rank's parked kernels.
  const RankState& rs = ranks[static_cast<std::size_t>(rank)];
  if (rs.blocked) push(rank, -1);
  if (rs.parked > (st.parked ? 1 : 0)) push_parked(rank, s);
}

void ReplayCore::Impl::fired(int rank, OpId record) {
  for (int s = 0; s < stream_count(rank); ++s)
    if (stream(rank, s).waiting == record) push(rank, s);
  if (ranks[static_cast<std::size_t>(rank)].blocked) push(rank, -1);
}

// --- SM interference ---------------------------------------------------------------------------
// The model (workloads/trace.hpp): an NCCL collective is one kernel of one CTA per channel
// (NCCL src/enqueue.cc, ncclLaunchKernel: grid = {nChannels, 1, 1}), each CTA on its own SM
// for the whole collective, so kernels beside it run on the S - C SMs left. How the core
// decides when a kernel's end is final: sim/replay_core.hpp, "SM interference".

ReplayCore::Impl::Timing ReplayCore::Impl::timed(int rank, Seconds begin, Seconds work) const {
  const std::vector<Hold>& list = holds[static_cast<std::size_t>(rank)];
  // The common cases first: nothing held at `begin` and nothing starting before the end.
  bool held = false;
  Seconds next = kNever, open_from = kNever;
  for (const Hold& h : list) {
    if (h.end <= begin) continue;
    if (h.end == kNever) open_from = std::min(open_from, h.begin);
    if (h.begin <= begin) {
      held = true;
      next = std::min(next, h.end);
    } else {
      next = std::min(next, h.begin);
    }
  }
  if (!held && begin + work <= next) return {begin + work, open_from < begin + work};

  // Piecewise: the work (isolated seconds) is consumed at (S - C) / S between the times C
  // changes, and not at all while a codec step holds the GPU; only changes of that rate cut
  // the work, so a kernel that overlaps no hold keeps begin + work to the bit.
  // A rank has a handful of holds at a time, so the next change is found by a scan.
  const int cap = sm_count - 1;
  auto rate_at = [&](Seconds when) {
    std::int32_t channels = 0;
    for (const Hold& h : list) {
      if (h.begin > when || when >= h.end) continue;
      if (h.codec) return 0.0;
      channels += h.channels;
    }
    return static_cast<double>(sm_count - std::min(channels, cap)) / sm_count;
  };
  Seconds at = begin, cursor = begin;
  double speed = rate_at(begin);
  for (;;) {
    Seconds when = kNever;
    for (const Hold& h : list) {
      if (h.begin > cursor) when = std::min(when, h.begin);
      else if (h.end > cursor) when = std::min(when, h.end);
    }
    if (when == kNever) break;
    cursor = when;
    const double next_speed = rate_at(when);
    if (next_speed == speed) continue;
    const Seconds done = (when - at) * speed;
    if (work <= done) break;
    work -= done;
    at = when;
    speed = next_speed;
  }
  // Codec holds always end, so the rate after the last change is positive unless no work is left.
  const Seconds finish = work > 0 ? at + work / speed : at;
  return {finish, open_from < finish};
}

Seconds ReplayCore::Impl::horizon(int rank, int decided) const {
  // A collective starts when its last member arrives, so one of this rank's starts comes no
  // earlier than this rank's arrival: a lower bound per stream that has communication ahead.
  // The decided stream's own later collectives come after the kernel ends, so they bound
  // nothing before it (were one to start earlier, the kernel would not have ended then).
  Seconds bound = kNever;
  for (int s = 0; s < stream_count(rank); ++s)
    if (s != decided && (ahead(rank, s, stream(rank, s).head) & kCommAhead))
      bound = std::min(bound, reach(rank, s, -1, decided, 0));
  return bound;
}

Seconds ReplayCore::Impl::reach(int rank, int s, int target, int decided, int depth) const {
  const StreamState& st = stream(rank, s);
  const ProgramInfo& p = info(rank);
  const std::vector<Op>& ops = program(rank).ops;
  const std::int32_t* list = p.stream_ops.data() + p.stream_begin[static_cast<std::size_t>(s)];
  const OpId base = id(rank, 0);
  Seconds at = st.last_end;
  std::int32_t k = st.head;
  if (st.busy) {
    const int index = instance_of(rank, list[k]);
    const Instance& in = instances[static_cast<std::size_t>(index)];
    // Not started: it starts no earlier than its latest arrival so far.
    if (in.arrived < in.members) return std::max(at, in.begin);
    Seconds done = std::max(in.begin, now);   // not done before now: member_done is pending
    for (const Hold& h : holds[static_cast<std::size_t>(rank)])
      if (h.instance == index && h.end != kNever) done = h.end;
    at = std::max(at, done);
    ++k;
    // Its own hold is known; with no collective behind it the stream bounds nothing.
    if (target < 0 && !(ahead(rank, s, k) & kCommAhead)) return kNever;
  } else if (st.parked) {
    at = start[static_cast<std::size_t>(base + list[k])] + p.duration[static_cast<std::size_t>(list[k])];
    ++k;
  }
  const std::int32_t stop = target >= 0 ? target : stream_length(rank, s);
  for (int steps = 0; k < stop; ++k, ++steps) {
    if (steps == kReachSteps) return at;
    if (k >= st.issued) return std::max(at, cpu_floor(rank, decided));
    const int i = list[k];
    const Op& op = ops[static_cast<std::size_t>(i)];
    const Seconds issued = start[static_cast<std::size_t>(base + i)];
    if (is_communication(op.kind)) {
      if (target < 0) return std::max(at, issued);
      at = std::max(at, issued);   // it ends no earlier than it starts
    } else if (op.kind == OpKind::kernel || op.kind == OpKind::memcpy) {
      // No faster than alone: SM holds only slow compute down.
      at = std::max(at, issued) + (is_compute(op) ? p.duration[static_cast<std::size_t>(i)] : plan.duration(rank, op));
    } else if (op.kind == OpKind::wait) {
      const OpId record = pred[static_cast<std::size_t>(base + i)];
      if (record < 0) continue;
      if (end[static_cast<std::size_t>(record)] != kNotDone) {
        at = std::max(at, end[static_cast<std::size_t>(record)]);
        continue;
      }
      const auto r = static_cast<std::size_t>(record - base);
      const int record_stream = ops[r].stream;
      if (record_stream == decided) return kNever;   // fires after the decided kernel ends
      if (record_stream != s && depth < kReachDepth)
        at = std::max(at, reach(rank, record_stream, p.position[r], decided, depth + 1));
    }
  }
  return at;
}

Seconds ReplayCore::Impl::cpu_floor(int rank, int decided) const {
  const RankState& rs = ranks[static_cast<std::size_t>(rank)];
  if (!rs.blocked) return rs.cpu;
  // A sync that waits for the decided stream (or the whole device, the decided kernel
  // included) returns after the decided kernel ends.
  const Op& o = program(rank).ops[static_cast<std::size_t>(rs.pc)];
  if (o.event >= 0) {
    const OpId record = last_record[static_cast<std::size_t>(event_base[static_cast<std::size_t>(rank)] + o.event)];
    const bool on_decided = record >= 0 && end[static_cast<std::size_t>(record)] == kNotDone &&
                            program(rank).ops[static_cast<std::size_t>(record - id(rank, 0))].stream == decided;
    return on_decided ? kNever : rs.cpu;
  }
  return o.stream < 0 || o.stream == decided ? kNever : rs.cpu;
}

void ReplayCore::Impl::holds_changed(int rank) {
  std::vector<Hold>& list = holds[static_cast<std::size_t>(rank)];
  // Holds that end before every kernel the rank may still start can no longer matter.
  const ProgramInfo& p = info(rank);
  Seconds earliest = kNever;
  for (int s = 0; s < stream_count(rank); ++s) {
    const StreamState& st = stream(rank, s);
    if (!(ahead(rank, s, st.head) & kComputeAhead)) continue;
    const auto k = static_cast<std::size_t>(p.stream_begin[static_cast<std::size_t>(s)] + st.head);
    const Seconds from = st.head < st.issued ? start[static_cast<std::size_t>(id(rank, p.stream_ops[k]))]
                                             : ranks[static_cast<std::size_t>(rank)].cpu;
    Seconds bound = std::max(st.last_end, from);
    if (!st.parked) {
      // The stream's next kernel starts once the ops before it are done (reach's lower bound):
      // an all-gather stream waiting on an event issued long ago bounds no earlier than that.
      const int length = stream_length(rank, s);
      int c = st.head;
      while (c < length && c < st.head + kReachSteps &&
             !is_compute(program(rank).ops[static_cast<std::size_t>(p.stream_ops[static_cast<std::size_t>(p.stream_begin[static_cast<std::size_t>(s)] + c)])]))
        ++c;
      if (c > st.head && c < length && c < st.head + kReachSteps) bound = std::max(bound, reach(rank, s, c, -1, 0));
    }
    earliest = std::min(earliest, bound);
  }
  std::erase_if(list, [earliest](const Hold& h) { return h.end <= earliest; });
  push_parked(rank, -1);
}

void ReplayCore::Impl::push_parked(int rank, int except) {
  if (ranks[static_cast<std::size_t>(rank)].parked == 0) return;
  for (int s = 0; s < stream_count(rank); ++s)
    if (s != except && stream(rank, s).parked) push(rank, s);
}

void ReplayCore::Impl::woken(ReplayBackend::Token token) {
  const auto global = static_cast<std::int32_t>(token & 0xffffffffU);
  const StreamState& st = streams[static_cast<std::size_t>(global)];
  // Stale when the kernel settled or was re-timed (a newer wake) since.
  if (!st.parked || st.wake_version != static_cast<std::uint32_t>(token >> 32)) return;
  const auto owner = std::upper_bound(stream_base.begin(), stream_base.end(), global) - 1;
  push(static_cast<int>(owner - stream_base.begin()), global - *owner);
}

bool ReplayCore::Impl::arrive(int index, int rank, OpId me, Seconds at) {
  // Folded: the ghosts this representative stands for reach their instances now too.
  if (!ghosts.empty())
    for (const Ghost& g : ghosts[static_cast<std::size_t>(index)])
      if (g.representative == rank) meet(g.instance, me, at);
  return meet(index, me, at);
}

bool ReplayCore::Impl::meet(int index, OpId me, Seconds at) {
  Instance& in = instances[static_cast<std::size_t>(index)];
  if (in.arrived == 0 || at > in.begin) {
    in.begin = at;
    in.last = me;
  }
  if (in.members == 1) {
    in.arrived = 1;
    return true;
  }
  if (++in.arrived == in.members) {
    const models::Schedule& schedule = in.schedule->schedule;
    ++(*starts)[static_cast<std::size_t>(in.schedule->id)];
    const auto token = static_cast<ReplayBackend::Token>(index);
    if (!replayed_members.empty() && !replayed_members[static_cast<std::size_t>(index)].empty())
      backend->start_collective_for(in.begin, schedule, token, replayed_members[static_cast<std::size_t>(index)]);
    else
      backend->start_collective(in.begin, schedule, token);
    if (sm_count > 1 && schedule.channels > 0) {
      const std::vector<Seconds>* finish = backend->finish_offsets(schedule);
      // Codec steps: known now where the backend fixes them, else reported by codec_busy.
      const std::vector<std::vector<BusyInterval>>* codec =
          schedule.compressed_piece_bytes > 0 ? backend->codec_offsets(schedule) : nullptr;
      for (int m = 0; m < in.members; ++m) {
        const int rank = member(in, m).first;
        if (ghost(rank)) continue;   // its representative holds its own GPU
        std::vector<Hold>& list = holds[static_cast<std::size_t>(rank)];
        list.push_back({in.begin, finish ? in.begin + (*finish)[static_cast<std::size_t>(m)] : kNever,
                        schedule.channels, index});
        if (codec)
          for (const BusyInterval& busy : (*codec)[static_cast<std::size_t>(m)])
            list.push_back({in.begin + busy.begin, in.begin + busy.end, 0, -1, true});
        holds_changed(rank);
      }
    }
  }
  return false;
}

void ReplayCore::Impl::codec_busy(int instance, int m, Seconds begin, Seconds end) {
  if (sm_count <= 1) return;
  const int rank = member(instances[static_cast<std::size_t>(instance)], m).first;
  if (ghost(rank)) return;
  holds[static_cast<std::size_t>(rank)].push_back({begin, end, 0, -1, true});
  holds_changed(rank);
}

void ReplayCore::Impl::member_done(ReplayBackend::Token token, int m) {
  const Instance& in = instances[static_cast<std::size_t>(token)];
  const auto [rank, op] = member(in, m);
  if (ghost(rank)) return;   // not replayed: its representative's op ends at the same time
  const OpId me = id(rank, op);
  const int s = program(rank).ops[static_cast<std::size_t>(op)].stream;
  StreamState& st = stream(rank, s);
  for (Hold& hold : holds[static_cast<std::size_t>(rank)])
    if (hold.instance == static_cast<std::int32_t>(token) && hold.end == kNever) {
      hold.end = now;   // the end was not known at the start: kernels it overlaps are re-timed
      push_parked(rank, -1);
      break;
    }
  end[static_cast<std::size_t>(me)] = now;
  st.busy = false;
  st.last_end = now;
  st.last = me;
  ++st.head;
  push(rank, s);
  if (ranks[static_cast<std::size_t>(rank)].blocked) push(rank, -1);
}

bool ReplayCore::Impl::finished(int rank) const {
  if (ranks[static_cast<std::size_t>(rank)].pc < static_cast<std::int32_t>(program(rank).ops.size())) return false;
  for (int s = 0; s < stream_count(rank); ++s)
    if (stream(rank, s).head < stream_length(rank, s)) return false;
  return true;
}

// --- deadlock report --------------------------------------------------------------------------

bool ReplayCore::Impl::has_reached(int rank, int op) const {
  if (end[static_cast<std::size_t>(id(rank, op))] != kNotDone) return true;
  const int s = program(rank).ops[static_cast<std::size_t>(op)].stream;
  const StreamState& st = stream(rank, s);
  const ProgramInfo& p = info(rank);
  return st.busy && p.stream_ops[static_cast<std::size_t>(p.stream_begin[static_cast<std::size_t>(s)] + st.head)] == op;
}

std::string ReplayCore::Impl::blocked_stream(int rank, int s) const {
  const StreamState& st = stream(rank, s);
  const ProgramInfo& p = info(rank);
  const int op = p.stream_ops[static_cast<std::size_t>(p.stream_begin[static_cast<std::size_t>(s)] + st.head)];
  const Op& o = program(rank).ops[static_cast<std::size_t>(op)];
  const std::string where = fmt::format("stream '{}': ", program(rank).streams[static_cast<std::size_t>(s)]);
  if (st.waiting >= 0) {
    const auto [record_rank, record_op] = locate(st.waiting);
    const Op& record = program(record_rank).ops[static_cast<std::size_t>(record_op)];
    return where + fmt::format("{} on event '{}' waits for {} on stream '{}', which never completes",
                               describe(rank, op), program(rank).events[static_cast<std::size_t>(o.event)],
                               describe(record_rank, record_op), program(rank).streams[static_cast<std::size_t>(record.stream)]);
  }
  if (!st.busy) throw std::logic_error("replay: stream with pending work after the run");
  const Instance& in = instances[static_cast<std::size_t>(instance_of(rank, op))];
  std::vector<int> absent, never;
  for (int m = 0; m < in.members; ++m) {
    const auto [q, q_op] = member(in, m);
    if (q_op < 0) {
      never.push_back(q);
      absent.push_back(q);
      continue;
    }
    const bool reached = has_reached(q, q_op);
    if (!reached) absent.push_back(q);
  }
  if (in.group >= 0) {
    const workloads::ProcessGroup& group = t.groups[static_cast<std::size_t>(in.group)];
    std::string text = where + fmt::format("waiting for rank{} {} to reach {} (#{} on group '{}')",
                                           absent.size() == 1 ? "" : "s", list_ranks(absent), describe(rank, op),
                                           in.ordinal, group.name);
    if (!never.empty())
      text += fmt::format("; rank{} {} never issue{} it (fewer collectives on '{}')", never.size() == 1 ? "" : "s",
                          list_ranks(never), never.size() == 1 ? "s" : "", group.name);
    return text;
  }
  const bool sending = o.kind == OpKind::send;
  const int peer = sending ? in.b : in.a;
  if (!never.empty())
    return where + fmt::format("{} {} rank {} (#{}) has no matching {}: rank {} posts fewer", describe(rank, op),
                               sending ? "to" : "from", peer, in.ordinal, sending ? "recv" : "send", peer);
  const auto [peer_rank, peer_op] = member(in, sending ? 1 : 0);
  return where + fmt::format("{} {} rank {} (#{}) is waiting for rank {} to reach its {}", describe(rank, op),
                             sending ? "to" : "from", peer, in.ordinal, peer_rank, describe(peer_rank, peer_op));
}

std::string ReplayCore::Impl::blocked_cpu(int rank) const {
  const int op = ranks[static_cast<std::size_t>(rank)].pc;
  const Op& o = program(rank).ops[static_cast<std::size_t>(op)];
  if (o.event >= 0) {
    const auto [record_rank, record_op] =
        locate(last_record[static_cast<std::size_t>(event_base[static_cast<std::size_t>(rank)] + o.event)]);
    return fmt::format("cpu: {} on event '{}' waits for {} on stream '{}', which never completes", describe(rank, op),
                       program(rank).events[static_cast<std::size_t>(o.event)], describe(record_rank, record_op),
                       program(rank).streams[static_cast<std::size_t>(program(record_rank).ops[static_cast<std::size_t>(record_op)].stream)]);
  }
  if (o.stream >= 0)
    return fmt::format("cpu: {} waits for stream '{}', which never drains", describe(rank, op),
                       program(rank).streams[static_cast<std::size_t>(o.stream)]);
  return fmt::format("cpu: {} waits for the whole device, whose streams never drain", describe(rank, op));
}

void ReplayCore::Impl::deadlock() const {
  constexpr int kShown = 8;
  std::vector<std::string> lines;
  int blocked = 0;
  for (int rank = 0; rank < t.ranks; ++rank) {
    if (ghost(rank) || finished(rank)) continue;
    if (++blocked > kShown) continue;
    std::vector<std::string> why;
    for (int s = 0; s < stream_count(rank); ++s) {
      const StreamState& st = stream(rank, s);
      if (st.head < st.issued) why.push_back(blocked_stream(rank, s));
    }
    if (ranks[static_cast<std::size_t>(rank)].blocked) why.push_back(blocked_cpu(rank));
    std::string line = fmt::format("rank {}: ", rank);
    for (std::size_t i = 0; i < why.size(); ++i) line += (i ? "; " : "") + why[i];
    lines.push_back(line);
  }
  std::string text = fmt::format("the iteration cannot finish: {} rank{} blocked forever", blocked,
                                 blocked == 1 ? " is" : "s are");
  for (const std::string& line : lines) text += "\n  " + line;
  if (blocked > kShown) text += fmt::format("\n  and {} more blocked ranks", blocked - kShown);
  throw ConfigError(t.origin, text,
                    "a collective starts only when every member of its subgroup reaches it, a recv only with its "
                    "send, a wait only after its record: order each rank's ops so that no cycle of such waits remains");
}

// --- results ----------------------------------------------------------------------------------

Seconds ReplayCore::Impl::rank_time(int rank) const {
  Seconds done = ranks[static_cast<std::size_t>(rank)].cpu;
  for (int s = 0; s < stream_count(rank); ++s) done = std::max(done, stream(rank, s).last_end);
  return done;
}

Breakdown ReplayCore::Impl::breakdown(int rank, Seconds iteration_time,
                                      std::vector<std::tuple<Seconds, Seconds, int>>& intervals) const {
  constexpr int kCompute = 1, kCommunication = 2;
  auto category = [](OpKind kind) {
    return kind == OpKind::kernel || kind == OpKind::memcpy ? kCompute : is_communication(kind) ? kCommunication : 0;
  };
  // A communication interval also carries its group: 1 + the group index, or 1 + groups for
  // sends and recvs to global ranks.
  const int global_p2p = static_cast<int>(t.groups.size()) + 1;
  auto code = [&](const Op& op) {
    if (op.kind == OpKind::collective)
      return 1 + t.collectives[static_cast<std::size_t>(op.collective)].group;
    return op.group >= 0 ? 1 + op.group : global_p2p;
  };
  // A stream's ops start in order, so merging the streams' lists sorts the intervals by start
  // without a sort.
  const std::vector<Op>& ops = program(rank).ops;
  const ProgramInfo& p = info(rank);
  const OpId base = id(rank, 0);
  const int streams_count = stream_count(rank);
  std::vector<std::int32_t> next(p.stream_begin.begin(), p.stream_begin.end() - 1);
  auto skip = [&](int s) {
    while (next[static_cast<std::size_t>(s)] < p.stream_begin[static_cast<std::size_t>(s) + 1] &&
           !category(ops[static_cast<std::size_t>(p.stream_ops[static_cast<std::size_t>(next[static_cast<std::size_t>(s)])])].kind))
      ++next[static_cast<std::size_t>(s)];
  };
  for (int s = 0; s < streams_count; ++s) skip(s);
  intervals.clear();
  while (true) {
    int pick = -1;
    Seconds earliest = 0;
    for (int s = 0; s < streams_count; ++s) {
      if (next[static_cast<std::size_t>(s)] == p.stream_begin[static_cast<std::size_t>(s) + 1]) continue;
      const Seconds begin = start[static_cast<std::size_t>(base + p.stream_ops[static_cast<std::size_t>(next[static_cast<std::size_t>(s)])])];
      if (pick < 0 || begin < earliest) {
        pick = s;
        earliest = begin;
      }
    }
    if (pick < 0) break;
    const int i = p.stream_ops[static_cast<std::size_t>(next[static_cast<std::size_t>(pick)]++)];
    const Op& op = ops[static_cast<std::size_t>(i)];
    const int kind = category(op.kind);
    intervals.emplace_back(earliest, end[static_cast<std::size_t>(base + i)],
                           kind == kCommunication ? kind | code(op) << 2 : kind);
    skip(pick);
  }
  // Union of the intervals whose kind passes `keep`.
  auto covered_if = [&](auto keep) {
    Seconds total = 0, from = 0, to = -1;
    for (const auto& [s, e, kind] : intervals) {
      if (!keep(kind)) continue;
      if (s > to) {
        if (to > from) total += to - from;
        from = s;
        to = e;
      } else {
        to = std::max(to, e);
      }
    }
    if (to > from) total += to - from;
    return total;
  };
  auto covered = [&](int mask) { return covered_if([mask](int kind) { return (kind & mask) != 0; }); };
  Breakdown b;
  b.compute = covered(kCompute);
  b.communication = covered(kCommunication);
  const Seconds busy = covered(kCompute | kCommunication);
  b.exposed_communication = busy - b.compute;
  b.idle = iteration_time - busy;
  std::vector<bool> seen(static_cast<std::size_t>(global_p2p) + 1, false);
  for (const auto& [s, e, kind] : intervals) seen[static_cast<std::size_t>(kind >> 2)] = kind >= 4;
  for (int g = 1; g <= global_p2p; ++g) {
    if (!seen[static_cast<std::size_t>(g)]) continue;
    const std::string name = g == global_p2p ? "p2p" : t.groups[static_cast<std::size_t>(g) - 1].name;
    GroupTime& time = b.by_group[name];
    time.exposed += covered_if([g](int kind) { return (kind & kCompute) || (kind >> 2) == g; }) - b.compute;
    time.communication += covered_if([g](int kind) { return (kind >> 2) == g; });
  }
  return b;
}

std::vector<CriticalPathEntry> ReplayCore::Impl::critical_path(int rank) const {
  // Walks back from the rank's last event through what determined each start; every step adds
  // the time between the cause's end and the op's end, so the entries sum to the iteration time.
  std::map<std::pair<std::string, std::string>, CriticalPathEntry> by_name;
  auto add = [&](int r, int op, const std::string& kind, Seconds time) {
    CriticalPathEntry& e = by_name[{fold_indices(name_of(r, op)), kind}];
    e.count += 1;
    e.time += time;
  };
  const Seconds launch = t.launch.cpu_launch;
  OpId at = -1;       // the op the walk is at (its end is the current time), -1: on the CPU chain
  int cpu_rank = rank, cpu_op = -1;   // the CPU chain position (op cpu_op included)

  // Start: the last stream op to finish on the slowest rank, or its CPU if that ends later.
  Seconds latest = ranks[static_cast<std::size_t>(rank)].cpu;
  cpu_op = static_cast<int>(program(rank).ops.size()) - 1;
  for (int s = 0; s < stream_count(rank); ++s) {
    const StreamState& st = stream(rank, s);
    if (st.last >= 0 && st.last_end >= latest) {
      latest = st.last_end;
      at = st.last;
    }
  }
  while (true) {
    if (at >= 0) {
      const auto [r, op] = locate(at);
      const Op& o = program(r).ops[static_cast<std::size_t>(op)];
      const char* kind = workloads::to_string(o.kind);
      OpId cause_of = at;   // the op whose start the walk follows next
      Seconds time = end[static_cast<std::size_t>(at)] - start[static_cast<std::size_t>(at)];
      if (is_communication(o.kind)) {
        const Instance& in = instances[static_cast<std::size_t>(instance_of(r, op))];
        time = end[static_cast<std::size_t>(at)] - in.begin;
        cause_of = in.last;
      }
      const OpId cause = pred[static_cast<std::size_t>(cause_of)];
      if (cause >= 0) time += start[static_cast<std::size_t>(cause_of)] - end[static_cast<std::size_t>(cause)];
      if (o.kind != OpKind::record && o.kind != OpKind::wait) add(r, op, kind, time);
      if (cause >= 0) {
        at = cause;
        continue;
      }
      std::tie(cpu_rank, cpu_op) = locate(cause_of);
      at = -1;
    }
    // The CPU chain: costs back to the previous sync that had to wait, or to the start.
    const std::vector<Op>& ops = program(cpu_rank).ops;
    for (; cpu_op >= 0; --cpu_op) {
      const Op& o = ops[static_cast<std::size_t>(cpu_op)];
      if (o.kind == OpKind::cpu) {
        add(cpu_rank, cpu_op, "cpu", o.duration);
      } else if (o.kind == OpKind::sync) {
        const OpId cause = pred[static_cast<std::size_t>(id(cpu_rank, cpu_op))];
        if (cause >= 0) {
          at = cause;
          break;
        }
      } else if (o.kind != OpKind::record && o.kind != OpKind::wait) {
        add(cpu_rank, cpu_op, "launch", launch);
      }
    }
    if (at < 0) break;
  }
  std::vector<CriticalPathEntry> entries;
  for (auto& [key, entry] : by_name) {
    entry.name = key.first;
    entry.kind = key.second;
    entries.push_back(std::move(entry));
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const CriticalPathEntry& a, const CriticalPathEntry& b) { return a.time > b.time; });
  return entries;
}

void ReplayCore::Impl::number_ops() {
  const auto ranks_count = static_cast<std::size_t>(t.ranks);
  id_base.assign(ranks_count, 0);
  id_owner.clear();
  id_owner_first.clear();
  std::int64_t next = 0;
  for (int rank = 0; rank < t.ranks; ++rank) {
    if (ghost(rank)) continue;
    id_base[static_cast<std::size_t>(rank)] = next;
    id_owner.push_back(rank);
    id_owner_first.push_back(next);
    next += static_cast<std::int64_t>(program(rank).ops.size());
  }
  for (int rank = 0; rank < t.ranks; ++rank)
    if (ghost(rank)) id_base[static_cast<std::size_t>(rank)] = id_base[static_cast<std::size_t>(representative(rank))];
  const auto total = static_cast<std::size_t>(next);
  start.assign(total, 0);
  end.assign(total, kNotDone);
  pred.assign(total, kByCpu);
}

// --- folding ----------------------------------------------------------------------------------

// Ranks that replay alike, found by refinement (as bisimulation): at first ranks of one program
// are alike; then two ranks stay alike while, on every group, their subgroups' instances time
// alike for them (their finish offsets, SM channels and codec intervals, as the backend fixes
// them at the start) and hold the same classes of members, and they send to and receive from
// alike peers over alike transfers. Ranks alike at the end
// reach every op at the same time: by induction over the replay, each of their instances starts
// when the latest of alike members arrives and ends for each at the same offset. Only backends
// that fix every finish at the start (analytical) can be folded; host copies (priced per rank's
// route) keep every rank apart.
void ReplayCore::Impl::fold(ReplayBackend& backend) {
  for (const workloads::Program& program : t.programs)
    for (const Op& op : program.ops)
      if (op.kind == OpKind::memcpy && op.memcpy != workloads::MemcpyKind::device_to_device) return;
  std::map<std::vector<double>, int> timing_ids;
  auto intern = [](auto& table, auto key) {
    return table.try_emplace(std::move(key), static_cast<int>(table.size())).first->second;
  };
  bool foldable = true;
  // What member `m` of a schedule sees of it: when it finishes, the SM channels it holds and
  // its codec intervals, all from the start.
  std::vector<std::vector<int>> memo(plan.schedules().size());   // per schedule and member
  auto timing = [&](const PlannedSchedule* planned, int m) {
    if (!planned) return -1;
    std::vector<int>& known = memo[static_cast<std::size_t>(planned->id)];
    if (known.empty()) known.assign(static_cast<std::size_t>(planned->allocation.ranks()), -2);
    int& id = known[static_cast<std::size_t>(m)];
    if (id != -2) return id;
    const models::Schedule& schedule = planned->schedule;
    const std::vector<Seconds>* finish = backend.finish_offsets(schedule);
    if (!finish) {
      foldable = false;
      return id = -1;
    }
    std::vector<double> key = {(*finish)[static_cast<std::size_t>(m)], static_cast<double>(schedule.channels)};
    if (schedule.compressed_piece_bytes > 0) {
      const std::vector<std::vector<BusyInterval>>* codec = backend.codec_offsets(schedule);
      if (!codec) foldable = false;
      else
        for (const BusyInterval& busy : (*codec)[static_cast<std::size_t>(m)]) key.insert(key.end(), {busy.begin, busy.end});
    }
    return id = intern(timing_ids, std::move(key));
  };
  // Member m's timing over a run of consecutive instances (a subgroup's, a rank pair's).
  std::map<std::vector<int>, int> run_ids;
  auto run_timing = [&](int first, int count, int m) {
    std::vector<int> key;
    for (int k = 0; k < count; ++k) key.push_back(timing(instances[static_cast<std::size_t>(first + k)].schedule, m));
    return intern(run_ids, std::move(key));
  };
  const auto subgroups = static_cast<std::size_t>(group_offset.back());
  auto subgroup_end = [&](std::size_t i) { return i + 1 < subgroups ? subgroup_first[i + 1] : collective_instances; };
  const auto ranks_count = static_cast<std::size_t>(t.ranks);
  // Per rank and peer slot: the peer and the timing of their transfers.
  std::vector<std::vector<std::pair<int, int>>> peers(ranks_count);
  for (int rank = 0; rank < t.ranks; ++rank)
    for (std::size_t slot = 0; slot < info(rank).peers.size(); ++slot) {
      const auto& peer = info(rank).peers[slot];
      Op op;
      op.peer = peer.peer;
      op.group = peer.group;
      const int first = peer_first[static_cast<std::size_t>(peer_base[static_cast<std::size_t>(rank)]) + slot];
      peers[static_cast<std::size_t>(rank)].push_back(
          {workloads::peer_rank(t, rank, op), run_timing(first, static_cast<int>(peer.ops.size()), peer.send ? 0 : 1)});
    }
  if (!foldable) return;
  // Per rank and group it is in: its timing over its subgroup's instances.
  std::vector<std::vector<int>> group_timing(ranks_count, std::vector<int>(t.groups.size(), -1));
  for (std::size_t g = 0; g < t.groups.size(); ++g)
    for (std::size_t sg = 0; sg < t.groups[g].subgroups.size(); ++sg) {
      const auto i = static_cast<std::size_t>(group_offset[g]) + sg;
      const std::vector<int>& members = t.groups[g].subgroups[sg];
      for (std::size_t m = 0; m < members.size(); ++m)
        group_timing[static_cast<std::size_t>(members[m])][g] =
            run_timing(subgroup_first[i], subgroup_end(i) - subgroup_first[i], static_cast<int>(m));
    }
  if (!foldable) return;
  std::vector<int> color(ranks_count);
  for (std::size_t r = 0; r < ranks_count; ++r) color[r] = t.program_of_rank[r];
  int colors = static_cast<int>(t.programs.size());
  for (;;) {
    std::map<std::vector<std::int64_t>, int> signatures;
    std::vector<int> next(ranks_count);
    for (int rank = 0; rank < t.ranks; ++rank) {
      std::vector<std::int64_t> key = {color[static_cast<std::size_t>(rank)]};
      for (std::size_t g = 0; g < t.groups.size(); ++g) {
        const int sg = t.groups[g].subgroup_of_rank[static_cast<std::size_t>(rank)];
        if (sg < 0) continue;
        // The start waits for the latest member: what matters is which classes meet, not where.
        std::vector<int> met;
        for (int m : t.groups[g].subgroups[static_cast<std::size_t>(sg)]) met.push_back(color[static_cast<std::size_t>(m)]);
        std::sort(met.begin(), met.end());
        key.insert(key.end(), {static_cast<std::int64_t>(g), group_timing[static_cast<std::size_t>(rank)][g]});
        key.insert(key.end(), met.begin(), met.end());
      }
      for (std::size_t slot = 0; slot < peers[static_cast<std::size_t>(rank)].size(); ++slot) {
        const auto [peer, transfers] = peers[static_cast<std::size_t>(rank)][slot];
        key.insert(key.end(), {info(rank).peers[slot].send ? 1 : 0, transfers, color[static_cast<std::size_t>(peer)]});
      }
      next[static_cast<std::size_t>(rank)] = intern(signatures, std::move(key));
    }
    const int refined = static_cast<int>(signatures.size());
    color = std::move(next);
    if (refined == colors) break;
    colors = refined;
  }
  if (colors == t.ranks) return;   // nothing alike: replay every rank
  // The lowest rank of each class represents it.
  std::vector<int> first_of(static_cast<std::size_t>(colors), -1);
  rep_of.resize(ranks_count);
  for (int rank = 0; rank < t.ranks; ++rank) {
    int& first = first_of[static_cast<std::size_t>(color[static_cast<std::size_t>(rank)])];
    if (first < 0) first = rank;
    rep_of[static_cast<std::size_t>(rank)] = first;
  }
  live.assign(instances.size(), 0);
  ghosts.assign(instances.size(), {});
  for (std::size_t i = 0; i < instances.size(); ++i)
    for (int m = 0; m < instances[i].members && !live[i]; ++m) live[i] = !ghost(member(instances[i], m).first);
  replayed_members.assign(instances.size(), {});
  for (std::size_t i = 0; i < instances.size(); ++i) {
    if (!live[i]) continue;
    std::vector<std::int32_t> replayed;
    for (int m = 0; m < instances[i].members; ++m) {
      const auto [rank, op] = member(instances[i], m);
      if (!ghost(rank)) replayed.push_back(m);
      if (!ghost(rank) || op < 0) continue;
      ghosts[static_cast<std::size_t>(instance_of(representative(rank), op))].push_back(
          {static_cast<std::int32_t>(i), static_cast<std::int32_t>(m), representative(rank)});
    }
    // Only instances with ghosts need the list: the others resume every member.
    if (static_cast<int>(replayed.size()) < instances[i].members) replayed_members[i] = std::move(replayed);
  }
}

// --- ReplayCore -------------------------------------------------------------------------------

ReplayCore::ReplayCore(const workloads::Trace& trace, const Placement& placement, ReplayPlan& plan)
    : trace_(trace),
      placement_(placement),
      plan_(plan),
      impl_(std::make_unique<Impl>(trace, plan, placement.platform.gpu().sm_count)) {
  schedule_starts_.assign(plan.schedules().size(), 0);
}

ReplayCore::~ReplayCore() = default;

void ReplayCore::run(ReplayBackend& backend, bool fold) {
  Impl& m = *impl_;
  m.backend = &backend;
  m.starts = &schedule_starts_;
  for (const auto& planned : plan_.schedules()) backend.declare(planned->schedule, planned->placement);
  if (fold) m.fold(backend);
  m.number_ops();
  ReplayBackend::Callbacks callbacks;
  // Token 0 starts every rank's CPU; the others wake a parked stream (see advance()).
  callbacks.woken = [&m](ReplayBackend::Token token, Seconds now) {
    m.now = now;
    if (token == 0) {
      for (int rank = 0; rank < m.t.ranks; ++rank)
        if (!m.ghost(rank)) m.push(rank, -1);
    } else {
      m.woken(token);
    }
    m.drain();
  };
  callbacks.member_done = [&m](ReplayBackend::Token token, int member, Seconds now) {
    m.now = now;
    m.member_done(token, member);
    m.drain();
  };
  callbacks.codec_busy = [&m](ReplayBackend::Token token, int member, Seconds begin, Seconds end, Seconds now) {
    m.now = now;
    m.codec_busy(static_cast<int>(token), member, begin, end);
    m.drain();
  };
  backend.wake_at(0, 0);
  backend.run(callbacks);
  for (int rank = 0; rank < trace_.ranks; ++rank)
    if (!m.ghost(rank) && !m.finished(rank)) m.deadlock();
  // Instances only ghosts meet in ran, unreplayed, once each (for the links' bytes).
  for (std::size_t i = 0; i < m.live.size(); ++i)
    if (!m.live[i] && m.instances[i].schedule) ++schedule_starts_[static_cast<std::size_t>(m.instances[i].schedule->id)];
}

Prediction ReplayCore::prediction() const {
  const Impl& m = *impl_;
  Prediction p;
  p.ranks = trace_.ranks;
  p.rank_time.resize(static_cast<std::size_t>(trace_.ranks));
  for (int rank = 0; rank < trace_.ranks; ++rank) {
    p.rank_time[static_cast<std::size_t>(rank)] = m.rank_time(m.representative(rank));
    if (p.rank_time[static_cast<std::size_t>(rank)] > p.iteration_time) {
      p.iteration_time = p.rank_time[static_cast<std::size_t>(rank)];
      p.slowest_rank = rank;
    }
  }
  std::vector<std::tuple<Seconds, Seconds, int>> scratch;
  std::map<int, Breakdown> of_representative;   // folded: each representative's, for its ghosts
  for (int rank = 0; rank < trace_.ranks; ++rank) {
    // A representative is the lowest rank of its class: its ghosts come after it.
    Breakdown own;
    if (!m.ghost(rank)) {
      own = m.breakdown(rank, p.iteration_time, scratch);
      if (!m.rep_of.empty()) of_representative.emplace(rank, own);
    }
    const Breakdown& b = m.ghost(rank) ? of_representative.at(m.representative(rank)) : own;
    p.breakdown.compute += b.compute / trace_.ranks;
    p.breakdown.communication += b.communication / trace_.ranks;
    p.breakdown.exposed_communication += b.exposed_communication / trace_.ranks;
    p.breakdown.idle += b.idle / trace_.ranks;
    for (const auto& [name, time] : b.by_group) {
      GroupTime& mean = p.breakdown.by_group[name];
      mean.communication += time.communication / trace_.ranks;
      mean.exposed += time.exposed / trace_.ranks;
    }
    if (rank == p.slowest_rank) p.slowest_rank_breakdown = b;
  }
  p.critical_path = m.critical_path(p.slowest_rank);
  p.ops_replayed = m.total_ops;   // folded ranks' ops count as their representative replayed them
  return p;
}

Seconds ReplayCore::start(int rank, int op) const {
  return impl_->start[static_cast<std::size_t>(impl_->id(impl_->representative(rank), op))];
}
Seconds ReplayCore::end(int rank, int op) const {
  return impl_->end[static_cast<std::size_t>(impl_->id(impl_->representative(rank), op))];
}

int ReplayCore::replayed_ranks() const {
  if (impl_->rep_of.empty()) return trace_.ranks;
  int count = 0;
  for (int rank = 0; rank < trace_.ranks; ++rank) count += !impl_->ghost(rank);
  return count;
}

int ReplayCore::meeting_count() const { return static_cast<int>(impl_->instances.size()); }

ReplayCore::Meeting ReplayCore::meeting(int instance) const {
  const Instance& in = impl_->instances[static_cast<std::size_t>(instance)];
  Meeting meeting;
  meeting.schedule = in.schedule;
  meeting.begin = in.begin;
  meeting.group = in.group;
  meeting.ordinal = in.ordinal;
  meeting.members = in.members;
  return meeting;
}

std::pair<int, int> ReplayCore::meeting_member(int instance, int member) const {
  return impl_->member(impl_->instances[static_cast<std::size_t>(instance)], member);
}

int ReplayCore::meeting_of(int rank, int op) const { return impl_->instance_of(rank, op); }

}  // namespace stepsim::sim
