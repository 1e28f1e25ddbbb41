#include "sim/engine.hpp"

#include "platforms/config_error.hpp"
#include "sim/analytical.hpp"
#include "sim/event.hpp"

namespace stepsim::sim {

std::unique_ptr<Engine> make_engine(const std::string& name) {
  if (name == "analytical") return std::make_unique<AnalyticalEngine>();
  if (name == "event") return std::make_unique<EventEngine>();
  throw ConfigError("--engine", "unknown engine '" + name + "'", "use analytical or event");
}

}  // namespace stepsim::sim
