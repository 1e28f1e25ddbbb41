#pragma once
// Shared by the parallel-layout tests: a workload preset on dgx-h100 (or another platform's) nodes with fixed overrides
// and each test's own (Llama8b: the llama3-8b preset with a micro-batch of one `sequence`-token
// sequence and no activation checkpointing); and what a rank's program issues.
#include <memory>
#include <string>
#include <vector>

#include "platforms/config_error.hpp"
#include "platforms/loader.hpp"
#include "workloads/workload.hpp"

namespace stepsim::workloads::testing {

class PresetJob {
 public:
  PresetJob(std::string preset, std::vector<std::string> base, std::string platform = "dgx-h100")
      : preset_(std::move(preset)), base_(std::move(base)), platform_(std::move(platform)) {}

  Trace load(std::vector<std::string> overrides, int nodes = 1) {
    platforms::PlatformOptions options;
    options.nodes = nodes;
    platforms_.push_back(std::make_unique<platforms::Platform>(platforms::load_platform(platform_, options)));
    allocations_.push_back(platforms::parse_allocation("", *platforms_.back()));
    overrides.insert(overrides.begin(), base_.begin(), base_.end());
    return load_workload(preset_, JobContext{*platforms_.back(), allocations_.back()}, overrides);
  }

  /// @brief The ConfigError's text, or "no error".
  std::string error(std::vector<std::string> overrides, int nodes = 1) {
    try {
      load(std::move(overrides), nodes);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "no error";
  }

 private:
  std::string preset_;
  std::vector<std::string> base_;
  std::string platform_;
  std::vector<std::unique_ptr<platforms::Platform>> platforms_;
  std::vector<platforms::Allocation> allocations_;
};

class Llama8b : public PresetJob {
 public:
  Llama8b(int sequence, int micro_batches)
      : PresetJob("llama3-8b", {"training.micro_batch=1", "training.sequence=" + std::to_string(sequence),
                                "training.gradient_accumulation=" + std::to_string(micro_batches),
                                "fsdp.activation_checkpointing=none"}) {}
};

inline int group_named(const Trace& t, const std::string& name) {
  for (std::size_t g = 0; g < t.groups.size(); ++g)
    if (t.groups[g].name == name) return static_cast<int>(g);
  return -1;
}

/// @brief `rank`'s collectives of `op` on `group`, of `bytes` (any size when negative).
inline int count(const Trace& t, int rank, int group, models::CollectiveOp op, double bytes = -1) {
  int n = 0;
  for (const Op& o : t.program(rank).ops) {
    if (o.kind != OpKind::collective) continue;
    const CollectiveCall& c = t.collectives[o.collective];
    n += c.group == group && c.op == op && (bytes < 0 || c.bytes == bytes);
  }
  return n;
}

inline double gemm_flops(const Trace& t, int rank) {
  double flops = 0;
  for (const Op& o : t.program(rank).ops)
    if (o.kind == OpKind::kernel && o.kernel >= 0 && t.kernels[o.kernel].kind == "gemm") {
      const models::KernelSpec& k = t.kernels[o.kernel];
      flops += 2 * k.param("m") * k.param("n") * k.param("k") * k.param("batch");
    }
  return flops;
}

}  // namespace stepsim::workloads::testing
