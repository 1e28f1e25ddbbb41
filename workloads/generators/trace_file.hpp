#pragma once
/// @file The reader of `kind: trace` documents (docs/trace.md), shared by the YAML generator
/// and the JSON loader. Internal to workloads/.
#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <functional>

#include "platforms/yaml_reader.hpp"
#include "workloads/trace.hpp"
#include "workloads/workload.hpp"

namespace stepsim::workloads {

using OpVisitor = std::function<void(const YAML::Node& op)>;
/// @brief Visits the ops of `programs[entry]` in order. A YAML document holds them in place; a
/// JSON trace converts them one at a time, because a whole YAML tree of a 10^5-op trace costs
/// seconds and gigabytes.
using OpSource = std::function<void(std::size_t entry, const OpVisitor& visit)>;

/// @brief Reads a trace document (`version` and `kind` already checked) for `job`. The
/// `ops` of each program entry must be a sequence in `doc` (it may be empty when `ops` supplies
/// them). Throws ConfigError naming reader.origin(), the YAML path, the line and a fix.
Trace read_trace(const YAML::Node& doc, const platforms::YamlReader& reader, const JobContext& job,
                 const OpSource& ops);

}  // namespace stepsim::workloads
