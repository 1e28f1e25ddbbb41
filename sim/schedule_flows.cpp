#include "sim/schedule_flows.hpp"

#include <algorithm>
#include <unordered_map>

#include "models/schedule_clock.hpp"

namespace stepsim::sim {

ScheduleFlows::ScheduleFlows(const PreparedSchedule& prepared, std::vector<std::vector<HostPair>> step_hosts)
    : prepared_(prepared), step_hosts_(std::move(step_hosts)) {
  involvements_.resize(prepared_.pairs());
  endpoint_steps_.assign(prepared_.endpoints(), 0);
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
    for (const PreparedStep& step : round.steps) {
      // A codec step involves its one endpoint (and pair) once.
      endpoint_steps_[step.src] += round.repeat;
      if (!step.codec) endpoint_steps_[step.dst] += round.repeat;
      const int pairs[2] = {step.src_pair, step.dst_pair};
      for (int k = 0; k < step.pair_count(); ++k)
        if (count[pairs[k]]++ == 0) touched.push_back(pairs[k]);
    }
    for (int pair : touched) {
      Involvement inv;
      inv.round = r;
      inv.first = involvements_so_far[pair];
      inv.count = count[pair];
      involvements_[pair].push_back(inv);
      involvements_so_far[pair] += round.repeat;
      count[pair] = 0;
    }
    for (int k = 0; k < n;) {
      const int pair = round.steps[index.send_order[k]].src_pair;
      int end = k;
      while (end < n && round.steps[index.send_order[end]].src_pair == pair) ++end;
      Involvement& inv = involvements_[pair].back();
      inv.send_begin = k;
      inv.send_end = end;
      k = end;
    }
    index.src_first.resize(n);
    index.dst_first.resize(n);
    for (int s = 0; s < n; ++s) {
      index.src_first[s] = involvements_[round.steps[s].src_pair].back().first;
      index.dst_first[s] = involvements_[round.steps[s].dst_pair].back().first;
    }
    rounds_.push_back(std::move(index));
  }
  total_steps_ = tag;
  if (prepared_.protocol().slots_in_flight > 0) index_connections();
}

void ScheduleFlows::index_connections() {
  std::unordered_map<std::int64_t, int> ids;
  std::vector<std::int64_t> transfers;   // per connection, transfers of the rounds indexed so far
  for (std::size_t r = 0; r < rounds_.size(); ++r) {
    const PreparedRound& round = prepared_.rounds()[r];
    RoundIndex& index = rounds_[r];
    const std::size_t n = round.steps.size();
    index.connection.assign(n, -1);
    index.transfer_first.assign(n, 0);
    index.transfer_per_rep.assign(n, 0);
    std::unordered_map<int, int> per_rep;   // connection -> transfers in one repetition
    for (std::size_t s = 0; s < n; ++s) {
      const PreparedStep& step = round.steps[s];
      if (step.codec) continue;
      const auto [it, added] =
          ids.try_emplace(models::connection_key(step.src_pair, step.dst_pair, prepared_.pairs()),
                          static_cast<int>(transfers.size()));
      if (added) transfers.push_back(0);
      index.connection[s] = it->second;
      index.transfer_first[s] = transfers[static_cast<std::size_t>(it->second)] + per_rep[it->second]++;
    }
    for (std::size_t s = 0; s < n; ++s)
      if (index.connection[s] >= 0) index.transfer_per_rep[s] = per_rep[index.connection[s]];
    for (const auto& [connection, count] : per_rep)
      transfers[static_cast<std::size_t>(connection)] += static_cast<std::int64_t>(count) * round.repeat;
  }
  connection_count_ = static_cast<int>(transfers.size());
}

ScheduleFlows::Instance::Instance(const ScheduleFlows& flows, SimgridNetwork& network, std::uint64_t tag_base,
                                  Seconds start)
    : flows_(flows),
      network_(network),
      tag_base_(tag_base),
      start_(start),
      pairs_(flows.prepared_.pairs()),
      connections_(static_cast<std::size_t>(flows.connection_count_)),
      remaining_(flows.endpoint_steps_),
      finish_(flows.prepared_.endpoints(), start + flows.prepared_.launch_latency()) {}

void ScheduleFlows::Instance::start() {
  const Seconds ready = start_ + flows_.prepared_.launch_latency();
  for (int pair = 0; pair < flows_.prepared_.pairs(); ++pair) advance(pair, ready);
}

/// @brief Moves `pair` past every fully finished involvement, issuing the sends of each
/// involvement it reaches.
void ScheduleFlows::Instance::advance(int pair, Seconds now) {
  PairState& state = pairs_[pair];
  const std::vector<Involvement>& involvements = flows_.involvements_[pair];
  while (state.cursor < involvements.size()) {
    const Involvement& inv = involvements[state.cursor];
    if (!state.sends_issued) {
      state.sends_issued = true;
      issue_sends(pair, state.rep, now);
    }
    if (state.done.empty() || state.done.front() < inv.count) return;
    state.done.pop_front();
    state.sends_issued = false;
    if (++state.rep == flows_.prepared_.rounds()[inv.round].repeat) {
      state.rep = 0;
      ++state.cursor;
    }
  }
}

