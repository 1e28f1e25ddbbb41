#include "sim/prepared_schedule.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "platforms/config_error.hpp"

namespace stepsim::sim {
namespace {

const char* kFix = "fix the algorithm that lowered this schedule";

bool finite_non_negative(double x) { return std::isfinite(x) && x >= 0; }

}  // namespace

std::string PreparedSchedule::where(int round, int step) const {
  std::string text = fmt::format("schedule '{}'", schedule_.algorithm);
  if (round >= 0) text += fmt::format(": rounds[{}]", round);
  if (step >= 0) text += fmt::format(".steps[{}]", step);
  return text;
}

PreparedSchedule::PreparedSchedule(const models::Schedule& schedule, const Placement& placement)
    : schedule_(schedule), platform_(placement.platform) {
  const std::string here = where(-1, -1);
  if (schedule.spec.ranks != placement.allocation.ranks())
    throw ConfigError(here,
                      fmt::format("has {} ranks but the allocation has {} GPUs",
                                  schedule.spec.ranks, placement.allocation.ranks()),
                      "lower the collective for the same allocation it runs on");
  if (schedule.channels < 1)
    throw ConfigError(here, fmt::format("has {} channels", schedule.channels), "use channels >= 1");
  if (schedule.lanes < 1)
    throw ConfigError(here, fmt::format("has {} lanes", schedule.lanes), "use lanes >= 1");
  const models::Protocol& proto = schedule.protocol;
  if (!(proto.efficiency > 0) || !std::isfinite(proto.efficiency))
    throw ConfigError(here, fmt::format("protocol '{}' has efficiency {}", proto.name, proto.efficiency),
                      "use an efficiency in (0, 1]");
  if (!finite_non_negative(proto.step_latency) || !finite_non_negative(schedule.launch_latency))
    throw ConfigError(here, "has a negative or non-finite latency", kFix);
  if (!(proto.per_step_bandwidth_cap > 0))
    throw ConfigError(here, fmt::format("protocol '{}' caps a step at {} B/s", proto.name,
                                        proto.per_step_bandwidth_cap),
                      "use a positive cap, or infinity for none");
  if (proto.slots_in_flight < 0)
    throw ConfigError(here, fmt::format("protocol '{}' allows {} transfers in flight", proto.name,
                                        proto.slots_in_flight),
                      "use a positive count of slots per connection, or 0 for unbounded");

  for (int gpu : placement.allocation.gpus) {
    if (gpu < 0 || gpu >= platform_.gpu_count())
      throw ConfigError("allocation", fmt::format("GPU {} is not on platform '{}' ({} GPUs)", gpu,
                                                  platform_.name(), platform_.gpu_count()),
                        "pick GPUs of this platform");
    endpoint_vertex_.push_back(platform_.gpu_vertex(gpu));
  }
  for (int vertex : schedule.switch_vertices) {
    if (vertex < 0 || vertex >= platform_.vertex_count())
      throw ConfigError(here, fmt::format("names switch vertex {}, not on the platform", vertex), kFix);
    endpoint_vertex_.push_back(vertex);
  }

  const int channels = schedule.channels;
  for (int r = 0; r < static_cast<int>(schedule.rounds.size()); ++r) {
    const models::Round& round = schedule.rounds[r];
    if (round.repeat < 1)
      throw ConfigError(where(r, -1), fmt::format("has repeat {}", round.repeat), "use repeat >= 1");
    PreparedRound prepared;
    prepared.repeat = round.repeat;
    prepared.steps.reserve(round.steps.size());
    for (int s = 0; s < static_cast<int>(round.steps.size()); ++s) {
      const models::Step& step = round.steps[s];
      if (step.src < 0 || step.src >= endpoints() || step.dst < 0 || step.dst >= endpoints())
        throw ConfigError(where(r, s), fmt::format("endpoint {} -> {} is outside [0, {})", step.src,
                                                   step.dst, endpoints()), kFix);
      if (step.channel < 0 || step.channel >= channels)
        throw ConfigError(where(r, s), fmt::format("uses channel {} of {}", step.channel, channels), kFix);
      for (int lane : {step.src_lane, step.dst_lane})
        if (lane < 0 || lane >= schedule.lanes)
          throw ConfigError(where(r, s), fmt::format("uses lane {} of {}", lane, schedule.lanes), kFix);
      if (step.is_codec() && step.src_lane != step.dst_lane)
        throw ConfigError(where(r, s), "is a codec step on two lanes", kFix);
      PreparedStep p;
      p.src = step.src;
      p.dst = step.dst;
      p.src_pair = schedule.pair_of(step.src, step.channel, step.src_lane);
      p.dst_pair = schedule.pair_of(step.dst, step.channel, step.dst_lane);
      if (step.is_codec()) {
        if (step.src != step.dst || step.src >= ranks())
          throw ConfigError(where(r, s), fmt::format("{} step on endpoints {} -> {}: a codec runs on one rank's GPU",
                                                     models::to_string(step.kind), step.src, step.dst), kFix);
        if (!finite_non_negative(step.codec_time))
          throw ConfigError(where(r, s), fmt::format("{} step takes {} s", models::to_string(step.kind), step.codec_time),
                            kFix);
        p.codec = true;
        p.codec_time = step.codec_time;
        prepared.steps.push_back(p);
        continue;
      }
      if (step.src == step.dst)
        throw ConfigError(where(r, s), fmt::format("transfers from endpoint {} to itself", step.src), kFix);
      if (!finite_non_negative(step.wire_bytes))
        throw ConfigError(where(r, s), fmt::format("moves {} bytes", step.wire_bytes), kFix);
      p.wire_bytes = step.wire_bytes;
      if (step.via >= 0 && (step.via >= ranks() || step.via == step.src || step.via == step.dst))
        throw ConfigError(where(r, s), fmt::format("relays {} -> {} through endpoint {}", step.src, step.dst, step.via),
                          "relay through a rank other than the two ends");
      p.route = step.via < 0 ? &platform_.route(endpoint_vertex_[step.src], endpoint_vertex_[step.dst])
                             : &relayed_route(step.src, step.via, step.dst);
      p.via = step.via;
      if (p.route->hops.empty())
        throw ConfigError(where(r, s), "endpoints sit on the same platform vertex", kFix);
      for (const platforms::Hop& hop : p.route->hops) {
        const platforms::Link link = platform_.link(hop.link);
        if (!(link.bandwidth() > 0) || !std::isfinite(link.bandwidth()))
          throw ConfigError(fmt::format("platform '{}': link '{}'", platform_.name(), link.name),
                            fmt::format("has bandwidth {} B/s", link.bandwidth()),
                            "give every link a positive bandwidth such as 25GBps");
        if (!finite_non_negative(link.latency))
          throw ConfigError(fmt::format("platform '{}': link '{}'", platform_.name(), link.name),
                            fmt::format("has latency {} s", link.latency),
                            "give every link a non-negative latency such as 0.7us");
        if (link.datasheet_two_way_bandwidth > 0 && p.wire_bytes > 0) directions_[hop.link] |= hop.forward ? 1 : 2;
      }
      prepared.steps.push_back(p);
    }
    rounds_.push_back(std::move(prepared));
  }
  if (schedule.expanded_step_count() == 0)
    throw ConfigError(here, "is empty (no steps)", "a collective needs at least 2 ranks and one transfer");
}

const platforms::Route& PreparedSchedule::relayed_route(int src, int via, int dst) {
  const std::array<int, 3> key = {endpoint_vertex_[src], endpoint_vertex_[via], endpoint_vertex_[dst]};
  auto [it, fresh] = relayed_.try_emplace(key);
  if (!fresh) return it->second;
  platforms::Route& route = it->second;
  route = platform_.route(key[0], key[1]);
  platforms::append(route, platform_.route(key[1], key[2]));
  return route;
}

std::vector<LinkUsage> PreparedSchedule::link_usage() const {
  // Indexed by link id: big schedules cross each link many times.
  std::vector<LinkUsage> by_link(static_cast<std::size_t>(platform_.link_count()));
  std::vector<bool> used(by_link.size(), false);
  for (const PreparedRound& round : rounds_) {
    for (const PreparedStep& step : round.steps) {
      const Bytes bytes = step.wire_bytes * round.repeat;
      if (step.codec || bytes == 0) continue;
      for (const platforms::Hop& hop : step.route->hops) {
        LinkUsage& usage = by_link[static_cast<std::size_t>(hop.link)];
        used[static_cast<std::size_t>(hop.link)] = true;
        (hop.forward ? usage.bytes_forward : usage.bytes_backward) += bytes;
      }
    }
  }
  std::vector<LinkUsage> result;
  for (std::size_t link = 0; link < by_link.size(); ++link)
    if (used[link]) {
      by_link[link].link = static_cast<int>(link);
      result.push_back(by_link[link]);
    }
  return result;
}

}  // namespace stepsim::sim
