#pragma once
/// @file What a replay predicts: iteration time, where the time went, what the links carried.
#include <string>
#include <vector>

#include "platforms/units.hpp"

namespace stepsim::sim {

/// @brief Time of one rank's iteration split by activity. compute = union of the intervals in
/// which a kernel or memcpy runs on any stream; communication = union of the intervals in
/// which a collective, send or recv is in progress on this rank (from when the rank reached
/// it, so waiting for late peers counts); exposed_communication = communication minus its
/// overlap with compute; idle = iteration time - union(compute, communication).
struct Breakdown {
  Seconds compute = 0;
  Seconds communication = 0;
  Seconds exposed_communication = 0;
  Seconds idle = 0;
};

/// @brief Ops of the critical path aggregated by name, numeric name segments folded
/// ("layers.12.mlp" counts as "layers.*.mlp"), longest total first.
struct CriticalPathEntry {
  std::string name;
  std::string kind;          ///< workloads::OpKind name, or "launch" for CPU-bound stretches
  int count = 0;
  Seconds time = 0;          ///< time the path spends in these ops
};

struct LinkReport {
  int link = -1;
  std::string name;          ///< platform link name
  std::string type;          ///< nvlink, pcie, ...
  Bytes bytes_forward = 0;
  Bytes bytes_backward = 0;
  double utilisation = 0;    ///< busiest direction's bytes / (bandwidth * iteration time)
};

struct Prediction {
  std::string engine;
  int ranks = 0;
  Seconds iteration_time = 0;           ///< max over ranks
  int slowest_rank = 0;
  std::vector<Seconds> rank_time;       ///< per rank: when its CPU and streams were all done
  Breakdown breakdown;                  ///< mean over ranks
  Breakdown slowest_rank_breakdown;
  std::vector<CriticalPathEntry> critical_path;   ///< ending at the slowest rank's last op
  std::vector<LinkReport> links;        ///< links that carried bytes, ascending id
  std::int64_t ops_replayed = 0;
  std::vector<std::string> notes;
};

}  // namespace stepsim::sim
