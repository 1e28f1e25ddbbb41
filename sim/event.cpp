#include "sim/event.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <unordered_set>

#include "sim/child_process.hpp"
#include "sim/prepared_schedule.hpp"
#include "sim/simgrid_network.hpp"

namespace stepsim::sim {
namespace {

/// @brief One expanded schedule run as SimGrid flows, steps created lazily as they become
/// ready (a 1024-rank ring allreduce is ~2 M steps; only those in flight exist at a time).
///
/// Dependencies are tracked per (endpoint, channel) pair. A pair's *involvements* are the
/// expanded rounds it sends or receives in, numbered 0, 1, ... in round order. A pair issues
/// the sends of involvement j exactly when all its involvements < j have finished, which is
/// the contract's rule (a step starts when its source's steps of earlier rounds finished).
///
/// Cost mapping (equivalent to the analytical formula when nothing is shared): the flow of a
/// step starts `step_latency + route.latency` after the step is ready and then moves
/// `wire_bytes` through the route's links (latency as a delayed start rather than SimGrid
/// link latency, which would skew max-min shares by 1 / latency; see simgrid_network.hpp). Protocol efficiency scales every link's capacity
/// (max-min shares scale linearly with capacities, so this equals each step using that
/// fraction of its share); the per-step cap is a FATPIPE link on every route, which bounds
/// each flow on its own without making flows share it.
class EventSimulation {
 public:
  explicit EventSimulation(const PreparedSchedule& prepared)
      : prepared_(prepared), network_(byte_scale(prepared)) {
    build_network();
    index_involvements();
  }

  /// @brief Runs to the end; returns, per endpoint, when its last step finished.
  std::vector<Seconds> run() {
    finish_.assign(prepared_.endpoints(), prepared_.launch_latency());
    for (int pair = 0; pair < prepared_.pairs(); ++pair) advance(pair, prepared_.launch_latency());
    network_.run([this](std::uint64_t tag, Seconds now) { finished(tag, now); });
    if (finished_steps_ != total_steps_)
      throw std::logic_error("event engine: " + std::to_string(total_steps_ - finished_steps_) +
                             " steps never became ready");
    return finish_;
  }

 private:
  struct Involvement {
    int round = 0;
    std::int64_t first = 0;      ///< involvement index of the round's first repetition
    int count = 0;               ///< steps of one repetition that send or receive here
    int send_begin = 0, send_end = 0;   ///< this pair's sends: range of rounds_[round].send_order
  };
  /// The pair's earliest unfinished involvement, `base`, is repetition `rep` of
  /// involvements[cursor]; later ones may already have finished steps (receives).
  struct PairState {
    std::vector<Involvement> involvements;
    std::size_t cursor = 0;
    int rep = 0;
    bool sends_issued = false;   ///< sends of `base` issued
    std::deque<int> done;        ///< finished steps of involvements base, base + 1, ...
  };
  struct RoundIndex {
    std::vector<int> send_order;            ///< step indices grouped by source pair
    std::vector<std::int64_t> src_first;    ///< per step: Involvement::first at its source
    std::vector<std::int64_t> dst_first;
    std::uint64_t first_tag = 0;            ///< tag of (repetition 0, step 0)
  };

  /// SimGrid payloads are integers: scale bytes so the largest step stays below 2^52 (exact
  /// in a double) while fractional byte counts keep about 2^-20 relative precision or better.
  static double byte_scale(const PreparedSchedule& prepared) {
    Bytes largest = 1;
    for (const PreparedRound& round : prepared.rounds())
      for (const PreparedStep& step : round.steps) largest = std::max(largest, step.wire_bytes);
    int exponent = 0;
    std::frexp(largest, &exponent);
    return std::ldexp(1.0, std::clamp(52 - exponent, 0, 40));
  }

  void build_network() {
    for (int e = 0; e < prepared_.endpoints(); ++e) network_.add_host();
    const models::Protocol& proto = prepared_.protocol();
    int cap = -1;
    if (std::isfinite(proto.per_step_bandwidth_cap)) cap = network_.add_rate_cap(proto.per_step_bandwidth_cap);

    const platforms::Platform& platform = prepared_.platform();
    std::vector<int> link_of(platform.link_count(), -1);
    std::unordered_set<std::int64_t> routed;
    for (const PreparedRound& round : prepared_.rounds()) {
      for (const PreparedStep& step : round.steps) {
        if (!routed.insert(static_cast<std::int64_t>(step.src) * prepared_.endpoints() + step.dst).second)
          continue;
        std::vector<SimgridNetwork::RouteLink> links;
        for (const platforms::Hop& hop : step.route->hops) {
          int& link = link_of[hop.link];
          if (link < 0) {
            const platforms::Link& physical = platform.link(hop.link);
            link = physical.half_duplex ? network_.add_shared_link(proto.efficiency * physical.bandwidth)
                                        : network_.add_duplex_link(proto.efficiency * physical.bandwidth);
          }
          links.push_back({link, hop.forward});
        }
        if (cap >= 0) links.push_back({cap, true});
        network_.add_route(step.src, step.dst, links);
      }
    }
    network_.seal();
  }

