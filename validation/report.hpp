#pragma once
/// @file The HTML validation report (`stepsim validate --report FILE.html`): one self-contained
/// offline file, no scripts, no network, plots as inline SVG (svg_plot.hpp).
///
/// Contract: the page holds a summary table of every group, the not-modelled counts and the
/// notes, then per group a plot of measured and predicted rate over the group's abscissa (for
/// groups that have both), a plot of predicted / measured time over it (for groups that have
/// an abscissa), and a table of every case. Every text from the files is escaped.
#include <string>

#include "validation/validate.hpp"

namespace stepsim::validation {

/// @brief The report as one HTML document.
std::string html_report(const ValidationResult& result);

/// @brief Writes html_report(result) to `path`; ConfigError naming --report when it cannot.
void write_html_report(const ValidationResult& result, const std::string& path);

}  // namespace stepsim::validation
