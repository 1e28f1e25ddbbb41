#include "tools/sweep/sweep_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "platforms/config_error.hpp"
#include "platforms/yaml_reader.hpp"

namespace stepsim::sweep {
namespace {

using platforms::join;
using platforms::YamlReader;

// More points than this is a typo (a range with factor 1.0001), not a sweep.
constexpr double kMaxPoints = 1e7;

const std::vector<std::string> kCollectiveFields = {
    "platform", "op",       "size",  "algo",        "gpus",        "nodes",           "fabric",
    "engine",   "root",     "channels", "chunk", "compression", "compression_mode", "compression_threshold",
    "runtime"};
const std::vector<std::string> kSimulateFields = {"platform", "workload", "gpus", "nodes", "fabric", "engine"};

std::vector<std::string> required_fields(SweepKind kind) {
  return kind == SweepKind::collective ? std::vector<std::string>{"platform", "op", "size"}
                                       : std::vector<std::string>{"platform", "workload"};
}

std::string param_fix(SweepKind kind) {
  return fmt::format("use a base field ({}) or a dotted path as -p takes it (gpu.model, fabric.kind{})",
                     join(base_fields(kind)),
                     kind == SweepKind::collective ? ", algo_param.proto" : ", workload.fsdp.strategy");
}

class SweepReader {
 public:
  SweepReader(const YAML::Node& root, std::string origin) : root_(root), reader_(std::move(origin)) {}

  Sweep read() {
    Sweep s;
    s.origin = reader_.origin();
    if (!root_ || !root_.IsMap())
      reader_.fail("", root_, "a sweep file is a section of `key: value` entries",
                   "start with `version: 1`, `base:`, `axes:` and `metric:` (docs/sweep.md)");
    reader_.check_keys(root_, "", {"version", "name", "base", "axes", "combine", "filters", "metric", "rank",
                                   "group_by", "plot"});
    const YAML::Node version = reader_.require(root_, "", "version");
    if (reader_.get_int(version, "version", 0) != 1)
      reader_.fail("version", version, "unsupported sweep file version", "write `version: 1`");
    if (const YAML::Node name = root_["name"]) s.name = reader_.get_string(name, "name");
    read_base(s);
    read_axes(s);
    if (const YAML::Node combine = root_["combine"])
      s.zip = reader_.get_choice(combine, "combine", {"grid", "zip"}) == "zip";
    check_required(s);
    check_zip(s);
    read_filters(s);
    read_metric(s);
    read_group_by(s);
    read_plot(s);
    return s;
  }

 private:
  void read_base(Sweep& s) {
    const YAML::Node base = reader_.require(root_, "", "base");
    reader_.check_keys(base, "base", {"collective", "simulate"});
    if (base.size() != 1)
      reader_.fail("base", base, "expected exactly one of `collective:` or `simulate:`",
                   "write `base: {collective: {...}}` or `base: {simulate: {...}}`");
    const std::string kind = base.begin()->first.as<std::string>();
    s.kind = kind == "collective" ? SweepKind::collective : SweepKind::simulate;
    const std::string path = "base." + kind;
    const YAML::Node fields = base[kind];
    std::vector<std::string> allowed = base_fields(s.kind);
    allowed.push_back("params");
    reader_.check_keys(fields, path, allowed);
    for (const auto& entry : fields) {
      const std::string key = entry.first.as<std::string>();
      if (key == "params") continue;
      s.base[key] = reader_.get_string(entry.second, path + "." + key);
    }
    if (const YAML::Node params = fields["params"]) {
      if (!params.IsMap())
        reader_.fail(path + ".params", params, "expected a section of `dotted.path: value` entries",
                     "write e.g. `params: {gpu.model: H200-SXM5-141GB}`");
      for (const auto& entry : params) {
        const std::string key = entry.first.as<std::string>();
        const std::string at = path + ".params." + key;
        const auto target = param_target(s.kind, key);
        if (!target || *target == ParamTarget::field)
          reader_.fail(at, entry.first, "'" + key + "' is not a dotted -p path",
                       target ? "set base fields directly under " + path : param_fix(s.kind));
        s.base[key] = reader_.get_string(entry.second, at);
      }
    }
  }

