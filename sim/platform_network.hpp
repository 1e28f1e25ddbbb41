#pragma once
/// @file One SimgridNetwork for a platform and every schedule that will run on it.
///
/// Contract: links are the platform's links on the schedules' routes, each created once (full
/// duplex, or one shared capacity when half duplex) and shared by every schedule that crosses
/// it, so concurrent schedules contend. Hosts are platform vertices that are some schedule's
/// endpoint (GPUs, in-network reduction switches), and each (src, dst) vertex pair that a
/// step uses gets its route; a step relayed through a GPU gets a host pair of its own, whose
/// route crosses both legs. A protocol's per-step cap bounds each flow on its own: flows move
/// wire_bytes / efficiency (ScheduleFlows), so the bound is cap / efficiency, a FATPIPE link
/// on the route (one per route, so that it joins no flows that share no physical link).
/// Routes belong to host pairs, so schedules with different bounds get different hosts for
/// the same vertex: one SimgridNetwork zone per distinct bound (no bound is a zone of its
/// own). Construct at most one per process (SimgridNetwork's rule).
#include <cstddef>
#include <memory>
#include <vector>

#include "sim/prepared_schedule.hpp"
#include "sim/simgrid_network.hpp"

namespace stepsim::sim {

class PlatformNetwork {
 public:
  /// @brief Builds and seals the network for `schedules`, which share one platform (and
  /// outlive this object); std::logic_error otherwise.
  explicit PlatformNetwork(const std::vector<const PreparedSchedule*>& schedules);

  SimgridNetwork& network() { return *network_; }
  /// @brief Source and destination host of each step of `schedules[i]`, by round and step:
  /// its endpoints' hosts, or for a step relayed through a GPU (models::Step::via) a pair of
  /// its own whose route crosses both legs.
  const std::vector<std::vector<HostPair>>& step_hosts(std::size_t i) const { return step_hosts_[i]; }

 private:
  std::unique_ptr<SimgridNetwork> network_;
  std::vector<std::vector<std::vector<HostPair>>> step_hosts_;
};

}  // namespace stepsim::sim
