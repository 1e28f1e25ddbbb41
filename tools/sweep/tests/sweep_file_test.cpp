// The sweep file: what it reads, and a clear error (file, key path, line, fix) for each mistake.
#include <gtest/gtest.h>

#include "platforms/config_error.hpp"
#include "tools/sweep/sweep_file.hpp"

namespace stepsim::sweep {
namespace {

const char* kExample = R"(version: 1
name: allreduce on dgx1-v100
base:
  collective:
    platform: dgx1-v100
    op: allreduce
    gpus: 0-4
    params: {gpu.model: V100-SXM2-32GB, algo_param.proto: Simple}
axes:
  - param: size
    range: {from: 1KiB, to: 1MiB, factor: 4}
  - param: algo
    values: [ring, tree]
  - param: nodes
    range: {from: 1, to: 4, step: 1}
filters:
  - {param: size, min: 4KiB}
  - {param: algo, in: [ring]}
metric: time_s
group_by: size
)";

/// The message of the ConfigError that parsing `text` throws ("" when it parses).
std::string error_of(const std::string& text) {
  try {
    parse_sweep(text, "s.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(SweepFile, ReadsBaseAxesFiltersAndMetric) {
  const Sweep s = parse_sweep(kExample, "s.yaml");
  EXPECT_EQ(s.kind, SweepKind::collective);
  EXPECT_EQ(s.name, "allreduce on dgx1-v100");
  EXPECT_EQ(s.base.at("platform"), "dgx1-v100");
  EXPECT_EQ(s.base.at("gpus"), "0-4");
  EXPECT_EQ(s.base.at("gpu.model"), "V100-SXM2-32GB");
  EXPECT_EQ(s.base.at("algo_param.proto"), "Simple");
  ASSERT_EQ(s.axes.size(), 3u);
  EXPECT_EQ(s.axes[0].values, (std::vector<std::string>{"1KiB", "4KiB", "16KiB", "64KiB", "256KiB", "1MiB"}));
  EXPECT_EQ(s.axes[1].values, (std::vector<std::string>{"ring", "tree"}));
  EXPECT_EQ(s.axes[2].values, (std::vector<std::string>{"1", "2", "3", "4"}));
  EXPECT_FALSE(s.zip);
  ASSERT_EQ(s.filters.size(), 2u);
  EXPECT_EQ(*s.filters[0].min, 4096);
  EXPECT_EQ(s.filters[1].in, std::vector<std::string>{"ring"});
  EXPECT_EQ(s.metric, "time_s");
  EXPECT_FALSE(s.maximize);
  EXPECT_EQ(s.group_by, std::vector<std::string>{"size"});
  // The plot defaults to the first two axes and the metric.
  EXPECT_EQ(s.plot.x, "size");
  EXPECT_EQ(s.plot.series, "algo");
  EXPECT_EQ(s.plot.y, "time_s");
}

TEST(SweepFile, RankDirectionFollowsTheMetricUnlessGiven) {
  const std::string head = "version: 1\nbase: {simulate: {platform: dgx-h100, workload: llama3-8b}}\n"
                           "axes: [{param: nodes, values: [1, 2]}]\n";
  EXPECT_FALSE(parse_sweep(head + "metric: iteration_time_s\n", "s").maximize);
  EXPECT_TRUE(parse_sweep(head + "metric: throughput.per_gpu_per_s\n", "s").maximize);
  EXPECT_TRUE(parse_sweep(head + "metric: mfu_bf16\n", "s").maximize);
  EXPECT_TRUE(parse_sweep(head + "metric: iteration_time_s\nrank: max\n", "s").maximize);
}

TEST(SweepFile, ParamTargets) {
  EXPECT_EQ(param_target(SweepKind::collective, "size"), ParamTarget::field);
  EXPECT_EQ(param_target(SweepKind::collective, "gpu.model"), ParamTarget::platform);
  EXPECT_EQ(param_target(SweepKind::collective, "algo_param.proto"), ParamTarget::algo_param);
  EXPECT_EQ(param_target(SweepKind::simulate, "workload.fsdp.strategy"), ParamTarget::workload);
  EXPECT_FALSE(param_target(SweepKind::collective, "workload.fsdp.strategy"));
  EXPECT_FALSE(param_target(SweepKind::simulate, "size"));
  EXPECT_FALSE(param_target(SweepKind::simulate, "algo_param.proto"));
  EXPECT_FALSE(param_target(SweepKind::collective, "sizes"));
}

TEST(SweepFile, UnknownKeyNamesFileKeyLineAndAllowedKeys) {
  std::string text = kExample;
  text.insert(text.find("metric:"), "axis: []\n");
  const std::string e = error_of(text);
  EXPECT_NE(e.find("s.yaml: axis (line 19)"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'axis'"), std::string::npos) << e;
  EXPECT_NE(e.find("allowed keys here: version, name, base, axes"), std::string::npos) << e;
}

TEST(SweepFile, UnknownParamSaysWhatParamsExist) {
  std::string text = kExample;
  text.replace(text.find("param: algo\n"), 11, "param: algos");
  const std::string e = error_of(text);
  EXPECT_NE(e.find("axes[1].param (line 12)"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown param 'algos'"), std::string::npos) << e;
  EXPECT_NE(e.find("a dotted path as -p takes it"), std::string::npos) << e;
}

TEST(SweepFile, EveryMistakeIsAConfigErrorWithAFix) {
  const std::string base = "version: 1\nbase: {collective: {platform: dgx1-v100, op: allreduce}}\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {base + "axes: [{param: size, values: []}]\nmetric: time_s\n", "empty axis"},
      {base + "axes: []\nmetric: time_s\n", "expected a list of axes"},
      {base + "axes: [{param: size, values: [1KiB]}, {param: size, values: [2KiB]}]\nmetric: time_s\n",
       "a second axis over 'size'"},
      {base + "axes: [{param: size, values: [1KiB, 2KiB]}, {param: algo, values: [ring]}]\ncombine: zip\nmetric: time_s\n",
       "equal length"},
      {base + "axes: [{param: size, values: [1KiB]}]\nmetric: speed\n", "unknown value 'speed'"},
      {base + "axes: [{param: algo, values: [ring]}]\nmetric: time_s\n", "missing 'size'"},
      {base + "axes: [{param: workload.fsdp.strategy, values: [FULL_SHARD]}, {param: size, values: [1]}]\nmetric: time_s\n",
       "unknown param 'workload.fsdp.strategy' for a collective sweep"},
      {base + "axes: [{param: size, values: [1KiB]}]\nmetric: time_s\ngroup_by: algo\n", "'algo' is not an axis"},
      {base + "axes: [{param: size, values: [1KiB]}, {param: algo, values: [ring]}]\nmetric: time_s\n"
              "filters: [{param: algo, min: 2}]\n",
       "which is not a number"},
      {base + "axes: [{param: size, range: {from: 1KiB, to: 1MiB, factor: 1}}]\nmetric: time_s\n", "factor must be > 1"},
      {base + "axes: [{param: size, range: {from: 1MiB, to: 1KiB, factor: 2}}]\nmetric: time_s\n", "`to` is below `from`"},
      {base + "axes: [{param: size, values: [1KiB], range: {from: 1, to: 2, step: 1}}]\nmetric: time_s\n",
       "both `values` and `range`"},
      {base + "axes: [{param: size, values: [1KiB]}]\nmetric: time_s\nrank: fastest\n", "unknown value 'fastest'"},
      {base + "axes: [{param: channels_used, values: [1]}, {param: size, values: [1]}]\nmetric: time_s\n",
       "unknown param 'channels_used'"},
      {"version: 2\n" + base.substr(11) + "axes: [{param: size, values: [1]}]\nmetric: time_s\n", "unsupported sweep file version"},
      {"version: 1\nbase: {collective: {platform: dgx1-v100, op: allreduce, sizes: 1}}\naxes: [{param: size, values: [1]}]\n"
       "metric: time_s\n",
       "unknown key 'sizes'"},
      {"version: 1\nbase: {collective: {platform: dgx1-v100, op: allreduce, params: {size: 1}}}\n"
       "axes: [{param: algo, values: [ring]}]\nmetric: time_s\n",
       "'size' is not a dotted -p path"},
      {"version: 1\nbase: {collective: {platform: x}, simulate: {platform: x}}\naxes: []\nmetric: time_s\n",
       "exactly one of"},
      {"version: 1\nbase: [\n", "malformed YAML"},
  };
  for (const auto& [text, expected] : cases) {
    const std::string e = error_of(text);
    EXPECT_NE(e.find(expected), std::string::npos) << "expected '" << expected << "' for:\n" << text << "got: " << e;
    EXPECT_NE(e.find("s.yaml"), std::string::npos) << e;
    EXPECT_NE(e.find("(fix: "), std::string::npos) << e;
  }
}

TEST(SweepFile, MissingFileIsAConfigError) {
  EXPECT_THROW(load_sweep("/nonexistent/sweep.yaml"), ConfigError);
}

}  // namespace
}  // namespace stepsim::sweep
