#include "sim/simgrid_network.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u.hpp>

namespace stepsim::sim {

namespace sg4 = simgrid::s4u;

struct SimgridNetwork::Impl {
  double byte_scale;
  std::unique_ptr<sg4::Engine> engine;
  sg4::NetZone* root = nullptr;
  std::vector<sg4::NetZone*> zones;
  std::vector<sg4::Host*> hosts;
  std::vector<int> host_zone;
  std::vector<sg4::Link*> links;
  std::vector<bool> split;
  std::uint64_t next_seq = 0;

  /// A flow or timer waiting for its time; `src` kTimer marks a timer, kLinkless a flow
  /// that crosses no link (delivered as a flow at its time).
  static constexpr int kTimer = -1;
  static constexpr int kLinkless = -2;
  struct Request {
    std::uint64_t seq = 0;
    std::uint64_t tag = 0;
    int src = kTimer, dst = -1;
    Bytes bytes = 0;
  };
  /// Requests by date, each date's in request order; one kernel timer per date fires them.
  std::map<Seconds, std::vector<Request>> later;

  // A started Comm must outlive its completion (SimGrid aborts otherwise); finished ones are
  // released once the clock moves on, when SimGrid no longer touches them.
  struct Flow {
    sg4::CommPtr comm;
    std::uint64_t tag = 0;
    std::uint64_t seq = 0;
  };
  std::vector<Flow> flows;
  std::vector<std::size_t> free_slots;
  std::vector<sg4::CommPtr> finished;

  /// Flows and timers of the current instant, delivered sorted by `seq` once SimGrid is done
  /// with the instant.
  struct Event {
    std::uint64_t seq = 0;
    std::uint64_t tag = 0;
    bool flow = true;
  };
  std::vector<Event> instant;
  /// SimGrid's run loop returns after the iteration in which this set became non-empty (it
  /// is the "vetoed activities" set of the actor-free activity API, which S4U also fills with
  /// activities it could not start yet): the one hook that runs after every completion and
  /// timer of an instant and before the clock moves on.
  std::set<sg4::Activity*> stop;

  void start_now(const Request& request) {
    std::size_t slot;
    if (free_slots.empty()) {
      slot = flows.size();
      flows.emplace_back();
    } else {
      slot = free_slots.back();
      free_slots.pop_back();
    }
    sg4::CommPtr comm = sg4::Comm::sendto_init(hosts[request.src], hosts[request.dst]);
    comm->set_payload_size(static_cast<std::uint64_t>(std::llround(request.bytes * byte_scale)));
    comm->set_data(reinterpret_cast<void*>(slot + 1));
    flows[slot] = {comm, request.tag, request.seq};
    comm->start();
  }

  void schedule(Seconds at, const Request& request) {
    // A kernel timer in the past would fail SimGrid's "max_date >= now" assertion.
    const Seconds date = std::max(at, sg4::Engine::get_clock());
    auto [it, fresh] = later.try_emplace(date);
    it->second.push_back(request);
    if (fresh) simgrid::kernel::timer::Timer::set(date, [this, date] { due(date); });
  }

  void due(Seconds date) {
    auto node = later.extract(date);
    for (const Request& request : node.mapped()) {
      if (request.src >= 0) {
        start_now(request);
      } else {
        instant.push_back({request.seq, request.tag, request.src == kLinkless});
        stop.insert(nullptr);
      }
    }
  }

  void completed(const sg4::Activity& activity) {
    const auto slot = reinterpret_cast<std::size_t>(activity.get_data<void>()) - 1;
    if (activity.get_state() != sg4::Activity::State::FINISHED)
      throw std::runtime_error(fmt::format("SimGrid flow ended in state {}", activity.get_state_str()));
    instant.push_back({flows[slot].seq, flows[slot].tag, true});
    stop.insert(nullptr);
    finished.push_back(std::move(flows[slot].comm));
    free_slots.push_back(slot);
  }

  void deliver(const Callbacks& callbacks) {
    std::vector<Event> events;
    events.swap(instant);
    if (events.empty()) return;
    std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.seq < b.seq; });
    const Seconds now = sg4::Engine::get_clock();
    for (const Event& event : events) (event.flow ? callbacks.flow_done : callbacks.timer)(event.tag, now);
    if (callbacks.settled) callbacks.settled(now);
  }
};

SimgridNetwork::SimgridNetwork(double byte_scale) : impl_(std::make_unique<Impl>()) {
  impl_->byte_scale = byte_scale;
  // Info-level configuration chatter would end up in every CLI run; warnings still show.
  static char arg0[] = "stepsim";
  static char arg1[] = "--log=root.thresh:warning";
  static char* argv[] = {arg0, arg1, nullptr};
  int argc = 2;
  impl_->engine = std::make_unique<sg4::Engine>(&argc, argv);
  // Measured on SimGrid 3.32 (docs/style.md): LV08 applies TCP latency and bandwidth factors;
  // CM02 without cross-traffic and with an unbounded TCP window is plain max-min sharing.
  sg4::Engine::set_config("network/model:CM02");
  sg4::Engine::set_config("network/crosstraffic:0");
  sg4::Engine::set_config("network/TCP-gamma:1e300");
  impl_->root = sg4::create_full_zone("stepsim");
  Impl* impl = impl_.get();
  sg4::Activity::on_completion_cb([impl](const sg4::Activity& activity) { impl->completed(activity); });
  sg4::Engine::on_time_advance_cb([impl](double) { impl->finished.clear(); });
}

