// `stepsim presets`: what ships with stepsim.
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "tools/cli/commands.hpp"

namespace stepsim::cli {

Action add_presets_command(CLI::App& command) {
  auto format = std::make_shared<std::string>("text");
  add_format_option(command, *format);
  return [format] {
    const auto presets = platforms::list_presets();
    if (*format == "json") {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& p : presets) list.push_back({{"name", p.name}, {"description", p.description}});
      std::cout << nlohmann::json{{"platforms", list}}.dump(2) << "\n";
      return 0;
    }
    std::cout << "platforms:\n";
    for (const auto& p : presets) std::cout << fmt::format("  {:<14} {}\n", p.name, p.description);
    return 0;
  };
}

}  // namespace stepsim::cli
