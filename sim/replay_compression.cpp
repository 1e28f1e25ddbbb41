#include "sim/replay_compression.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "models/compression/compressed_schedules.hpp"

namespace stepsim::sim {
namespace {

/// A call that replaces its output leaves one call's error in it; see CompressionReport.
bool accumulates(models::CollectiveOp op) {
  return op == models::CollectiveOp::reduce_scatter || op == models::CollectiveOp::allreduce ||
         op == models::CollectiveOp::reduce;
}

using Key = std::tuple<std::string, std::string, std::string, Bytes>;   // op, codec spec, mode, threshold

/// One program's compressed calls of one kind.
struct Tally {
  int calls = 0;
  Bytes bytes = 0;
  double per_call = 0;
  std::map<int, double> by_name;   ///< accumulating ops: Trace::names index -> summed bound
};

}  // namespace

std::vector<CompressionReport> compression_reports(const workloads::Trace& trace, ReplayPlan& plan) {
  std::map<int, double> bound_of_schedule;   // PlannedSchedule::id -> bound at magnitude 1
  std::map<std::string, std::unique_ptr<models::Codec>> codecs;   // codec text -> codec
  std::map<Key, CompressionReport> reports;
  // Ranks running one program issue the same calls; the first such rank stands for them.
  std::vector<int> first_rank(trace.programs.size(), -1);
  for (int rank = trace.ranks - 1; rank >= 0; --rank)
    first_rank[static_cast<std::size_t>(trace.program_of_rank[static_cast<std::size_t>(rank)])] = rank;
  for (std::size_t p = 0; p < trace.programs.size(); ++p) {
    const int rank = first_rank[p];
    if (rank < 0) continue;
    std::map<Key, Tally> tallies;
    for (const workloads::Op& op : trace.programs[p].ops) {
      if (op.kind != workloads::OpKind::collective) continue;
      const workloads::CollectiveCall& call = trace.collectives[static_cast<std::size_t>(op.collective)];
      const models::CompressionOptions& compression = call.options.compression;
      if (compression.codec.empty()) continue;
      std::unique_ptr<models::Codec>& codec = codecs[compression.codec];
      if (!codec) codec = models::parse_codec(compression.codec, trace.origin);
      const bool p2p = compression.mode == models::CompressionMode::p2p;
      const Key key{models::to_string(call.op), codec->spec(), models::to_string(compression.mode),
                    p2p ? compression.threshold : 0};
      Tally& tally = tallies[key];
      ++tally.calls;
      tally.bytes += call.bytes;
      // A one-rank subgroup moves nothing (replay_core.hpp): no schedule, no error.
      const int subgroup = trace.groups[static_cast<std::size_t>(call.group)].subgroup_of_rank[static_cast<std::size_t>(rank)];
      if (trace.groups[static_cast<std::size_t>(call.group)].subgroups[static_cast<std::size_t>(subgroup)].size() < 2)
        continue;
      const PlannedSchedule& planned = plan.collective(op.collective, subgroup);
      const auto [it, added] = bound_of_schedule.try_emplace(planned.id, 0.0);
      if (added) it->second = models::schedule_error_bound(planned.schedule, *codec, 1.0);
      tally.per_call = std::max(tally.per_call, it->second);
      if (accumulates(call.op)) tally.by_name[op.name] += it->second;
    }
    for (const auto& [key, tally] : tallies) {
      CompressionReport& report = reports[key];
      std::tie(report.op, report.codec, report.mode, report.threshold) = key;
      if (tally.calls > report.calls) {
        report.calls = tally.calls;
        report.bytes = tally.bytes;
      }
      report.error_bound_per_call = std::max(report.error_bound_per_call, tally.per_call);
      double iteration = tally.per_call;
      for (const auto& [name, sum] : tally.by_name) iteration = std::max(iteration, sum);
      report.error_bound = std::max(report.error_bound, iteration);
    }
  }
  std::vector<CompressionReport> out;
  for (auto& [key, report] : reports) out.push_back(std::move(report));
  return out;
}

}  // namespace stepsim::sim
