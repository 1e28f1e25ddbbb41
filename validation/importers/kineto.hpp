#pragma once
/// @file `stepsim import kineto`: a PyTorch profiler trace as measurements (kernels,
/// collectives, copies, iterations) or as a replayable stepsim workload trace
/// (docs/measurements.md, "Importers"; the trace format is docs/trace.md).
///
/// Contract: measurements sum every GPU kernel by (name, stream), average NCCL kernels that
/// carry torch's collective metadata by (op, size, dtype, ranks), and give one iteration per
/// `ProfilerStep#N`. The workload is one profiled iteration per rank: GPU work in stream
/// order with its measured durations, NCCL kernels as collectives on their process group,
/// the CPU time between launches as `cpu` ops, and cross-stream waits inferred from the
/// timeline as record/wait pairs. Anything the trace does not say is a ConfigError or a note,
/// never a guess.
#include <string>
#include <vector>

#include "validation/importers/kineto_reader.hpp"
#include "validation/measurement.hpp"

namespace stepsim::validation {

struct KinetoOptions {
  std::string platform;  ///< system.platform of the measurements ("" = leave out)
  std::string workload;  ///< `workload` of iteration measurements ("" = the trace's path)
  int step = -1;         ///< ProfilerStep#N to turn into a workload (-1 = the last one)
};

/// @brief Kernel, collective, copy and iteration measurements of one trace.
MeasurementFile kineto_measurements(const KinetoProfile& profile, const KinetoOptions& options);

/// @brief The workload trace (docs/trace.md) of one iteration: one profile = the program of
/// every rank (symmetric runs; groups inferred as blocks or strided blocks of their ranks),
/// several profiles = one program per rank (distributedInfo.rank, else the order given).
/// `notes` receives what was approximated (kernels of unknown collectives kept as timed GPU
/// work, inferred dependencies). Returns the JSON document, keys in the order written.
nlohmann::ordered_json kineto_workload(const std::vector<KinetoProfile>& profiles, const KinetoOptions& options,
                               std::vector<std::string>& notes);

/// @brief `workload` as text: JSON when `path` ends in ".json", else YAML with one op per line.
std::string format_workload(const nlohmann::ordered_json& workload, const std::string& path);

}  // namespace stepsim::validation
