#include "sim/platform_network.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <array>
#include <map>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "sim/schedule_flows.hpp"

namespace stepsim::sim {
namespace {

/// SimGrid payloads are integers: scale bytes so the largest flow stays below 2^52 (exact in
/// a double) while fractional byte counts keep about 2^-20 relative precision or better.
double byte_scale(const std::vector<const PreparedSchedule*>& schedules) {
  Bytes largest = 1;
  for (const PreparedSchedule* prepared : schedules)
    for (const PreparedRound& round : prepared->rounds())
      for (const PreparedStep& step : round.steps)
        largest = std::max(largest, ScheduleFlows::flow_bytes(*prepared, step));
  int exponent = 0;
  std::frexp(largest, &exponent);
  return std::ldexp(1.0, std::clamp(52 - exponent, 0, 40));
}

}  // namespace

PlatformNetwork::PlatformNetwork(const std::vector<const PreparedSchedule*>& schedules)
    : network_(std::make_unique<SimgridNetwork>(byte_scale(schedules))) {
  struct Zone {
    int id = -1;
    BytesPerSecond bound = 0;                          ///< per-flow bound; infinity: none
    std::unordered_map<int, int> host_of_vertex;
    std::set<std::array<int, 3>> routed;               ///< (src vertex, via vertex or -1, dst vertex)
    std::map<std::array<int, 3>, HostPair> relay_hosts;   ///< a host pair per relayed route
  };
  std::map<BytesPerSecond, Zone> zones;   // by per-flow bound; infinity: none
  const platforms::Platform* platform = schedules.empty() ? nullptr : &schedules.front()->platform();
  std::vector<int> link_of(platform ? platform->link_count() : 0, -1);

  for (const PreparedSchedule* prepared : schedules) {
    if (&prepared->platform() != platform)
      throw std::logic_error("PlatformNetwork: schedules on different platforms cannot share one network");
    const models::Protocol& proto = prepared->protocol();
    const BytesPerSecond bound = proto.per_step_bandwidth_cap / proto.efficiency;
    auto [entry, fresh] = zones.try_emplace(bound);
    Zone& zone = entry->second;
    if (fresh) {
      zone.id = network_->add_zone();
      zone.bound = bound;
    }

    std::vector<int> hosts;
    for (int e = 0; e < prepared->endpoints(); ++e) {
      auto [host, added] = zone.host_of_vertex.try_emplace(prepared->endpoint_vertex(e), -1);
      if (added) host->second = network_->add_host(zone.id);
      hosts.push_back(host->second);
    }

    std::vector<std::vector<HostPair>>& step_hosts = step_hosts_.emplace_back();
    for (const PreparedRound& round : prepared->rounds()) {
      std::vector<HostPair>& round_hosts = step_hosts.emplace_back();
      for (const PreparedStep& step : round.steps) {
        HostPair pair{hosts[step.src], hosts[step.dst]};
        if (step.codec) {   // no flow, no route
          round_hosts.push_back(pair);
          continue;
        }
        const std::array<int, 3> key = {prepared->endpoint_vertex(step.src),
                                        step.via < 0 ? -1 : prepared->endpoint_vertex(step.via),
                                        prepared->endpoint_vertex(step.dst)};
        // Routes belong to host pairs, so a relayed route gets a host pair of its own.
        if (step.via >= 0) {
          auto [relay, added] = zone.relay_hosts.try_emplace(key);
          if (added) relay->second = {network_->add_host(zone.id), network_->add_host(zone.id)};
          pair = relay->second;
        }
        round_hosts.push_back(pair);
        if (!zone.routed.insert(key).second) continue;
        std::vector<SimgridNetwork::RouteLink> links;
        for (const platforms::Hop& hop : step.route->hops) {
          int& link = link_of[hop.link];
          if (link < 0) {
            const platforms::Link physical = platform->link(hop.link);
            // A two-way total applies when any of the schedules crosses the link both ways.
            const bool both_ways = std::any_of(schedules.begin(), schedules.end(), [&](const PreparedSchedule* s) {
              return s->crosses_both_ways(hop.link);
            });
            const BytesPerSecond capacity = link_capacity(physical, both_ways);
            link = physical.half_duplex ? network_->add_shared_link(capacity) : network_->add_duplex_link(capacity);
          }
          links.push_back({link, hop.forward});
        }
        // A cap of its own per route: SimGrid re-solves the connected component of the
        // constraints a finished flow touched, and one cap shared by every route would join all
        // concurrent flows into one component (measured: 81 % of a 64-rank event run solving).
        if (std::isfinite(zone.bound)) links.push_back({network_->add_rate_cap(zone.bound), true});
        network_->add_route(pair.src, pair.dst, links);
      }
    }
  }
  network_->seal();
}

}  // namespace stepsim::sim