  void index_involvements() {
    pairs_.resize(prepared_.pairs());
    std::vector<std::int64_t> involvements_so_far(prepared_.pairs(), 0);
    std::vector<int> count(prepared_.pairs(), 0);
    std::uint64_t tag = 0;
    for (int r = 0; r < static_cast<int>(prepared_.rounds().size()); ++r) {
      const PreparedRound& round = prepared_.rounds()[r];
      RoundIndex index;
      index.first_tag = tag;
      tag += static_cast<std::uint64_t>(round.repeat) * round.steps.size();
      const int n = static_cast<int>(round.steps.size());
      index.send_order.resize(n);
      for (int s = 0; s < n; ++s) index.send_order[s] = s;
      std::stable_sort(index.send_order.begin(), index.send_order.end(), [&](int a, int b) {
        return round.steps[a].src_pair < round.steps[b].src_pair;
      });

      std::vector<int> touched;
      for (const PreparedStep& step : round.steps)
        for (int pair : {step.src_pair, step.dst_pair})
          if (count[pair]++ == 0) touched.push_back(pair);
      for (int pair : touched) {
        Involvement inv;
        inv.round = r;
        inv.first = involvements_so_far[pair];
        inv.count = count[pair];
        pairs_[pair].involvements.push_back(inv);
        involvements_so_far[pair] += round.repeat;
        count[pair] = 0;
      }
      for (int k = 0; k < n;) {
        const int pair = round.steps[index.send_order[k]].src_pair;
        int end = k;
        while (end < n && round.steps[index.send_order[end]].src_pair == pair) ++end;
        Involvement& inv = pairs_[pair].involvements.back();
        inv.send_begin = k;
        inv.send_end = end;
        k = end;
      }
      index.src_first.resize(n);
      index.dst_first.resize(n);
      for (int s = 0; s < n; ++s) {
        index.src_first[s] = pairs_[round.steps[s].src_pair].involvements.back().first;
        index.dst_first[s] = pairs_[round.steps[s].dst_pair].involvements.back().first;
      }
      rounds_.push_back(std::move(index));
    }
    total_steps_ = tag;
  }

  /// @brief Moves `pair` past every fully finished involvement, issuing the sends of each
  /// involvement it reaches.
  void advance(int pair, Seconds now) {
    PairState& state = pairs_[pair];
    while (state.cursor < state.involvements.size()) {
      const Involvement& inv = state.involvements[state.cursor];
      if (!state.sends_issued) {
        state.sends_issued = true;
        issue_sends(inv, state.rep, now);
      }
      if (state.done.empty() || state.done.front() < inv.count) return;
      state.done.pop_front();
      state.sends_issued = false;
      if (++state.rep == prepared_.rounds()[inv.round].repeat) {
        state.rep = 0;
        ++state.cursor;
      }
    }
  }

  void issue_sends(const Involvement& inv, int rep, Seconds now) {
    const PreparedRound& round = prepared_.rounds()[inv.round];
    const RoundIndex& index = rounds_[inv.round];
    for (int k = inv.send_begin; k < inv.send_end; ++k) {
      const int s = index.send_order[k];
      const PreparedStep& step = round.steps[s];
      const std::uint64_t tag = index.first_tag + static_cast<std::uint64_t>(rep) * round.steps.size() + s;
      network_.start_flow(now + prepared_.step_latency(step), step.src, step.dst, step.wire_bytes, tag);
    }
  }

  void finished(std::uint64_t tag, Seconds now) {
    ++finished_steps_;
    // Rounds are few; find the one holding this tag.
    const auto it = std::upper_bound(rounds_.begin(), rounds_.end(), tag,
                                     [](std::uint64_t t, const RoundIndex& r) { return t < r.first_tag; });
    const int r = static_cast<int>(it - rounds_.begin()) - 1;
    const PreparedRound& round = prepared_.rounds()[r];
    const std::uint64_t offset = tag - rounds_[r].first_tag;
    const int rep = static_cast<int>(offset / round.steps.size());
    const int s = static_cast<int>(offset % round.steps.size());
    const PreparedStep& step = round.steps[s];
    finish_[step.src] = std::max(finish_[step.src], now);
    finish_[step.dst] = std::max(finish_[step.dst], now);
    mark_done(step.src_pair, rounds_[r].src_first[s] + rep, now);
    mark_done(step.dst_pair, rounds_[r].dst_first[s] + rep, now);
  }

  void mark_done(int pair, std::int64_t involvement, Seconds now) {
    PairState& state = pairs_[pair];
    const std::int64_t base = state.involvements[state.cursor].first + state.rep;
    const auto slot = static_cast<std::size_t>(involvement - base);
    if (state.done.size() <= slot) state.done.resize(slot + 1, 0);
    ++state.done[slot];
    advance(pair, now);
  }

  const PreparedSchedule& prepared_;
  SimgridNetwork network_;
  std::vector<PairState> pairs_;
  std::vector<RoundIndex> rounds_;
  std::vector<Seconds> finish_;
  std::uint64_t total_steps_ = 0;
  std::uint64_t finished_steps_ = 0;
};

std::string encode(const std::vector<Seconds>& values) {
  std::string bytes(values.size() * sizeof(Seconds), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<Seconds> decode(const std::string& bytes) {
  std::vector<Seconds> values(bytes.size() / sizeof(Seconds));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(Seconds));
  return values;
}

}  // namespace

CollectiveResult EventEngine::run(const models::Schedule& schedule, const Placement& placement) {
  // Validation (and its ConfigErrors) and every Platform::route lookup happen here in the
  // parent; the child only simulates, so it never needs a lock another thread might hold.
  const PreparedSchedule prepared(schedule, placement);
  const std::vector<Seconds> finish =
      decode(run_in_child([&] { return encode(EventSimulation(prepared).run()); }));
  if (static_cast<int>(finish.size()) != prepared.endpoints())
    throw std::logic_error("event engine: child returned " + std::to_string(finish.size()) +
                           " finish times for " + std::to_string(prepared.endpoints()) + " endpoints");

  CollectiveResult result;
  result.time = *std::max_element(finish.begin(), finish.end());
  result.rank_finish.assign(finish.begin(), finish.begin() + prepared.ranks());
  result.link_usage = prepared.link_usage();
  return result;
}

}  // namespace stepsim::sim
