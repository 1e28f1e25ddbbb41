/// @file See primitives_runtime.hpp.
#include "models/collectives/primitives_runtime.hpp"

#include <cstdio>
#include <limits>
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

Candidate price(const Schedule& s, const CollectiveContext& ctx, Proto proto, nccl::IntraPath intra) {
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
  const double efficiency = c.protocol.efficiency;
  const Seconds handover = c.protocol.step_latency;
  c.time = c.launch + lowering::uncontended_makespan(s, ctx, [&](const Step& step) {
             if (step.is_codec()) return step.codec_time;
             const platforms::Route& route = ctx.platform.route(lowering::endpoint_vertex(s, ctx, step.src),
                                                                lowering::endpoint_vertex(s, ctx, step.dst));
             return handover + step.wire_bytes / (route.bandwidth * efficiency);
           });
  return c;
}

}  // namespace

void apply_primitives_runtime(Schedule& s, const CollectiveContext& ctx) {
  if (ctx.options.ideal_runtime || s.protocol.name != Protocol{}.name || s.spec.ranks < 2) return;
  const nccl::NcclSystem sys = nccl::nccl_system(ctx);
  std::vector<Proto> candidates = {Proto::ll, Proto::simple};
  if (sys.sm >= 70 && sys.intra == nccl::IntraPath::nvlink) candidates.insert(candidates.begin() + 1, Proto::ll128);
  Candidate best;
  best.time = std::numeric_limits<double>::infinity();
  std::string alternatives;
  for (Proto proto : candidates) {
    const Candidate c = price(s, ctx, proto, sys.intra);
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
  s.notes.push_back(note + std::string(" uncontended estimates (us):") + alternatives);
}

}  // namespace stepsim::models
