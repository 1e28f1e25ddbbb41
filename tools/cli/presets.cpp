// `stepsim presets`: what ships with stepsim.
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "tools/cli/commands.hpp"
#include "workloads/workload.hpp"

namespace stepsim::cli {

Action add_presets_command(CLI::App& command) {
  auto format = std::make_shared<std::string>("text");
  add_format_option(command, *format);
  return [format] {
    const auto presets = platforms::list_presets();
    const auto workloads = workloads::list_workload_presets();
    if (*format == "json") {
      nlohmann::json platform_list = nlohmann::json::array();
      for (const auto& p : presets) platform_list.push_back({{"name", p.name}, {"description", p.description}});
      nlohmann::json workload_list = nlohmann::json::array();
      for (const auto& w : workloads) workload_list.push_back({{"name", w.name}, {"description", w.description}});
      std::cout << nlohmann::json{{"platforms", platform_list}, {"workloads", workload_list}}.dump(2) << "\n";
      return 0;
    }
    std::cout << "platforms:\n";
    for (const auto& p : presets) std::cout << fmt::format("  {:<16} {}\n", p.name, p.description);
    std::cout << "workloads:\n";
    for (const auto& w : workloads) std::cout << fmt::format("  {:<16} {}\n", w.name, w.description);
    return 0;
  };
}

}  // namespace stepsim::cli