SimgridNetwork::~SimgridNetwork() = default;

int SimgridNetwork::add_zone() {
  const int id = static_cast<int>(impl_->zones.size());
  impl_->zones.push_back(sg4::create_full_zone(fmt::format("z{}", id))->set_parent(impl_->root));
  return id;
}

int SimgridNetwork::add_host(int zone) {
  const int id = static_cast<int>(impl_->hosts.size());
  impl_->hosts.push_back(impl_->zones.at(zone)->create_host(fmt::format("h{}", id), 1e9));
  impl_->host_zone.push_back(zone);
  return id;
}

int SimgridNetwork::add_duplex_link(BytesPerSecond bandwidth) {
  const int id = static_cast<int>(impl_->links.size());
  impl_->links.push_back(
      impl_->root->create_split_duplex_link(fmt::format("l{}", id), bandwidth * impl_->byte_scale)
          ->set_latency(0)
          ->seal());
  impl_->split.push_back(true);
  return id;
}

int SimgridNetwork::add_single_link(BytesPerSecond bandwidth, bool shared) {
  const auto policy = shared ? sg4::Link::SharingPolicy::SHARED : sg4::Link::SharingPolicy::FATPIPE;
  const int id = static_cast<int>(impl_->links.size());
  impl_->links.push_back(impl_->root->create_link(fmt::format("l{}", id), bandwidth * impl_->byte_scale)
                             ->set_sharing_policy(policy)
                             ->set_latency(0)
                             ->seal());
  impl_->split.push_back(false);
  return id;
}

int SimgridNetwork::add_shared_link(BytesPerSecond bandwidth) {
  return add_single_link(bandwidth, /*shared=*/true);
}

int SimgridNetwork::add_rate_cap(BytesPerSecond bandwidth) {
  return add_single_link(bandwidth, /*shared=*/false);
}

void SimgridNetwork::add_route(int src_host, int dst_host, const std::vector<RouteLink>& links) {
  const int zone = impl_->host_zone.at(src_host);
  if (impl_->host_zone.at(dst_host) != zone)
    throw std::logic_error(fmt::format("route from host {} (zone {}) to host {} (zone {}) leaves its zone",
                                       src_host, zone, dst_host, impl_->host_zone[dst_host]));
  using Direction = sg4::LinkInRoute::Direction;
  std::vector<sg4::LinkInRoute> route;
  route.reserve(links.size());
  for (const RouteLink& hop : links) {
    const Direction direction =
        impl_->split[hop.link] ? (hop.forward ? Direction::UP : Direction::DOWN) : Direction::NONE;
    route.emplace_back(impl_->links[hop.link], direction);
  }
  impl_->zones[zone]->add_route(impl_->hosts[src_host]->get_netpoint(), impl_->hosts[dst_host]->get_netpoint(),
                                nullptr, nullptr, route, /*symmetrical=*/false);
}

void SimgridNetwork::seal() {
  for (sg4::NetZone* zone : impl_->zones) zone->seal();
  impl_->root->seal();
}

void SimgridNetwork::start_flow(Seconds at, int src_host, int dst_host, Bytes bytes, std::uint64_t tag) {
  const Impl::Request request{impl_->next_seq++, tag, src_host, dst_host, bytes};
  if (at <= sg4::Engine::get_clock())
    impl_->start_now(request);
  else
    impl_->schedule(at, request);
}

void SimgridNetwork::start_timer(Seconds at, std::uint64_t tag) {
  impl_->schedule(at, {impl_->next_seq++, tag, Impl::kTimer, -1, 0});
}

void SimgridNetwork::finish_at(Seconds at, std::uint64_t tag) {
  impl_->schedule(at, {impl_->next_seq++, tag, Impl::kLinkless, -1, 0});
}

void SimgridNetwork::run(const Callbacks& callbacks) {
  Impl& impl = *impl_;
  // The set must not outlive a run that a callback's exception cut short.
  struct Hook {
    explicit Hook(std::set<sg4::Activity*>& stop) { sg4::Activity::set_vetoed_activities(&stop); }
    ~Hook() { sg4::Activity::set_vetoed_activities(nullptr); }
  } hook(impl.stop);
  for (;;) {
    impl.engine->run();
    // Returned with nothing asked to stop: SimGrid has no flow or timer left.
    if (impl.stop.empty()) break;
    impl.stop.clear();
    impl.deliver(callbacks);
  }
}

}  // namespace stepsim::sim