  void read_axes(Sweep& s) {
    const YAML::Node axes = reader_.require(root_, "", "axes");
    if (!axes.IsSequence() || axes.size() == 0)
      reader_.fail("axes", axes, "expected a list of axes", "write `axes: [{param: size, values: [1MiB, 1GiB]}]`");
    std::set<std::string> seen;
    double points = 1;
    for (std::size_t i = 0; i < axes.size(); ++i) {
      const std::string path = fmt::format("axes[{}]", i);
      const YAML::Node axis = axes[i];
      reader_.check_keys(axis, path, {"param", "values", "range"});
      SweepAxis a;
      const YAML::Node param = reader_.require(axis, path, "param");
      a.param = reader_.get_string(param, path + ".param");
      if (!param_target(s.kind, a.param))
        reader_.fail(path + ".param", param, "unknown param '" + a.param + "' for a " + to_string(s.kind) + " sweep",
                     param_fix(s.kind));
      const auto& results = result_columns(s.kind);
      if (std::find(results.begin(), results.end(), a.param) != results.end())
        reader_.fail(path + ".param", param, "'" + a.param + "' names a result column", param_fix(s.kind));
      if (!seen.insert(a.param).second)
        reader_.fail(path + ".param", param, "a second axis over '" + a.param + "'",
                     "list every value of one parameter in one axis");
      const YAML::Node values = axis["values"], range = axis["range"];
      if (values && range)
        reader_.fail(path, axis, "both `values` and `range`", "keep one of them");
      if (values) {
        if (!values.IsSequence())
          reader_.fail(path + ".values", values, "expected a list", "write `values: [a, b, c]`");
        for (std::size_t v = 0; v < values.size(); ++v) {
          const std::string at = fmt::format("{}.values[{}]", path, v);
          a.values.push_back(reader_.get_string(values[v], at));
          // A size is checked here, where the file and line are known, not when its point runs.
          if (a.param == "size" || a.param == "chunk" || a.param == "compression_threshold") reader_.get_size(values[v], at);
        }
      } else if (range) {
        a.values = read_range(range, path + ".range", a.param);
      } else {
        reader_.fail(path, axis, "an axis needs `values` or `range`",
                     "write `values: [...]` or `range: {from, to, factor}`");
      }
      if (a.values.empty())
        reader_.fail(path, axis, "empty axis: '" + a.param + "' takes no value", "list at least one value");
      points *= static_cast<double>(a.values.size());
      if (points > kMaxPoints)
        reader_.fail(path, axis, fmt::format("the grid exceeds {:g} points", kMaxPoints),
                     "narrow the ranges or split the sweep with --shard");
      s.axes.push_back(std::move(a));
    }
  }

  std::vector<std::string> read_range(const YAML::Node& range, const std::string& path, const std::string& param) {
    reader_.check_keys(range, path, {"from", "to", "factor", "step"});
    const YAML::Node from_node = reader_.require(range, path, "from"), to_node = reader_.require(range, path, "to");
    const double from = reader_.get_size(from_node, path + ".from"), to = reader_.get_size(to_node, path + ".to");
    if (to < from) reader_.fail(path + ".to", to_node, "`to` is below `from`", "write from <= to");
    const YAML::Node factor = range["factor"], step = range["step"];
    if (!factor == !step)
      reader_.fail(path, range, "a range needs exactly one of `factor` (geometric) or `step` (arithmetic)",
                   "write e.g. `range: {from: 1KiB, to: 1GiB, factor: 2}`");
    const double by = reader_.get_number(factor ? factor : step, path + (factor ? ".factor" : ".step"));
    if (factor ? by <= 1 : by <= 0)
      reader_.fail(path + (factor ? ".factor" : ".step"), factor ? factor : step,
                   factor ? "factor must be > 1" : "step must be > 0", "write e.g. factor: 2 or step: 1");
    // A range over sizes lists sizes: 64KiB, not 65536.
    const bool sizes = is_size_value(param, from_node.Scalar()) || is_size_value(param, to_node.Scalar());
    if (from == 0 && factor)
      reader_.fail(path + ".from", from_node, "a geometric range cannot start at 0", "start at a positive value");
    std::vector<std::string> values;
    // The relative slack keeps `to` when repeated multiplication lands a rounding error above it.
    for (double v = from; v <= to * (1 + 1e-12); v = factor ? v * by : v + by) {
      if (values.size() >= kMaxPoints)
        reader_.fail(path, range, "the range has too many values", "raise the factor or step");
      if (sizes)
        values.push_back(format_size(v));
      else if (v == std::floor(v) && std::abs(v) < 9e15)
        values.push_back(fmt::format("{}", static_cast<long long>(v)));
      else
        values.push_back(fmt::format("{}", v));
    }
    return values;
  }

