#include "sim/replay_event.hpp"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "sim/platform_network.hpp"
#include "sim/prepared_schedule.hpp"
#include "sim/schedule_flows.hpp"
#include "sim/simgrid_network.hpp"

namespace stepsim::sim {
namespace {

/// @brief Every started collective's steps as flows of one SimGrid network (PlatformNetwork),
/// each instance issuing its own by the dependency rule (ScheduleFlows), so collectives that
/// overlap in time share links max-min fairly.
///
/// Ordering: every request (wake_at, start_collective) gets a sequence number. What falls due
/// at one instant (wakes, members done) is collected while SimGrid delivers that instant's
/// flows and timers, then handed to the caller sorted by (request, member) once the instant
/// has settled, so equal-time callbacks come in request order whatever SimGrid's order. Codec
/// steps are reported (codec_busy) at the first settled instant after they were issued (at
/// their ready time, or earlier for those a start requested from a callback issues at once),
/// which comes no later than their end (a pending completion); at each instant they come
/// before everything else, as the contract asks.
class EventReplayBackend : public ReplayBackend {
 public:
  void declare(const models::Schedule& schedule, const Placement& placement) override {
    if (network_) throw std::logic_error("event replay: declare after run");
    if (const auto known = index_.find(&schedule); known != index_.end()) {
      if (declared_[known->second].allocation->gpus != placement.allocation.gpus)
        throw std::logic_error(fmt::format("event replay: schedule '{}' declared on two allocations",
                                           schedule.algorithm));
      return;
    }
    // Validation first: a ConfigError leaves nothing half-declared.
    auto prepared = std::make_unique<PreparedSchedule>(schedule, placement);
    index_.emplace(&schedule, declared_.size());
    declared_.push_back({std::move(prepared), &placement.allocation, nullptr});
  }

  void wake_at(Seconds at, Token token) override {
    check_time(at, "wake_at");
    const Request request{at, token, -1, next_seq_++};
    if (network_)
      issue(request);
    else
      before_run_.push_back(request);
  }

  void start_collective(Seconds at, const models::Schedule& schedule, Token token) override {
    check_time(at, "start_collective");
    const auto entry = index_.find(&schedule);
    if (entry == index_.end())
      throw std::logic_error(fmt::format("event replay: schedule '{}' started but never declared",
                                         schedule.algorithm));
    const Request request{at, token, static_cast<int>(entry->second), next_seq_++};
    if (network_)
      issue(request);
    else
      before_run_.push_back(request);
  }

  void run(const Callbacks& callbacks) override {
    if (network_) throw std::logic_error("event replay: run called twice");
    std::vector<const PreparedSchedule*> schedules;
    for (const Declared& declared : declared_) schedules.push_back(declared.prepared.get());
    network_ = std::make_unique<PlatformNetwork>(schedules);
    for (std::size_t i = 0; i < declared_.size(); ++i)
      declared_[i].flows = std::make_unique<ScheduleFlows>(*declared_[i].prepared, network_->step_hosts(i));
    for (const Request& request : before_run_) issue(request);
    before_run_.clear();

    SimgridNetwork::Callbacks network_callbacks;
    network_callbacks.flow_done = [this](std::uint64_t tag, Seconds now) { flow_done(tag, now); };
    network_callbacks.timer = [this](std::uint64_t tag, Seconds) { timer(tag); };
    network_callbacks.settled = [this, &callbacks](Seconds now) { dispatch(callbacks, now); };
    network_->network().run(network_callbacks);

    if (!running_.empty()) {
      std::string blocked;
      for (const auto& [base, collective] : running_)
        blocked += fmt::format("{}'{}' (token {})", blocked.empty() ? "" : ", ",
                               collective.instance.flows().prepared().schedule().algorithm, collective.token);
      throw std::logic_error("event replay: started collectives never completed: " + blocked);
    }
  }

 private:
  struct Declared {
    std::unique_ptr<PreparedSchedule> prepared;
    const platforms::Allocation* allocation = nullptr;
    std::unique_ptr<ScheduleFlows> flows;   ///< once the network exists (run)
  };
  /// A wake (collective < 0) or the start of declared_[collective].
  struct Request {
    Seconds at = 0;
    Token token = 0;
    int collective = -1;
    std::uint64_t seq = 0;
  };
  struct Running {
    Running(const ScheduleFlows& flows, SimgridNetwork& network, std::uint64_t tag_base, Seconds start,
            Token token, std::uint64_t seq)
        : instance(flows, network, tag_base, start), token(token), seq(seq) {}
    ScheduleFlows::Instance instance;
    Token token;
    std::uint64_t seq;
    int stepless_left = 0;   ///< members with no step whose done timer has not fired
  };
  /// What a network timer stands for: a wake (member < 0) or a stepless member's end.
  struct Timer {
    std::uint64_t seq = 0;
    Token token = 0;
    int member = -1;
    std::uint64_t running = 0;   ///< tag base of the collective, for a member
  };
  struct Due {
    std::uint64_t seq = 0;
    int member = -1;   ///< -1: a wake
    Token token = 0;
    bool codec = false;          ///< a codec step of `member` over [begin, end)
    Seconds begin = 0, end = 0;
  };

