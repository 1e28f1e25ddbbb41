#pragma once
/// @file The GPU runners behind stepsim-harness's subcommands.
///
/// Contract: a runner fills `recording.header` (system, notes) and appends one record per measured
/// case as soon as it is measured, so the caller can still write what was measured when a later
/// case fails. Runners print one progress line per case to standard error. CUDA, NCCL and cuBLAS
/// failures and wrong GPU results throw std::runtime_error; impossible requests (more GPUs than
/// visible) throw ConfigError.
#include <vector>

#include "validation/harness/batch_timer.hpp"
#include "validation/harness/harness_options.hpp"
#include "validation/harness/measurement_writer.hpp"

namespace stepsim::harness {

/// @brief What a run has produced so far.
struct Recording {
  FileHeader header;
  std::vector<MeasurementRecord> records;
};

/// @brief The timing plan the common options ask for.
inline TimingPlan timing_plan(const CommonOptions& common) {
  TimingPlan plan;
  plan.warmup = common.warmup;
  plan.repetitions = common.repetitions;
  plan.target_s = common.target_ms * 1e-3;
  plan.max_batch = common.max_batch;
  return plan;
}

void run_nccl(const NcclOptions& options, Recording& recording);
void run_copy(const CopyOptions& options, Recording& recording);
void run_gemm(const GemmOptions& options, Recording& recording);
void run_embedding(const EmbeddingOptions& options, Recording& recording);
void run_compress(const CompressOptions& options, Recording& recording);

}  // namespace stepsim::harness
