#pragma once
/// @file Validation: every measured case of some measurement files beside stepsim's prediction
/// of the same case, with per-case errors and per-group summaries (`stepsim validate`).
///
/// Contract: `validate` predicts each measurement on the platform (a preset or YAML file) with
/// the same model the matching subcommand uses: `collective` as `stepsim collective` (lowered
/// schedule on an engine), `gemm`, `embedding` (uniform indices) and `copy` d2d with the
/// compute kernel models, `compression` with the codec models (models/compression/), `iteration`
/// as `stepsim simulate`. Cases no model covers yet (kind `kernel`, unknown codecs, zipf
/// embeddings, host copies, collectives the algorithm does not support) are counted in
/// `not_modelled` with the reason, never dropped. Platform facts come
/// from the file's `system` (params, gpu_list, nodes, software.nccl) and are overridden by the
/// options (the CLI flags). Bad input (unknown platform, allocation that does not match a
/// case) throws ConfigError naming the file, the measurement and its line.
///
/// Error figures: per case the signed relative error of time, pred/meas - 1, and the
/// symmetric log error |ln(pred/meas)| (for collectives the same as comparing busbw, which is
/// proportional to 1/time); per group the geomean |error| exp(mean |ln(pred/meas)|) - 1, the
/// definition tools/nccl-tests-compare uses, over the headline cases (collectives of at least
/// `min_size`, kernels measured at `min_kernel_time` or longer, every case of other kinds) and over all cases, and the same per (platform, kind).
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "platforms/loader.hpp"
#include "validation/measurement.hpp"

namespace stepsim::validation {

/// @brief What the user chose on the command line; empty / zero = the files decide.
struct ValidateOptions {
  std::string platform;                         ///< preset name or platform YAML path
  platforms::PlatformOptions platform_options;  ///< --nodes, --fabric, -p (after each file's params)
  std::string gpus;                             ///< --gpus for every case ("" = file's gpu_list, else derived)
  std::string algo = "nccl";                    ///< collective algorithm (registry name or "best")
  std::vector<std::string> algo_params;         ///< --algo-param, after the file's NCCL version
  std::string engine = "analytical";
  Bytes min_size = 1024.0 * 1024.0;             ///< smallest collective size in the headline geomean
  /// Shortest measured kernel (gemm, copy, embedding, compression) in the headline geomean: the
  /// harness times back-to-back calls, so below ~20 us it measures the CPU's call rate (4.7 us
  /// per cudaMemcpyAsync, 7-10 us per cuBLAS call on the H100 runs), not the kernel the model prices.
  Seconds min_kernel_time = 20e-6;
  /// Kinds of measurement to score (--kind); empty = all. The others are counted as left out.
  std::vector<std::string> kinds;
};

/// @brief One measured case beside its prediction.
struct CaseResult {
  std::string where;          ///< "file.yaml: measurements[3] (line 40)"
  std::string platform;       ///< platform label of the group
  std::string kind;
  std::string key;            ///< the rest of the group: "allreduce, 8 ranks", "bf16", "d2d"
  std::string label;          ///< the case within its group: "64MiB", "4096x4096x4096"
  double x = 0;               ///< plot abscissa: bytes (collective, copy, compression), FLOPs (gemm); 0 = none
  double measured_s = 0;
  double predicted_s = 0;
  double measured_rate = 0;   ///< busbw GB/s, TFLOP/s or GB/s by kind; 0 = none
  double predicted_rate = 0;
  double error = 0;           ///< pred / meas - 1 of time
  double log_error = 0;       ///< |ln(pred / meas)|
  bool headline = true;       ///< counted in the group's headline geomean
  std::string model;          ///< what the model chose: schedule and protocol, the roofline bound
};

/// @brief The cases of one (platform, kind, key) group and their figures.
struct GroupSummary {
  std::string platform;
  std::string kind;
  std::string key;
  std::string x_name;                 ///< "size", "FLOPs" or "" (no plot)
  std::string rate_name;              ///< "busbw (GB/s)", ... or "" (no rate)
  std::string headline_rule;          ///< "sizes >= 1MiB" or "all cases"
  std::vector<std::size_t> cases;     ///< indices into ValidationResult::cases, by x then file order
  std::size_t headline_count = 0;
  double headline_geomean = 0;        ///< NaN when no case is in the headline
  double all_geomean = 0;
  std::vector<std::size_t> worst;     ///< up to 10 case indices, largest |ln(pred/meas)| first
};

/// @brief Cases of one kind (and reason) that no model predicts yet.
struct NotModelled {
  int count = 0;
  std::string reason;
  std::vector<std::string> where;     ///< every such case
};

struct ValidationResult {
  std::string platform;               ///< as the user named it
  std::string engine;
  Bytes min_size = 0;
  std::vector<CaseResult> cases;
  std::vector<GroupSummary> groups;   ///< in order of first appearance
  std::vector<GroupSummary> overall;  ///< one per (platform, kind), key "all": every op or dtype together
  std::map<std::string, NotModelled> not_modelled;   ///< by "kind" or "kind qualifier"
  std::vector<std::string> notes;     ///< facts taken from the files (NCCL version, mismatches)
};

/// @brief exp(mean of `log_errors`) - 1: the geomean |error| of tools/nccl-tests-compare; NaN
/// for an empty list.
double geomean_error(const std::vector<double>& log_errors);

/// @brief The predicted time of every measurement of `file`, in order; nullopt where no
/// model predicts the case (what `validate` counts as not modelled). Fitted cases included.
std::vector<std::optional<Seconds>> predicted_times(const MeasurementFile& file, const ValidateOptions& options);

/// @brief Predicts every measurement of `files` (see the file contract); cases the platform's
/// calibration was fitted on are left out, with a note.
ValidationResult validate(const std::vector<MeasurementFile>& files, const ValidateOptions& options);

/// @brief The text report: one table per group, then the summary and the not-modelled counts.
std::string format_validation_text(const ValidationResult& result);

/// @brief The JSON report: `platform`, `engine`, `min_size_bytes`, `cases`, `groups`, `overall`,
/// `not_modelled`, `notes` (keys documented in docs/validation.md).
nlohmann::json validation_json(const ValidationResult& result);

}  // namespace stepsim::validation
