// libFuzzer target: sweep files (`stepsim sweep`): the parse, and the enumeration of the points
// (ranges, zips, filters) when the grid is small enough to list on every run; a big grid is a
// legitimate request whose cost is not the parser's. Any exception but ConfigError is a finding.
#include "platforms/tests/fuzz_entry.hpp"
#include "tools/sweep/sweep_points.hpp"

namespace {

constexpr double kMaxPoints = 1e4;

double grid_points(const stepsim::sweep::Sweep& sweep) {
  double points = 1;
  for (const auto& axis : sweep.axes)
    points = sweep.zip ? std::max(points, double(axis.values.size())) : points * double(axis.values.size());
  return points;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = stepsim::fuzz::input_text(data, size);
  stepsim::fuzz::expect_config_error_only([&] {
    const stepsim::sweep::Sweep sweep = stepsim::sweep::parse_sweep(text, "sweep.yaml");
    if (grid_points(sweep) <= kMaxPoints) stepsim::sweep::enumerate_points(sweep);
  });
  return 0;
}
