#pragma once
// Hand-built platforms and schedules for the engine tests: small enough to price by hand.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "models/schedule.hpp"
#include "platforms/platform.hpp"
#include "sim/engine.hpp"

namespace stepsim::sim::testing {

inline int add_vertex(platforms::NodeTemplate& node, std::string name, platforms::VertexKind kind) {
  platforms::Vertex v;
  v.name = std::move(name);
  v.kind = kind;
  if (kind == platforms::VertexKind::gpu) {
    v.local_gpu = static_cast<int>(node.gpus.size());
    node.gpus.push_back(static_cast<int>(node.vertices.size()));
  }
  node.vertices.push_back(v);
  return static_cast<int>(node.vertices.size()) - 1;
}

inline void add_link(platforms::NodeTemplate& node, int a, int b, platforms::LinkType type,
                     BytesPerSecond bandwidth, Seconds latency) {
  platforms::Link l;
  l.name = node.vertices[a].name + "-" + node.vertices[b].name;
  l.type = type;
  l.a = a;
  l.b = b;
  l.datasheet_bandwidth = bandwidth;
  l.latency = latency;
  node.links.push_back(l);
}

inline platforms::Platform make_platform(platforms::NodeTemplate node) {
  platforms::GpuModel gpu;
  gpu.name = "test-gpu";
  return platforms::Platform("test", gpu, std::move(node), 1, platforms::Fabric{});
}

/// Two GPUs joined by one NVLink.
inline platforms::Platform two_gpus(BytesPerSecond bandwidth, Seconds latency) {
  platforms::NodeTemplate n;
  add_vertex(n, "gpu0", platforms::VertexKind::gpu);
  add_vertex(n, "gpu1", platforms::VertexKind::gpu);
  add_link(n, 0, 1, platforms::LinkType::nvlink, bandwidth, latency);
  return make_platform(std::move(n));
}

/// `gpus` GPUs each with one link of `bandwidth` to a single NVSwitch; a GPU-to-GPU route
/// crosses two links of latency `latency / 2`, so it costs `latency` in all.
inline platforms::Platform nvswitch_node(int gpus, BytesPerSecond bandwidth, Seconds latency) {
  platforms::NodeTemplate n;
  for (int g = 0; g < gpus; ++g) add_vertex(n, "gpu" + std::to_string(g), platforms::VertexKind::gpu);
  const int sw = add_vertex(n, "nvswitch", platforms::VertexKind::nvswitch);
  for (int g = 0; g < gpus; ++g) add_link(n, g, sw, platforms::LinkType::nvlink, bandwidth, latency / 2);
  return make_platform(std::move(n));
}

/// `gpus` GPUs on a bidirectional NVLink ring, link i joining gpu i and gpu i+1 with
/// `bandwidth(i)` and `latency(i)`. Every GPU also hangs off a 1 GB/s PCIe switch (the platform
/// wants all GPU pairs connected); it is narrower than any NVLink, so neighbours use NVLink.
template <class Bandwidth, class Latency>
platforms::Platform nvlink_ring(int gpus, Bandwidth bandwidth, Latency latency) {
  platforms::NodeTemplate n;
  for (int g = 0; g < gpus; ++g) add_vertex(n, "gpu" + std::to_string(g), platforms::VertexKind::gpu);
  for (int g = 0; g < gpus; ++g)
    add_link(n, g, (g + 1) % gpus, platforms::LinkType::nvlink, bandwidth(g), latency(g));
  const int sw = add_vertex(n, "pcie_sw", platforms::VertexKind::pcie_switch);
  for (int g = 0; g < gpus; ++g) add_link(n, g, sw, platforms::LinkType::pcie, 1e9, 1e-6);
  return make_platform(std::move(n));
}

inline platforms::Platform nvlink_ring(int gpus, BytesPerSecond bandwidth, Seconds latency) {
  return nvlink_ring(gpus, [=](int) { return bandwidth; }, [=](int) { return latency; });
}

/// `nodes` servers of `gpus_per_node` GPUs on an NVSwitch (`bandwidth`, route `latency`), one
/// NIC per node on the NVSwitch, joined by a fat tree.
inline platforms::Platform nvswitch_cluster(int nodes, int gpus_per_node, BytesPerSecond bandwidth,
                                           Seconds latency, BytesPerSecond nic_bandwidth) {
  platforms::NodeTemplate n;
  for (int g = 0; g < gpus_per_node; ++g) add_vertex(n, "gpu" + std::to_string(g), platforms::VertexKind::gpu);
  const int sw = add_vertex(n, "nvswitch", platforms::VertexKind::nvswitch);
  for (int g = 0; g < gpus_per_node; ++g)
    add_link(n, g, sw, platforms::LinkType::nvlink, bandwidth, latency / 2);
  const int nic = add_vertex(n, "nic0", platforms::VertexKind::nic);
  n.nics.push_back(nic);
  add_link(n, sw, nic, platforms::LinkType::pcie, 2 * nic_bandwidth, 1e-6);
  platforms::Fabric fabric;
  fabric.kind = platforms::FabricKind::fat_tree;
  fabric.nic_bandwidth = nic_bandwidth;
  fabric.nic_latency = 2e-6;
  fabric.switch_latency = 0.5e-6;
  platforms::GpuModel gpu;
  gpu.name = "test-gpu";
  return platforms::Platform("test-cluster", gpu, std::move(n), nodes, fabric);
}

inline platforms::Allocation first_gpus(int count) {
  platforms::Allocation a;
  a.gpus.resize(count);
  std::iota(a.gpus.begin(), a.gpus.end(), 0);
  return a;
}

/// Ring allgather of `bytes` over `ranks` in compact form: one round of n steps (rank i to
/// rank i+1 on `channel`, in `order` when given), repeated n-1 times.
inline models::Schedule ring_allgather(int ranks, Bytes bytes, std::vector<int> order = {}) {
  if (order.empty()) {
    order.resize(ranks);
    std::iota(order.begin(), order.end(), 0);
  }
  models::Schedule s;
  s.spec = {models::CollectiveOp::allgather, ranks, bytes, 0};
  s.algorithm = "test-ring";
  s.num_blocks = ranks;
  s.block_bytes = bytes / ranks;
  models::Round round;
  for (int i = 0; i < ranks; ++i) {
    models::Step step;
    step.src = order[i];
    step.dst = order[(i + 1) % ranks];
    step.block = order[i];
    step.wire_bytes = bytes / ranks;
    round.steps.push_back(step);
  }
  round.repeat = ranks - 1;
  round.block_shift = ranks - 1;
  s.rounds.push_back(round);
  return s;
}

/// Ring allreduce: a reduce-scatter round then an allgather round, each repeated n-1 times.
inline models::Schedule ring_allreduce(int ranks, Bytes bytes) {
  models::Schedule s = ring_allgather(ranks, bytes);
  s.spec.op = models::CollectiveOp::allreduce;
  models::Round reduce = s.rounds.front();
  for (models::Step& step : reduce.steps) step.combine = models::Combine::reduce;
  s.rounds.insert(s.rounds.begin(), reduce);
  return s;
}

/// Direct alltoall: every rank sends its block for every other rank in one round.
inline models::Schedule direct_alltoall(int ranks, Bytes bytes_per_rank) {
  models::Schedule s;
  s.spec = {models::CollectiveOp::alltoall, ranks, bytes_per_rank, 0};
  s.algorithm = "test-alltoall";
  s.num_blocks = ranks * ranks;
  s.block_bytes = bytes_per_rank / ranks;
  models::Round round;
  for (int src = 0; src < ranks; ++src)
    for (int dst = 0; dst < ranks; ++dst) {
      if (src == dst) continue;
      models::Step step;
      step.src = src;
      step.dst = dst;
      step.block = src * ranks + dst;
      step.wire_bytes = s.block_bytes;
      round.steps.push_back(step);
    }
  s.rounds.push_back(round);
  return s;
}

/// One transfer of `bytes` from rank 0 to rank 1.
inline models::Schedule single_transfer(Bytes bytes) { return models::single_transfer(bytes, "test-transfer"); }

inline CollectiveResult run_engine(const std::string& engine, const models::Schedule& schedule,
                                   const platforms::Platform& platform,
                                   const platforms::Allocation& allocation) {
  return make_engine(engine)->run(schedule, Placement{platform, allocation});
}

/// Launch latency, step latency, efficiency and a per-step cap on a ring allgather over `n`
/// NVSwitch GPUs, priced by `engine` and checked against the closed form to `tolerance`.
inline void expect_protocol_costs(const std::string& engine, int n, double tolerance) {
  const double alpha = 2e-6, bandwidth = 100e9, size = 64e6;
  const auto platform = nvswitch_node(n, bandwidth, alpha);
  auto schedule = ring_allgather(n, size);
  schedule.launch_latency = 5e-6;
  schedule.protocol.step_latency = 1e-6;
  schedule.protocol.efficiency = 0.8;
  const auto result = run_engine(engine, schedule, platform, first_gpus(n));
  const double expected = 5e-6 + (n - 1) * (alpha + 1e-6 + size / n / (0.8 * bandwidth));
  EXPECT_NEAR(result.time, expected, tolerance * expected) << engine;

  // A cap below the usable link bandwidth takes over.
  schedule.protocol.per_step_bandwidth_cap = 20e9;
  const auto capped = run_engine(engine, schedule, platform, first_gpus(n));
  const double expected_capped = 5e-6 + (n - 1) * (alpha + 1e-6 + size / n / 20e9);
  EXPECT_NEAR(capped.time, expected_capped, tolerance * expected_capped) << engine;
}

}  // namespace stepsim::sim::testing
