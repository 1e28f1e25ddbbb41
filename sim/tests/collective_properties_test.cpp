// Properties every prediction must have, over every preset x op x algorithm (nccl included) x
// {1, 2, 4} nodes x sizes 1 KiB .. 1 GiB (analytical engine):
//  - monotone: a larger message never takes more than 1 % less time than a smaller one (a
//    protocol or algorithm switch included);
//  - bounded: busbw never exceeds what the GPU's own links can carry (twice that for an
//    allreduce reduced in a switch, which each rank sends and receives once);
//  - floored: no prediction is below its launch-and-sync floor (the schedule at zero bytes),
//    and that floor is positive for every algorithm.
// Each violation is listed with the case that shows it.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "models/collectives/lowering.hpp"
#include "platforms/config_error.hpp"
#include "platforms/loader.hpp"
#include "sim/analytical.hpp"
#include "sim/collective_prediction.hpp"

namespace stepsim::sim {
namespace {

using models::CollectiveOp;

constexpr double kMonotoneSlack = 0.99;

/// Per direction, what GPU 0's links carry together.
BytesPerSecond injection_bandwidth(const platforms::Platform& p) {
  const int gpu = p.gpu_vertex(0);
  BytesPerSecond sum = 0;
  for (int l = 0; l < p.link_count(); ++l) {
    const platforms::Link link = p.link(l);
    if (link.a == gpu || link.b == gpu) sum += link.bandwidth();
  }
  return sum;
}

/// The launch plus every step's synchronisation and route latency along the critical path,
/// no bytes moved: what the schedule costs at zero size (for nccl at least NCCL's own latency
/// estimate, which its launch latency tops the path up to).
Seconds launch_and_sync_floor(const models::Schedule& s, const models::CollectiveContext& ctx) {
  return s.launch_latency +
         models::lowering::uncontended_makespan(s, ctx, [&](std::size_t, std::size_t) { return s.protocol.step_latency; });
}

struct Curve {
  std::string preset, algo;
  int nodes = 1;
  CollectiveOp op = CollectiveOp::allreduce;
};

std::string name(const Curve& c) {
  return c.preset + " x" + std::to_string(c.nodes) + " " + models::to_string(c.op) + " " + c.algo;
}

void check_curve(const Curve& c, const platforms::Platform& platform, std::vector<std::string>& bad,
                 std::vector<std::string>& channel_jumps) {
  platforms::Allocation allocation;
  for (int g = 0; g < platform.gpu_count(); ++g) allocation.gpus.push_back(g);
  const models::CollectiveContext ctx{platform, allocation, {}};
  AnalyticalEngine engine;
  const BytesPerSecond inject = injection_bandwidth(platform);
  double previous = 0;
  int previous_channels = 0;
  for (double bytes = 1024; bytes <= (1 << 30); bytes *= 2) {
    const models::CollectiveSpec spec{c.op, allocation.ranks(), bytes, 0};
    if (collective_unsupported(c.algo, spec, ctx)) return;
    const CollectivePrediction p = predict_collective(c.algo, spec, ctx, engine);
    const Seconds t = p.result.time;
    char at[96];
    std::snprintf(at, sizeof at, " at %.0f B: ", bytes);
    const bool more_channels = c.algo == "nccl" && p.schedule.channels > previous_channels;
    if (t < kMonotoneSlack * previous) {
      const std::string drop = name(c) + at + std::to_string(t * 1e6) + " us after " + std::to_string(previous * 1e6) + " us";
      (more_channels ? channel_jumps : bad).push_back(drop);
    }
    previous = t;
    previous_channels = p.schedule.channels;
    const bool in_switch = c.op == CollectiveOp::allreduce && !p.schedule.switch_vertices.empty();
    const double n = allocation.ranks();
    const double bound = inject * (in_switch ? 2 * (n - 1) / n : 1.0) / kGB;
    if (p.busbw_GBps() > bound * 1.0001)
      bad.push_back(name(c) + at + "busbw " + std::to_string(p.busbw_GBps()) + " GB/s above " + std::to_string(bound));
    const Seconds floor = launch_and_sync_floor(p.schedule, ctx);
    if (floor <= 0 || t < floor * (1 - 1e-9))
      bad.push_back(name(c) + at + "time " + std::to_string(t * 1e6) + " us below its launch-and-sync floor " +
                    std::to_string(floor * 1e6) + " us");
  }
}

TEST(CollectiveProperties, MonotoneBoundedAndFloored) {
  std::vector<std::string> bad, channel_jumps;
  int curves = 0;
  for (const platforms::PresetInfo& preset : platforms::list_presets())
    for (int nodes : {1, 2, 4}) {
      platforms::PlatformOptions options;
      options.nodes = nodes;
      std::optional<platforms::Platform> platform;
      try {
        platform.emplace(platforms::load_platform(preset.name, options));
      } catch (const ConfigError&) {
        continue;   // a single-node preset (no NIC)
      }
      for (CollectiveOp op : models::all_ops())
        for (const models::AlgorithmInfo* info : models::AlgorithmRegistry::instance().all()) {
          check_curve({preset.name, info->name, nodes, op}, *platform, bad, channel_jumps);
          ++curves;
        }
    }
  // Drops whose mechanism is known and documented (docs/accuracy.md "Monotonicity"); each must
  // still occur, so a fix shows here too.
  const std::set<std::string> known = {
      // NCCL picks tree/LL by its estimate, but the physical critical path (EFA's 10 us per
      // hop against NCCL's 5 us NET LL figure) prices LL above it; LL128 runs at its estimate.
      "aws-p5 x2 allreduce nccl at 262144 B",
      "aws-p5 x4 allreduce nccl at 262144 B",
      // One-channel tree/Simple across four PCIe nodes runs well above NCCL's estimate (its
      // 8 loops pay the fill at every hop); the ring/LL NCCL takes next is closer to its own.
      "pcie-gen4-x8 x4 allreduce nccl at 524288 B",
      // Blink re-packs per size (PCIe strands join at 4 KiB): 1.5 %.
      "dgx1-p100 x2 allreduce blink at 4096 B",
  };
  std::set<std::string> seen;
  for (const std::string& b : bad) {
    const std::string where = b.substr(0, b.find(':'));
    if (known.count(where)) seen.insert(where);
    else ADD_FAILURE() << b;
  }
  for (const std::string& k : known)
    if (!seen.count(k)) ADD_FAILURE() << "known drop no longer occurs (remove it from the list): " << k;
  // The one tolerated drop, docs/accuracy.md "Monotonicity": NCCL launches more channels at a
  // larger size (a protocol switch whose channel threshold differs, enqueue.cc), and a launched
  // channel carries its graph share only, so the larger message runs on more of the graph.
  for (const std::string& j : channel_jumps) std::printf("channel jump: %s\n", j.c_str());
  std::printf("%d curves, %zu violations, %zu drops at an NCCL channel jump\n", curves, bad.size(), channel_jumps.size());
}

}  // namespace
}  // namespace stepsim::sim