  void check_required(const Sweep& s) {
    for (const std::string& field : required_fields(s.kind)) {
      const bool on_axis = std::any_of(s.axes.begin(), s.axes.end(), [&](const SweepAxis& a) { return a.param == field; });
      if (!s.base.count(field) && !on_axis)
        reader_.fail("base." + std::string(to_string(s.kind)), root_["base"][to_string(s.kind)],
                     "missing '" + field + "'", "set `" + field + ":` in the base or add an axis over it");
    }
  }

  void check_zip(const Sweep& s) {
    if (!s.zip) return;
    for (std::size_t i = 1; i < s.axes.size(); ++i)
      if (s.axes[i].values.size() != s.axes[0].values.size())
        reader_.fail(fmt::format("axes[{}]", i), root_["axes"][i],
                     fmt::format("`combine: zip` needs axes of equal length: '{}' has {} values, '{}' has {}",
                                 s.axes[i].param, s.axes[i].values.size(), s.axes[0].param, s.axes[0].values.size()),
                     "give every axis as many values, or use `combine: grid`");
  }

  const SweepAxis* axis_named(const Sweep& s, const std::string& param) const {
    for (const SweepAxis& a : s.axes)
      if (a.param == param) return &a;
    return nullptr;
  }

  std::string axis_param(const Sweep& s, const YAML::Node& node, const std::string& path) {
    const std::string param = reader_.get_string(node, path);
    if (!axis_named(s, param)) {
      std::vector<std::string> names;
      for (const SweepAxis& a : s.axes) names.push_back(a.param);
      reader_.fail(path, node, "'" + param + "' is not an axis", "name one of the axes: " + join(names));
    }
    return param;
  }

  void read_filters(Sweep& s) {
    const YAML::Node filters = root_["filters"];
    if (!filters) return;
    if (!filters.IsSequence())
      reader_.fail("filters", filters, "expected a list of filters", "write `filters: [{param: size, min: 1MiB}]`");
    for (std::size_t i = 0; i < filters.size(); ++i) {
      const std::string path = fmt::format("filters[{}]", i);
      const YAML::Node filter = filters[i];
      reader_.check_keys(filter, path, {"param", "min", "max", "in"});
      SweepFilter f;
      f.param = axis_param(s, reader_.require(filter, path, "param"), path + ".param");
      if (const YAML::Node min = filter["min"]) f.min = reader_.get_size(min, path + ".min");
      if (const YAML::Node max = filter["max"]) f.max = reader_.get_size(max, path + ".max");
      if (const YAML::Node in = filter["in"]) {
        if (!in.IsSequence() || in.size() == 0)
          reader_.fail(path + ".in", in, "expected a non-empty list of values", "write `in: [ring, tree]`");
        for (std::size_t v = 0; v < in.size(); ++v)
          f.in.push_back(reader_.get_string(in[v], fmt::format("{}.in[{}]", path, v)));
      }
      if (!f.min && !f.max && f.in.empty())
        reader_.fail(path, filter, "a filter needs `min`, `max` or `in`", "write e.g. `{param: size, min: 1MiB}`");
      if (f.min || f.max) {
        // Bounds compare numbers: every value of the axis must read as one.
        for (const std::string& value : axis_named(s, f.param)->values) {
          try {
            parse_size(value);
          } catch (const std::invalid_argument&) {
            reader_.fail(path, filter, "'" + f.param + "' takes the value '" + value + "', which is not a number",
                         "filter non-numeric axes with `in: [...]`");
          }
        }
      }
      s.filters.push_back(std::move(f));
    }
  }

  std::vector<std::string> numeric_results(SweepKind kind) const {
    std::vector<std::string> numeric;
    for (const std::string& c : result_columns(kind))
      if (is_numeric_column(c)) numeric.push_back(c);
    return numeric;
  }

  std::string metric_name(const Sweep& s, const YAML::Node& node, const std::string& path) {
    const std::vector<std::string> numeric = numeric_results(s.kind);
    return reader_.get_choice(node, path, numeric);
  }

