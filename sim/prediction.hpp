#pragma once
/// @file What a replay predicts: iteration time, where the time went, what the links carried.
#include <map>
#include <string>
#include <vector>

#include "platforms/units.hpp"

namespace stepsim::sim {

/// @brief Time of one rank's iteration split by activity. compute = union of the intervals in
/// which a kernel or memcpy runs on any stream; communication = union of the intervals in
/// which a collective, send or recv is in progress on this rank (from when the rank reached
/// it, so waiting for late peers counts); exposed_communication = communication minus its
/// overlap with compute; idle = iteration time - union(compute, communication).
/// by_group splits communication by the process group it runs on (the trace's group names,
/// e.g. fsdp, tp, pp; "p2p" for sends and recvs to global ranks): each group's union of
/// intervals and its part not overlapped by compute. Groups overlap one another, so the
/// entries need not sum to the totals. A pipeline's receives count from when the rank posted
/// them, so the pp entry holds the bubble.
struct GroupTime {
  Seconds communication = 0;
  Seconds exposed = 0;
  bool operator==(const GroupTime&) const = default;
};
struct Breakdown {
  Seconds compute = 0;
  Seconds communication = 0;
  Seconds exposed_communication = 0;
  Seconds idle = 0;
  std::map<std::string, GroupTime> by_group;
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

/// @brief The iteration's compressed collectives of one kind (op, codec, mode, threshold) and
/// the error their lossy passes can leave (models::schedule_error_bound), in units of R, the
/// largest magnitude of the values entering a collective. How errors add up over an iteration:
/// a call that replaces its output (allgather, broadcast, alltoall, sendrecv) leaves at most one
/// call's bound in it; reductions issued under one name on a rank add into one buffer (gradient
/// accumulation reduces each unit's gradients once per micro-batch), so their bounds add up.
struct CompressionReport {
  std::string op;                 ///< models::to_string(CollectiveOp)
  std::string codec;              ///< the codec's canonical text, every parameter given
  std::string mode;               ///< "p2p" or "collective"
  Bytes threshold = 0;            ///< p2p: messages below it stay raw
  int calls = 0;                  ///< per iteration, on the rank that issues the most
  Bytes bytes = 0;                ///< their sizes (nccl-tests convention) summed, on that rank
  double error_bound_per_call = 0;   ///< largest over the calls, x R
  double error_bound = 0;         ///< per iteration, by the rule above, x R
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
  std::vector<CompressionReport> compression;   ///< one per kind of compressed collective; empty without
  std::vector<std::string> notes;
};

}  // namespace stepsim::sim
