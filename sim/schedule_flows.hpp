#pragma once
/// @file A schedule's steps as SimGrid flows, issued by the dependency rule of
/// models/schedule.hpp: the one implementation that the event engine and the event replay
/// backend share.
///
/// Contract: ScheduleFlows indexes one PreparedSchedule once; each Instance is one run of it
/// from a start time, issuing its flows into a SimgridNetwork shared with any number of other
/// instances (of this or other schedules), each flow tagged `tag_base + k` with k below
/// tag_count(). Steps are issued lazily as they become ready (a 1024-rank ring allreduce is
/// ~2 M steps; only those in flight exist at a time).
///
/// Dependencies are tracked per (endpoint, channel) pair. A pair's *involvements* are the
/// expanded rounds it sends or receives in, numbered 0, 1, ... in round order. A pair issues
/// the sends of involvement j exactly when all its involvements < j have finished, which is
/// the contract's rule (a step starts when its source's steps of earlier rounds finished).
///
/// Cost mapping (the analytical clock's rule, models/schedule_clock.hpp, to the instant when
/// nothing is shared): a step's flow starts `protocol.step_latency` after the step is ready
/// (the sender's handover) and moves `wire_bytes / protocol.efficiency` through the route's
/// links, whose capacities are the platform's. Alone, (b / e) / B = b / (e B), the cost
/// contract's transmission time. When the last byte has left, the step is done at its source;
/// it is done at its destination `route.latency` later (latency as a delayed arrival rather
/// than SimGrid link latency, which would skew max-min shares by 1 / latency; see
/// simgrid_network.hpp). Shared, a low-efficiency flow takes more of a link than its payload,
/// which is what NCCL's LL protocol does (it sends a flag with every 4 bytes of data);
/// scaling bytes rather than link capacities lets schedules of different protocols share one
/// network. The per-step cap is the route's job (PlatformNetwork: cap / efficiency, so a
/// capped lone step takes wire_bytes / cap). With `protocol.slots_in_flight` = k > 0, the
/// j-th transfer of a connection (source pair -> destination pair) waits until transfer j - k
/// has arrived and its credit has travelled back (its route latency again). A codec step
/// (compress / decompress) is no flow: it completes `codec_time` after it is ready
/// (SimgridNetwork::finish_at), as the analytical engine prices it, so the two engines agree
/// on it exactly.
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <vector>

#include "sim/prepared_schedule.hpp"
#include "sim/simgrid_network.hpp"

namespace stepsim::sim {

class ScheduleFlows {
 public:
  /// @param step_hosts  network hosts of each step, by round and step; their routes are
  /// already in the network (PlatformNetwork::step_hosts).
  ScheduleFlows(const PreparedSchedule& prepared, std::vector<std::vector<HostPair>> step_hosts);

  const PreparedSchedule& prepared() const { return prepared_; }
  /// @brief Tags one instance uses: per expanded step, its transmission and its arrival.
  std::uint64_t tag_count() const { return 2 * total_steps_; }
  /// @brief Expanded steps in which `endpoint` sends, receives or runs a codec.
  std::int64_t endpoint_steps(int endpoint) const { return endpoint_steps_[endpoint]; }
  /// @brief Bytes a step's flow moves: wire bytes over the protocol's efficiency.
  static Bytes flow_bytes(const PreparedSchedule& prepared, const PreparedStep& step) {
    return step.wire_bytes / prepared.protocol().efficiency;
  }

  /// @brief One run of the schedule, its steps issued from `start + launch_latency` on.
  class Instance {
   public:
    Instance(const ScheduleFlows& flows, SimgridNetwork& network, std::uint64_t tag_base, Seconds start);
    /// @brief Issues the steps that are ready at the start.
    void start();
    /// @brief The flow tagged `tag` (of this instance) finished at `now`: issues what became
    /// ready and calls `endpoint_done(endpoint)` for each endpoint whose last step it was.
    void flow_done(std::uint64_t tag, Seconds now, const std::function<void(int endpoint)>& endpoint_done);
    /// @brief Calls `started(endpoint, begin, end)` for every codec step as it is issued
    /// (`begin` its ready time, `end` = begin + codec_time), before its completion comes back.
    void on_codec(std::function<void(int endpoint, Seconds begin, Seconds end)> started) {
      codec_started_ = std::move(started);
    }
    const ScheduleFlows& flows() const { return flows_; }
    bool finished() const { return finished_steps_ == flows_.total_steps_; }
    /// @brief Per endpoint, when its last step finished (start + launch_latency when it has none).
    const std::vector<Seconds>& finish() const { return finish_; }

