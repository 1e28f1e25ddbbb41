#pragma once
/// @file `framework: megatron` on a transformer workload: the iteration as Megatron-LM runs it
/// (megatron.cpp). Internal to workloads/generators/.
#include <yaml-cpp/yaml.h>

#include "platforms/yaml_reader.hpp"
#include "workloads/generators/transformer.hpp"
#include "workloads/trace.hpp"
#include "workloads/workload.hpp"

namespace stepsim::workloads::transformer {

/// @brief Reads the `megatron:` section (docs/parallelism.md) and emits one iteration.
Trace megatron_iteration(const YAML::Node& doc, const platforms::YamlReader& reader, const JobContext& job,
                         const ModelConfig& model, const TrainingConfig& training);

}  // namespace stepsim::workloads::transformer
