#include "validation/svg_plot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "platforms/units.hpp"

namespace stepsim::validation {
namespace {

constexpr int kLeft = 72, kRight = 24, kTop = 56, kBottom = 52;  // margins in px
constexpr double kCharWidth = 6.5, kUpperWidth = 8.5;            // px per character at 12 px, for layout

bool showable(PlotAxis axis, double v) {
  return std::isfinite(v) && (axis == PlotAxis::linear || axis == PlotAxis::categorical || v > 0);
}

/// The value in the axis's drawing space (log units for log axes).
double transform(PlotAxis axis, double v) {
  switch (axis) {
    case PlotAxis::linear:
    case PlotAxis::categorical: return v;
    case PlotAxis::log10: return std::log10(v);
    case PlotAxis::log2_bytes:
    case PlotAxis::log2:
    case PlotAxis::ratio: return std::log2(v);
  }
  return v;
}

struct Tick {
  double at;          ///< in drawing space
  std::string label;
};

/// An axis's drawing-space range and its ticks.
struct Scale {
  double lo = 0, hi = 1;
  std::vector<Tick> ticks;
  double fraction(double t) const { return (t - lo) / (hi - lo); }
};

std::string ratio_label(double ratio) {
  const double percent = std::round(1000 * (ratio - 1)) / 10;
  if (percent == 0) return "0%";
  return percent == std::round(percent) ? fmt::format("{:+.0f}%", percent) : fmt::format("{:+.1f}%", percent);
}

/// Ticks at integer exponents inside [lo, hi], a step of 1, 2, 5, 10 or 20 apart (so that
/// binary sizes fall on KiB, MiB and GiB when the step is 10).
Scale exponent_scale(double lo, double hi, PlotAxis axis) {
  Scale s;
  s.lo = lo;
  s.hi = hi;
  int step = 20;
  for (int candidate : {1, 2, 5, 10, 20})
    if ((hi - lo) / candidate <= 8) {
      step = candidate;
      break;
    }
  for (int e = static_cast<int>(std::ceil(lo)); e <= static_cast<int>(std::floor(hi)); ++e) {
    if (e % step != 0) continue;
    std::string label = axis == PlotAxis::log10    ? fmt::format("1e{}", e)
                        : axis == PlotAxis::ratio ? ratio_label(std::exp2(e))
                        : axis == PlotAxis::log2  ? fmt::format("{:g}", std::exp2(e))
                                                  : format_size(std::exp2(e));
    s.ticks.push_back({static_cast<double>(e), label});
  }
  return s;
}

Scale linear_scale(double lo, double hi) {
  Scale s;
  const double raw = (hi - lo) / 5;
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  const double step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * magnitude;
  s.lo = std::floor(lo / step) * step;
  s.hi = std::ceil(hi / step) * step;
  for (double v = s.lo; v <= s.hi + step / 2; v += step)
    s.ticks.push_back({v, fmt::format("{:g}", std::abs(v) < step / 2 ? 0.0 : v)});
  return s;
}

/// Ratio axes: up to 2.3x wide, ticks at round error percentages (a 1-2-5 step); up to 8x,
/// at familiar ratios; wider, at powers of two.
Scale ratio_scale(double lo, double hi) {
  if (hi - lo > 3) return exponent_scale(lo, hi, PlotAxis::ratio);
  Scale s;
  s.lo = lo;
  s.hi = hi;
  if (hi - lo > 1.2) {
    for (double r : {0.125, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 8.0})
      if (std::log2(r) >= lo && std::log2(r) <= hi) s.ticks.push_back({std::log2(r), ratio_label(r)});
    return s;
  }
  const double low = std::exp2(lo) - 1, high = std::exp2(hi) - 1;   // as errors
  double step = 0.5;
  for (double candidate : {0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5})
    if ((high - low) / candidate <= 7) {
      step = candidate;
      break;
    }
  for (double e = std::ceil(low / step) * step; e <= high + 1e-12; e += step)
    if (1 + e > 0) s.ticks.push_back({std::log2(1 + e), ratio_label(1 + e)});
  return s;
}

/// The scale of one axis over the values `plot` shows on it.
Scale make_scale(PlotAxis axis, std::vector<double> values, bool include_one) {
  std::vector<double> t;
  for (double v : values)
    if (showable(axis, v)) t.push_back(transform(axis, v));
  if (include_one) t.push_back(transform(axis, 1));
  double lo = t.empty() ? 0 : *std::min_element(t.begin(), t.end());
  double hi = t.empty() ? 1 : *std::max_element(t.begin(), t.end());
  switch (axis) {
    case PlotAxis::linear:
    case PlotAxis::categorical:   // a categorical y axis is not drawn; read it as linear
      if (lo >= 0) lo = 0;
      if (hi - lo <= 0) hi = lo + std::max(1.0, std::abs(lo));
      return linear_scale(lo, hi + 0.05 * (hi - lo));
    case PlotAxis::ratio: {
      const double pad = std::max(0.05, 0.05 * (hi - lo));   // at least +-3.5 %
      return ratio_scale(lo - pad, hi + pad);
    }
    case PlotAxis::log2_bytes:
    case PlotAxis::log2:
    case PlotAxis::log10: {
      // Padding keeps the end markers off the frame.
      const double pad = std::max(0.3, 0.04 * (hi - lo));
      return exponent_scale(lo - pad, hi + pad, axis);
    }
  }
  return {};
}

/// One slot per category, centred on 0, 1, ..., labelled with the names.
Scale categorical_scale(const std::vector<std::string>& categories) {
  Scale s;
  s.lo = -0.5;
  s.hi = std::max<double>(1, static_cast<double>(categories.size())) - 0.5;
  for (std::size_t i = 0; i < categories.size(); ++i) s.ticks.push_back({static_cast<double>(i), categories[i]});
  return s;
}

std::string marker_svg(PlotMarker marker, double x, double y, const std::string& color) {
  if (marker == PlotMarker::square)
    return fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="7" height="7" fill="{}"/>)", x - 3.5, y - 3.5, color);
  return fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="3.5" fill="none" stroke="{}" stroke-width="1.5"/>)", x, y,
                     color);
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string svg_plot(const Plot& plot) {
  std::vector<double> xs, ys;
  for (const PlotSeries& s : plot.series)
    for (const auto& [x, y] : s.points) {
      xs.push_back(x);
      ys.push_back(y);
    }
  const Scale sx =
      plot.x_axis == PlotAxis::categorical ? categorical_scale(plot.categories) : make_scale(plot.x_axis, xs, false);
  const Scale sy = make_scale(plot.y_axis, ys, plot.reference_one);
  const double w = plot.width - kLeft - kRight, h = plot.height - kTop - kBottom;
  const auto px = [&](double t) { return kLeft + sx.fraction(t) * w; };
  const auto py = [&](double t) { return kTop + h - sy.fraction(t) * h; };

  std::string out = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}" role="img" )"
      R"(font-family="sans-serif" font-size="12"><title>{2}</title>)"
      "\n",
      plot.width, plot.height, xml_escape(plot.title));
  out += fmt::format(R"(<rect width="{}" height="{}" fill="white"/>)", plot.width, plot.height);
  out += fmt::format(R"(<text x="{}" y="18" text-anchor="middle" font-size="14" font-weight="bold">{}</text>)",
                     plot.width / 2, xml_escape(plot.title));
  out += "\n";
  for (const Tick& t : sx.ticks) {
    const double x = px(t.at);
    out += fmt::format(R"(<line x1="{0:.1f}" y1="{1}" x2="{0:.1f}" y2="{2:.1f}" stroke="#e0e0e0"/>)", x, kTop, kTop + h);
    out += fmt::format(R"(<line x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}" stroke="black"/>)", x, kTop + h,
                       kTop + h + 5);
    out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">{}</text>)", x, kTop + h + 18,
                       xml_escape(t.label));
    out += "\n";
  }
  for (const Tick& t : sy.ticks) {
    const double y = py(t.at);
    out += fmt::format(R"(<line x1="{0}" y1="{1:.1f}" x2="{2:.1f}" y2="{1:.1f}" stroke="#e0e0e0"/>)", kLeft, y, kLeft + w);
    out += fmt::format(R"(<line x1="{0}" y1="{1:.1f}" x2="{2}" y2="{1:.1f}" stroke="black"/>)", kLeft - 5, y, kLeft);
    out += fmt::format(R"(<text x="{}" y="{:.1f}" text-anchor="end">{}</text>)", kLeft - 8, y + 4, xml_escape(t.label));
    out += "\n";
  }
  if (plot.reference_one && plot.y_axis != PlotAxis::linear)
    out += fmt::format(R"(<line x1="{0}" y1="{1:.1f}" x2="{2:.1f}" y2="{1:.1f}" stroke="#555555" stroke-width="1.5"/>)",
                       kLeft, py(transform(plot.y_axis, 1)), kLeft + w);
  out += fmt::format(R"(<rect x="{}" y="{}" width="{:.1f}" height="{:.1f}" fill="none" stroke="black"/>)", kLeft, kTop,
                     w, h);
  out += fmt::format(R"(<text x="{:.1f}" y="{}" text-anchor="middle">{}</text>)", kLeft + w / 2, plot.height - 10,
                     xml_escape(plot.x_label));
  out += fmt::format(R"svg(<text transform="translate(16 {:.1f}) rotate(-90)" text-anchor="middle">{}</text>)svg",
                     kTop + h / 2, xml_escape(plot.y_label));
  out += "\n";

  // Bars rise from 0 on a linear y axis (from the bottom on a log one) and share each x slot.
  const int bar_series = static_cast<int>(std::count_if(plot.series.begin(), plot.series.end(),
                                                        [](const PlotSeries& s) { return s.bars; }));
  const double slot = w / (sx.hi - sx.lo), bar_width = 0.8 * slot / std::max(1, bar_series);
  const double bar_base = py(plot.y_axis == PlotAxis::linear ? std::clamp(0.0, sy.lo, sy.hi) : sy.lo);
  int bar_at = 0;
  double legend_x = kLeft;
  for (const PlotSeries& s : plot.series) {
    std::string polyline, markers;
    for (const auto& [x, y] : s.points) {
      if (!showable(plot.x_axis, x) || !showable(plot.y_axis, y)) continue;
      const double X = px(transform(plot.x_axis, x)), Y = py(transform(plot.y_axis, y));
      polyline += fmt::format("{}{:.1f},{:.1f}", polyline.empty() ? "" : " ", X, Y);
      if (s.bars)
        markers += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"/>)",
                               X - 0.4 * slot + bar_at * bar_width, std::min(Y, bar_base), bar_width,
                               std::abs(bar_base - Y), s.color);
      else
        markers += marker_svg(s.marker, X, Y, s.color);
    }
    if (s.bars) ++bar_at;
    const std::string dash = s.dashed ? R"( stroke-dasharray="6 4")" : "";
    out += fmt::format(R"(<g><title>{}</title>)", xml_escape(s.name));
    if (s.line && !s.bars && !polyline.empty())
      out += fmt::format(R"(<polyline points="{}" fill="none" stroke="{}" stroke-width="1.5"{}/>)", polyline, s.color,
                         dash);
    out += markers + "</g>\n";
    // Legend entry: a line sample with the marker, then the name.
    const double ly = 38;
    if (s.bars)
      out += fmt::format(R"(<rect x="{:.1f}" y="{}" width="18" height="10" fill="{}"/>)", legend_x + 3, ly - 5, s.color);
    else if (s.line)
      out += fmt::format(R"(<line x1="{:.1f}" y1="{}" x2="{:.1f}" y2="{}" stroke="{}" stroke-width="1.5"{}/>)", legend_x,
                         ly, legend_x + 24, ly, s.color, dash);
    if (!s.bars) out += marker_svg(s.marker, legend_x + 12, ly, s.color);
    out += fmt::format(R"(<text x="{:.1f}" y="{}">{}</text>)", legend_x + 30, ly + 4, xml_escape(s.name));
    out += "\n";
    // Capitals are wider: legends of names such as FULL_SHARD would otherwise overlap.
    const auto upper = std::count_if(s.name.begin(), s.name.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
    legend_x += 30 + kCharWidth * static_cast<double>(s.name.size()) + (kUpperWidth - kCharWidth) * upper + 18;
  }
  out += "</svg>";
  return out;
}

}  // namespace stepsim::validation