   private:
    /// The pair's earliest unfinished involvement, `base`, is repetition `rep` of
    /// involvements[cursor]; later ones may already have finished steps (receives).
    struct PairState {
      std::size_t cursor = 0;
      int rep = 0;
      bool sends_issued = false;   ///< sends of `base` issued
      std::deque<int> done;        ///< finished steps of involvements base, base + 1, ...
    };
    /// A transfer ready at `ready` that waits for the credit of transfer `needed`.
    struct Waiting {
      std::int64_t needed = 0;
      Seconds ready = 0;
      int round = 0, step = 0;
      std::uint64_t tag = 0;
    };
    /// Per connection (slots_in_flight > 0 only): when the slots of arrived transfers are
    /// credited back (each is claimed by the transfer `slots` later), and the transfers
    /// waiting for a credit not yet known.
    struct ConnectionState {
      std::map<std::int64_t, Seconds> credit;   ///< arrived transfers whose slot is not reused yet
      std::vector<Waiting> waiting;
    };

    void advance(int pair, Seconds now);
    void issue_sends(int pair, int rep, Seconds now);
    /// @brief Starts the flow of a transfer step at `at` (its handover first).
    void start_transfer(int round, int step, std::uint64_t tag, Seconds at);
    /// @brief Starts the transfer now or once its connection has a free slot.
    void gate_transfer(int round, int step, int rep, std::uint64_t tag, Seconds now);
    void credit_arrival(int round, int step, int rep, Seconds credit_time);
    void mark_done(int pair, std::int64_t involvement, Seconds now);
    void endpoint_finished(int endpoint, Seconds now, const std::function<void(int endpoint)>& endpoint_done);

    const ScheduleFlows& flows_;
    SimgridNetwork& network_;
    std::uint64_t tag_base_;
    Seconds start_;
    std::vector<PairState> pairs_;
    std::vector<ConnectionState> connections_;
    std::vector<std::int64_t> remaining_;   ///< per endpoint, steps not finished yet
    std::vector<Seconds> finish_;
    std::uint64_t finished_steps_ = 0;
    std::function<void(int endpoint, Seconds begin, Seconds end)> codec_started_;
  };

 private:
  struct Involvement {
    int round = 0;
    std::int64_t first = 0;      ///< involvement index of the round's first repetition
    int count = 0;               ///< steps of one repetition that send or receive here
    int send_begin = 0, send_end = 0;   ///< this pair's sends: range of rounds_[round].send_order
  };
  struct RoundIndex {
    std::vector<int> send_order;            ///< step indices grouped by source pair
    std::vector<std::int64_t> src_first;    ///< per step: Involvement::first at its source
    std::vector<std::int64_t> dst_first;
    std::uint64_t first_tag = 0;            ///< tag of (repetition 0, step 0)
    /// Per step, with slots_in_flight > 0: its connection, and its transfer number there in
    /// repetition rep = transfer_first + rep * transfer_per_rep.
    std::vector<int> connection;
    std::vector<std::int64_t> transfer_first;
    std::vector<int> transfer_per_rep;
  };

  /// @brief Numbers every transfer on its connection (slots_in_flight > 0 only).
  void index_connections();
  /// @brief Step `step` of compact round `round` in repetition `rep`: its transfer number on
  /// its connection.
  std::int64_t transfer_number(int round, int step, int rep) const;

  const PreparedSchedule& prepared_;
  std::vector<std::vector<HostPair>> step_hosts_;
  std::vector<std::vector<Involvement>> involvements_;   ///< per pair, in round order
  std::vector<RoundIndex> rounds_;
  std::vector<std::int64_t> endpoint_steps_;
  std::uint64_t total_steps_ = 0;
  int connection_count_ = 0;
};

}  // namespace stepsim::sim
