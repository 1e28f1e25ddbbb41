// The event replay backend: collectives of a replay as flows of one SimGrid network. Lone
// collectives cost what the engines say; concurrent ones contend (hand-computed max-min cases);
// callbacks come in time, then request, order. SimGrid keeps one simulation per process, so
// every backend runs in a forked child (run_in_child).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "models/algorithm.hpp"
#include "platforms/loader.hpp"
#include "sim/analytical.hpp"
#include "sim/child_process.hpp"
#include "sim/event.hpp"
#include "sim/replay_event.hpp"
#include "sim/tests/fixtures.hpp"

namespace stepsim::sim::testing {
namespace {

using Token = ReplayBackend::Token;

struct Event {
  bool woken = false;
  Token token = 0;
  int member = -1;
  Seconds time = 0;
  bool operator==(const Event&) const = default;
};

/// @brief Runs a fresh event backend in a child: `setup` declares and makes the first
/// requests, `react` (when given) sees every callback and may request more.
std::vector<Event> replay(const std::function<void(ReplayBackend&)>& setup,
                          const std::function<void(ReplayBackend&, const Event&)>& react = {}) {
  const std::string bytes = run_in_child([&] {
    const auto backend = make_event_replay_backend();
    setup(*backend);
    std::vector<Event> events;
    auto record = [&](const Event& event) {
      events.push_back(event);
      if (react) react(*backend, event);
    };
    ReplayBackend::Callbacks callbacks;
    callbacks.woken = [&](Token token, Seconds now) { record({true, token, -1, now}); };
    callbacks.member_done = [&](Token token, int member, Seconds now) { record({false, token, member, now}); };
    backend->run(callbacks);
    std::string out(events.size() * sizeof(Event), '\0');
    std::memcpy(out.data(), events.data(), out.size());
    return out;
  });
  std::vector<Event> events(bytes.size() / sizeof(Event));
  std::memcpy(events.data(), bytes.data(), bytes.size());
  return events;
}

/// @brief Per member of collective `token`, when it was reported done (-1: never; a second
/// report fails the test).
std::vector<Seconds> member_finish(const std::vector<Event>& events, Token token, int ranks) {
  std::vector<Seconds> finish(ranks, -1);
  for (const Event& event : events) {
    if (event.woken || event.token != token) continue;
    EXPECT_GE(event.member, 0);
    EXPECT_LT(event.member, ranks);
    EXPECT_EQ(finish[event.member], -1) << "member " << event.member << " reported twice";
    finish[event.member] = event.time;
  }
  return finish;
}

void expect_times(const std::vector<Seconds>& actual, const std::vector<Seconds>& expected, Seconds offset,
                  double tolerance, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (std::size_t m = 0; m < actual.size(); ++m)
    EXPECT_NEAR(actual[m], offset + expected[m], tolerance * (offset + expected[m])) << what << ", member " << m;
}

models::Schedule lower(const std::string& algorithm, const platforms::Platform& platform,
                       const platforms::Allocation& allocation, models::CollectiveOp op, Bytes bytes,
                       const models::AlgorithmOptions& options = {}) {
  const models::CollectiveContext context{platform, allocation, options};
  return models::AlgorithmRegistry::instance().get(algorithm).make()->lower(
      {op, allocation.ranks(), bytes, 0}, context);
}

platforms::Platform preset(const std::string& name, int nodes) {
  platforms::PlatformOptions options;
  options.nodes = nodes;
  return platforms::load_platform(name, options);
}

/// A lone allreduce costs, per member, what both engines say.
void expect_lone_agreement(const platforms::Platform& platform, const std::string& gpus, Seconds start,
                           const std::string& algorithm = "ring", Bytes bytes = 256.0 * 1024 * 1024,
                           const models::AlgorithmOptions& options = {}) {
  const platforms::Allocation allocation = platforms::parse_allocation(gpus, platform);
  const models::Schedule schedule =
      lower(algorithm, platform, allocation, models::CollectiveOp::allreduce, bytes, options);
  const Placement placement{platform, allocation};
  const auto events = replay([&](ReplayBackend& backend) {
    backend.declare(schedule, placement);
    backend.start_collective(start, schedule, 7);
  });
  ASSERT_EQ(static_cast<int>(events.size()), allocation.ranks());
  const std::vector<Seconds> finish = member_finish(events, 7, allocation.ranks());
  expect_times(finish, EventEngine().run(schedule, placement).rank_finish, start, 1e-9, "vs event engine");
  expect_times(finish, AnalyticalEngine().run(schedule, placement).rank_finish, start, 1e-9, "vs analytical");
}

TEST(EventReplay, LoneRingAllreduceOnDgxA100MatchesBothEngines) {
  expect_lone_agreement(preset("dgx-a100", 1), "0-7", 0);
}

TEST(EventReplay, LoneRingAllreduceAcrossTwoDgxH100MatchesBothEngines) {
  expect_lone_agreement(preset("dgx-h100", 2), "", 0);
}

TEST(EventReplay, LoneNcclNvlsAllreduceMatchesBothEngines) {
  // NCCL's choice for 1 GiB on a DGX H100: NVLS, whose steps go through the NVSwitch (an
  // endpoint that is not a member), capped per step.
  const platforms::Platform platform = preset("dgx-h100", 1);
  const models::Schedule probe = lower("nccl", platform, platforms::parse_allocation("", platform),
                                       models::CollectiveOp::allreduce, 1024.0 * 1024 * 1024);
  ASSERT_EQ(probe.switch_vertices.size(), 1u);
  ASSERT_LT(probe.protocol.per_step_bandwidth_cap, INFINITY);
  expect_lone_agreement(platform, "", 0, "nccl", 1024.0 * 1024 * 1024);
}

TEST(EventReplay, LoneNcclLowLatencyAllreduceMatchesBothEngines) {
  // A small ring allreduce in NCCL's LL protocol: half of every link usable, capped per step.
  models::AlgorithmOptions options;
  options.extra = {{"algo", "ring"}, {"proto", "LL"}};
  const platforms::Platform platform = preset("dgx-h100", 2);
  const models::Schedule probe = lower("nccl", platform, platforms::parse_allocation("", platform),
                                       models::CollectiveOp::allreduce, 256.0 * 1024, options);
  ASSERT_EQ(probe.protocol.efficiency, 0.5);
  expect_lone_agreement(platform, "", 0, "nccl", 256.0 * 1024, options);
}

TEST(EventReplay, CollectiveStartedLaterIsShiftedByItsStart) {
  expect_lone_agreement(preset("dgx-a100", 1), "0-7", 1e-3);
}

TEST(EventReplay, CollectivesOnDisjointLinksFinishLikeOne) {
  const platforms::Platform platform = preset("dgx-a100", 1);
  const platforms::Allocation low = platforms::parse_allocation("0-3", platform);
  const platforms::Allocation high = platforms::parse_allocation("4-7", platform);
  const Bytes bytes = 128.0 * 1024 * 1024;
  const models::Schedule a = lower("ring", platform, low, models::CollectiveOp::allreduce, bytes);
  const models::Schedule b = lower("ring", platform, high, models::CollectiveOp::allreduce, bytes);
  const Placement on_low{platform, low}, on_high{platform, high};
  const CollectiveResult alone_a = EventEngine().run(a, on_low);
  const CollectiveResult alone_b = EventEngine().run(b, on_high);
  // Precondition: the two rings cross no common link (each GPU's NVLinks are its own).
  std::set<int> links_a;
  for (const LinkUsage& usage : alone_a.link_usage) links_a.insert(usage.link);
  for (const LinkUsage& usage : alone_b.link_usage) ASSERT_EQ(links_a.count(usage.link), 0u) << usage.link;

  const auto events = replay([&](ReplayBackend& backend) {
    backend.declare(a, on_low);
    backend.declare(b, on_high);
    backend.start_collective(0, a, 1);
    backend.start_collective(0, b, 2);
  });
  expect_times(member_finish(events, 1, 4), alone_a.rank_finish, 0, 1e-9, "low GPUs");
  expect_times(member_finish(events, 2, 4), alone_b.rank_finish, 0, 1e-9, "high GPUs");
}

TEST(EventReplay, CollectivesOnTheSameLinkShareIt) {
  // One 50 GB/s, 1 us NVLink between two GPUs.
  const BytesPerSecond bandwidth = 50e9;
  const Seconds latency = 1e-6;
  const Bytes bytes = 1e9;
  const auto platform = two_gpus(bandwidth, latency);
  const auto allocation = first_gpus(2);
  const Placement placement{platform, allocation};
  const models::Schedule send = single_transfer(bytes);          // GPU 0 -> GPU 1
  const models::Schedule exchange = ring_allgather(2, 2 * bytes);   // one block each way

  // Started together, two sends split the link: each sender is done after 2 bytes / bandwidth,
  // twice the transfer time alone, and its bytes land `latency` later. The exchanges use both
  // directions, each shared by two; every member receives, so each ends at the later time.
  const auto together = replay([&](ReplayBackend& backend) {
    backend.declare(send, placement);
    backend.declare(exchange, placement);
    backend.start_collective(0, send, 1);
    backend.start_collective(0, send, 2);
    backend.start_collective(1.0, exchange, 3);
    backend.start_collective(1.0, exchange, 4);
  });
  const Seconds shared = 2 * bytes / bandwidth;
  for (Token token : {1, 2})
    expect_times(member_finish(together, token, 2), {shared, shared + latency}, 0, 1e-9, "send");
  for (Token token : {3, 4})
    expect_times(member_finish(together, token, 2), {shared + latency, shared + latency}, 1.0, 1e-9, "exchange");

  // Staggered: the second send starts when the first has moved a quarter of its bytes alone;
  // then both move at half the bandwidth until the first ends, and the second finishes alone.
  const Seconds second_start = 0.25 * bytes / bandwidth;
  const auto staggered = replay([&](ReplayBackend& backend) {
    backend.declare(send, placement);
    backend.start_collective(0, send, 1);
    backend.start_collective(second_start, send, 2);
  });
  const Bytes first_left = bytes - second_start * bandwidth;
  const Seconds first_end = second_start + first_left / (bandwidth / 2);
  const Seconds second_end = first_end + (bytes - first_left) / bandwidth;
  expect_times(member_finish(staggered, 1, 2), {first_end, first_end + latency}, 0, 1e-9, "first");
  expect_times(member_finish(staggered, 2, 2), {second_end, second_end + latency}, 0, 1e-9, "second");
}

TEST(EventReplay, WakesComeInTimeThenRequestOrder) {
  const auto events = replay(
      [](ReplayBackend& backend) {
        backend.wake_at(2e-3, 1);
        backend.wake_at(1e-3, 2);
        backend.wake_at(2e-3, 3);
        backend.wake_at(2e-3, 4);
        backend.wake_at(0, 5);
      },
      [](ReplayBackend& backend, const Event& event) {
        // Requests from a callback: one for the current instant (after what is due now), one
        // for a later instant (after the requests made before it).
        if (event.token == 2) {
          backend.wake_at(event.time, 6);
          backend.wake_at(2e-3, 7);
        }
      });
  const std::vector<Event> expected = {{true, 5, -1, 0},    {true, 2, -1, 1e-3}, {true, 6, -1, 1e-3},
                                       {true, 1, -1, 2e-3}, {true, 3, -1, 2e-3}, {true, 4, -1, 2e-3},
                                       {true, 7, -1, 2e-3}};
  EXPECT_EQ(events, expected);
}

TEST(EventReplay, EqualTimeCallbacksOfCollectivesAndWakesComeInRequestOrder) {
  // Three ranks, only 0 -> 1 moves data: rank 2 is done as soon as the collective launched.
  const auto platform = nvswitch_node(3, 100e9, 1e-6);
  const auto allocation = first_gpus(3);
  models::Schedule schedule = single_transfer(1e6);
  schedule.spec.ranks = 3;
  schedule.launch_latency = 1e-3;
  const Placement placement{platform, allocation};
  const auto setup = [&](ReplayBackend& backend) {
    backend.declare(schedule, placement);
    backend.start_collective(0, schedule, 10);
    backend.wake_at(1e-3, 11);
    backend.start_collective(0, schedule, 12);
    backend.wake_at(1e-3, 13);
  };
  const auto events = replay(setup);
  ASSERT_EQ(events.size(), 8u);
  const std::vector<Event> at_launch = {events.begin(), events.begin() + 4};
  const std::vector<Event> expected = {
      {false, 10, 2, 1e-3}, {true, 11, -1, 1e-3}, {false, 12, 2, 1e-3}, {true, 13, -1, 1e-3}};
  EXPECT_EQ(at_launch, expected);
  // The two transfers share one route at 100 GB/s; both senders are done together, the
  // earlier request's first, and both receivers the route's 1 us latency later, in that order.
  const Seconds sent = 1e-3 + 1e6 / 50e9;
  const std::vector<std::pair<Token, int>> order = {{10, 0}, {12, 0}, {10, 1}, {12, 1}};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(events[4 + i].token, order[i].first);
    EXPECT_EQ(events[4 + i].member, order[i].second);
    const Seconds end = sent + (order[i].second == 1 ? 1e-6 : 0);
    EXPECT_NEAR(events[4 + i].time, end, 1e-9 * end);
  }
  // Deterministic: the same requests give the same callbacks, bit for bit.
  EXPECT_EQ(replay(setup), events);
}

TEST(EventReplay, RequestsInThePastAreBugs) {
  try {
    replay([](ReplayBackend& backend) { backend.wake_at(1e-3, 1); },
           [](ReplayBackend& backend, const Event& event) { backend.wake_at(event.time / 2, 2); });
    FAIL() << "a wake before now was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("before now"), std::string::npos) << e.what();
  }
}

TEST(EventReplay, LowEfficiencyProtocolScalesFlowBytes) {
  // Alone, an LL-like step (half the link usable) costs what the analytical formula says.
  const BytesPerSecond bandwidth = 40e9;
  const Seconds latency = 1e-6;
  const Bytes bytes = 1e8;
  const auto platform = two_gpus(bandwidth, latency);
  const auto allocation = first_gpus(2);
  const Placement placement{platform, allocation};
  models::Schedule ll = single_transfer(bytes);
  ll.protocol = {"LL", 0.5, 0.5e-6, std::numeric_limits<double>::infinity()};
  ll.launch_latency = 3e-6;
  models::Schedule simple = single_transfer(bytes);
  simple.protocol.name = "Simple";

  const auto alone = replay([&](ReplayBackend& backend) {
    backend.declare(ll, placement);
    backend.start_collective(0, ll, 1);
  });
  const Seconds formula = 3e-6 + 0.5e-6 + latency + bytes / (0.5 * bandwidth);
  expect_times(member_finish(alone, 1, 2), {formula - latency, formula}, 0, 1e-9, "LL alone");
  expect_times(member_finish(alone, 1, 2), AnalyticalEngine().run(ll, placement).rank_finish, 0, 1e-9,
               "LL alone vs analytical");

  // Sharing the link with a Simple step of the same payload, the LL flow moves twice the
  // bytes at the same max-min share: Simple ends after 2 bytes / bandwidth, by when LL has
  // moved half its wire bytes; it sends the other half alone.
  ll.protocol.step_latency = 0;
  ll.launch_latency = 0;
  const auto shared = replay([&](ReplayBackend& backend) {
    backend.declare(ll, placement);
    backend.declare(simple, placement);
    backend.start_collective(0, simple, 1);
    backend.start_collective(0, ll, 2);
  });
  const Seconds simple_end = latency + 2 * bytes / bandwidth;
  const Seconds ll_end = simple_end + bytes / bandwidth;
  expect_times(member_finish(shared, 1, 2), {simple_end - latency, simple_end}, 0, 1e-9, "Simple beside LL");
  expect_times(member_finish(shared, 2, 2), {ll_end - latency, ll_end}, 0, 1e-9, "LL beside Simple");
}

TEST(EventReplay, PerStepCapsBoundEachFlowOnItsOwn) {
  const BytesPerSecond bandwidth = 60e9;
  const Seconds latency = 1e-6;
  const Bytes bytes = 1e8;
  const auto platform = two_gpus(bandwidth, latency);
  const auto allocation = first_gpus(2);
  const Placement placement{platform, allocation};
  models::Schedule capped = single_transfer(bytes);
  capped.protocol.per_step_bandwidth_cap = 10e9;
  models::Schedule capped_ll = capped;   // the cap is on payload bytes, whatever the efficiency
  capped_ll.protocol.efficiency = 0.5;
  const models::Schedule free = single_transfer(4 * bytes);

  // Alone, a capped step takes bytes / cap.
  const auto alone = replay([&](ReplayBackend& backend) {
    backend.declare(capped_ll, placement);
    backend.start_collective(0, capped_ll, 1);
  });
  const Seconds capped_time = latency + bytes / 10e9;
  expect_times(member_finish(alone, 1, 2), {capped_time - latency, capped_time}, 0, 1e-9, "capped alone");
  expect_times(member_finish(alone, 1, 2), AnalyticalEngine().run(capped_ll, placement).rank_finish, 0, 1e-9,
               "capped alone vs analytical");

  // Three schedules with different caps between the same GPUs. Max-min on the 60 GB/s link:
  // the capped flow is held to 10 GB/s, the LL one to 20 GB/s of wire bytes (its 10 GB/s of
  // payload), the uncapped one gets the other 30 GB/s, then all 60 once the others are done.
  const auto together = replay([&](ReplayBackend& backend) {
    backend.declare(capped, placement);
    backend.declare(capped_ll, placement);
    backend.declare(free, placement);
    backend.start_collective(0, capped, 1);
    backend.start_collective(0, capped_ll, 2);
    backend.start_collective(0, free, 3);
  });
  for (Token token : {1, 2})
    expect_times(member_finish(together, token, 2), {capped_time - latency, capped_time}, 0, 1e-9, "capped");
  const Seconds free_end = capped_time + (4 * bytes - 30e9 * (capped_time - latency)) / bandwidth;
  expect_times(member_finish(together, 3, 2), {free_end - latency, free_end}, 0, 1e-9, "uncapped");
}

}  // namespace
}  // namespace stepsim::sim::testing
