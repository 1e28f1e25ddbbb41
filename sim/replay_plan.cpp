#include "sim/replay_plan.hpp"

#include <fmt/format.h>

#include "models/algorithm.hpp"
#include "models/compression/compressed_schedules.hpp"
#include "platforms/config_error.hpp"

namespace stepsim::sim {

using workloads::Op;
using workloads::OpKind;


ReplayPlan::ReplayPlan(const workloads::Trace& trace, const Placement& placement)
    : trace_(trace), placement_(placement) {
  const platforms::Platform& platform = placement.platform;
  kernels_.reserve(trace.kernels.size());
  for (const models::KernelSpec& spec : trace.kernels) kernels_.push_back(models::kernel_cost(spec, platform.gpu()));

  // Equal calls share schedules: group the calls by their cheap-to-compare fields first.
  std::map<std::tuple<models::CollectiveOp, Bytes, int, int, std::string>, std::vector<int>> similar;
  canonical_call_.resize(trace.collectives.size());
  for (int c = 0; c < static_cast<int>(trace.collectives.size()); ++c) {
    const workloads::CollectiveCall& call = trace.collectives[static_cast<std::size_t>(c)];
    std::vector<int>& seen = similar[{call.op, call.bytes, call.group, call.root, call.algorithm}];
    canonical_call_[static_cast<std::size_t>(c)] = c;
    for (int other : seen)
      if (trace.collectives[static_cast<std::size_t>(other)] == call) {
        canonical_call_[static_cast<std::size_t>(c)] = other;
        break;
      }
    if (canonical_call_[static_cast<std::size_t>(c)] == c) seen.push_back(c);
  }

  // An out-of-place call may run on a one-rank subgroup, where it is a device copy.
  for (const workloads::CollectiveCall& call : trace.collectives)
    if (!call.in_place && !(platform.gpu().hbm_bandwidth > 0))
      throw ConfigError(trace.origin,
                        fmt::format("GPU model '{}' has no hbm_bandwidth to price an out-of-place {} (a one-rank "
                                    "subgroup copies its buffer within the GPU)",
                                    platform.gpu().name, models::to_string(call.op)),
                        "give the GPU model an hbm_bandwidth");

  // Copies are checked once per program, naming the first rank that runs it.
  std::vector<int> first_rank(trace.programs.size(), -1);
  for (int rank = trace.ranks - 1; rank >= 0; --rank)
    first_rank[static_cast<std::size_t>(trace.program_of_rank[static_cast<std::size_t>(rank)])] = rank;
  bool host_copies = false;
  std::string pageable_copy;  ///< the first copy of pageable memory, for the error without a figure
  for (std::size_t p = 0; p < trace.programs.size(); ++p) {
    if (first_rank[p] < 0) continue;
    const std::vector<Op>& ops = trace.programs[p].ops;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      if (op.kind != OpKind::memcpy) continue;
      if (op.memcpy == workloads::MemcpyKind::device_to_device && !(platform.gpu().hbm_bandwidth > 0))
        throw ConfigError(fmt::format("{}: rank {}, op {} (memcpy{})", trace.origin, first_rank[p], i,
                                      op.name >= 0 ? " '" + trace.names[static_cast<std::size_t>(op.name)] + "'" : ""),
                          fmt::format("GPU model '{}' has no hbm_bandwidth to price a device-to-device copy",
                                      platform.gpu().name),
                          "give the GPU model an hbm_bandwidth");
      host_copies = host_copies || op.memcpy != workloads::MemcpyKind::device_to_device;
      if (op.host_memory == workloads::HostMemory::pageable && pageable_copy.empty())
        pageable_copy = fmt::format("{}: rank {}, op {} (memcpy{})", trace.origin, first_rank[p], i,
                                    op.name >= 0 ? " '" + trace.names[static_cast<std::size_t>(op.name)] + "'" : "");
    }
  }
  if (!host_copies) return;

  const platforms::NodeTemplate& node = platform.node();
  const int vertices = static_cast<int>(node.vertices.size());
  host_.resize(static_cast<std::size_t>(trace.ranks));
  for (int rank = 0; rank < trace.ranks; ++rank) {
    const int gpu = placement.allocation.gpus[static_cast<std::size_t>(rank)];
    const int gpu_vertex = platform.gpu_vertex(gpu);
    const int node_index = platform.node_of_gpu(gpu);
    const int socket = node.vertices[static_cast<std::size_t>(gpu_vertex - node_index * vertices)].socket;
    int cpu = -1;
    for (int v = 0; v < vertices; ++v) {
      const platforms::Vertex& vertex = node.vertices[static_cast<std::size_t>(v)];
      if (vertex.kind != platforms::VertexKind::cpu) continue;
      if (cpu < 0 || (vertex.socket == socket && node.vertices[static_cast<std::size_t>(cpu)].socket != socket)) cpu = v;
    }
    if (cpu < 0)
      throw ConfigError(trace.origin,
                        fmt::format("the trace copies between host and device but platform '{}' has no host "
                                    "(a vertex of kind cpu), so the copy has no route to price",
                                    platform.name()),
                        "add the CPUs and their PCIe links to the platform's node, or make the copies device_to_device");
    const int cpu_vertex = node_index * vertices + cpu;
    const platforms::Route& to_host = platform.route(gpu_vertex, cpu_vertex);
    const platforms::Route& from_host = platform.route(cpu_vertex, gpu_vertex);
    const BytesPerSecond pageable = node.vertices[static_cast<std::size_t>(cpu)].pageable_copy_bandwidth;
    if (!pageable_copy.empty() && !(pageable > 0))
      throw ConfigError(pageable_copy,
                        fmt::format("the copy is of pageable host memory, which the driver stages through the CPU, "
                                    "but platform '{}' gives its CPU '{}' no pageable_copy_bandwidth",
                                    platform.name(), node.vertices[static_cast<std::size_t>(cpu)].name),
                        "add pageable_copy_bandwidth to the platform's cpu vertices (validation/harness/torch/"
                        "host_copy_sweep.py measures it), or copy from pinned memory");
    host_[static_cast<std::size_t>(rank)] = {{to_host.latency, to_host.bandwidth, pageable},
                                             {from_host.latency, from_host.bandwidth, pageable}};
  }
}

