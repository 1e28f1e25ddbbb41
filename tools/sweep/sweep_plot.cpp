#include "tools/sweep/sweep_plot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "platforms/units.hpp"
#include "platforms/yaml_reader.hpp"
#include "tools/sweep/sweep_ranking.hpp"
#include "validation/svg_plot.hpp"

namespace stepsim::sweep {
namespace {

using validation::PlotAxis;

// Tableau 10: distinct at a glance and for the common colour-vision deficiencies.
const char* const kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

const SweepAxis& axis(const Sweep& sweep, const std::string& param) {
  return *std::find_if(sweep.axes.begin(), sweep.axes.end(), [&](const SweepAxis& a) { return a.param == param; });
}

/// The x axis a set of values asks for: categorical unless every value reads as a number.
PlotAxis x_axis_for(const std::string& param, const std::vector<std::string>& values, std::vector<double>& numbers) {
  bool sizes = false;
  for (const std::string& v : values) {
    try {
      numbers.push_back(parse_size(v));
    } catch (const std::invalid_argument&) {
      numbers.clear();
      return PlotAxis::categorical;
    }
    sizes = sizes || is_size_value(param, v);
  }
  if (numbers.empty()) return PlotAxis::categorical;
  const auto [lo, hi] = std::minmax_element(numbers.begin(), numbers.end());
  if (*lo <= 0) return PlotAxis::linear;
  if (sizes) return PlotAxis::log2_bytes;
  // Counts that double (GPUs, nodes, channels) read best on powers of two.
  const bool counts = std::all_of(numbers.begin(), numbers.end(), [](double v) { return v == std::floor(v); });
  if (counts && *hi / *lo >= 8) return PlotAxis::log2;
  return *hi / *lo >= 64 ? PlotAxis::log10 : PlotAxis::linear;
}

}  // namespace

std::string sweep_plot_svg(const Sweep& sweep, const ResultTable& table) {
  const SweepPlotSpec& spec = sweep.plot;
  std::vector<std::string> group_by = {spec.x};
  if (!spec.series.empty()) group_by.push_back(spec.series);
  const int x_col = table.column(spec.x), y_col = table.column(spec.y);
  const int series_col = spec.series.empty() ? -1 : table.column(spec.series);
  // best[(x, series)] = y of the best row of that pair
  std::map<std::pair<std::string, std::string>, double> best;
  for (const auto& group : ranked_groups(sweep, table, spec.y, group_by)) {
    const auto& row = *group.front();
    best[{row[x_col], series_col < 0 ? "" : row[series_col]}] = std::stod(row[y_col]);
  }
  // Axis order, keeping only values that have a result.
  std::vector<std::string> xs, series_names;
  for (const std::string& v : axis(sweep, spec.x).values)
    if (std::any_of(best.begin(), best.end(), [&](const auto& e) { return e.first.first == v; })) xs.push_back(v);
  if (spec.series.empty())
    series_names.push_back("");
  else
    for (const std::string& v : axis(sweep, spec.series).values)
      if (std::any_of(best.begin(), best.end(), [&](const auto& e) { return e.first.second == v; }))
        series_names.push_back(v);

  validation::Plot plot;
  std::vector<double> x_numbers;
  plot.x_axis = x_axis_for(spec.x, xs, x_numbers);
  const bool bars = plot.x_axis == PlotAxis::categorical;
  if (bars) plot.categories = xs;
  plot.x_label = spec.x;
  plot.y_label = spec.y;
  std::vector<std::string> others;
  for (const SweepAxis& a : sweep.axes)
    if (a.param != spec.x && a.param != spec.series) others.push_back(a.param);
  plot.title = !spec.title.empty()
                   ? spec.title
                   : fmt::format("{} by {}{}", spec.y, spec.x, spec.series.empty() ? "" : " and " + spec.series);
  if (!others.empty())
    plot.title += fmt::format(" ({} over {})", sweep.maximize ? "max" : "min", platforms::join(others));
  double y_lo = INFINITY, y_hi = 0;
  for (const auto& [key, y] : best) {
    y_lo = std::min(y_lo, y);
    y_hi = std::max(y_hi, y);
  }
  plot.y_axis = y_lo > 0 && y_hi / y_lo >= 100 ? PlotAxis::log10 : PlotAxis::linear;
  double legend = 0;
  const std::string label = spec.series.substr(spec.series.rfind('.') + 1);   // npos + 1 == 0
  for (std::size_t s = 0; s < series_names.size(); ++s) {
    validation::PlotSeries series;
    series.name = series_names[s].empty() ? spec.y : label + "=" + series_names[s];
    series.color = kColors[s % std::size(kColors)];
    series.marker = s / std::size(kColors) % 2 ? validation::PlotMarker::square : validation::PlotMarker::circle;
    series.bars = bars;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const auto it = best.find({xs[i], series_names[s]});
      if (it != best.end()) series.points.emplace_back(bars ? static_cast<double>(i) : x_numbers[i], it->second);
    }
    legend += 48 + 8.5 * static_cast<double>(series.name.size());   // an upper bound of svg_plot's layout
    plot.series.push_back(std::move(series));
  }
  // The legend is one row above the plot: widen the figure rather than clip it.
  plot.width = std::max(640, static_cast<int>(legend) + 100);
  plot.width = std::max(plot.width, static_cast<int>(7 * plot.title.size()) + 40);
  return validation::svg_plot(plot) + "\n";
}

}  // namespace stepsim::sweep
