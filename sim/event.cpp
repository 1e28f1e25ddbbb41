#include "sim/event.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "sim/child_process.hpp"
#include "sim/platform_network.hpp"
#include "sim/prepared_schedule.hpp"
#include "sim/schedule_flows.hpp"

namespace stepsim::sim {
namespace {

/// @brief Runs `prepared` alone in this process; per endpoint, when its last step finished.
std::vector<Seconds> simulate(const PreparedSchedule& prepared) {
  PlatformNetwork platform_network({&prepared});
  const ScheduleFlows flows(prepared, platform_network.step_hosts(0));
  ScheduleFlows::Instance instance(flows, platform_network.network(), 0, 0);
  instance.start();
  SimgridNetwork::Callbacks callbacks;
  callbacks.flow_done = [&](std::uint64_t tag, Seconds now) { instance.flow_done(tag, now, nullptr); };
  platform_network.network().run(callbacks);
  if (!instance.finished())
    throw std::logic_error("event engine: schedule '" + prepared.schedule().algorithm +
                           "' has steps that never became ready");
  return instance.finish();
}

std::string encode(const std::vector<Seconds>& values) {
  std::string bytes(values.size() * sizeof(Seconds), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<Seconds> decode(const std::string& bytes) {
  std::vector<Seconds> values(bytes.size() / sizeof(Seconds));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(Seconds));
  return values;
}

}  // namespace

CollectiveResult EventEngine::run(const models::Schedule& schedule, const Placement& placement) {
  // Validation (and its ConfigErrors) and every Platform::route lookup happen here in the
  // parent; the child only simulates, so it never needs a lock another thread might hold.
  const PreparedSchedule prepared(schedule, placement);
  const std::vector<Seconds> finish =
      decode(run_in_child([&] { return encode(simulate(prepared)); }));
  if (static_cast<int>(finish.size()) != prepared.endpoints())
    throw std::logic_error("event engine: child returned " + std::to_string(finish.size()) +
                           " finish times for " + std::to_string(prepared.endpoints()) + " endpoints");

  CollectiveResult result;
  result.time = *std::max_element(finish.begin(), finish.end());
  result.rank_finish.assign(finish.begin(), finish.begin() + prepared.ranks());
  result.link_usage = prepared.link_usage();
  return result;
}

}  // namespace stepsim::sim
