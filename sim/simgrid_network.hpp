#pragma once
/// @file The thin adapter to SimGrid 3.32 S4U: the only code that includes SimGrid headers.
///
/// Contract: a flow-level network of hosts, links and explicit one-way routes, run with
/// SimGrid's CM02 max-min model with TCP factors, cross-traffic and the TCP window cap off,
/// so a lone flow of n bytes on a route of bottleneck bandwidth B takes exactly n / B.
/// Links have no latency here: callers start a flow at the moment its latency has elapsed
/// (SimGrid would otherwise weight each flow's share by 1 / its route latency, the TCP RTT
/// unfairness, instead of the plain max-min fair share the cost contract wants).
///
/// Determinism: every flow and timer gets a sequence number when it is requested; whatever
/// completes at one instant is delivered in that order, then `settled` is called, before the
/// clock moves on. (SimGrid 3.32 itself orders equal-date kernel timers and equal-time flow
/// completions by its heaps' internals, not by request: measured, six timers set for one
/// date fired as 0 1 2 4 5 3.) Flows that start at one instant start in request order too.
///
/// SimGrid keeps one simulation per process, so construct at most one SimgridNetwork per
/// process (the engines run it in a forked child).
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "platforms/units.hpp"

namespace stepsim::sim {

/// @brief A flow's source and destination host.
struct HostPair {
  int src = -1;
  int dst = -1;
};

class SimgridNetwork {
 public:
  /// @param byte_scale  SimGrid payloads are whole numbers, so bytes and bandwidths are both
  /// multiplied by this factor (times are unchanged) to keep fractional byte counts exact.
  explicit SimgridNetwork(double byte_scale);
  ~SimgridNetwork();
  SimgridNetwork(const SimgridNetwork&) = delete;
  SimgridNetwork& operator=(const SimgridNetwork&) = delete;

  /// @brief A group of hosts whose routes stay among themselves; links belong to no zone and
  /// may be on routes of every zone. Why zones: SimGrid keeps a dense route table per zone,
  /// (hosts of the zone)^2 entries, so callers that need several hosts per platform vertex
  /// (one per per-flow rate cap) keep each group in its own zone instead of squaring the sum.
  int add_zone();
  int add_host(int zone);
  /// @brief A full-duplex link: each direction has `bandwidth` to itself, max-min shared.
  int add_duplex_link(BytesPerSecond bandwidth);
  /// @brief A link that bounds every flow crossing it to `bandwidth` without any sharing
  /// (SimGrid FATPIPE): a per-flow rate cap.
  int add_rate_cap(BytesPerSecond bandwidth);
  /// @brief A link whose two directions share one capacity (platforms::Link::half_duplex).
  int add_shared_link(BytesPerSecond bandwidth);

  struct RouteLink {
    int link = -1;
    bool forward = true;   ///< ignored for rate caps and shared links
  };
  /// @brief One-way route from `src` to `dst`, two hosts of one zone (the reverse needs its
  /// own call).
  void add_route(int src_host, int dst_host, const std::vector<RouteLink>& links);
  /// @brief Freezes the platform; flows may be started afterwards.
  void seal();

  /// @brief Starts a flow of `bytes` at time `at` (now when `at` <= now). `tag` comes back
  /// through Callbacks::flow_done when its last byte arrived.
  void start_flow(Seconds at, int src_host, int dst_host, Bytes bytes, std::uint64_t tag);
  /// @brief Calls Callbacks::timer with `tag` at time `at` (at the current instant, after
  /// what is being delivered, when `at` <= now).
  void start_timer(Seconds at, std::uint64_t tag);
  /// @brief Calls Callbacks::flow_done with `tag` at time `at`, as a flow crossing no link
  /// would finish: work that occupies an endpoint, not the network (a codec kernel).
  void finish_at(Seconds at, std::uint64_t tag);

  struct Callbacks {
    std::function<void(std::uint64_t tag, Seconds now)> flow_done;
    std::function<void(std::uint64_t tag, Seconds now)> timer;   ///< needed once a timer is started
    /// After the flows and timers of one instant were delivered; may be empty.
    std::function<void(Seconds now)> settled;
  };
  /// @brief Runs until no flow or timer is left; callbacks may start further ones.
  void run(const Callbacks& callbacks);

 private:
  /// @brief One link for both directions: shared by all its flows (SHARED) or bounding each
  /// flow on its own (FATPIPE, the per-step rate cap).
  int add_single_link(BytesPerSecond bandwidth, bool shared);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stepsim::sim
