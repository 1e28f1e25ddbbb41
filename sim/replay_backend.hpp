#pragma once
/// @file The clock and the communication of a replay: what the engine-independent replay
/// state machine (replay_core) asks of an engine.
///
/// Contract: the backend owns simulated time. The core asks to be woken at a time (`wake_at`)
/// and to start a collective's schedule at a time on given platform GPUs
/// (`start_collective`); the backend calls `woken(token, now)` at that time and
/// `member_done(token, member, now)` when member `member` (an index into the schedule's ranks)
/// has finished its part of the schedule; callbacks may issue further requests. Requests at
/// times before now are bugs (std::logic_error). Callbacks at equal times come in request
/// order, so replays are deterministic. `run` returns when nothing is pending. The analytical
/// backend prices every schedule in isolation (sim::AnalyticalEngine, cached per schedule), so
/// it knows when each member finishes as soon as a schedule starts (`finish_offsets`); the
/// event backend runs all flows of all started schedules in one SimGrid network, where later
/// starts can still change that, so the core learns it from `member_done`. The same holds for
/// when a member's GPU runs the schedule's codec steps (compress / decompress): the analytical
/// backend fixes them at the start (`codec_offsets`), the event backend reports each codec step
/// through `codec_busy` when it becomes ready, which is when its end is known (a codec step
/// lasts its codec_time, models/schedule.hpp).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/schedule.hpp"
#include "sim/engine.hpp"

namespace stepsim::sim {

class ReplayBackend {
 public:
  using Token = std::uint64_t;
  struct Callbacks {
    std::function<void(Token token, Seconds now)> woken;
    std::function<void(Token token, int member, Seconds now)> member_done;
    /// Member `member`'s GPU runs a codec step of the instance over [begin, end). Only from
    /// backends whose codec_offsets is null; may be empty (then not called). Called at a time
    /// now <= end, before that member's member_done and before any other callback at a time
    /// after begin; of the callbacks at one time these come first. So a kernel the step
    /// overlaps (it ends after begin) is never settled without it.
    std::function<void(Token token, int member, Seconds begin, Seconds end, Seconds now)> codec_busy;
  };
  virtual ~ReplayBackend() = default;

  /// @brief Every schedule that may be started, before `run`: the event backend builds its
  /// network (routes of every step) from them. `schedule` and `placement` outlive the backend.
  virtual void declare(const models::Schedule& schedule, const Placement& placement) = 0;
  virtual void wake_at(Seconds at, Token token) = 0;
  /// @brief Starts a declared schedule at `at` (its launch_latency counts from `at`).
  virtual void start_collective(Seconds at, const models::Schedule& schedule, Token token) = 0;
  /// @brief start_collective where only `members` (schedule member indices, increasing) need
  /// their member_done; the others' may be left out (a folded replay does not replay them).
  virtual void start_collective_for(Seconds at, const models::Schedule& schedule, Token token,
                                    const std::vector<std::int32_t>& members) {
    static_cast<void>(members);
    start_collective(at, schedule, token);
  }
  /// @brief Per schedule member, when it finishes after a start of the declared `schedule`,
  /// counted from that start, where the backend fixes it at the start whatever else runs;
  /// nullptr where it does not (the replay then learns each end from `member_done`). The
  /// replay uses it to know early how long a collective holds SMs that kernels then lack.
  virtual const std::vector<Seconds>* finish_offsets(const models::Schedule& schedule) {
    static_cast<void>(schedule);
    return nullptr;
  }
  /// @brief Per schedule member, the intervals, counted from a start of the declared
  /// `schedule`, in which its GPU runs the schedule's codec steps (time order, merged), where
  /// the backend fixes them at the start; nullptr where it reports them through
  /// Callbacks::codec_busy instead. Only asked for schedules with codec steps.
  virtual const std::vector<std::vector<BusyInterval>>* codec_offsets(const models::Schedule& schedule) {
    static_cast<void>(schedule);
    return nullptr;
  }
  virtual void run(const Callbacks& callbacks) = 0;
};

/// @brief "analytical" or "event" (ConfigError naming --engine otherwise).
std::unique_ptr<ReplayBackend> make_replay_backend(const std::string& engine);

}  // namespace stepsim::sim
