#pragma once
/// @file Loading platforms from presets and YAML files.
///
/// Contract: every key is checked (unknown keys rejected with the allowed list), every value
/// is validated (positive bandwidths, known link types, connected topology), and every error
/// is a ConfigError naming the file, the YAML path, the line and a fix.
#include <string>
#include <vector>

#include "platforms/platform.hpp"

namespace stepsim::platforms {

/// @brief Options a user applies on top of a platform file or preset.
struct PlatformOptions {
  int nodes = 0;                              ///< 0 = as the file says (usually 1)
  std::string fabric;                         ///< "", "fat-tree" or "rail-optimized"
  std::vector<std::string> overrides;         ///< `-p key=value`, e.g. gpu.model=H200-SXM5-141GB
};

/// @brief A platform document's YAML text and the name errors give it.
struct PlatformText {
  std::string text;
  std::string origin;   ///< "dgx-h100.yaml (preset)" or the file path
};
/// @brief The YAML of `name_or_path` (a preset name or a file path), unparsed; ConfigError
/// listing the presets when it is neither.
PlatformText platform_text(const std::string& name_or_path);

/// @brief Loads `name_or_path`: a preset name (see list_presets) or a YAML file path.
Platform load_platform(const std::string& name_or_path, const PlatformOptions& options = {});

/// @brief Parses YAML text; `origin` names it in errors.
Platform parse_platform(const std::string& yaml_text, const std::string& origin,
                        const PlatformOptions& options = {});

struct PresetInfo {
  std::string name;
  std::string description;
};
/// @brief Shipped platform presets, sorted by name.
std::vector<PresetInfo> list_presets();

}  // namespace stepsim::platforms
