#pragma once
/// @file A Schedule checked against its placement, with endpoints resolved to platform
/// vertices and every step's route looked up once: what both engines start from.
///
/// Contract: constructing it validates everything a user (or an algorithm bug) can get
/// wrong and throws ConfigError naming the schedule, round and step; after that the engines
/// may assume a well-formed schedule. The compact form is kept: a round stands for all its
/// repetitions, because repetitions differ only in blocks, never in routes or bytes.
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "models/schedule.hpp"
#include "platforms/platform.hpp"
#include "sim/engine.hpp"

namespace stepsim::sim {

/// @brief One step of a compact round with its route resolved. A codec step (compress or
/// decompress, src == dst) has no route: it occupies its endpoint for `codec_time`.
struct PreparedStep {
  int src = 0;                ///< endpoint
  int dst = 0;                ///< endpoint
  int src_pair = 0;           ///< (endpoint, channel, lane) index: Schedule::pair_of
  int dst_pair = 0;
  Bytes wire_bytes = 0;
  const platforms::Route* route = nullptr;   ///< platform's route cache or relayed_; null for codec steps
  int via = -1;               ///< relaying endpoint (models::Step::via), -1: none
  bool codec = false;
  Seconds codec_time = 0;

  /// @brief The pairs the step involves, once each (a codec step involves one).
  int pair_count() const { return codec ? 1 : 2; }
};

struct PreparedRound {
  std::vector<PreparedStep> steps;
  int repeat = 1;
};

/// @brief The capacity a link offers schedules that cross it `both_ways` or not: its achieved
/// bandwidth, or its achieved two-way total when it has one (platforms::Link::two_way_bandwidth).
/// Both engines size links with it.
inline BytesPerSecond link_capacity(const platforms::Link& link, bool both_ways) {
  return both_ways && link.two_way_bandwidth() > 0 ? link.two_way_bandwidth() : link.bandwidth();
}

class PreparedSchedule {
 public:
  /// @brief Validates `schedule` on `placement`; throws ConfigError on bad input.
  PreparedSchedule(const models::Schedule& schedule, const Placement& placement);
  /// Steps point into relayed_: a copy would point into the original's.
  PreparedSchedule(const PreparedSchedule&) = delete;
  PreparedSchedule& operator=(const PreparedSchedule&) = delete;

  const models::Schedule& schedule() const { return schedule_; }
  const platforms::Platform& platform() const { return platform_; }
  int ranks() const { return schedule_.spec.ranks; }
  int endpoints() const { return static_cast<int>(endpoint_vertex_.size()); }
  int channels() const { return schedule_.channels; }
  int pairs() const { return schedule_.pairs(); }
  int endpoint_vertex(int endpoint) const { return endpoint_vertex_[endpoint]; }
  const std::vector<PreparedRound>& rounds() const { return rounds_; }
  const models::Protocol& protocol() const { return schedule_.protocol; }
  Seconds launch_latency() const { return schedule_.launch_latency; }


  /// @brief Whether the schedule moves bytes across `link` in both directions.
  bool crosses_both_ways(int link) const {
    auto it = directions_.find(link);
    return it != directions_.end() && it->second == 3;
  }

  /// @brief Bytes per link and direction over the whole (expanded) schedule, ascending link
  /// id, links that carried nothing left out. Engine-independent: it is what the schedule moves.
  std::vector<LinkUsage> link_usage() const;

  /// @brief Where an error in round `round`, step `step` is reported.
  std::string where(int round, int step) const;

 private:
  const models::Schedule& schedule_;
  const platforms::Platform& platform_;
  std::vector<int> endpoint_vertex_;
  std::vector<PreparedRound> rounds_;
  /// Routes through a relaying GPU by (src, via, dst) vertex; std::map keeps them in place.
  std::map<std::array<int, 3>, platforms::Route> relayed_;
  /// Links with a two-way total that the schedule crosses: bit 1 forward, bit 2 backward.
  std::map<int, int> directions_;

  const platforms::Route& relayed_route(int src, int via, int dst);
};

}  // namespace stepsim::sim
