#pragma once
/// @file The engine-independent replay: the state machine that executes a trace's model on a
/// ReplayBackend (ReplayCore), with the prices of sim/replay_plan.hpp. Internal to sim/
/// (replay.cpp, timeline.cpp and their tests).
///
/// Contract: ReplayCore executes exactly the model of workloads/trace.hpp on a trace that
/// passed workloads::validate (indices in range); it still detects what makes a valid-looking
/// trace unable to finish (a member that never reaches a collective, a recv without a send,
/// cycles through collectives, p2p and events) and throws ConfigError naming the blocked ranks
/// and ops instead of hanging. Times are those the backend reports for communication; all
/// else is max-plus arithmetic on them and, for compute under SM holds, piecewise rates, so the
/// same trace and backend give the same result bit for bit.
///
/// How it runs. Everything is computed eagerly, in dataflow order, as far as it is known: a
/// rank's CPU issues ops until a `sync` whose target has not finished, a stream runs its
/// issued ops until one waits on something unfinished (a collective or send/recv in progress,
/// a `wait` whose record has not fired) or is a kernel whose end is not final yet (below).
/// Communication goes through the backend: when the last member of a collective (or the second
/// side of a send/recv) reaches it, the core starts its schedule at that member's arrival time,
/// and `member_done` resumes each member's stream. Every time computed in a callback at `now`
/// is >= now, so the backend's no-past-requests rule holds.
///
/// SM interference (workloads/trace.hpp) makes a kernel's end depend on when collectives start
/// and end on its rank. A started collective adds a hold to each member's GPU, whose end is
/// known at the start where the backend fixes it then (ReplayBackend::finish_offsets) and
/// otherwise at `member_done`; a compressed collective also adds a whole-GPU hold per codec
/// step, known at the start (ReplayBackend::codec_offsets) or reported by the backend before
/// any callback after the step's begin (Callbacks::codec_busy). Such a step lies inside the
/// member's own hold, whose end is unknown until the member is done, so the rule below never
/// settles a kernel that a step reported later overlaps. A kernel (or device copy) is timed piecewise over its rank's
/// known holds and is final when nothing unknown can change that: it ends by the backend's now
/// (a start is found at a callback no later than it, so every start before now is known), or
/// no hold of unknown end overlaps it and it ends by the rank's horizon, a lower bound on the
/// start of any collective of the rank not started yet (the latest arrival so far of one a
/// stream waits in; for the others, where the rank's other streams can reach their next
/// collective, following their waits on records of other streams; what waits on the kernel's
/// own stream comes after the kernel). Otherwise the kernel is parked: its stream holds, it is
/// re-timed when its rank's holds or horizon change, and a wake at its tentative end settles it
/// at the latest (a wake made stale by re-timing carries an old version and is ignored). A
/// kernel that overlaps no hold ends at begin + duration to the bit, as without the model.
///
/// Details the trace model leaves open, as implemented: a GPU op is issued when its launch
/// call returns (CPU time + cpu_launch); `kernel_gap` counts from the end of the stream's
/// previous op of any kind and does not apply to a stream's first op; a collective or
/// send/recv occupies its stream from when the stream reached it (waiting for late peers
/// included) until the backend reports this member done; a collective on a one-rank subgroup
/// holds no SMs and, in place, completes when reached; out of place it takes NCCL's local copy
/// of its bytes (ReplayPlan::one_rank_copy), not slowed by SM holds;
/// `sync` on an event with no record issued before it returns at once (cudaEventSynchronize on
/// an unrecorded event); a GPU model without an SM count (sm_count <= 1) has no interference.
#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "models/compute/kernel.hpp"
#include "sim/engine.hpp"
#include "sim/prediction.hpp"
#include "sim/replay_backend.hpp"
#include "sim/replay_plan.hpp"
#include "workloads/trace.hpp"