  void read_metric(Sweep& s) {
    s.metric = metric_name(s, reader_.require(root_, "", "metric"), "metric");
    // Times (`*_s`) are minimised, rates (`*_per_s`), bandwidths and the rest maximised,
    // unless the file says.
    const auto ends_with = [&](const std::string& suffix) {
      return s.metric.size() >= suffix.size() &&
             s.metric.compare(s.metric.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    s.maximize = !ends_with("_s") || ends_with("_per_s");
    if (const YAML::Node rank = root_["rank"]) s.maximize = reader_.get_choice(rank, "rank", {"min", "max"}) == "max";
  }

  void read_group_by(Sweep& s) {
    const YAML::Node group = root_["group_by"];
    if (!group) return;
    if (group.IsScalar()) {
      s.group_by.push_back(axis_param(s, group, "group_by"));
      return;
    }
    if (!group.IsSequence())
      reader_.fail("group_by", group, "expected an axis or a list of axes", "write `group_by: [size]`");
    for (std::size_t i = 0; i < group.size(); ++i)
      s.group_by.push_back(axis_param(s, group[i], fmt::format("group_by[{}]", i)));
  }

  void read_plot(Sweep& s) {
    s.plot.x = s.axes[0].param;
    if (s.axes.size() > 1) s.plot.series = s.axes[1].param;
    s.plot.y = s.metric;
    s.plot.title = s.name;
    const YAML::Node plot = root_["plot"];
    if (!plot) return;
    reader_.check_keys(plot, "plot", {"x", "series", "y", "title"});
    if (const YAML::Node x = plot["x"]) s.plot.x = axis_param(s, x, "plot.x");
    if (const YAML::Node series = plot["series"])
      s.plot.series = series.Scalar() == "none" ? "" : axis_param(s, series, "plot.series");
    if (const YAML::Node y = plot["y"]) s.plot.y = metric_name(s, y, "plot.y");
    if (const YAML::Node title = plot["title"]) s.plot.title = reader_.get_string(title, "plot.title");
    if (!s.plot.series.empty() && s.plot.series == s.plot.x)
      reader_.fail("plot.series", plot["series"], "the series axis is the x axis", "name another axis, or none");
  }

  YAML::Node root_;
  YamlReader reader_;
};

}  // namespace

const char* to_string(SweepKind kind) { return kind == SweepKind::collective ? "collective" : "simulate"; }

const std::vector<std::string>& base_fields(SweepKind kind) {
  return kind == SweepKind::collective ? kCollectiveFields : kSimulateFields;
}

std::optional<ParamTarget> param_target(SweepKind kind, const std::string& param) {
  const auto& fields = base_fields(kind);
  if (std::find(fields.begin(), fields.end(), param) != fields.end()) return ParamTarget::field;
  const auto dot = param.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == param.size()) return std::nullopt;
  const std::string prefix = param.substr(0, dot);
  if (prefix == "workload") return kind == SweepKind::simulate ? std::optional(ParamTarget::workload) : std::nullopt;
  if (prefix == "algo_param")
    return kind == SweepKind::collective ? std::optional(ParamTarget::algo_param) : std::nullopt;
  return ParamTarget::platform;
}

const std::vector<std::string>& result_columns(SweepKind kind) {
  static const std::vector<std::string> collective = {"ranks",    "size_bytes", "time_s",   "algbw_GBps",
                                                      "busbw_GBps", "chosen_algo", "schedule", "protocol",
                                                      "channels_used", "steps"};
  static const std::vector<std::string> simulate = {"ranks",
                                                    "iteration_time_s",
                                                    "breakdown.compute_s",
                                                    "breakdown.communication_s",
                                                    "breakdown.exposed_communication_s",
                                                    "breakdown.idle_s",
                                                    "slowest_rank",
                                                    "throughput.per_gpu_per_s",
                                                    "mfu_bf16",
                                                    "ops_replayed",
                                                    "memory.peak_bytes",
                                                    "memory.fits"};
  return kind == SweepKind::collective ? collective : simulate;
}

bool is_size_value(const std::string& param, const std::string& text) {
  if (param == "size" || param == "chunk" || param == "compression_threshold") return true;
  return std::any_of(text.begin(), text.end(),
                     [](char c) { return std::isalpha(static_cast<unsigned char>(c)) && c != 'e'; });
}

bool is_numeric_column(const std::string& column) {
  if (column == "chosen_algo" || column == "schedule" || column == "protocol" || column == "memory.fits") return false;
  for (SweepKind kind : {SweepKind::collective, SweepKind::simulate}) {
    const auto& columns = result_columns(kind);
    if (std::find(columns.begin(), columns.end(), column) != columns.end()) return true;
  }
  return false;
}

Sweep parse_sweep(const std::string& yaml_text, const std::string& origin) {
  return SweepReader(platforms::load_yaml(yaml_text, origin), origin).read();
}

Sweep load_sweep(const std::string& path) { return parse_sweep(platforms::read_text_file(path), path); }

}  // namespace stepsim::sweep
