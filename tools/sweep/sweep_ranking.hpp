#pragma once
/// @file The ranked summary of a sweep's results, as `stepsim sweep` prints it.
///
/// Contract: the text depends only on the sweep and the set of rows, never on the order in
/// which points finished: rows are ranked by the metric (ties by index), groups (`group_by`)
/// appear in the order of their first point. Without groups the best `top` points are listed;
/// with groups, the best point of each group and its runner-up with the gap in percent.
/// Failed points are counted and their most frequent errors shown.
#include <string>

#include "tools/sweep/sweep_file.hpp"
#include "tools/sweep/sweep_results.hpp"

namespace stepsim::sweep {

/// @brief The summary text (ends with a newline). `table` holds sweep_columns(sweep).
std::string ranked_summary(const Sweep& sweep, const ResultTable& table, int top);

/// @brief Rows of `table` with a metric value and no error, grouped by `group_by`: groups in
/// the order of their lowest index, each ranked best first (ties by index).
std::vector<std::vector<const std::vector<std::string>*>> ranked_groups(const Sweep& sweep, const ResultTable& table,
                                                                        const std::string& metric,
                                                                        const std::vector<std::string>& group_by);

}  // namespace stepsim::sweep