namespace stepsim::sim {

/// @brief The replay state machine (see the file comment).
class ReplayCore {
 public:
  /// @brief Sets up the instance tables (which ops of which ranks meet in which collective or
  /// send/recv) and asks `plan` for every instance's schedule. Throws ConfigError for
  /// matched collectives that differ (as CollectiveCall) or matched send/recv of different sizes.
  ReplayCore(const workloads::Trace& trace, const Placement& placement, ReplayPlan& plan);
  ~ReplayCore();
  ReplayCore(const ReplayCore&) = delete;
  ReplayCore& operator=(const ReplayCore&) = delete;

  /// @brief Declares the plan's schedules to `backend` and runs the iteration to its end.
  /// Throws ConfigError listing the blocked ranks and ops when it cannot finish. With `fold`,
  /// ranks that provably replay alike (the backend fixing every finish at the start) run once,
  /// as the lowest of them, and the others report its times: every per-rank figure is the same
  /// as without, the meetings of folded ranks are not replayed (no timeline then).
  void run(ReplayBackend& backend, bool fold = false);

  /// @brief After run: iteration and rank times, breakdowns, critical path and ops replayed
  /// (links, engine and notes are the caller's).
  Prediction prediction() const;
  /// @brief After run: the ranks actually replayed (the representatives when folded).
  int replayed_ranks() const;
  /// @brief After run: started instances per PlannedSchedule::id (for link usage).
  const std::vector<std::int64_t>& schedule_starts() const { return schedule_starts_; }

  // Read access for the timeline (after run).
  const workloads::Trace& trace() const { return trace_; }
  const Placement& placement() const { return placement_; }
  const ReplayPlan& plan() const { return plan_; }
  /// @brief When op `op` of `rank` started on its stream (collective, send, recv: when the
  /// stream reached it) and finished; cpu and sync ops: their CPU interval.
  Seconds start(int rank, int op) const;
  Seconds end(int rank, int op) const;
  /// @brief Calls f(op, begin, end) for every op in `rank`'s CPU order with the CPU interval it
  /// takes: launch calls of GPU ops, cpu ops, syncs (blocked time), zero for record / wait.
  template <class F>
  void for_each_cpu_interval(int rank, F&& f) const;

  /// @brief A collective or send/recv instance as the timeline shows it.
  struct Meeting {
    const PlannedSchedule* schedule = nullptr;   ///< null for a one-rank collective
    Seconds begin = 0;            ///< when the schedule started (last member's arrival)
    int group = -1;               ///< Trace::groups index, -1 for send/recv
    int ordinal = 0;              ///< k: the k-th on its group (send/recv: on its rank pair)
    int members = 0;
  };
  int meeting_count() const;
  Meeting meeting(int instance) const;
  /// @brief (rank, op index) of schedule member `member` of an instance.
  std::pair<int, int> meeting_member(int instance, int member) const;
  /// @brief Instance of a collective / send / recv op of `rank`.
  int meeting_of(int rank, int op) const;

 private:
  struct Impl;
  const workloads::Trace& trace_;
  const Placement& placement_;
  ReplayPlan& plan_;
  std::unique_ptr<Impl> impl_;
  std::vector<std::int64_t> schedule_starts_;
};

template <class F>
void ReplayCore::for_each_cpu_interval(int rank, F&& f) const {
  const workloads::Program& program = trace_.program(rank);
  // Recomputed from the stored cpu and sync intervals with the same additions the run made,
  // so the launch intervals are exactly those the run saw.
  Seconds cpu = 0;
  for (int i = 0; i < static_cast<int>(program.ops.size()); ++i) {
    switch (program.ops[static_cast<std::size_t>(i)].kind) {
      case workloads::OpKind::cpu:
      case workloads::OpKind::sync:
        f(i, start(rank, i), end(rank, i));
        cpu = end(rank, i);
        break;
      case workloads::OpKind::record:
      case workloads::OpKind::wait:
        f(i, cpu, cpu);
        break;
      default: {
        const Seconds begin = cpu;
        cpu += trace_.launch.cpu_launch;
        f(i, begin, cpu);
      }
    }
  }
}

}  // namespace stepsim::sim