  void check_time(Seconds at, const char* what) const {
    if (!(at >= now_))
      throw std::logic_error(fmt::format("event replay: {} at {} s, before now ({} s)", what, at, now_));
  }

  void issue(const Request& request) {
    SimgridNetwork& network = network_->network();
    if (request.collective < 0) {
      timers_.emplace(next_timer_, Timer{request.seq, request.token, -1, 0});
      network.start_timer(request.at, next_timer_++);
      return;
    }
    const ScheduleFlows& flows = *declared_[request.collective].flows;
    const std::uint64_t base = next_tag_;
    next_tag_ += flows.tag_count();
    Running& collective =
        running_.try_emplace(base, flows, network, base, request.at, request.token, request.seq).first->second;
    // Contract: a member with nothing to send or receive is done once the collective launched.
    const PreparedSchedule& prepared = flows.prepared();
    for (int member = 0; member < prepared.ranks(); ++member) {
      if (flows.endpoint_steps(member) != 0) continue;
      ++collective.stepless_left;
      timers_.emplace(next_timer_, Timer{request.seq, request.token, member, base});
      network.start_timer(request.at + prepared.launch_latency(), next_timer_++);
    }
    const std::uint64_t seq = request.seq;
    const Token token = request.token;
    collective.instance.on_codec([this, seq, token](int endpoint, Seconds begin, Seconds end) {
      if (end > begin) due_.push_back({seq, endpoint, token, true, begin, end});
    });
    collective.instance.start();
  }

  void flow_done(std::uint64_t tag, Seconds now) {
    const auto entry = std::prev(running_.upper_bound(tag));
    Running& collective = entry->second;
    const int ranks = collective.instance.flows().prepared().ranks();
    collective.instance.flow_done(tag, now, [&](int endpoint) {
      if (endpoint < ranks) due_.push_back({collective.seq, endpoint, collective.token});
    });
    retire(entry);
  }

  void timer(std::uint64_t tag) {
    const auto node = timers_.extract(tag);
    const Timer& timer = node.mapped();
    due_.push_back({timer.seq, timer.member, timer.token});
    if (timer.member < 0) return;
    const auto entry = running_.find(timer.running);
    --entry->second.stepless_left;
    retire(entry);
  }

  void retire(std::map<std::uint64_t, Running>::iterator entry) {
    if (entry->second.instance.finished() && entry->second.stepless_left == 0) running_.erase(entry);
  }

  void dispatch(const Callbacks& callbacks, Seconds now) {
    std::vector<Due> due;
    due.swap(due_);
    // Stable: a member's codec steps keep the order in which they were issued.
    std::stable_sort(due.begin(), due.end(), [](const Due& a, const Due& b) {
      if (a.codec != b.codec) return a.codec;
      return a.seq != b.seq ? a.seq < b.seq : a.member < b.member;
    });
    now_ = now;
    for (const Due& d : due) {
      if (d.codec) {
        if (callbacks.codec_busy) callbacks.codec_busy(d.token, d.member, d.begin, d.end, now);
      } else if (d.member < 0)
        callbacks.woken(d.token, now);
      else
        callbacks.member_done(d.token, d.member, now);
    }
  }

  std::vector<Declared> declared_;
  std::unordered_map<const models::Schedule*, std::size_t> index_;
  std::vector<Request> before_run_;
  std::unique_ptr<PlatformNetwork> network_;
  std::map<std::uint64_t, Running> running_;   ///< by tag base: a flow's tag finds its collective
  std::unordered_map<std::uint64_t, Timer> timers_;
  std::vector<Due> due_;
  Seconds now_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t next_tag_ = 0;
  std::uint64_t next_timer_ = 0;
};

}  // namespace

std::unique_ptr<ReplayBackend> make_event_replay_backend() { return std::make_unique<EventReplayBackend>(); }

}  // namespace stepsim::sim
