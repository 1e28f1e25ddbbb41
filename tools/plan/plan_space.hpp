#pragma once
/// @file The layouts `stepsim plan` enumerates for a torchtitan transformer on a GPU count: the
/// mesh degrees (dp_replicate x dp_shard x cp x tp x pp), the micro-batch, the checkpointing
/// policy, the pipeline schedule, the FSDP strategy and the precision (eager, torch.compile,
/// compile + Float8 where the GPU has fp8), each as the workload overrides that express it.
///
/// Contract: `enumerate_layouts` keeps only layouts whose degrees divide what they split (GPUs,
/// heads, KV heads, FFN width and vocabulary by tp; the sequence into 2 cp chunks; the global
/// batch over the data-parallel ranks; micro-batches at least pp, a multiple of pp for
/// Interleaved1F1B; tensor parallelism within a node); the order is deterministic.
#include <string>
#include <vector>

#include "workloads/generators/transformer_layout.hpp"

namespace stepsim::plan {

enum class Precision : std::uint8_t { eager, compile, float8 };
const char* to_string(Precision p);

/// @brief One point of the space.
struct Layout {
  int dp_replicate = 1, dp_shard = 1, cp = 1, tp = 1, pp = 1;
  int micro_batch = 1;   ///< sequences per micro-batch
  int microbatches = 1;  ///< per step (gradient accumulation, or the pipeline's)
  workloads::transformer::Checkpointing checkpointing = workloads::transformer::Checkpointing::full;
  workloads::PipelineSchedule schedule = workloads::PipelineSchedule::one_f_one_b;
  bool shard_grad_op = false;  ///< FSDP SHARD_GRAD_OP instead of FULL_SHARD / HYBRID_SHARD
  Precision precision = Precision::eager;

  int gpus() const { return dp_replicate * dp_shard * cp * tp * pp; }
  /// @brief `workload.KEY=VALUE` assignments (without the `workload.` prefix) for the fsdp generator.
  std::vector<std::string> overrides(int sequence) const;
  /// @brief e.g. "dp_shard 32 x tp 8, mb 2 x 1, full AC, FULL_SHARD, float8".
  std::string label() const;
};

/// @brief What the space spans.
struct Space {
  workloads::transformer::ModelConfig model;
  workloads::transformer::TrainingConfig training;  ///< the model's own; micro-batch and precision replaced
  int gpus = 0;
  int gpus_per_node = 8;
  int global_batch = 0;  ///< sequences per step
  int sequence = 0;      ///< tokens per sequence
  bool fp8 = false;      ///< the GPU has fp8 tensor cores
};

std::vector<Layout> enumerate_layouts(const Space& space);

/// @brief `layout` as the memory model and the estimator see it.
workloads::transformer::IterationLayout iteration_layout(const Space& space, const Layout& layout);

}  // namespace stepsim::plan
