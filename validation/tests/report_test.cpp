// The HTML report and its SVG plots: one <svg> per plot, escaped text, balanced elements,
// axes that show what the data holds.
#include <gtest/gtest.h>

#include <cmath>

#include "platforms/config_error.hpp"
#include "validation/report.hpp"
#include "validation/svg_plot.hpp"

namespace stepsim::validation {
namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

CaseResult make_case(const std::string& kind, const std::string& key, double x, double meas, double pred) {
  CaseResult c;
  c.where = "<lab>.yaml: measurements[0]";
  c.platform = "dgx<h100>";
  c.kind = kind;
  c.key = key;
  c.label = "case & <co>";
  c.x = x;
  c.measured_s = meas;
  c.predicted_s = pred;
  c.measured_rate = x > 0 ? x / meas / 1e9 : 0;
  c.predicted_rate = x > 0 ? x / pred / 1e9 : 0;
  c.error = pred / meas - 1;
  c.log_error = std::abs(std::log(pred / meas));
  c.headline = x >= 1 << 20;
  c.model = "ring <ideal>";
  return c;
}

/// Two collective groups (each plotted twice), one iteration group (a table only).
ValidationResult sample() {
  ValidationResult r;
  r.platform = "dgx<h100>";
  r.engine = "analytical";
  r.min_size = 1 << 20;
  r.cases = {make_case("collective", "allreduce, 8 ranks", 1024, 1e-5, 1.2e-5),
             make_case("collective", "allreduce, 8 ranks", 1 << 26, 1e-3, 0.9e-3),
             make_case("collective", "allgather <x>, 8 ranks", 1 << 26, 1e-3, 1.1e-3),
             make_case("iteration", "llama3-8b", 0, 1.0, 1.3)};
  const auto group = [&](const std::string& kind, const std::string& key, std::vector<std::size_t> cases,
                         std::string x_name, std::string rate_name) {
    GroupSummary g;
    g.platform = "dgx<h100>";
    g.kind = kind;
    g.key = key;
    g.x_name = std::move(x_name);
    g.rate_name = std::move(rate_name);
    g.headline_rule = "sizes >= 1MiB";
    g.cases = cases;
    g.worst = cases;
    g.headline_count = 1;
    g.headline_geomean = 0.1;
    g.all_geomean = 0.15;
    return g;
  };
  r.groups = {group("collective", "allreduce, 8 ranks", {0, 1}, "size", "busbw (GB/s)"),
              group("collective", "allgather <x>, 8 ranks", {2}, "size", "busbw (GB/s)"),
              group("iteration", "llama3-8b", {3}, "", "")};
  r.not_modelled["kernel <lambda>"] = {3, "names <no> model", {"a.yaml: measurements[1]"}};
  r.notes = {"NCCL <2.27>"};
  return r;
}

TEST(HtmlReport, HasOneSvgPerPlotAndBalancedElements) {
  const std::string html = html_report(sample());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(count(html, "<svg"), 4u) << "rate and error plots of the two collective groups";
  EXPECT_EQ(count(html, "</svg>"), 4u);
  for (const char* element : {"table", "section", "html", "body", "ul"})
    EXPECT_EQ(count(html, std::string("<") + element), count(html, std::string("</") + element + ">")) << element;
  EXPECT_EQ(count(html, "<section"), 3u);
  EXPECT_EQ(html.find("<script"), std::string::npos) << "no scripts: the report works offline";
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg")) << "no link but the SVG namespace";
}

TEST(HtmlReport, EscapesEveryTextFromTheFiles) {
  const std::string html = html_report(sample());
  for (const char* raw : {"<lab>", "dgx<h100>", "<co>", "<ideal>", "<x>", "<lambda>", "<no>", "<2.27>"})
    EXPECT_EQ(html.find(raw), std::string::npos) << raw;
  EXPECT_NE(html.find("dgx&lt;h100&gt;"), std::string::npos);
  EXPECT_NE(html.find("case &amp; &lt;co&gt;"), std::string::npos);
  EXPECT_NE(html.find("allgather &lt;x&gt;"), std::string::npos) << "plot titles are escaped too";
}

TEST(HtmlReport, UnwritablePathIsAConfigError) {
  EXPECT_THROW(write_html_report(sample(), "/nonexistent/dir/report.html"), ConfigError);
}

TEST(SvgPlot, Log2SizeAxisTicksAtBinaryUnits) {
  Plot plot;
  plot.title = "t";
  plot.series = {{"measured", {{8, 1}, {1 << 30, 300}}}};
  const std::string svg = svg_plot(plot);
  for (const char* tick : {">1KiB<", ">1MiB<", ">1GiB<"}) EXPECT_NE(svg.find(tick), std::string::npos) << tick;
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(count(svg, "<polyline"), 1u);
  EXPECT_EQ(count(svg, "<circle"), 3u) << "two points and the legend's marker";
}

TEST(SvgPlot, RatioAxisLabelsSignedErrorsAndSkipsWhatItCannotShow) {
  Plot plot;
  plot.y_axis = PlotAxis::ratio;
  plot.reference_one = true;
  plot.series = {{"error", {{1024, 0.9}, {2048, 1.1}, {4096, -1}, {8192, std::nan("")}}}};
  const std::string svg = svg_plot(plot);
  for (const char* tick : {">0%<", ">-10%<", ">+10%<"}) EXPECT_NE(svg.find(tick), std::string::npos) << tick;
  EXPECT_EQ(count(svg, "<circle"), 3u) << "non-positive and NaN ratios are left out";
  EXPECT_EQ(svg.find("nan"), std::string::npos);
}

TEST(SvgPlot, OnePointStillHasAxes) {
  Plot plot;
  plot.series = {{"p", {{4096, 5}}}};
  const std::string svg = svg_plot(plot);
  EXPECT_NE(svg.find(">4KiB<"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

}  // namespace
}  // namespace stepsim::validation
