#pragma once
/// @file Sweep result files: one line per point, CSV (with a header line) or JSON Lines.
///
/// Contract: every row is one physical line (values never hold a line break), written with
/// one write, so a killed sweep leaves at most one half-written last line; `read_results`
/// sets that line aside (`partial_line`) and reports where the complete lines end, so a
/// resumed sweep truncates it and runs its point again. CSV quotes values per RFC 4180;
/// JSON Lines writes one object per line with the columns as keys, numbers as numbers and
/// empty values as null. Reading gives back exactly the text that was written. A damaged
/// file (a line with the wrong columns) is a ConfigError naming the file and the line.
#include <cstdint>
#include <string>
#include <vector>

#include "tools/sweep/sweep_file.hpp"

namespace stepsim::sweep {

/// @brief CSV (.csv) or JSON Lines (.jsonl).
enum class ResultFormat { csv, jsonl };

/// @brief The format a file's extension names (.csv, .jsonl); ConfigError naming `flag`
/// otherwise.
ResultFormat result_format(const std::string& path, const std::string& flag);

/// @brief Rows of text values under named columns.
struct ResultTable {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  /// @brief The position of `name` in columns, or -1.
  int column(const std::string& name) const;
};

/// @brief The columns of a sweep's results: `point` (id), `index`, the axis params, the
/// kind's result columns, `error`.
std::vector<std::string> sweep_columns(const Sweep& sweep);

/// @brief The CSV header line (with its newline); empty for JSON Lines.
std::string header_line(const std::vector<std::string>& columns, ResultFormat format);

/// @brief One row as one line, newline included.
std::string row_line(const std::vector<std::string>& columns, const std::vector<std::string>& row,
                     ResultFormat format);

/// @brief A result file as read back.
struct ReadResults {
  ResultTable table;
  std::uintmax_t complete_bytes = 0;   ///< file length up to the end of its last complete line
  bool partial_line = false;           ///< a last line without its newline was left out
};

/// @brief Reads `path` in the format of its extension. With `expected` columns, a file with
/// other columns is a ConfigError (the sweep file changed since); with none, the file's own
/// columns are taken (CSV header, or the first JSON object's keys). A file with no complete
/// line has no rows and no columns.
ReadResults read_results(const std::string& path, const std::vector<std::string>& expected = {});

/// @brief Replaces line breaks and the record separator of the worker pipe (0x1f) by spaces,
/// so that a value can never split a line.
std::string one_line(std::string value);

}  // namespace stepsim::sweep