const ReplayPlan::HostRoute& ReplayPlan::host_route(int rank, const Op& op) const {
  const auto& routes = host_[static_cast<std::size_t>(rank)];
  return op.memcpy == workloads::MemcpyKind::device_to_host ? routes.first : routes.second;
}

Seconds ReplayPlan::device_copy(Bytes bytes) const {
  return 2 * bytes / placement_.platform.gpu().hbm_bandwidth;   // read and write HBM
}

Seconds ReplayPlan::one_rank_copy(int call) const {
  const workloads::CollectiveCall& c = trace_.collectives[static_cast<std::size_t>(call)];
  return c.in_place ? 0 : device_copy(c.bytes);
}

Seconds ReplayPlan::duration(int rank, const Op& op) const {
  switch (op.kind) {
    case OpKind::kernel:
      return op.kernel >= 0 ? kernels_[static_cast<std::size_t>(op.kernel)].time : op.duration;
    case OpKind::cpu:
      return op.duration;
    case OpKind::memcpy:
      if (op.memcpy == workloads::MemcpyKind::device_to_device) return device_copy(op.bytes);
      {
        const HostRoute& route = host_route(rank, op);
        const BytesPerSecond rate = op.host_memory == workloads::HostMemory::pageable
                                        ? std::min(route.bandwidth, route.pageable)
                                        : route.bandwidth;
        return route.latency + op.bytes / rate;
      }
    default:
      return 0;
  }
}

const PlannedSchedule& ReplayPlan::add(models::Schedule schedule, platforms::Allocation allocation) {
  schedules_.push_back(std::make_unique<PlannedSchedule>(static_cast<int>(schedules_.size()), std::move(schedule),
                                                         std::move(allocation), placement_.platform));
  return *schedules_.back();
}

const PlannedSchedule& ReplayPlan::collective(int call, int subgroup) {
  const int canonical = canonical_call_[static_cast<std::size_t>(call)];
  const PlannedSchedule*& slot = by_call_[{canonical, subgroup}];
  if (slot) return *slot;
  const workloads::CollectiveCall& c = trace_.collectives[static_cast<std::size_t>(canonical)];
  const workloads::ProcessGroup& group = trace_.groups[static_cast<std::size_t>(c.group)];
  platforms::Allocation allocation;
  for (int rank : group.subgroups[static_cast<std::size_t>(subgroup)])
    allocation.gpus.push_back(placement_.allocation.gpus[static_cast<std::size_t>(rank)]);
  const models::CollectiveSpec spec{c.op, allocation.ranks(), c.bytes, c.root};
  const models::CollectiveContext context{placement_.platform, allocation, c.options};
  try {
    // lower_collective honours the call's compression (codec steps priced on the platform GPU).
    const std::unique_ptr<models::Algorithm> algorithm = models::AlgorithmRegistry::instance().get(c.algorithm).make();
    models::Schedule schedule = models::lower_collective(c.algorithm, *algorithm, spec, context);
    slot = &add(std::move(schedule), std::move(allocation));
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: collectives[{}]", trace_.origin, call),
                      fmt::format("{} of {} on group '{}' (subgroup {}, {} ranks) cannot be lowered with '{}': {}",
                                  models::to_string(c.op), format_size(c.bytes), group.name, subgroup,
                                  spec.ranks, c.algorithm, e.what()),
                      "");
  }
  return *slot;
}

const PlannedSchedule& ReplayPlan::p2p(int sender, int receiver, Bytes bytes) {
  const PlannedSchedule*& slot = by_pair_[{sender, receiver, bytes}];
  if (slot) return *slot;
  // Not the `direct` algorithm: its sendrecv is nccl-tests' ring shift, which on two ranks
  // moves the bytes both ways; a send moves them one way, rank 0 -> rank 1.
  models::Schedule schedule = models::single_transfer(bytes, "direct");
  platforms::Allocation allocation;
  allocation.gpus = {placement_.allocation.gpus[static_cast<std::size_t>(sender)],
                     placement_.allocation.gpus[static_cast<std::size_t>(receiver)]};
  slot = &add(std::move(schedule), std::move(allocation));
  return *slot;
}

}  // namespace stepsim::sim
