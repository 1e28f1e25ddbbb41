/// @file See primitives_runtime.hpp.
#include "models/collectives/primitives_runtime.hpp"

#include <cstdio>
#include <algorithm>
#include <limits>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "models/collectives/lowering.hpp"
#include "models/collectives/nccl_topology.hpp"
#include "models/collectives/nccl_versions.hpp"

namespace stepsim::models {
namespace {

using nccl::Proto;

struct Candidate {
  Protocol protocol;
  Seconds launch = 0;
  Seconds time = 0;
};

/// Per round and step, its bytes' time at full wire efficiency when each round's steps share the
/// directed links they cross evenly (the analytical engine's rule, sim/analytical.hpp, without
/// its protocol caps): the narrowest such share of its route. Codec steps: 0 (they cost their
/// codec time whatever the protocol).
using WireTimes = std::vector<std::vector<Seconds>>;
WireTimes shared_wire_times(const Schedule& s, const CollectiveContext& ctx) {
  WireTimes times(s.rounds.size());
  for (std::size_t r = 0; r < s.rounds.size(); ++r) {
    const Round& round = s.rounds[r];
    std::map<std::pair<int, bool>, int> crossing;   // (link, forward) -> steps of the round on it
    std::vector<const platforms::Route*> routes;
    for (const Step& step : round.steps) {
      routes.push_back(step.is_codec() ? nullptr
                                       : &ctx.platform.route(lowering::endpoint_vertex(s, ctx, step.src),
                                                             lowering::endpoint_vertex(s, ctx, step.dst)));
      if (routes.back())
        for (const platforms::Hop& hop : routes.back()->hops) ++crossing[{hop.link, hop.forward}];
    }
    for (std::size_t i = 0; i < round.steps.size(); ++i) {
      double rate = std::numeric_limits<double>::infinity();
      if (routes[i])
        for (const platforms::Hop& hop : routes[i]->hops)
          rate = std::min(rate, ctx.platform.link(hop.link).bandwidth() / crossing[{hop.link, hop.forward}]);
      times[r].push_back(routes[i] ? round.steps[i].wire_bytes / rate : 0.0);
    }
  }
  return times;
}

Candidate price(const Schedule& s, const CollectiveContext& ctx, const WireTimes& wire, Proto proto,
                nccl::IntraPath intra) {
  const nccl::VersionConstants& head = nccl::head_version();
  const int ring = static_cast<int>(nccl::Algo::ring);
  const int path = intra == nccl::IntraPath::nvlink ? 0 : 1;
  const double hop_us = head.hw_lat[path][ring][static_cast<int>(proto)] -
                        head.hw_lat[path][ring][static_cast<int>(Proto::ll)];
  Candidate c;
  c.protocol.name = nccl::to_string(proto);
  c.protocol.efficiency = nccl::wire_efficiency(proto);
  c.protocol.step_latency = hop_us * 1e-6;
  c.launch = head.base_lat[ring][static_cast<int>(proto)] * 1e-6;
  c.time = c.launch + lowering::uncontended_makespan(s, ctx, [&](std::size_t r, std::size_t i) {
             const Step& step = s.rounds[r].steps[i];
             return step.is_codec() ? step.codec_time
                                    : c.protocol.step_latency + wire[r][i] / c.protocol.efficiency;
           });
  return c;
}

}  // namespace

void apply_primitives_runtime(Schedule& s, const CollectiveContext& ctx) {
  if (ctx.options.ideal_runtime || s.protocol.name != Protocol{}.name || s.spec.ranks < 2) return;
  const nccl::NcclSystem sys = nccl::nccl_system(ctx);
  std::vector<Proto> candidates = {Proto::ll, Proto::simple};
  if (sys.sm >= 70 && sys.intra == nccl::IntraPath::nvlink) candidates.insert(candidates.begin() + 1, Proto::ll128);
  const WireTimes wire = shared_wire_times(s, ctx);
  Candidate best;
  best.time = std::numeric_limits<double>::infinity();
  std::string alternatives;
  for (Proto proto : candidates) {
    const Candidate c = price(s, ctx, wire, proto, sys.intra);
    char text[64];
    std::snprintf(text, sizeof text, " %s=%.2f", c.protocol.name.c_str(), c.time * 1e6);
    alternatives += text;
    if (c.time < best.time) best = c;
  }
  s.protocol = best.protocol;
  s.launch_latency += best.launch;
  char note[160];
  std::snprintf(note, sizeof note, "runtime: kernels on NCCL's primitives, protocol %s (launch %.1f us, +%.1f us per step);",
                best.protocol.name.c_str(), best.launch * 1e6, best.protocol.step_latency * 1e6);
  s.notes.push_back(note + std::string(" estimates with links shared per round (us):") + alternatives);
}

}  // namespace stepsim::models
