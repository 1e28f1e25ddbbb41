#include "sim/analytical.hpp"

#include <algorithm>
#include <cmath>

#include "sim/prepared_schedule.hpp"

namespace stepsim::sim {
namespace {

/// Finish times closer than this (relative to the time reached) count as equal when looking
/// for a uniform advance: a few hundred ulps, far below any modelled effect, but above the
/// rounding noise of sums of unequal step durations.
constexpr double kUniformTolerance = 1e-13;

/// @brief Durations of one round's steps (the same for every repetition of the round): each
/// directed link's bandwidth is split evenly among the round's steps that cross it.
std::vector<Seconds> step_durations(const PreparedSchedule& prepared, const PreparedRound& round,
                                    const std::vector<BytesPerSecond>& link_bandwidth,
                                    const std::vector<char>& half_duplex,
                                    std::vector<int>& crossing) {
  // A half-duplex link has one capacity for both directions, so both count in one slot.
  auto slot = [&](const platforms::Hop& hop) {
    return 2 * hop.link + (hop.forward || half_duplex[hop.link] ? 0 : 1);
  };
  for (const PreparedStep& step : round.steps)
    if (!step.codec)
      for (const platforms::Hop& hop : step.route->hops) ++crossing[slot(hop)];

  const models::Protocol& proto = prepared.protocol();
  std::vector<Seconds> durations;
  durations.reserve(round.steps.size());
  for (const PreparedStep& step : round.steps) {
    // A codec step occupies its GPU for a time fixed at lowering, no link (schedule.hpp).
    if (step.codec) {
      durations.push_back(step.codec_time);
      continue;
    }
    BytesPerSecond share = link_bandwidth[step.route->hops.front().link];
    for (const platforms::Hop& hop : step.route->hops)
      share = std::min(share, link_bandwidth[hop.link] / crossing[slot(hop)]);
    const BytesPerSecond rate = std::min(proto.efficiency * share, proto.per_step_bandwidth_cap);
    durations.push_back(prepared.step_latency(step) + step.wire_bytes / rate);
  }
  for (const PreparedStep& step : round.steps)
    if (!step.codec)
      for (const platforms::Hop& hop : step.route->hops) crossing[slot(hop)] = 0;
  return durations;
}

/// @brief The (endpoint, channel) pairs a round touches, each once, in first-seen order.
std::vector<int> involved_pairs(const PreparedRound& round, std::vector<char>& seen) {
  std::vector<int> pairs;
  for (const PreparedStep& step : round.steps)
    for (int pair : {step.src_pair, step.dst_pair})
      if (!seen[pair]) {
        seen[pair] = 1;
        pairs.push_back(pair);
      }
  for (int pair : pairs) seen[pair] = 0;
  return pairs;
}

/// @brief Appends the codec steps of one repetition of `round` (finishing at `finish`, plus
/// `shift`) to their ranks' busy intervals.
void record_codec(const PreparedRound& round, const std::vector<Seconds>& durations,
                  const std::vector<Seconds>& finish, Seconds shift,
                  std::vector<std::vector<BusyInterval>>& codec_busy) {
  for (std::size_t s = 0; s < round.steps.size(); ++s) {
    const PreparedStep& step = round.steps[s];
    if (!step.codec || durations[s] <= 0) continue;
    codec_busy[step.src].push_back({finish[s] - durations[s] + shift, finish[s] + shift});
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

/// @brief Runs every repetition of `round`, advancing `ready` (per pair: when its last step
/// so far finished), and extrapolates once the advance per repetition is uniform. With
/// `codec_busy`, appends each codec step's [start, finish) to its rank's list (unmerged).
void run_round(const PreparedRound& round, const std::vector<Seconds>& durations,
               const std::vector<int>& pairs, std::vector<Seconds>& ready,
               std::vector<std::vector<BusyInterval>>* codec_busy) {
  std::vector<Seconds> finish(round.steps.size());
  std::vector<Seconds> previous(pairs.size());
  for (std::size_t k = 0; k < pairs.size(); ++k) previous[k] = ready[pairs[k]];
  bool last_uniform = false;
  Seconds last_delta = 0;

  for (int rep = 0; rep < round.repeat; ++rep) {
    // Every start reads the ready times of earlier rounds only, so all starts come first.
    for (std::size_t s = 0; s < round.steps.size(); ++s)
      finish[s] = ready[round.steps[s].src_pair] + durations[s];
    if (codec_busy) record_codec(round, durations, finish, 0, *codec_busy);
    for (std::size_t s = 0; s < round.steps.size(); ++s) {
      const PreparedStep& step = round.steps[s];
      ready[step.src_pair] = std::max(ready[step.src_pair], finish[s]);
      ready[step.dst_pair] = std::max(ready[step.dst_pair], finish[s]);
    }
    if (rep + 1 == round.repeat) break;

    Seconds low = INFINITY, high = -INFINITY, reached = 0;
    for (std::size_t k = 0; k < pairs.size(); ++k) {
      const Seconds delta = ready[pairs[k]] - previous[k];
      low = std::min(low, delta);
      high = std::max(high, delta);
      reached = std::max(reached, ready[pairs[k]]);
      previous[k] = ready[pairs[k]];
    }
    const Seconds tolerance = kUniformTolerance * reached;
    const bool uniform = high - low <= tolerance;
    if (uniform && last_uniform && std::abs(high - last_delta) <= tolerance) {
      const double remaining = round.repeat - 1 - rep;
      for (int pair : pairs) ready[pair] += remaining * high;
      // The extrapolated repetitions run the same steps, each `high` later than the one before.
      if (codec_busy)
        for (int k = 1; k <= round.repeat - 1 - rep; ++k) record_codec(round, durations, finish, k * high, *codec_busy);
      break;
    }
    last_uniform = uniform;
    last_delta = high;
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
  std::vector<char> seen(prepared.pairs(), 0);

  std::vector<Seconds> ready(prepared.pairs(), prepared.launch_latency());
  for (const PreparedRound& round : prepared.rounds()) {
    if (round.steps.empty()) continue;
    run_round(round, step_durations(prepared, round, link_bandwidth, half_duplex, crossing),
              involved_pairs(round, seen), ready, codec_busy);
  }

  CollectiveResult result;
  result.time = *std::max_element(ready.begin(), ready.end());
  result.rank_finish.assign(prepared.ranks(), prepared.launch_latency());
  for (int pair = 0; pair < prepared.ranks() * prepared.channels(); ++pair) {
    Seconds& finish = result.rank_finish[pair / prepared.channels()];
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
