#include "validation/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "platforms/config_error.hpp"
#include "platforms/units.hpp"
#include "validation/svg_plot.hpp"

namespace stepsim::validation {
namespace {

constexpr const char* kMeasuredColor = "#1f77b4";
constexpr const char* kPredictedColor = "#d62728";
constexpr const char* kBelowMinColor = "#9e9e9e";
constexpr std::size_t kListedWhere = 10;   // not-modelled cases named one by one, per kind

constexpr const char* kStyle = R"(
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 1400px; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; white-space: nowrap; }
th { background: #f0f0f0; }
td.text, th.text { text-align: left; }
tr.below td { color: #888; }
section { border-top: 2px solid #ddd; margin-top: 2em; }
.plots svg { margin-right: 1em; border: 1px solid #eee; }
p.defs { max-width: 60em; }
)";

std::string percent(double fraction) {
  return std::isnan(fraction) ? "&ndash;" : fmt::format("{:.1f}&nbsp;%", 100 * fraction);
}

std::string time_text(double s) {
  if (s < 1e-3) return fmt::format("{:.2f}&nbsp;us", s * 1e6);
  if (s < 1) return fmt::format("{:.3f}&nbsp;ms", s * 1e3);
  return fmt::format("{:.4f}&nbsp;s", s);
}

/// Two decimals, or three significant digits for the small rates of tiny messages.
std::string rate_text(double rate) { return rate >= 1 ? fmt::format("{:.2f}", rate) : fmt::format("{:.3g}", rate); }

std::string group_title(const GroupSummary& g) {
  return xml_escape(g.platform) + " &middot; " + xml_escape(g.kind) + " &middot; " + xml_escape(g.key);
}

PlotAxis x_axis_of(const GroupSummary& g) { return g.x_name == "size" ? PlotAxis::log2_bytes : PlotAxis::log10; }

std::string x_label_of(const GroupSummary& g) {
  return g.x_name == "size" ? "size (bytes, log2 scale)" : g.x_name + " (log10 scale)";
}

constexpr int kPlotWidth = 540;   // two plots side by side in a 1200 px window

std::string rate_plot(const ValidationResult& r, const GroupSummary& g) {
  Plot plot;
  plot.width = kPlotWidth;
  plot.title = g.key + ": " + g.rate_name;
  plot.x_label = x_label_of(g);
  plot.y_label = g.rate_name;
  plot.x_axis = x_axis_of(g);
  PlotSeries measured{"measured", {}, kMeasuredColor, PlotMarker::circle, false, true};
  PlotSeries predicted{"predicted (stepsim)", {}, kPredictedColor, PlotMarker::square, true, true};
  for (std::size_t i : g.cases) {
    measured.points.emplace_back(r.cases[i].x, r.cases[i].measured_rate);
    predicted.points.emplace_back(r.cases[i].x, r.cases[i].predicted_rate);
  }
  plot.series = {measured, predicted};
  return svg_plot(plot);
}

std::string error_plot(const ValidationResult& r, const GroupSummary& g) {
  Plot plot;
  plot.width = kPlotWidth;
  plot.title = g.key + ": prediction error of time";
  plot.x_label = x_label_of(g);
  plot.y_label = "predicted / measured time - 1";
  plot.x_axis = x_axis_of(g);
  plot.y_axis = PlotAxis::ratio;
  plot.reference_one = true;
  PlotSeries headline{"in the headline (" + g.headline_rule + ")", {}, kPredictedColor, PlotMarker::circle, false, true};
  PlotSeries below{"below min size", {}, kBelowMinColor, PlotMarker::circle, false, true};
  for (std::size_t i : g.cases)
    (r.cases[i].headline ? headline : below).points.emplace_back(r.cases[i].x, 1 + r.cases[i].error);
  plot.series = {headline};
  if (!below.points.empty()) plot.series.push_back(below);
  return svg_plot(plot);
}

std::string worst_text(const ValidationResult& r, const GroupSummary& g) {
  if (g.worst.empty()) return "&ndash;";
  const CaseResult& c = r.cases[g.worst.front()];
  const std::string label = g.key == "all" ? c.key + " " + c.label : c.label;   // a total names the group too
  return fmt::format("{} ({:+.1f}&nbsp;%)", xml_escape(label), 100 * c.error);
}

std::string summary_table(const ValidationResult& r) {
  std::string out = "<table>\n<tr><th class=\"text\">group</th><th>cases</th><th>geomean |error| (headline)</th>"
                    "<th class=\"text\">headline rule</th><th>geomean |error| (all)</th><th class=\"text\">worst case</th></tr>\n";
  for (std::size_t gi = 0; gi < r.groups.size(); ++gi) {
    const GroupSummary& g = r.groups[gi];
    out += fmt::format(
        "<tr><td class=\"text\"><a href=\"#group{}\">{}</a></td><td>{}</td><td>{}</td><td class=\"text\">{}</td>"
        "<td>{}</td><td class=\"text\">{}</td></tr>\n",
        gi, group_title(g), g.cases.size(), percent(g.headline_geomean), xml_escape(g.headline_rule),
        percent(g.all_geomean), worst_text(r, g));
  }
  for (const GroupSummary& g : r.overall) {
    const auto siblings = std::count_if(r.groups.begin(), r.groups.end(), [&](const GroupSummary& k) {
      return k.platform == g.platform && k.kind == g.kind;
    });
    if (siblings < 2) continue;   // one group: the total would repeat it
    out += fmt::format(
        "<tr><td class=\"text\"><b>{}</b></td><td>{}</td><td><b>{}</b></td><td class=\"text\">{}</td><td>{}</td>"
        "<td class=\"text\">{}</td></tr>\n",
        group_title(g), g.cases.size(), percent(g.headline_geomean), xml_escape(g.headline_rule),
        percent(g.all_geomean), worst_text(r, g));
  }
  return out + "</table>\n";
}

std::string not_modelled_table(const ValidationResult& r) {
  if (r.not_modelled.empty()) return "<p>Every measured case was predicted.</p>\n";
  std::string out = "<h2>Not modelled</h2>\n<table>\n<tr><th class=\"text\">cases</th><th>count</th>"
                    "<th class=\"text\">why</th><th class=\"text\">where</th></tr>\n";
  for (const auto& [key, n] : r.not_modelled) {
    std::string where;
    for (std::size_t i = 0; i < n.where.size() && i < kListedWhere; ++i)
      where += (i == 0 ? "" : "<br>") + xml_escape(n.where[i]);
    if (n.where.size() > kListedWhere) where += fmt::format("<br>and {} more", n.where.size() - kListedWhere);
    out += fmt::format("<tr><td class=\"text\">{}</td><td>{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td></tr>\n",
                       xml_escape(key), n.count, xml_escape(n.reason), where);
  }
  return out + "</table>\n";
}

std::string case_table(const ValidationResult& r, const GroupSummary& g) {
  const bool rates = !g.rate_name.empty();
  std::string out = "<table>\n<tr><th class=\"text\">case</th><th>measured</th><th>predicted</th>";
  if (rates) out += fmt::format("<th>measured {0}</th><th>predicted {0}</th>", xml_escape(g.rate_name));
  out += "<th>error</th><th>|ln(pred/meas)|</th><th class=\"text\">model</th><th class=\"text\">where</th></tr>\n";
  for (std::size_t i : g.cases) {
    const CaseResult& c = r.cases[i];
    out += fmt::format("<tr{}><td class=\"text\">{}</td><td>{}</td><td>{}</td>", c.headline ? "" : " class=\"below\"",
                       xml_escape(c.label), time_text(c.measured_s), time_text(c.predicted_s));
    if (rates) out += fmt::format("<td>{}</td><td>{}</td>", rate_text(c.measured_rate), rate_text(c.predicted_rate));
    out += fmt::format("<td>{:+.1f}&nbsp;%</td><td>{:.3f}</td><td class=\"text\">{}</td><td class=\"text\">{}</td></tr>\n",
                       100 * c.error, c.log_error, xml_escape(c.model), xml_escape(c.where));
  }
  return out + "</table>\n";
}

std::string group_section(const ValidationResult& r, const GroupSummary& g, std::size_t index) {
  std::string out = fmt::format("<section id=\"group{}\">\n<h2>{}</h2>\n", index, group_title(g));
  out += fmt::format("<p>geomean |error| {} over {} ({} of {} case{})", percent(g.headline_geomean),
                     xml_escape(g.headline_rule), g.headline_count, g.cases.size(), g.cases.size() == 1 ? "" : "s");
  if (g.headline_count != g.cases.size()) out += fmt::format("; {} over all of them", percent(g.all_geomean));
  out += ".</p>\n";
  if (!g.x_name.empty()) {
    out += "<div class=\"plots\">\n";
    if (!g.rate_name.empty()) out += rate_plot(r, g) + "\n";
    out += error_plot(r, g) + "\n</div>\n";
  }
  return out + case_table(r, g) + "</section>\n";
}

}  // namespace

std::string html_report(const ValidationResult& r) {
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += fmt::format("<title>stepsim validation on {}</title>\n<style>{}</style>\n</head>\n<body>\n",
                     xml_escape(r.platform), kStyle);
  out += fmt::format("<h1>stepsim validation on {}</h1>\n", xml_escape(r.platform));
  out += fmt::format(
      "<p class=\"defs\">Engine {}. Each measured case beside stepsim's prediction of the same case. "
      "<b>error</b> = predicted / measured time &minus; 1 (for collectives the busbw error has the opposite "
      "sign: busbw is proportional to 1 / time). <b>geomean |error|</b> = exp(mean |ln(predicted / measured)|) "
      "&minus; 1, a symmetric error in which +25&nbsp;% and &minus;20&nbsp;% count the same; the headline "
      "geomean of collectives takes sizes &ge; {} only, where bandwidth rather than launch latency "
      "dominates.</p>\n",
      xml_escape(r.engine), xml_escape(format_size(r.min_size)));
  out += "<h2>Summary</h2>\n" + summary_table(r) + not_modelled_table(r);
  if (!r.notes.empty()) {
    out += "<h2>Notes</h2>\n<ul>\n";
    for (const std::string& note : r.notes) out += "<li>" + xml_escape(note) + "</li>\n";
    out += "</ul>\n";
  }
  for (std::size_t i = 0; i < r.groups.size(); ++i) out += group_section(r, r.groups[i], i);
  return out + "</body>\n</html>\n";
}

void write_html_report(const ValidationResult& result, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw ConfigError("--report " + path, "cannot open the file for writing", "name a writable path");
  out << html_report(result);
  if (!out) throw ConfigError("--report " + path, "writing the report failed", "check the disk has space");
}

}  // namespace stepsim::validation
