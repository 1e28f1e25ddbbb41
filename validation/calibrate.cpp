#include "validation/calibrate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "models/compute/kernel.hpp"
#include "platforms/config_error.hpp"
#include "platforms/loader.hpp"
#include "platforms/yaml_reader.hpp"
#include "validation/least_squares.hpp"

namespace stepsim::validation {
namespace {

// One parameter of the fit: how theta maps to the `-p calibration.<key>=value` override.
struct Parameter {
  std::string key;
  double initial = 1;   // value at theta = 0
  bool capped_at_one = false;  // a fraction of peak (GEMM efficiency)
  double value(double theta) const {
    const double v = initial * std::exp(theta);
    return capped_at_one ? std::min(v, 1.0) : v;
  }
};

// A case the fit may use: file, index in that file, and its measured time.
struct CaseRef {
  std::size_t file = 0;
  int index = 0;
  double measured = 0;
};

// Largest standard error of a log multiplier (about the relative error of the factor) kept.
constexpr double kMaxRelativeError = 0.25;

// The figure users read is the geomean |error|, exp(mean |ln(pred/meas)|) - 1, an L1 measure:
// least squares on raw log errors would let one structural outlier (e.g. sendrecv 45 % off)
// drag every factor. The pseudo-Huber transform makes r~^2 = 2 d^2 (sqrt(1 + (r/d)^2) - 1),
// about r^2 below d and 2 d |r| above it, so the squared sum fits mean |ln| beyond 2 %.
constexpr double kHuberScale = 0.02;

double robust_residual(double r) {
  const double d = kHuberScale;
  return std::copysign(std::sqrt(2 * d * d * (std::sqrt(1 + (r / d) * (r / d)) - 1)), r);
}

bool fittable_kind(const std::string& kind) { return kind == "collective" || kind == "gemm" || kind == "compression"; }

// A measured kernel (not a collective) whose time is the kernel's, not the CPU's call rate.
bool kernel_timed(const Measurement& m, Seconds min_kernel_time) {
  return m.kind == "collective" || m.time_s >= min_kernel_time;
}

// Cases that differ only in size (or GEMM shape) share a group; the holdout alternates in it.
std::string group_of(const Measurement& m) {
  if (m.kind == "gemm") return "gemm " + m.text("dtype");
  if (m.kind == "compression") {
    // Every key but the size: codec, direction, rate/bits/block/to/dtype.
    std::string g = "compression";
    for (const auto& [k, v] : m.texts) g += " " + k + "=" + v;
    for (const auto& [k, v] : m.numbers)
      if (k != "size_bytes" && k != "compressed_bytes" && k != "max_abs_error") g += fmt::format(" {}={}", k, v);
    return g;
  }
  return fmt::format("{} {} ranks={} nodes={} dtype={} in_place={} algo={}", m.kind, m.text("op"), m.number("ranks"),
                     m.number_or("nodes", 0), m.text_or("dtype", "float32"), m.text_or("in_place", "false"),
                     m.text_or("algo", ""));
}

double size_of(const Measurement& m) {
  if (m.kind == "gemm") return 2 * m.number("m") * m.number("n") * m.number("k") * m.number_or("batch", 1);
  return m.number("size_bytes");
}

std::string number(double v) { return fmt::format("{:.17g}", v); }

// Predicted times of `cases` with the given extra overrides (nullopt where not modelled).
std::vector<std::optional<double>> predict(const std::vector<MeasurementFile>& files, const std::vector<CaseRef>& cases,
                                           const ValidateOptions& base, const std::vector<std::string>& extra) {
  ValidateOptions options = base;
  options.platform_options.overrides.insert(options.platform_options.overrides.end(), extra.begin(), extra.end());
  std::vector<std::optional<double>> out(cases.size());
  std::map<std::size_t, std::vector<std::size_t>> by_file;
  for (std::size_t i = 0; i < cases.size(); ++i) by_file[cases[i].file].push_back(i);
  for (const auto& [f, positions] : by_file) {
    MeasurementFile subset = files[f];
    subset.measurements.clear();
    for (std::size_t p : positions) subset.measurements.push_back(files[f].measurements[cases[p].index]);
    const std::vector<std::optional<Seconds>> times = predicted_times(subset, options);
    for (std::size_t k = 0; k < positions.size(); ++k) out[positions[k]] = times[k];
  }
  return out;
}

std::vector<std::string> overrides_for(const std::vector<Parameter>& params, const Eigen::VectorXd& theta) {
  std::vector<std::string> out;
  for (std::size_t k = 0; k < params.size(); ++k)
    out.push_back("calibration." + params[k].key + "=" + number(params[k].value(theta[k])));
  return out;
}

CaseSetError errors_of(const std::vector<CaseRef>& cases, const std::vector<MeasurementFile>& files,
                       const std::vector<std::optional<double>>& before, const std::vector<std::optional<double>>& after,
                       Bytes headline_min, Seconds min_kernel_time) {
  CaseSetError e;
  std::vector<double> b, a, b_all, a_all;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    if (!before[i] || !after[i]) continue;
    const Measurement& m = files[cases[i].file].measurements[cases[i].index];
    const double lb = std::abs(std::log(*before[i] / cases[i].measured));
    const double la = std::abs(std::log(*after[i] / cases[i].measured));
    ++e.cases;
    b_all.push_back(lb);
    a_all.push_back(la);
    if (m.kind == "collective" ? m.number("size_bytes") >= headline_min : kernel_timed(m, min_kernel_time)) {
      ++e.headline_cases;
      b.push_back(lb);
      a.push_back(la);
    }
  }
  e.before = geomean_error(b);
  e.after = geomean_error(a);
  e.before_all = geomean_error(b_all);
  e.after_all = geomean_error(a_all);
  return e;
}

std::string calibration_section(const CalibrationOutcome& out, const std::vector<MeasurementFile>& files,
                                const CalibrateOptions& options) {
  std::map<std::string, std::map<std::string, double>> links, algorithms, protocols, codecs;
  std::map<std::string, double> gemm;
  for (const FittedParameter& p : out.parameters) {
    if (!p.determined) continue;
    const auto dot1 = p.key.find('.'), dot2 = p.key.rfind('.');
    const std::string head = p.key.substr(0, dot1);
    if (head == "links") links[p.key.substr(dot1 + 1, dot2 - dot1 - 1)][p.key.substr(dot2 + 1)] = p.value;
    else if (head == "protocols") protocols[p.key.substr(dot1 + 1, dot2 - dot1 - 1)][p.key.substr(dot2 + 1)] = p.value;
    else if (head == "algorithms") algorithms[p.key.substr(dot1 + 1, dot2 - dot1 - 1)][p.key.substr(dot2 + 1)] = p.value;
    else if (head == "codecs") codecs[p.key.substr(dot1 + 1, dot2 - dot1 - 1)][p.key.substr(dot2 + 1)] = p.value;
    else gemm[p.key.substr(dot1 + 1)] = p.value;
  }
  auto flow = [](const std::map<std::string, double>& m) {
    std::string s;
    for (const auto& [k, v] : m) s += (s.empty() ? "" : ", ") + k + ": " + number(v);
    return "{" + s + "}";
  };
  std::string y = "\n# Fitted by `stepsim calibrate` (validation/calibrate.hpp): least squares on ln(predicted/measured)\n";
  y += "# time of the cases listed under `fitted`; the other cases of those files are held out.\n";
  if (!options.validate.platform_options.overrides.empty()) {
    y += "# Fitted with these -p overrides, which this file does not apply; pass them again:";
    for (const std::string& o : options.validate.platform_options.overrides) y += " -p " + o;
    y += "\n";
  }
  y += "calibration:\n";
  if (!links.empty()) {
    y += "  links:\n";
    for (const auto& [type, fields] : links) y += "    " + type + ": " + flow(fields) + "\n";
  }
  if (!algorithms.empty()) {
    y += "  algorithms:\n";
    for (const auto& [name, fields] : algorithms) y += "    " + name + ": " + flow(fields) + "\n";
  }
  if (!protocols.empty()) {
    y += "  protocols:\n";
    for (const auto& [name, fields] : protocols) y += "    " + name + ": " + flow(fields) + "\n";
  }
  if (!gemm.empty()) y += "  gemm_efficiency: " + flow(gemm) + "\n";
  if (!codecs.empty()) {
    y += "  codecs:\n";
    for (const auto& [name, fields] : codecs) y += "    " + name + ": " + flow(fields) + "\n";
  }
  y += "  fitted:\n";
  for (const platforms::FittedCases& f : out.fitted) {
    std::string list;
    for (int c : f.cases) list += (list.empty() ? "" : ", ") + std::to_string(c);
    y += "    - {file: \"" + f.file + "\", cases: [" + list + "]}\n";
  }
  y += "  report:\n";
  y += "    method: Levenberg-Marquardt (Eigen), forward-difference Jacobian, log multipliers\n";
  y += fmt::format("    holdout_mode: {}\n    iterations: {}\n", options.holdout, out.iterations);
  auto set = [&](const char* name, const CaseSetError& e) {
    return fmt::format("    {}: {{cases: {}, headline_cases: {}, geomean_error_before: {:.6g}, geomean_error_after: {:.6g}}}\n",
                       name, e.cases, e.headline_cases, e.before, e.after);
  };
  y += set("fit", out.fit) + set("holdout", out.holdout);
  y += "    parameters:\n";
  for (const FittedParameter& p : out.parameters)
    y += fmt::format("      {}: {{initial: {:.6g}, value: {:.6g}, relative_error: {:.3g}, determined: {}{}}}\n", p.key,
                     p.initial, p.value, p.relative_error, p.determined ? "true" : "false",
                     p.dropped_error > 0 ? fmt::format(", dropped_error: {:.3g}", p.dropped_error) : "");
  y += "    sources:\n";
  for (const MeasurementFile& f : files)
    y += "      - {file: \"" + f.path + "\", tool: \"" + f.source.tool + "\"}\n";
  return y;
}

}  // namespace

