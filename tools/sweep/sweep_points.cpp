#include "tools/sweep/sweep_points.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "platforms/units.hpp"

namespace stepsim::sweep {
namespace {

bool passes(const SweepFilter& f, const std::string& value) {
  if (!f.in.empty() && std::find(f.in.begin(), f.in.end(), value) == f.in.end()) return false;
  if (!f.min && !f.max) return true;
  // The loader made sure every value of a bounded axis reads as a number.
  const double v = parse_size(value);
  return (!f.min || v >= *f.min) && (!f.max || v <= *f.max);
}

std::string point_id(const Sweep& sweep, const std::vector<std::string>& values) {
  std::string canonical = to_string(sweep.kind);
  for (const auto& [key, value] : point_settings(sweep, values))
    canonical.append("\n").append(key).append("=").append(value);
  return stable_hash(canonical);
}

}  // namespace

std::string stable_hash(const std::string& text) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

std::map<std::string, std::string> point_settings(const Sweep& sweep, const std::vector<std::string>& values) {
  std::map<std::string, std::string> settings = sweep.base;
  for (std::size_t a = 0; a < sweep.axes.size(); ++a) settings[sweep.axes[a].param] = values.at(a);
  return settings;
}

std::vector<Point> enumerate_points(const Sweep& sweep) {
  const std::size_t n_axes = sweep.axes.size();
  std::vector<std::vector<std::string>> combos;
  if (sweep.zip) {
    for (std::size_t i = 0; i < sweep.axes[0].values.size(); ++i) {
      std::vector<std::string> values;
      for (const SweepAxis& a : sweep.axes) values.push_back(a.values[i]);
      combos.push_back(std::move(values));
    }
  } else {
    std::vector<std::size_t> at(n_axes, 0);   // an odometer, last axis fastest
    for (bool more = true; more;) {
      std::vector<std::string> values;
      for (std::size_t a = 0; a < n_axes; ++a) values.push_back(sweep.axes[a].values[at[a]]);
      combos.push_back(std::move(values));
      more = false;
      for (std::size_t a = n_axes; a-- > 0;) {
        if (++at[a] < sweep.axes[a].values.size()) {
          more = true;
          break;
        }
        at[a] = 0;
      }
    }
  }
  std::vector<Point> points;
  for (std::vector<std::string>& values : combos) {
    bool keep = true;
    for (const SweepFilter& f : sweep.filters) {
      const auto axis = std::find_if(sweep.axes.begin(), sweep.axes.end(),
                                     [&](const SweepAxis& a) { return a.param == f.param; });
      keep = keep && passes(f, values[axis - sweep.axes.begin()]);
    }
    if (!keep) continue;
    Point p;
    p.index = static_cast<int>(points.size());
    p.id = point_id(sweep, values);
    p.values = std::move(values);
    points.push_back(std::move(p));
  }
  return points;
}

}  // namespace stepsim::sweep
