#pragma once
/// @file `stepsim plan`: the torchtitan layouts of a model on a GPU count, pruned by memory,
/// timed by the closed-form estimator (workloads/generators/transformer_estimate.hpp), the best
/// re-timed by the full replay (docs/plan.md).
///
/// Contract: deterministic. Every layout the space holds is checked against gpu.memory
/// (transformer_memory's required bytes) and estimated if it fits; the `retime` fastest estimates
/// are loaded through the fsdp generator with their overrides and replayed on `engine`, and the
/// result lists them by replayed time (a layout the generator refuses is dropped with its
/// reason in `notes`).
#include <optional>
#include <string>
#include <vector>

#include "models/memory/memory.hpp"
#include "platforms/loader.hpp"
#include "sim/prediction.hpp"
#include "tools/plan/plan_space.hpp"

namespace stepsim::plan {

struct PlanRequest {
  std::string platform;
  platforms::PlatformOptions platform_options;  ///< nodes are set from `gpus`
  std::string model;                            ///< a workload preset or file of kind fsdp
  std::vector<std::string> model_overrides;     ///< `-p workload.KEY=VALUE`, prefix removed
  int gpus = 0;
  int global_batch = 0;  ///< sequences per step
  int sequence = 0;      ///< 0: the model's training.sequence
  int retime = 10;       ///< estimates re-timed by the replay
  std::string engine = "analytical";
};

struct Candidate {
  Layout layout;
  double estimate_s = 0;
  models::RankMemory memory;  ///< the worst stage's
  std::optional<sim::Prediction> replay;
};

struct PlanResult {
  Space space;
  std::string platform, model;
  long layouts = 0;                ///< the space's size
  long fit = 0;                    ///< of them, those that fit gpu.memory
  double estimate_seconds = 0;     ///< wall time of pruning and estimating every layout
  std::vector<Candidate> retimed;  ///< by replayed time, fastest first
  std::vector<std::string> notes;
  double tokens_per_step() const { return double(space.global_batch) * space.sequence; }
};

PlanResult run_plan(const PlanRequest& request);

}  // namespace stepsim::plan
