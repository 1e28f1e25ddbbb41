// Enumeration: grid and zip orders, filters, sizes ranges, and point ids.
#include <gtest/gtest.h>

#include <set>

#include "tools/sweep/sweep_points.hpp"

namespace stepsim::sweep {
namespace {

Sweep sweep(const std::string& axes, const std::string& extra = "") {
  return parse_sweep("version: 1\nbase: {collective: {platform: dgx1-v100, op: allreduce, size: 1MiB}}\naxes:\n" + axes +
                         "metric: time_s\n" + extra,
                     "s.yaml");
}

std::vector<std::vector<std::string>> values(const std::vector<Point>& points) {
  std::vector<std::vector<std::string>> v;
  for (const Point& p : points) v.push_back(p.values);
  return v;
}

TEST(SweepPoints, GridVariesTheLastAxisFastest) {
  const auto points = enumerate_points(sweep("  - {param: size, values: [1KiB, 2KiB]}\n"
                                             "  - {param: algo, values: [ring, tree, rhd]}\n"));
  EXPECT_EQ(values(points), (std::vector<std::vector<std::string>>{{"1KiB", "ring"},
                                                                    {"1KiB", "tree"},
                                                                    {"1KiB", "rhd"},
                                                                    {"2KiB", "ring"},
                                                                    {"2KiB", "tree"},
                                                                    {"2KiB", "rhd"}}));
  for (std::size_t i = 0; i < points.size(); ++i) EXPECT_EQ(points[i].index, static_cast<int>(i));
}

TEST(SweepPoints, ZipPairsTheIthValues) {
  const auto points = enumerate_points(sweep("  - {param: gpus, values: [0-1, 0-3, 0-7]}\n"
                                             "  - {param: size, values: [2KiB, 4KiB, 8KiB]}\n",
                                             "combine: zip\n"));
  EXPECT_EQ(values(points),
            (std::vector<std::vector<std::string>>{{"0-1", "2KiB"}, {"0-3", "4KiB"}, {"0-7", "8KiB"}}));
}

TEST(SweepPoints, SizeRangesAndFiltersKeepTheirBounds) {
  const auto points = enumerate_points(sweep("  - {param: size, range: {from: 8, to: 1GiB, factor: 2}}\n"
                                             "  - {param: algo, values: [ring, tree, rhd]}\n",
                                             "filters:\n  - {param: size, min: 1KiB, max: 1MiB}\n"
                                             "  - {param: algo, in: [tree, rhd]}\n"));
  // 1KiB .. 1MiB is 11 powers of two, times two algorithms.
  ASSERT_EQ(points.size(), 22u);
  EXPECT_EQ(points.front().values, (std::vector<std::string>{"1KiB", "tree"}));
  EXPECT_EQ(points.back().values, (std::vector<std::string>{"1MiB", "rhd"}));
  EXPECT_EQ(points.back().index, 21);
}

TEST(SweepPoints, GeometricRangesListSizesWithUnitsAndCountsAsIntegers) {
  const Sweep s = sweep("  - {param: size, range: {from: 1e3, to: 1e9, factor: 10}}\n");
  EXPECT_EQ(s.axes[0].values, (std::vector<std::string>{"1000B", "10000B", "100000B", "1000000B", "10000000B",
                                                         "100000000B", "1000000000B"}));
  const Sweep n = sweep("  - {param: nodes, range: {from: 1, to: 16, factor: 2}}\n");
  EXPECT_EQ(n.axes[0].values, (std::vector<std::string>{"1", "2", "4", "8", "16"}));
}

TEST(SweepPoints, IdsAreStableDistinctAndDependOnEverySetting) {
  const std::string axes = "  - {param: size, values: [1KiB, 2KiB]}\n  - {param: algo, values: [ring, tree]}\n";
  const auto a = enumerate_points(sweep(axes)), b = enumerate_points(sweep(axes));
  std::set<std::string> ids;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].id, b[i].id);
    EXPECT_EQ(a[i].id.size(), 16u);
    EXPECT_EQ(a[i].id.find_first_not_of("0123456789abcdef"), std::string::npos);
    ids.insert(a[i].id);
  }
  EXPECT_EQ(ids.size(), a.size());
  // The same settings reached through a zip have the same id; another base gives new ids.
  const auto zipped = enumerate_points(sweep("  - {param: size, values: [1KiB]}\n  - {param: algo, values: [ring]}\n",
                                             "combine: zip\n"));
  EXPECT_EQ(zipped[0].id, a[0].id);
  const Sweep other = parse_sweep("version: 1\nbase: {collective: {platform: dgx1-v100, op: allgather}}\naxes:\n" + axes +
                                      "metric: time_s\n",
                                  "s.yaml");
  EXPECT_NE(enumerate_points(other)[0].id, a[0].id);
}

TEST(SweepPoints, StableHashIsFnv1a64) {
  EXPECT_EQ(stable_hash(""), "cbf29ce484222325");
  EXPECT_EQ(stable_hash("a"), "af63dc4c8601ec8c");
}

TEST(SweepPoints, SettingsApplyAxesOverTheBase) {
  const Sweep s = sweep("  - {param: size, values: [4KiB]}\n  - {param: gpu.model, values: [V100-SXM2-32GB]}\n");
  const auto settings = point_settings(s, {"4KiB", "V100-SXM2-32GB"});
  EXPECT_EQ(settings.at("size"), "4KiB");
  EXPECT_EQ(settings.at("gpu.model"), "V100-SXM2-32GB");
  EXPECT_EQ(settings.at("op"), "allreduce");
}

}  // namespace
}  // namespace stepsim::sweep
