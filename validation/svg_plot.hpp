#pragma once
/// @file A small SVG line/marker plot writer for the validation report: no scripts, no fonts
/// to fetch, one self-contained `<svg>` element per plot.
///
/// Contract: `svg_plot` returns one `<svg>...</svg>` element (no XML prolog, so it can sit
/// inline in HTML) with the title, both axis labels, tick marks with labels, grid lines, one
/// polyline and marker set per series, and a legend; every text is escaped. Points that an
/// axis cannot show (non-positive values on a log axis, NaN) are left out of the drawing;
/// ranges of one value are widened so a single point still has axes.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stepsim::validation {

/// @brief How an axis maps values: `log2_bytes` (ticks at powers of two labelled 64KiB, 1GiB),
/// `log10` (ticks at powers of ten labelled 1e9), `log2` (ticks at powers of two labelled as
/// numbers: 8, 16, 32, for counts such as GPUs), `ratio` (log2, ticks labelled as the signed
/// error of a predicted / measured ratio: 0.5 -> -50 %), `linear` (1-2-5 ticks, from 0 for
/// non-negative data), `categorical` (x only: value i is the slot of `Plot::categories[i]`,
/// ticks labelled with the names).
enum class PlotAxis { linear, log2_bytes, log2, log10, ratio, categorical };

/// @brief Marker shapes of a series.
enum class PlotMarker { circle, square };

struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  ///< (x, y), drawn in this order
  std::string color = "#1f77b4";
  PlotMarker marker = PlotMarker::circle;
  bool dashed = false;
  bool line = true;                               ///< join the points with a polyline
  /// Draw a filled bar from the bottom of the y axis (0 on a linear axis) to each point instead
  /// of markers; the bar series of a plot stand side by side in each x slot (categorical x).
  bool bars = false;
};

struct Plot {
  std::string title;
  std::string x_label;
  std::string y_label;
  PlotAxis x_axis = PlotAxis::log2_bytes;
  PlotAxis y_axis = PlotAxis::linear;
  std::vector<PlotSeries> series;
  bool reference_one = false;   ///< draw the line y = 1 (exact prediction on a ratio axis)
  std::vector<std::string> categories;   ///< names of the x slots of a categorical x axis
  int width = 640;
  int height = 360;
};

/// @brief Escapes &, <, >, " and ' for XML/HTML text and attribute values.
std::string xml_escape(std::string_view text);

/// @brief The plot as one inline `<svg>` element.
std::string svg_plot(const Plot& plot);

}  // namespace stepsim::validation
