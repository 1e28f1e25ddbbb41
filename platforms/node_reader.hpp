#pragma once
/// @file Reads the `node:` section of a platform file into a NodeTemplate. Internal to platforms/.
#include "platforms/platform.hpp"
#include "platforms/yaml_reader.hpp"

namespace stepsim::platforms {

/// @brief Builds the node template; NVLink bandwidths not written derive from `gpu`.
/// Throws ConfigError (file, key path, line, fix) on any bad entry.
NodeTemplate read_node(const YamlReader& reader, const YAML::Node& node, const GpuModel& gpu);

}  // namespace stepsim::platforms
