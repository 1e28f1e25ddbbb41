// The text and JSON forms of a ValidationResult (validate.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "validation/validate.hpp"

namespace stepsim::validation {
namespace {

/// A time with a unit that keeps three to four significant digits.
std::string format_time(double s) {
  if (s < 1e-3) return fmt::format("{:.2f} us", s * 1e6);
  if (s < 1) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.4f} s", s);
}

std::string format_percent(double fraction) {
  return std::isnan(fraction) ? "-" : fmt::format("{:.1f} %", 100 * fraction);
}

std::string cases_text(std::size_t n) { return fmt::format("{} case{}", n, n == 1 ? "" : "s"); }

std::string format_rate(double rate) { return rate >= 1 ? fmt::format("{:.2f}", rate) : fmt::format("{:.3g}", rate); }

nlohmann::json number_or_null(double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); }

void group_table(std::string& out, const ValidationResult& r, const GroupSummary& g) {
  out += fmt::format("== {} | {} | {}\n", g.platform, g.kind, g.key);
  const bool rates = !g.rate_name.empty();
  out += fmt::format("   {:<22} {:>12} {:>12}", "case", "measured", "predicted");
  if (rates) out += fmt::format(" {:>10} {:>10}", "meas rate", "pred rate");
  out += fmt::format(" {:>9}  {}\n", "error", "model");
  for (std::size_t i : g.cases) {
    const CaseResult& c = r.cases[i];
    out += fmt::format("   {:<22} {:>12} {:>12}", c.label, format_time(c.measured_s), format_time(c.predicted_s));
    if (rates) out += fmt::format(" {:>10} {:>10}", format_rate(c.measured_rate), format_rate(c.predicted_rate));
    out += fmt::format(" {:>+8.1f}%  {}{}\n", 100 * c.error, c.model, c.headline ? "" : "  [below min size]");
  }
  if (rates) out += fmt::format("   rate = {}\n", g.rate_name);
  out += fmt::format("   geomean |error|: {} over {} ({})", format_percent(g.headline_geomean), g.headline_rule,
                     cases_text(g.headline_count));
  if (g.headline_count != g.cases.size())
    out += fmt::format(", {} over all sizes ({})", format_percent(g.all_geomean), cases_text(g.cases.size()));
  out += "\n";
  std::string worst;
  for (std::size_t i : g.worst) worst += fmt::format("{}{} {:+.1f}%", worst.empty() ? "" : ", ", r.cases[i].label,
                                                     100 * r.cases[i].error);
  out += "   worst: " + worst + "\n\n";
}

}  // namespace

std::string format_validation_text(const ValidationResult& r) {
  std::string out;
  for (const GroupSummary& g : r.groups) group_table(out, r, g);
  out += fmt::format("Summary on {} ({} engine): error = predicted / measured time - 1; geomean |error| = "
                     "exp(mean |ln(pred/meas)|) - 1\n",
                     r.platform, r.engine);
  std::size_t width = 20;
  for (const GroupSummary& g : r.groups) width = std::max(width, g.platform.size() + g.kind.size() + g.key.size() + 6);
  out += fmt::format("  {:<{}} {:>6} {:>12} {:>12}  {}\n", "group", width, "cases", "headline", "all", "headline rule");
  const auto row = [&](const GroupSummary& g) {
    out += fmt::format("  {:<{}} {:>6} {:>12} {:>12}  {}\n", g.platform + " | " + g.kind + " | " + g.key, width,
                       g.cases.size(), format_percent(g.headline_geomean), format_percent(g.all_geomean),
                       g.headline_rule);
  };
  for (const GroupSummary& g : r.groups) row(g);
  // Totals of a (platform, kind) only where it has several groups: one group would repeat itself.
  for (const GroupSummary& g : r.overall)
    if (std::count_if(r.groups.begin(), r.groups.end(),
                      [&](const GroupSummary& k) { return k.platform == g.platform && k.kind == g.kind; }) > 1)
      row(g);
  if (r.groups.empty()) out += "  (no case was predicted)\n";
  for (const auto& [key, n] : r.not_modelled)
    out += fmt::format("not modelled: {} ({}): {}\n", key, cases_text(n.count), n.reason);
  for (const std::string& note : r.notes) out += "note: " + note + "\n";
  return out;
}

nlohmann::json validation_json(const ValidationResult& r) {
  nlohmann::json cases = nlohmann::json::array();
  for (const CaseResult& c : r.cases) {
    nlohmann::json j = {{"where", c.where},         {"platform", c.platform},       {"kind", c.kind},
                        {"key", c.key},             {"label", c.label},             {"measured_s", c.measured_s},
                        {"predicted_s", c.predicted_s}, {"error", c.error},         {"log_error", c.log_error},
                        {"headline", c.headline},   {"model", c.model}};
    if (c.x > 0) j["x"] = c.x;
    if (c.measured_rate > 0) {
      j["measured_rate"] = c.measured_rate;
      j["predicted_rate"] = c.predicted_rate;
    }
    cases.push_back(j);
  }
  const auto group_json = [](const GroupSummary& g) {
    return nlohmann::json{{"platform", g.platform},
                          {"kind", g.kind},
                          {"key", g.key},
                          {"x_name", g.x_name},
                          {"rate_name", g.rate_name},
                          {"cases", g.cases},
                          {"count", g.cases.size()},
                          {"headline_rule", g.headline_rule},
                          {"headline_count", g.headline_count},
                          {"headline_geomean_error", number_or_null(g.headline_geomean)},
                          {"all_geomean_error", number_or_null(g.all_geomean)},
                          {"worst", g.worst}};
  };
  nlohmann::json groups = nlohmann::json::array(), overall = nlohmann::json::array();
  for (const GroupSummary& g : r.groups) groups.push_back(group_json(g));
  for (const GroupSummary& g : r.overall) overall.push_back(group_json(g));
  nlohmann::json not_modelled = nlohmann::json::object();
  for (const auto& [key, n] : r.not_modelled)
    not_modelled[key] = {{"count", n.count}, {"reason", n.reason}, {"where", n.where}};
  return {{"platform", r.platform}, {"engine", r.engine}, {"min_size_bytes", r.min_size}, {"cases", cases},
          {"groups", groups},       {"overall", overall}, {"not_modelled", not_modelled}, {"notes", r.notes}};
}

}  // namespace stepsim::validation
