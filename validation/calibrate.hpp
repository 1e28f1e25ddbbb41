#pragma once
/// @file `stepsim calibrate`: fits the factors of a platform's `calibration` section
/// (platforms/calibration.hpp) to measurement files by least squares, on part of the cases,
/// and reports the error on the rest.
///
/// Contract: the residual of a case is ln(predicted / measured) of its time (through a
/// pseudo-Huber transform, so the fit minimises about mean |ln|, the geomean |error| that
/// validate reports, rather than letting outliers dominate a squared sum), predicted by the
/// same code as `stepsim validate` (so a calibrated platform validates with exactly the
/// figures printed here). Parameters are log multipliers (solve_least_squares), fitted only
/// where the fit cases depend on them:
///  - links.<type>.bandwidth_scale for every link type the platform has (network when a file
///    spans nodes): achieved vs datasheet bandwidth;
///  - protocols.<P>.efficiency_scale: protocol P's achieved bandwidth (its wire efficiency and
///    NCCL's per-channel cap alike), the lever where NCCL's estimate rather than a link binds;
///  - algorithms.<A>.efficiency_scale: NCCL algorithm A's achieved bandwidth on top of its
///    protocol's (NCCL's own tables are per algorithm and protocol; p2p = alltoall/sendrecv);
///  - protocols.<P>.latency_scale: NCCL's latency estimate for protocol P;
///  - gemm_efficiency.<dtype> for every GEMM dtype measured (starting at the model's ceiling);
///  - codecs.<name>.throughput_scale for every compression codec measured.
/// After a fit, the parameters no case moves, else the one with the largest standard error
/// above 25 %, are fixed at their preset value and the rest refitted (backward elimination),
/// until every fitted factor is well determined.
/// Holdout "half": within each group of cases that differ only in size (or GEMM shape), sorted
/// by size, every other case (the 1st, 3rd, ...) is fitted and the rest validated; "none" fits
/// every case. GEMMs and codec kernels measured below `min_kernel_time` (launch-bound, see validate.hpp) are
/// neither fitted nor held out. The calibrated platform lists the fitted cases, so `stepsim validate` with it
/// never scores a fitted case. Deterministic: same inputs, same output bit for bit.
#include <string>
#include <vector>

#include "platforms/calibration.hpp"
#include "validation/validate.hpp"

namespace stepsim::validation {

struct CalibrateOptions {
  ValidateOptions validate;        ///< platform, -p, --gpus, --algo, --engine, min_size (headline)
  std::string holdout = "half";    ///< half | none
  Bytes fit_min_size = 0;          ///< collectives smaller than this are neither fitted nor held out
};

struct FittedParameter {
  std::string key;          ///< path under calibration, e.g. links.nvlink.bandwidth_scale
  double value = 1;         ///< the written value (a multiplier, or a GEMM efficiency)
  double initial = 1;       ///< the model's value before the fit
  double relative_error = 0;  ///< standard error of the value / value (0 when not determined)
  bool determined = false;  ///< false: written as `initial` (see dropped_error)
  /// Not determined because the cases pin it down only this loosely (its relative standard
  /// error when the fit dropped it, > 25 %); 0 when no fit case depends on it at all.
  double dropped_error = 0;
};

/// @brief Error figures of one set of cases (geomean |error| as in validate.hpp).
struct CaseSetError {
  int cases = 0;
  int headline_cases = 0;
  double before = 0;           ///< headline geomean with the uncalibrated platform
  double after = 0;            ///< with the calibrated one
  double before_all = 0;       ///< every case of the set
  double after_all = 0;
};

struct CalibrationOutcome {
  std::vector<FittedParameter> parameters;
  CaseSetError fit;
  CaseSetError holdout;
  int iterations = 0;
  std::vector<platforms::FittedCases> fitted;
  std::vector<std::string> notes;
  std::string platform_yaml;   ///< the input platform's text followed by the fitted section
};

/// @brief Fits `files` (see the file contract); ConfigError when no case can be fitted.
CalibrationOutcome calibrate(const std::vector<MeasurementFile>& files, const CalibrateOptions& options);

/// @brief The fit as text: parameters, then fit and holdout error before and after.
std::string format_calibration_text(const CalibrationOutcome& outcome);

}  // namespace stepsim::validation
