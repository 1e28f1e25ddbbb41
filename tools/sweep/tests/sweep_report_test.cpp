// The report of a sweep: the ranked summary (independent of completion order) and the plots.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "tools/sweep/sweep_plot.hpp"
#include "tools/sweep/sweep_ranking.hpp"

namespace stepsim::sweep {
namespace {

Sweep sweep(const std::string& extra) {
  return parse_sweep("version: 1\nbase: {collective: {platform: dgx1-v100, op: allreduce}}\naxes:\n"
                     "  - {param: size, values: [1KiB, 1MiB, 1GiB]}\n"
                     "  - {param: algo, values: [ring, tree, rhd]}\n" +
                         extra,
                     "s.yaml");
}

/// A results table with time_s = given value per (size, algo); "" marks a failed point.
ResultTable table(const Sweep& s, const std::vector<std::string>& times) {
  ResultTable t;
  t.columns = sweep_columns(s);
  int index = 0;
  for (const std::string& size : s.axes[0].values)
    for (const std::string& algo : s.axes[1].values) {
      std::vector<std::string> row(t.columns.size());
      row[0] = std::to_string(1000 + index);
      row[1] = std::to_string(index);
      row[2] = size;
      row[3] = algo;
      row[t.column("time_s")] = times[index];
      if (times[index].empty()) row[t.column("error")] = "--algo: cannot run";
      t.rows.push_back(row);
      ++index;
    }
  return t;
}

const std::vector<std::string> kTimes = {"3e-06", "2e-06", "",     "0.001", "0.002", "0.0015",
                                         "1",     "0.5",   "0.5"};

TEST(SweepReport, BestPerGroupWithRunnerUpAndGap) {
  const Sweep s = sweep("metric: time_s\ngroup_by: size\n");
  const std::string text = ranked_summary(s, table(s, kTimes), 10);
  EXPECT_EQ(text,
            "best time_s (min) per size\n"
            "  size  algo  time_s  runner-up  gap\n"
            "  1KiB  tree  2e-06   ring       50.0 %\n"
            "  1MiB  ring  0.001   rhd        50.0 %\n"
            "  1GiB  tree  0.5     rhd        0.0 %\n"
            "1 point failed (`error` column); most frequent:\n"
            "  1 x --algo: cannot run\n");
}

// Issue 21: a simulate point whose peak memory exceeds gpu.memory is timed but never ranked.
TEST(SweepReport, PointsThatDoNotFitAreListedNotRanked) {
  const Sweep s = parse_sweep("version: 1\nbase: {simulate: {platform: dgx-h100, workload: llama3-70b}}\naxes:\n"
                              "  - {param: workload.fsdp.strategy, values: [FULL_SHARD, SHARD_GRAD_OP, NO_SHARD]}\n"
                              "metric: iteration_time_s\n",
                              "s.yaml");
  ResultTable t;
  t.columns = sweep_columns(s);
  const std::vector<std::string> times = {"3", "2", "1"}, fits = {"true", "false", "false"};
  for (int i = 0; i < 3; ++i) {
    std::vector<std::string> row(t.columns.size());
    row[0] = std::to_string(100 + i);
    row[1] = std::to_string(i);
    row[2] = s.axes[0].values[static_cast<std::size_t>(i)];
    row[static_cast<std::size_t>(t.column("iteration_time_s"))] = times[static_cast<std::size_t>(i)];
    row[static_cast<std::size_t>(t.column("memory.fits"))] = fits[static_cast<std::size_t>(i)];
    t.rows.push_back(row);
  }
  EXPECT_EQ(ranked_summary(s, t, 10),
            "ranked by iteration_time_s (min): best 1 of 1 point\n"
            "  rank  workload.fsdp.strategy  iteration_time_s\n"
            "  1     FULL_SHARD              3\n"
            "2 points do not fit gpu.memory (memory.fits false) and are not ranked: index 1, 2\n");
}

TEST(SweepReport, TopRowsWithoutGroupsAndMaximising) {
  const Sweep s = sweep("metric: time_s\nrank: max\n");
  const std::string text = ranked_summary(s, table(s, kTimes), 2);
  EXPECT_EQ(text.substr(0, text.find("1 point failed")),
            "ranked by time_s (max): best 2 of 8 points\n"
            "  rank  size  algo  time_s\n"
            "  1     1GiB  ring  1\n"
            "  2     1GiB  tree  0.5\n");
}

TEST(SweepReport, SummaryDoesNotDependOnCompletionOrder) {
  const Sweep s = sweep("metric: time_s\ngroup_by: algo\n");
  ResultTable t = table(s, kTimes);
  const std::string expected = ranked_summary(s, t, 10);
  std::mt19937 rng(7);   // explicit seed: the shuffle is the same every run
  for (int i = 0; i < 5; ++i) {
    std::shuffle(t.rows.begin(), t.rows.end(), rng);
    EXPECT_EQ(ranked_summary(s, t, 10), expected);
  }
}

TEST(SweepReport, NumericAxesGiveLinesOnALogSizeAxis) {
  const Sweep s = sweep("metric: time_s\nname: times\n");
  const std::string svg = sweep_plot_svg(s, table(s, kTimes));
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find(">times</text>"), std::string::npos);
  EXPECT_NE(svg.find(">size</text>"), std::string::npos);     // x label
  EXPECT_NE(svg.find(">time_s</text>"), std::string::npos);   // y label
  for (const char* legend : {">algo=ring</text>", ">algo=tree</text>", ">algo=rhd</text>"})
    EXPECT_NE(svg.find(legend), std::string::npos) << legend;
  EXPECT_NE(svg.find(">1MiB</text>"), std::string::npos);     // a binary-size tick
  EXPECT_NE(svg.find(">1e-3</text>"), std::string::npos);     // times span 1e-6..1 s: log10 y axis
  std::size_t polylines = 0;
  for (std::size_t at = 0; (at = svg.find("<polyline", at)) != std::string::npos; ++at) ++polylines;
  EXPECT_EQ(polylines, 3u);
  EXPECT_EQ(svg.find("<rect x="), svg.find("<rect x=\"72\""));   // no bars: the only rect at x=72 is the frame
}

TEST(SweepReport, CategoricalAxesGiveBarsAndBestOverOtherAxes) {
  const Sweep s = sweep("metric: time_s\nplot: {x: algo, series: none}\n");
  const std::string svg = sweep_plot_svg(s, table(s, kTimes));
  EXPECT_EQ(svg.find("<polyline"), std::string::npos);
  for (const char* tick : {">ring</text>", ">tree</text>", ">rhd</text>"})
    EXPECT_NE(svg.find(tick), std::string::npos) << tick;
  EXPECT_NE(svg.find("(min over size)"), std::string::npos);
  std::size_t bars = 0;
  for (std::size_t at = 0; (at = svg.find("fill=\"#1f77b4\"/>", at)) != std::string::npos; ++at) ++bars;
  EXPECT_EQ(bars, 4u);   // three bars and the legend swatch
}

}  // namespace
}  // namespace stepsim::sweep