CalibrationOutcome calibrate(const std::vector<MeasurementFile>& files, const CalibrateOptions& options) {
  if (options.holdout != "half" && options.holdout != "none")
    throw ConfigError("--holdout", "unknown holdout '" + options.holdout + "'", "use half or none");
  const std::string base_text = platforms::platform_text(options.validate.platform).text;
  {
    YAML::Node doc = platforms::load_yaml(base_text, options.validate.platform);
    if (doc.IsMap() && doc["calibration"])
      throw ConfigError(options.validate.platform + ": calibration", "the platform is already calibrated",
                        "calibrate the uncalibrated platform (the preset or file without a calibration section)");
  }
  CalibrationOutcome out;

  // Cases by group, sorted by size; the holdout alternates within each group.
  std::map<std::string, std::vector<CaseRef>> groups;
  std::vector<std::string> group_order;
  for (std::size_t f = 0; f < files.size(); ++f)
    for (std::size_t i = 0; i < files[f].measurements.size(); ++i) {
      const Measurement& m = files[f].measurements[i];
      if (!fittable_kind(m.kind)) continue;
      if (m.kind == "collective" && m.number("size_bytes") < options.fit_min_size) continue;
      if (!kernel_timed(m, options.validate.min_kernel_time)) continue;
      const std::string g = files[f].path + " | " + group_of(m);
      if (!groups.count(g)) group_order.push_back(g);
      groups[g].push_back({f, static_cast<int>(i), m.time_s});
    }
  std::vector<CaseRef> fit_cases, holdout_cases;
  for (const std::string& g : group_order) {
    std::vector<CaseRef>& cases = groups[g];
    std::stable_sort(cases.begin(), cases.end(), [&](const CaseRef& a, const CaseRef& b) {
      return size_of(files[a.file].measurements[a.index]) < size_of(files[b.file].measurements[b.index]);
    });
    for (std::size_t k = 0; k < cases.size(); ++k)
      (options.holdout == "none" || k % 2 == 0 ? fit_cases : holdout_cases).push_back(cases[k]);
  }

  // Drop cases the model cannot predict (they are validate's not-modelled ones).
  const std::vector<std::optional<double>> fit_before_all = predict(files, fit_cases, options.validate, {});
  std::vector<CaseRef> usable;
  std::vector<std::optional<double>> fit_before;  // the uncalibrated predictions of `usable`
  for (std::size_t i = 0; i < fit_cases.size(); ++i)
    if (fit_before_all[i]) {
      usable.push_back(fit_cases[i]);
      fit_before.push_back(fit_before_all[i]);
    }
  if (usable.empty())
    throw ConfigError("calibrate", "no collective, GEMM or codec case the model predicts is left to fit",
                      "pass measurement files with collective, gemm or compression cases of this platform");
  if (usable.size() < fit_cases.size())
    out.notes.push_back(fmt::format("{} fit case(s) skipped: no model predicts them", fit_cases.size() - usable.size()));
  fit_cases = usable;

  // Candidate parameters: what the platform and the cases could determine.
  const platforms::Platform platform = platforms::load_platform(options.validate.platform, options.validate.platform_options);
  std::set<std::string> link_types;
  for (int id = 0; id < platform.link_count(); ++id) link_types.insert(platforms::to_string(platform.link(id).type));
  std::set<std::string> gemm_dtypes, codecs;
  bool any_collective = false;
  for (const CaseRef& c : fit_cases) {
    const Measurement& m = files[c.file].measurements[c.index];
    if (m.kind == "gemm") gemm_dtypes.insert(models::to_string(models::parse_dtype(m.text("dtype"), "dtype")));
    if (m.kind == "compression") codecs.insert(m.text("codec"));
    if (m.kind != "collective") continue;
    any_collective = true;
    if (files[c.file].system.nodes > 1 || m.number_or("nodes", 1) > 1) link_types.insert("network");
  }
  std::vector<Parameter> params;
  if (any_collective) {
    for (const std::string& t : link_types) params.push_back({"links." + t + ".bandwidth_scale"});
    for (const std::string& p : platforms::calibrated_protocol_names()) params.push_back({"protocols." + p + ".efficiency_scale"});
    for (const std::string& a : platforms::calibrated_algorithm_names()) params.push_back({"algorithms." + a + ".efficiency_scale"});
    for (const std::string& p : platforms::calibrated_protocol_names()) params.push_back({"protocols." + p + ".latency_scale"});
  }
  for (const std::string& c : codecs) params.push_back({"codecs." + c + ".throughput_scale"});
  for (const std::string& d : gemm_dtypes)
    params.push_back({"gemm_efficiency." + d, models::gemm_efficiency(platform.gpu(), models::parse_dtype(d, "dtype")), true});

  // Fit, then drop every parameter the cases pin down worse than kMaxRelativeError and refit
  // the rest: a factor known only to within a factor of two explains nothing, and left free it
  // wanders along flat directions of the residuals (e.g. LL's efficiency where every LL case
  // is latency-bound).
  const auto n_params = static_cast<Eigen::Index>(params.size());
  std::vector<bool> active(params.size(), true);
  std::vector<double> dropped_error(params.size(), 0.0);
  Eigen::VectorXd theta = Eigen::VectorXd::Zero(n_params);
  LeastSquaresResult fit;
  std::vector<Eigen::Index> index;  // active parameter -> position in `params`
  for (;;) {
    index.clear();
    for (std::size_t k = 0; k < params.size(); ++k)
      if (active[k]) index.push_back(static_cast<Eigen::Index>(k));
    LeastSquaresProblem problem;
    problem.parameters = static_cast<int>(index.size());
    problem.residuals = [&](const Eigen::VectorXd& sub) {
      Eigen::VectorXd full = Eigen::VectorXd::Zero(n_params);
      for (std::size_t i = 0; i < index.size(); ++i) full[index[i]] = sub[static_cast<Eigen::Index>(i)];
      const std::vector<std::optional<double>> t = predict(files, fit_cases, options.validate, overrides_for(params, full));
      Eigen::VectorXd r(fit_cases.size());
      for (std::size_t i = 0; i < fit_cases.size(); ++i) {
        if (!t[i]) throw std::logic_error("calibrate: a case stopped being predictable");
        r[static_cast<Eigen::Index>(i)] = robust_residual(std::log(*t[i] / fit_cases[i].measured));
      }
      return r;
    };
    fit = solve_least_squares(problem);
    out.iterations += fit.iterations;
    // Backward elimination: every parameter no case moves, else the single worst-determined one.
    bool dropped = false;
    std::optional<std::size_t> worst;
    for (std::size_t i = 0; i < index.size(); ++i) {
      const double error = fit.standard_error[static_cast<Eigen::Index>(i)];
      if (!fit.determined[i]) {
        active[static_cast<std::size_t>(index[i])] = false;
        dropped = true;
      } else if (error > kMaxRelativeError && (!worst || error > fit.standard_error[static_cast<Eigen::Index>(*worst)])) {
        worst = i;
      }
    }
    if (!dropped && worst) {
      active[static_cast<std::size_t>(index[*worst])] = false;
      dropped_error[static_cast<std::size_t>(index[*worst])] = fit.standard_error[static_cast<Eigen::Index>(*worst)];
      dropped = true;
    }
    if (!dropped || index.empty()) break;
  }
  theta.setZero();
  for (std::size_t i = 0; i < index.size(); ++i) theta[index[i]] = fit.theta[static_cast<Eigen::Index>(i)];
  for (std::size_t k = 0; k < params.size(); ++k) {
    FittedParameter p;
    p.key = params[k].key;
    p.initial = params[k].initial;
    p.determined = active[k];
    p.dropped_error = dropped_error[k];
    p.value = params[k].value(theta[static_cast<Eigen::Index>(k)]);
    if (p.determined) {
      const auto pos = std::find(index.begin(), index.end(), static_cast<Eigen::Index>(k)) - index.begin();
      p.relative_error = fit.standard_error[pos];
    }
    out.parameters.push_back(p);
  }

  const std::vector<std::string> fitted_overrides = overrides_for(params, theta);
  const Bytes headline = options.validate.min_size;
  out.fit = errors_of(fit_cases, files, fit_before,
                      predict(files, fit_cases, options.validate, fitted_overrides), headline,
                      options.validate.min_kernel_time);
  out.holdout = errors_of(holdout_cases, files, predict(files, holdout_cases, options.validate, {}),
                          predict(files, holdout_cases, options.validate, fitted_overrides), headline,
                          options.validate.min_kernel_time);

  std::map<std::size_t, std::vector<int>> fitted_by_file;
  for (const CaseRef& c : fit_cases) fitted_by_file[c.file].push_back(c.index);
  for (auto& [f, cases] : fitted_by_file) {
    std::sort(cases.begin(), cases.end());
    out.fitted.push_back({files[f].path, cases});
  }
  out.platform_yaml = base_text + calibration_section(out, files, options);
  // The written platform must load and reproduce the fit (a bug otherwise, not user error).
  platforms::parse_platform(out.platform_yaml, "calibrated platform", options.validate.platform_options);
  return out;
}

