#pragma once
// Hand-built platforms and contexts for the models tests (no YAML, no presets).
#include <memory>
#include <string>
#include <vector>

#include "models/algorithm.hpp"
#include "models/checker.hpp"

namespace stepsim::models::test_support {

/// @brief `nodes` servers of `gpus` GPUs, every GPU on one NVSwitch (450 GB/s) and on its
/// own NIC (50 GB/s) into a fat tree, like a DGX H100.
platforms::Platform switch_platform(int nodes, int gpus);

/// @brief One node of 4 GPUs whose fast NVLinks form the cycle 0-2-1-3-0 (100 GB/s); every
/// other pair only meets through a PCIe switch (12 GB/s).
platforms::Platform crossed_node();

/// @brief A platform, an allocation and the context algorithms lower against.
struct Job {
  std::unique_ptr<platforms::Platform> platform;
  platforms::Allocation allocation;
  AlgorithmOptions options;
  CollectiveContext context() const { return {*platform, allocation, options}; }
};

/// @brief All GPUs of switch_platform(nodes, gpus), in GPU order.
Job whole(int nodes, int gpus);

/// @brief Lowers `algo` and returns the checker's verdict (empty = correct).
std::optional<std::string> lower_and_check(const std::string& algo, const CollectiveSpec& spec,
                                           const CollectiveContext& ctx, Schedule* out = nullptr);

}  // namespace stepsim::models::test_support