void ScheduleFlows::Instance::issue_sends(int pair, int rep, Seconds now) {
  const PreparedSchedule& prepared = flows_.prepared_;
  const Involvement& inv = flows_.involvements_[pair][pairs_[pair].cursor];
  const PreparedRound& round = prepared.rounds()[inv.round];
  const RoundIndex& index = flows_.rounds_[inv.round];
  for (int k = inv.send_begin; k < inv.send_end; ++k) {
    const int s = index.send_order[k];
    const PreparedStep& step = round.steps[s];
    const std::uint64_t tag = index.first_tag + static_cast<std::uint64_t>(rep) * round.steps.size() + s;
    if (step.codec) {
      network_.finish_at(now + step.codec_time, tag_base_ + tag);
      if (codec_started_) codec_started_(step.src, now, now + step.codec_time);
    } else {
      gate_transfer(inv.round, s, rep, tag, now);
    }
  }
}

void ScheduleFlows::Instance::start_transfer(int round, int step, std::uint64_t tag, Seconds at) {
  const PreparedSchedule& prepared = flows_.prepared_;
  const HostPair& hosts = flows_.step_hosts_[round][step];
  network_.start_flow(at + prepared.protocol().step_latency, hosts.src, hosts.dst,
                      flow_bytes(prepared, prepared.rounds()[round].steps[step]), tag_base_ + tag);
}

std::int64_t ScheduleFlows::transfer_number(int round, int step, int rep) const {
  const RoundIndex& index = rounds_[round];
  return index.transfer_first[step] + static_cast<std::int64_t>(rep) * index.transfer_per_rep[step];
}

void ScheduleFlows::Instance::gate_transfer(int round, int step, int rep, std::uint64_t tag, Seconds now) {
  const int slots = flows_.prepared_.protocol().slots_in_flight;
  const RoundIndex& index = flows_.rounds_[round];
  const std::int64_t needed = slots <= 0 ? -1 : flows_.transfer_number(round, step, rep) - slots;
  if (needed < 0) {
    start_transfer(round, step, tag, now);
    return;
  }
  ConnectionState& connection = connections_[static_cast<std::size_t>(index.connection[step])];
  const auto credit = connection.credit.find(needed);
  if (credit == connection.credit.end()) {
    connection.waiting.push_back({needed, now, round, step, tag});
    return;
  }
  start_transfer(round, step, tag, std::max(now, credit->second));
  connection.credit.erase(credit);
}

void ScheduleFlows::Instance::credit_arrival(int round, int step, int rep, Seconds credit_time) {
  ConnectionState& connection = connections_[static_cast<std::size_t>(flows_.rounds_[round].connection[step])];
  const std::int64_t transfer = flows_.transfer_number(round, step, rep);
  for (auto it = connection.waiting.begin(); it != connection.waiting.end(); ++it) {
    if (it->needed != transfer) continue;
    const Waiting waiting = *it;
    connection.waiting.erase(it);
    start_transfer(waiting.round, waiting.step, waiting.tag, std::max(waiting.ready, credit_time));
    return;
  }
  connection.credit.emplace(transfer, credit_time);
}

void ScheduleFlows::Instance::flow_done(std::uint64_t tag, Seconds now,
                                        const std::function<void(int endpoint)>& endpoint_done) {
  tag -= tag_base_;
  // Tags past the steps' are arrivals: the same step, its route latency after transmission.
  const bool arrival = tag >= flows_.total_steps_;
  if (arrival) tag -= flows_.total_steps_;
  // Rounds are few; find the one holding this tag.
  const auto it = std::upper_bound(flows_.rounds_.begin(), flows_.rounds_.end(), tag,
                                   [](std::uint64_t t, const RoundIndex& r) { return t < r.first_tag; });
  const int r = static_cast<int>(it - flows_.rounds_.begin()) - 1;
  const PreparedRound& round = flows_.prepared_.rounds()[r];
  const std::uint64_t offset = tag - flows_.rounds_[r].first_tag;
  const int rep = static_cast<int>(offset / round.steps.size());
  const int s = static_cast<int>(offset % round.steps.size());
  const PreparedStep& step = round.steps[s];
  if (!arrival) {
    // Transmitted (or a codec step done): the source is free.
    endpoint_finished(step.src, now, endpoint_done);
    mark_done(step.src_pair, flows_.rounds_[r].src_first[s] + rep, now);
    if (step.codec) {
      ++finished_steps_;
      return;
    }
    const Seconds latency = step.route->latency;
    if (latency > 0) {
      network_.finish_at(now + latency, tag_base_ + flows_.total_steps_ + tag);
      return;
    }
  }
  ++finished_steps_;
  endpoint_finished(step.dst, now, endpoint_done);
  if (flows_.prepared_.protocol().slots_in_flight > 0) credit_arrival(r, s, rep, now + step.route->latency);
  mark_done(step.dst_pair, flows_.rounds_[r].dst_first[s] + rep, now);
}

void ScheduleFlows::Instance::endpoint_finished(int endpoint, Seconds now,
                                                const std::function<void(int endpoint)>& endpoint_done) {
  finish_[endpoint] = std::max(finish_[endpoint], now);
  if (--remaining_[endpoint] == 0 && endpoint_done) endpoint_done(endpoint);
}

void ScheduleFlows::Instance::mark_done(int pair, std::int64_t involvement, Seconds now) {
  PairState& state = pairs_[pair];
  const std::int64_t base = flows_.involvements_[pair][state.cursor].first + state.rep;
  const auto slot = static_cast<std::size_t>(involvement - base);
  if (state.done.size() <= slot) state.done.resize(slot + 1, 0);
  ++state.done[slot];
  advance(pair, now);
}

}  // namespace stepsim::sim