std::string format_calibration_text(const CalibrationOutcome& out) {
  std::string s = fmt::format("{:<40} {:>10} {:>10} {:>9}\n", "parameter", "initial", "fitted", "+/- rel");
  for (const FittedParameter& p : out.parameters)
    s += p.determined      ? fmt::format("{:<40} {:>10.4g} {:>10.4g} {:>8.2f}%\n", p.key, p.initial, p.value, 100 * p.relative_error)
         : p.dropped_error > 0 ? fmt::format("{:<40} {:>10.4g} {:>10} {:>8.0f}%  too loose\n", p.key, p.initial, "(kept)",
                                             100 * p.dropped_error)
                               : fmt::format("{:<40} {:>10.4g} {:>10} {:>9}\n", p.key, p.initial, "(kept)", "no data");
  auto line = [](const char* name, const CaseSetError& e) {
    return fmt::format("{:<8} {:>4} cases ({:>4} headline): geomean |error| {:6.2f}% -> {:6.2f}%   (all sizes {:6.2f}% -> {:6.2f}%)\n",
                       name, e.cases, e.headline_cases, 100 * e.before, 100 * e.after, 100 * e.before_all,
                       100 * e.after_all);
  };
  s += fmt::format("\nLevenberg-Marquardt: {} iterations\n", out.iterations);
  s += line("fit", out.fit);
  s += line("holdout", out.holdout);
  for (const std::string& n : out.notes) s += "note: " + n + "\n";
  return s;
}

}  // namespace stepsim::validation
