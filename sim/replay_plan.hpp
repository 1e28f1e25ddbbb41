#pragma once
/// @file What each op of a Trace costs on a placement (ReplayPlan): kernels, copies, and the
/// schedules of its collectives and send/recv, lowered once per distinct kind. Internal to sim/.
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "models/compute/kernel.hpp"
#include "sim/engine.hpp"
#include "workloads/trace.hpp"

namespace stepsim::sim {

/// @brief A lowered schedule and the platform GPUs of its ranks (stable address: the backend
/// keeps references to `schedule` and `placement`).
struct PlannedSchedule {
  PlannedSchedule(int id_, models::Schedule schedule_, platforms::Allocation allocation_,
                  const platforms::Platform& platform)
      : id(id_), schedule(std::move(schedule_)), allocation(std::move(allocation_)), placement{platform, allocation} {}
  PlannedSchedule(const PlannedSchedule&) = delete;
  PlannedSchedule& operator=(const PlannedSchedule&) = delete;

  int id;                              ///< index in ReplayPlan::schedules()
  models::Schedule schedule;
  platforms::Allocation allocation;    ///< platform GPUs of the schedule's ranks, in rank order
  Placement placement;                 ///< {platform, allocation}
};

/// @brief The prices of what a trace runs: kernels (models::kernel_cost on the platform's GPU),
/// memcpys, and every collective and send/recv lowered once per distinct kind.
///
/// Contract: collectives are lowered by their call's algorithm with its options, compression
/// included (models::lower_collective), on the platform GPUs of the
/// subgroup (in subgroup order), once per (distinct call, subgroup): calls equal as
/// CollectiveCall share a schedule, so a trace with one call per layer still lowers each size
/// once (an out-of-place call on a one-rank subgroup is a device-to-device copy of its bytes,
/// NCCL's local copy). A send/recv of `bytes` is a two-rank `sendrecv` schedule (algorithm "direct") with the
/// single transfer sender -> receiver, once per (sender, receiver, bytes). A device-to-device
/// memcpy reads and writes HBM: 2 bytes / hbm_bandwidth. A host copy crosses the platform route
/// between the GPU and the CPU of its socket: route latency + bytes / route bandwidth, and a copy
/// of pageable memory at most the CPU's pageable_copy_bandwidth (the driver's staging); a
/// platform without a CPU vertex, or without that figure for a pageable copy, is a ConfigError
/// naming the op.
class ReplayPlan {
 public:
  ReplayPlan(const workloads::Trace& trace, const Placement& placement);

  /// @brief Schedule of collective call `call` (Trace::collectives index) on subgroup
  /// `subgroup` of its group; lowers it on first use.
  const PlannedSchedule& collective(int call, int subgroup);
  /// @brief Schedule of a send/recv of `bytes` from global rank `sender` to `receiver`.
  const PlannedSchedule& p2p(int sender, int receiver, Bytes bytes);
  const std::vector<std::unique_ptr<PlannedSchedule>>& schedules() const { return schedules_; }

  const models::KernelCost& kernel(int index) const { return kernels_[static_cast<std::size_t>(index)]; }
  /// @brief Device time of a kernel or memcpy op run by `rank`; CPU time of a cpu op.
  Seconds duration(int rank, const workloads::Op& op) const;
  /// @brief Time of collective call `call` (Trace::collectives index) on a one-rank subgroup:
  /// nothing when in place, else a device-to-device copy of its bytes.
  Seconds one_rank_copy(int call) const;

 private:
  struct HostRoute {
    Seconds latency = 0;
    BytesPerSecond bandwidth = 0;
    BytesPerSecond pageable = 0;  ///< the host CPU's pageable_copy_bandwidth
  };
  const HostRoute& host_route(int rank, const workloads::Op& op) const;
  Seconds device_copy(Bytes bytes) const;
  const PlannedSchedule& add(models::Schedule schedule, platforms::Allocation allocation);

  const workloads::Trace& trace_;
  const Placement& placement_;
  std::vector<models::KernelCost> kernels_;
  std::vector<int> canonical_call_;                          ///< call -> lowest equal call
  std::map<std::pair<int, int>, const PlannedSchedule*> by_call_;            ///< (canonical call, subgroup)
  std::map<std::tuple<int, int, Bytes>, const PlannedSchedule*> by_pair_;    ///< (sender, receiver, bytes)
  std::vector<std::unique_ptr<PlannedSchedule>> schedules_;
  /// Per rank {to host, from host}; filled only when the trace copies to or from the host.
  std::vector<std::pair<HostRoute, HostRoute>> host_;
};

}  // namespace stepsim::sim
