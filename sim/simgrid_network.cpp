#include "sim/simgrid_network.hpp"

#include <cmath>
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
  sg4::NetZone* zone = nullptr;
  std::vector<sg4::Host*> hosts;
  std::vector<sg4::Link*> links;
  std::vector<bool> split;
  std::function<void(std::uint64_t, Seconds)> on_finish;

  // A started Comm must outlive its completion (SimGrid aborts otherwise); finished ones are
  // released once the clock moves on, when SimGrid no longer touches them.
  struct Flow {
    sg4::CommPtr comm;
    std::uint64_t tag = 0;
  };
  std::vector<Flow> flows;
  std::vector<std::size_t> free_slots;
  std::vector<sg4::CommPtr> finished;

  void start_now(int src, int dst, Bytes bytes, std::uint64_t tag) {
    std::size_t slot;
    if (free_slots.empty()) {
      slot = flows.size();
      flows.emplace_back();
    } else {
      slot = free_slots.back();
      free_slots.pop_back();
    }
    sg4::CommPtr comm = sg4::Comm::sendto_init(hosts[src], hosts[dst]);
    comm->set_payload_size(static_cast<std::uint64_t>(std::llround(bytes * byte_scale)));
    comm->set_data(reinterpret_cast<void*>(slot + 1));
    flows[slot] = {comm, tag};
    comm->start();
  }

  void completed(const sg4::Activity& activity) {
    const auto slot = reinterpret_cast<std::size_t>(activity.get_data<void>()) - 1;
    if (activity.get_state() != sg4::Activity::State::FINISHED)
      throw std::runtime_error(fmt::format("SimGrid flow ended in state {}", activity.get_state_str()));
    const std::uint64_t tag = flows[slot].tag;
    finished.push_back(std::move(flows[slot].comm));
    free_slots.push_back(slot);
    on_finish(tag, sg4::Engine::get_clock());
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
  impl_->zone = sg4::create_full_zone("stepsim");
}

SimgridNetwork::~SimgridNetwork() = default;

int SimgridNetwork::add_host() {
  const int id = static_cast<int>(impl_->hosts.size());
  impl_->hosts.push_back(impl_->zone->create_host(fmt::format("h{}", id), 1e9));
  return id;
}

int SimgridNetwork::add_duplex_link(BytesPerSecond bandwidth) {
  const int id = static_cast<int>(impl_->links.size());
  impl_->links.push_back(
      impl_->zone->create_split_duplex_link(fmt::format("l{}", id), bandwidth * impl_->byte_scale)
          ->set_latency(0)
          ->seal());
  impl_->split.push_back(true);
  return id;
}

int SimgridNetwork::add_single_link(BytesPerSecond bandwidth, bool shared) {
  const auto policy = shared ? sg4::Link::SharingPolicy::SHARED : sg4::Link::SharingPolicy::FATPIPE;
  const int id = static_cast<int>(impl_->links.size());
  impl_->links.push_back(impl_->zone->create_link(fmt::format("l{}", id), bandwidth * impl_->byte_scale)
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
  using Direction = sg4::LinkInRoute::Direction;
  std::vector<sg4::LinkInRoute> route;
  route.reserve(links.size());
  for (const RouteLink& hop : links) {
    const Direction direction =
        impl_->split[hop.link] ? (hop.forward ? Direction::UP : Direction::DOWN) : Direction::NONE;
    route.emplace_back(impl_->links[hop.link], direction);
  }
  impl_->zone->add_route(impl_->hosts[src_host]->get_netpoint(), impl_->hosts[dst_host]->get_netpoint(),
                         nullptr, nullptr, route, /*symmetrical=*/false);
}

void SimgridNetwork::seal() { impl_->zone->seal(); }

void SimgridNetwork::start_flow(Seconds at, int src_host, int dst_host, Bytes bytes, std::uint64_t tag) {
  if (at <= sg4::Engine::get_clock()) {
    impl_->start_now(src_host, dst_host, bytes, tag);
    return;
  }
  Impl* impl = impl_.get();
  simgrid::kernel::timer::Timer::set(
      at, [impl, src_host, dst_host, bytes, tag] { impl->start_now(src_host, dst_host, bytes, tag); });
}

void SimgridNetwork::run(const std::function<void(std::uint64_t, Seconds)>& on_finish) {
  impl_->on_finish = on_finish;
  Impl* impl = impl_.get();
  sg4::Activity::on_completion_cb([impl](const sg4::Activity& activity) { impl->completed(activity); });
  sg4::Engine::on_time_advance_cb([impl](double) { impl->finished.clear(); });
  impl_->engine->run();
}

}  // namespace stepsim::sim
