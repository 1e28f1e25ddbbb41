#include "sim/analytical.hpp"

#include <algorithm>

#include "models/schedule_clock.hpp"
#include "sim/prepared_schedule.hpp"

namespace stepsim::sim {
namespace {

/// @brief What one round's steps cost (the same for every repetition of the round): each
/// directed link's bandwidth is split evenly among the round's steps that cross it; a
/// transfer occupies its sender for the protocol's handover and its bytes, and lands the
/// route's latency later.
std::vector<models::TimedStep> step_costs(const PreparedSchedule& prepared, const PreparedRound& round,
                                          const std::vector<BytesPerSecond>& link_bandwidth,
                                          const std::vector<char>& half_duplex, std::vector<int>& crossing) {
  // A half-duplex link has one capacity for both directions, so both count in one slot.
  auto slot = [&](const platforms::Hop& hop) {
    return 2 * hop.link + (hop.forward || half_duplex[hop.link] ? 0 : 1);
  };
  for (const PreparedStep& step : round.steps)
    if (!step.codec)
      for (const platforms::Hop& hop : step.route->hops) ++crossing[slot(hop)];

  const models::Protocol& proto = prepared.protocol();
  std::vector<models::TimedStep> costs;
  costs.reserve(round.steps.size());
  for (const PreparedStep& step : round.steps) {
    // A codec step occupies its GPU for a time fixed at lowering, no link (schedule.hpp).
    if (step.codec) {
      costs.push_back({step.src_pair, step.dst_pair, step.codec_time, 0});
      continue;
    }
    BytesPerSecond share = link_bandwidth[step.route->hops.front().link];
    for (const platforms::Hop& hop : step.route->hops)
      share = std::min(share, link_bandwidth[hop.link] / crossing[slot(hop)]);
    const BytesPerSecond rate = std::min(proto.efficiency * share, proto.per_step_bandwidth_cap);
    costs.push_back({step.src_pair, step.dst_pair, proto.step_latency + step.wire_bytes / rate, step.route->latency});
  }
  for (const PreparedStep& step : round.steps)
    if (!step.codec)
      for (const platforms::Hop& hop : step.route->hops) crossing[slot(hop)] = 0;
  return costs;
}

/// @brief Appends the codec steps of one repetition of `round` (started at `starts`, plus
/// `shift`) to their ranks' busy intervals.
void record_codec(const PreparedRound& round, const std::vector<Seconds>& starts, Seconds shift,
                  std::vector<std::vector<BusyInterval>>& codec_busy) {
  for (std::size_t s = 0; s < round.steps.size(); ++s) {
    const PreparedStep& step = round.steps[s];
    if (!step.codec || step.codec_time <= 0) continue;
    codec_busy[step.src].push_back({starts[s] + shift, starts[s] + step.codec_time + shift});
  }
}

/// @brief Sorts each rank's intervals and merges those that touch or overlap.
void merge_intervals(std::vector<std::vector<BusyInterval>>& codec_busy) {
  for (std::vector<BusyInterval>& list : codec_busy) {
    std::sort(list.begin(), list.end(),
              [](const BusyInterval& a, const BusyInterval& b) { return a.begin < b.begin; });
    std::size_t kept = 0;
    for (const BusyInterval& interval : list) {
      if (kept > 0 && interval.begin <= list[kept - 1].end) {
        list[kept - 1].end = std::max(list[kept - 1].end, interval.end);
      } else {
        list[kept++] = interval;
      }
    }
    list.resize(kept);
  }
}

/// @brief Prices the schedule (see analytical.hpp), collecting codec intervals when asked.
CollectiveResult price(const PreparedSchedule& prepared, std::vector<std::vector<BusyInterval>>* codec_busy) {
  const platforms::Platform& platform = prepared.platform();

  std::vector<BytesPerSecond> link_bandwidth(platform.link_count());
  std::vector<char> half_duplex(platform.link_count());
  for (int id = 0; id < platform.link_count(); ++id) {
    const platforms::Link link = platform.link(id);
    link_bandwidth[id] = link_capacity(link, prepared.crosses_both_ways(id));
    half_duplex[id] = link.half_duplex;
  }
  std::vector<int> crossing(2 * link_bandwidth.size(), 0);

  models::ScheduleClock clock(prepared.pairs(), prepared.protocol().slots_in_flight, prepared.launch_latency());
  for (const PreparedRound& round : prepared.rounds()) {
    if (round.steps.empty()) continue;
    const models::ScheduleClock::StartObserver record = [&](const std::vector<Seconds>& starts, Seconds shift) {
      record_codec(round, starts, shift, *codec_busy);
    };
    clock.run_round(step_costs(prepared, round, link_bandwidth, half_duplex, crossing), round.repeat,
                    codec_busy ? &record : nullptr);
  }
  const std::vector<Seconds>& ready = clock.ready();

  CollectiveResult result;
  result.time = *std::max_element(ready.begin(), ready.end());
  result.rank_finish.assign(prepared.ranks(), prepared.launch_latency());
  for (int pair = 0; pair < prepared.pairs(); ++pair) {
    const int endpoint = prepared.schedule().endpoint_of_pair(pair);
    if (endpoint >= prepared.ranks()) break;   // switches come after the ranks
    Seconds& finish = result.rank_finish[endpoint];
    finish = std::max(finish, ready[pair]);
  }
  result.link_usage = prepared.link_usage();
  return result;
}

}  // namespace

CollectiveResult AnalyticalEngine::run(const models::Schedule& schedule, const Placement& placement) {
  return price(PreparedSchedule(schedule, placement), nullptr);
}

CollectiveResult AnalyticalEngine::run(const models::Schedule& schedule, const Placement& placement,
                                       std::vector<std::vector<BusyInterval>>& codec_busy) {
  const PreparedSchedule prepared(schedule, placement);
  codec_busy.assign(static_cast<std::size_t>(prepared.ranks()), {});
  // Only schedules that compress have codec steps (models/schedule.hpp).
  CollectiveResult result = price(prepared, schedule.compressed_piece_bytes > 0 ? &codec_busy : nullptr);
  merge_intervals(codec_busy);
  return result;
}

}  // namespace stepsim::sim
