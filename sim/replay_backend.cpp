#include "sim/replay_backend.hpp"

#include <queue>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "platforms/config_error.hpp"
#include "sim/analytical.hpp"
#include "sim/replay_event.hpp"

namespace stepsim::sim {
namespace {

/// @brief The analytical backend: a priority queue of callbacks ordered by (time, request
/// order). Each schedule is priced once, in isolation, by AnalyticalEngine when first needed;
/// an instance started at `at` finishes member m at `at + rank_finish[m]`, whatever else runs
/// at the same time (no contention between collectives), which is what `finish_offsets` says,
/// and runs its codec steps at fixed offsets too (`codec_offsets`).
class AnalyticalReplayBackend : public ReplayBackend {
 public:
  void declare(const models::Schedule& schedule, const Placement& placement) override {
    schedules_.try_emplace(&schedule, Priced{&placement, {}, {}, false});
  }

  void wake_at(Seconds at, Token token) override { push(at, token, -1); }

  void start_collective(Seconds at, const models::Schedule& schedule, Token token) override {
    const std::vector<Seconds>& finish = rank_finish(schedule);
    for (std::size_t m = 0; m < finish.size(); ++m) push(at + finish[m], token, static_cast<int>(m));
  }

  void start_collective_for(Seconds at, const models::Schedule& schedule, Token token,
                            const std::vector<std::int32_t>& members) override {
    const std::vector<Seconds>& finish = rank_finish(schedule);
    for (const std::int32_t m : members) push(at + finish[static_cast<std::size_t>(m)], token, m);
  }

  const std::vector<Seconds>* finish_offsets(const models::Schedule& schedule) override {
    return &rank_finish(schedule);
  }

  const std::vector<std::vector<BusyInterval>>* codec_offsets(const models::Schedule& schedule) override {
    return &priced(schedule).codec_busy;
  }

  void run(const Callbacks& callbacks) override {
    while (!queue_.empty()) {
      const Event event = queue_.top();
      queue_.pop();
      now_ = event.time;
      if (event.member < 0) callbacks.woken(event.token, now_);
      else callbacks.member_done(event.token, event.member, now_);
    }
  }

 private:
  struct Priced {
    const Placement* placement = nullptr;
    std::vector<Seconds> rank_finish;
    std::vector<std::vector<BusyInterval>> codec_busy;   ///< per member, from the start
    bool done = false;
  };
  struct Event {
    Seconds time;
    std::uint64_t sequence;   ///< request order: breaks ties, so equal times come in request order
    Token token;
    int member;               ///< -1: a wake-up
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.time != b.time ? a.time > b.time : a.sequence > b.sequence;
    }
  };

  /// Member finish times of `schedule` from its start, priced on first use.
  const std::vector<Seconds>& rank_finish(const models::Schedule& schedule) { return priced(schedule).rank_finish; }

  const Priced& priced(const models::Schedule& schedule) {
    const auto it = schedules_.find(&schedule);
    if (it == schedules_.end()) throw std::logic_error("replay backend: a schedule that was not declared");
    Priced& entry = it->second;
    if (!entry.done) {
      entry.rank_finish = AnalyticalEngine().run(schedule, *entry.placement, entry.codec_busy).rank_finish;
      entry.done = true;
    }
    return entry;
  }

  void push(Seconds at, Token token, int member) {
    if (at < now_) throw std::logic_error("replay backend: request for a time before now");
    queue_.push({at, sequence_++, token, member});
  }

  std::unordered_map<const models::Schedule*, Priced> schedules_;
  std::priority_queue<Event, std::vector<Event>, Later> queue_;
  std::uint64_t sequence_ = 0;
  Seconds now_ = 0;
};

}  // namespace

std::unique_ptr<ReplayBackend> make_replay_backend(const std::string& engine) {
  if (engine == "analytical") return std::make_unique<AnalyticalReplayBackend>();
  if (engine == "event") return make_event_replay_backend();
  throw ConfigError("--engine", "unknown engine '" + engine + "'", "use analytical or event");
}

}  // namespace stepsim::sim
