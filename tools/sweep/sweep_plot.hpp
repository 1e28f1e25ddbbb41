#pragma once
/// @file The `--plot` figure of a sweep: its metric against one axis, one series per value of
/// another, drawn with validation/svg_plot.
///
/// Contract: for each (x, series) pair the plotted value is the best (by the sweep's `rank`)
/// over every other axis, so a grid over size x algo x channels plots the best channel count
/// of each algorithm. A numeric x axis gives lines (a log axis in bytes for sizes, log2 for
/// whole numbers spanning 8x or more such as GPU counts, log10 for other numbers spanning 64x
/// or more); a categorical one gives bars side by side. Series are labelled `name=value`
/// with the last segment of the series parameter (`strategy=FULL_SHARD`). The y axis is
/// log10 when every value is positive and they span 100x or more. Failed points are left out.
/// The result is a standalone SVG document.
#include <string>

#include "tools/sweep/sweep_file.hpp"
#include "tools/sweep/sweep_results.hpp"

namespace stepsim::sweep {

/// @brief The SVG document for `table` (sweep_columns(sweep)) as `sweep.plot` asks.
std::string sweep_plot_svg(const Sweep& sweep, const ResultTable& table);

}  // namespace stepsim::sweep
