#pragma once
/// @file `stepsim import nccl-tests`: nccl-tests logs (any version, with or without mpirun
/// prefixes) and the markdown tables of published write-ups, read by column name, as
/// `collective` measurements (docs/measurements.md, "Importers").
///
/// Contract: every table of the log becomes measurements: one per row and per run
/// (out-of-place; in-place with `in_place: true`). Tables are grouped by the system they ran on
/// (GPU named by the log's Rank lines or a spec table, else by the text around the table) and
/// by the tool that measured them; each group is one MeasurementFile. A log without any table
/// is a ConfigError; tables that cannot be used (one rank, unknown rank count) are skipped and
/// named in `notes`.
#include <string>
#include <vector>

#include "validation/measurement.hpp"

namespace stepsim::validation {

/// @brief The measurements of one (system, tool) group of a log.
struct NcclTestsGroup {
  std::string system;  ///< short name of the system ("h100", "p4de", "rtx-2080-ti"; "" = not stated)
  std::string tool;    ///< "nccl-tests", "torch.distributed"
  MeasurementFile file;
};

/// @brief What one log gave.
struct NcclTestsImport {
  std::vector<NcclTestsGroup> groups;
  std::vector<std::string> notes;  ///< tables skipped and why, with their line
};

/// @brief Parses one log's text; `origin` names it in errors and becomes `source.file`.
/// `platform` fills `system.platform` of every group ("" = leave it out). `op` is the collective
/// of tables the log does not name (no `*_perf` line; "" = the file name's op, else inferred
/// from busbw / algbw where only allreduce fits, with a note). A row whose cells are not
/// positive numbers ("N/A" aside) or whose size passes 1 PiB is a ConfigError naming its line.
NcclTestsImport import_nccl_tests(const std::string& text, const std::string& origin,
                                  const std::string& platform = "", const std::string& op = "");

/// @brief All `groups` (of one or more logs) as one file; they must share one (system, tool),
/// else a ConfigError naming `output` and the groups, with `-o DIR` as the fix.
MeasurementFile merge_nccl_tests_groups(const std::vector<NcclTestsGroup>& groups, const std::string& output);

/// @brief File name (no folder) for one group of the log at `log_path`: "<stem>.yaml" when the
/// log has one group, else "<stem>-<system>[-<tool>].yaml".
std::string nccl_tests_output_name(const std::string& log_path, const NcclTestsGroup& group, bool several);

}  // namespace stepsim::validation
