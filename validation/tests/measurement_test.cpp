// The measurement-file loader and writer: round trip, and every schema violation is a ConfigError
// naming the key, the line and a fix.
#include "validation/measurement.hpp"

#include <gtest/gtest.h>

#include <string>

#include "platforms/config_error.hpp"

using stepsim::ConfigError;
using namespace stepsim::validation;

namespace {

/// The ConfigError text parse_measurements throws for `text` ("" when it does not throw).
std::string error_of(const std::string& text) {
  try {
    parse_measurements(text, "m.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

MeasurementFile sample_file() {
  MeasurementFile file;
  file.source = {"nccl-tests 2.13.8", "all_reduce_perf -b 8 -e 8G -f 2 -g 8", "log.txt", "2026-11-22",
                 "notes: with a colon"};
  file.system.platform = "dgx-h100";
  file.system.gpu = "NVIDIA H100 80GB HBM3";
  file.system.gpus = 16;
  file.system.nodes = 2;
  file.system.software = {{"cuda", "12.4"}, {"nccl", "2.21.5"}};
  file.system.params = {"cpu_vendor=amd"};

  Measurement collective;
  collective.kind = "collective";
  collective.time_s = 2.31e-05;
  collective.texts = {{"op", "allreduce"}, {"dtype", "float32"}, {"in_place", "true"}};
  collective.numbers = {{"size_bytes", 8589934592.0}, {"ranks", 16}, {"busbw_GBps", 79.4}, {"algbw_GBps", 0.1 + 0.2}};
  collective.spread = Spread{20, 2.2e-05, 2.5e-05, 1.0 / 3.0 * 1e-6};
  Measurement kernel;
  kernel.kind = "kernel";
  kernel.time_s = 1e-300;
  kernel.texts = {{"name", "void gemm<float>(int, float*)"}};
  kernel.numbers = {{"count", 3}, {"stream", 7}};
  Measurement iteration;
  iteration.kind = "iteration";
  iteration.time_s = 0.731;
  iteration.texts = {{"workload", "llama3-8b"}};
  iteration.params = {"batch=8", "seq=4096"};
  Measurement gemm;
  gemm.kind = "gemm";
  gemm.time_s = 1.5e-3;
  gemm.texts = {{"dtype", "bf16"}, {"layout", "NT"}};
  gemm.numbers = {{"m", 8192}, {"n", 8192}, {"k", 8192}};
  file.measurements = {collective, kernel, iteration, gemm};
  return file;
}

const char* kMinimal = R"(version: 1
measurements:
  - kind: collective
    op: allreduce
    size_bytes: 1048576
    ranks: 8
    time_s: 2.31e-05
)";

TEST(Measurement, RoundTripIsExact) {
  MeasurementFile original = sample_file();
  std::string text = format_measurements(original);
  MeasurementFile back = parse_measurements(text, "round.yaml");
  EXPECT_EQ(back.source, original.source);
  EXPECT_EQ(back.system, original.system);
  ASSERT_EQ(back.measurements.size(), original.measurements.size());
  for (std::size_t i = 0; i < original.measurements.size(); ++i)
    EXPECT_EQ(back.measurements[i], original.measurements[i]) << "measurement " << i << "\n" << text;
  // Formatting what was read gives the same text: the writer is deterministic.
  EXPECT_EQ(format_measurements(back), text);
  // Shortest exact text, not 17 noisy digits, and version strings stay strings.
  EXPECT_NE(text.find("time_s: 2.31e-05"), std::string::npos) << text;
  EXPECT_NE(text.find("cuda: \"12.4\""), std::string::npos) << text;
  // Exponents keep a dot in the mantissa, which YAML 1.1 readers need to see a number.
  EXPECT_NE(text.find("time_s: 1.0e-300"), std::string::npos) << text;
}

TEST(Measurement, ReadsDocsExampleAndRecordsLines) {
  MeasurementFile file = parse_measurements(kMinimal, "m.yaml");
  ASSERT_EQ(file.measurements.size(), 1u);
  const Measurement& m = file.measurements[0];
  EXPECT_EQ(m.text("op"), "allreduce");
  EXPECT_EQ(m.number("size_bytes"), 1048576);
  EXPECT_EQ(m.number("ranks"), 8);
  EXPECT_DOUBLE_EQ(m.time_s, 2.31e-05);
  EXPECT_EQ(m.text_or("dtype", "float32"), "float32");
  EXPECT_EQ(m.line, 3);
  EXPECT_EQ(file.system.nodes, 1);
}

TEST(Measurement, MissingRequiredKeyNamesKeyAndLine) {
  // One case per kind: drop one required key and expect it named with the entry's line (3).
  const std::pair<std::string, std::string> cases[] = {
      {"kind: collective\n    op: allreduce\n    ranks: 8\n    time_s: 1", "size_bytes"},
      {"kind: copy\n    direction: h2d\n    time_s: 1", "size_bytes"},
      {"kind: gemm\n    m: 1\n    n: 1\n    k: 1\n    time_s: 1", "dtype"},
      {"kind: embedding\n    rows: 1\n    dim: 1\n    pooling: 1\n    batch: 1\n    tables: 1\n    dtype: fp32\n"
       "    time_s: 1",
       "distribution"},
      {"kind: compression\n    codec: zfp\n    size_bytes: 4\n    time_s: 1", "direction"},
      {"kind: kernel\n    time_s: 1", "name"},
      {"kind: iteration\n    workload: w", "time_s"},
  };
  for (const auto& [body, key] : cases) {
    std::string error = error_of("version: 1\nmeasurements:\n  - " + body + "\n");
    EXPECT_NE(error.find("measurements[0]." + key + " (line 3)"), std::string::npos) << error;
    EXPECT_NE(error.find("missing required key '" + key + "'"), std::string::npos) << error;
  }
}

TEST(Measurement, UnknownKeyListsAllowedKeys) {
  std::string error = error_of(std::string(kMinimal) + "    sise_bytes: 4\n");
  EXPECT_NE(error.find("measurements[0].sise_bytes (line 8)"), std::string::npos) << error;
  EXPECT_NE(error.find("unknown key 'sise_bytes'"), std::string::npos) << error;
  EXPECT_NE(error.find("busbw_GBps"), std::string::npos) << error;
  EXPECT_NE(error.find("in_place"), std::string::npos) << error;

  error = error_of("version: 1\nsystem: {gpuz: 8}\nmeasurements: []\n");
  EXPECT_NE(error.find("system.gpuz (line 2)"), std::string::npos) << error;
  EXPECT_NE(error.find("gpu_model"), std::string::npos) << error;

  error = error_of("version: 1\nmeasurments: []\n");
  EXPECT_NE(error.find("unknown key 'measurments'"), std::string::npos) << error;

  error = error_of("version: 1\nmeasurements:\n  - kind: latency\n    time_s: 1\n");
  EXPECT_NE(error.find("measurements[0].kind (line 3)"), std::string::npos) << error;
  EXPECT_NE(error.find("iteration"), std::string::npos) << error;
}

TEST(Measurement, BadValuesAreRejected) {
  auto with = [](const std::string& from, const std::string& to) {
    std::string text = kMinimal;
    text.replace(text.find(from), from.size(), to);
    return error_of(text);
  };
  std::string error = with("time_s: 2.31e-05", "time_s: -1e-6");
  EXPECT_NE(error.find("measurements[0].time_s (line 7)"), std::string::npos) << error;
  EXPECT_NE(error.find("must be >= 0"), std::string::npos) << error;
  error = with("time_s: 2.31e-05", "time_s: 0");
  EXPECT_NE(error.find("time_s must be > 0"), std::string::npos) << error;
  error = with("size_bytes: 1048576", "size_bytes: 1MiB");
  EXPECT_NE(error.find("'1MiB' is not a number"), std::string::npos) << error;
  error = with("ranks: 8", "ranks: 2.5");
  EXPECT_NE(error.find("not a whole number"), std::string::npos) << error;
  error = with("ranks: 8", "ranks: 0");
  EXPECT_NE(error.find("must be >= 1"), std::string::npos) << error;
  error = with("op: allreduce", "op: all_reduce");
  EXPECT_NE(error.find("unknown value 'all_reduce'"), std::string::npos) << error;
  EXPECT_NE(error.find("reduce_scatter"), std::string::npos) << error;
  error = error_of(std::string(kMinimal) + "    in_place: yes\n");
  EXPECT_NE(error.find("not true or false"), std::string::npos) << error;
  error = error_of(std::string(kMinimal) + "    spread: {repetitions: 5, min_s: 2, max_s: 1}\n");
  EXPECT_NE(error.find("max_s is below min_s"), std::string::npos) << error;
}

TEST(Measurement, VersionMissingOrUnknown) {
  std::string error = error_of("measurements: []\n");
  EXPECT_NE(error.find("missing required key 'version'"), std::string::npos) << error;
  error = error_of("version: 2\nmeasurements: []\n");
  EXPECT_NE(error.find("version (line 1)"), std::string::npos) << error;
  EXPECT_NE(error.find("unknown measurement file version 2"), std::string::npos) << error;
  EXPECT_NE(error.find("version: 1"), std::string::npos) << error;
  error = error_of("");
  EXPECT_NE(error.find("empty"), std::string::npos) << error;
}

TEST(Measurement, WriterRefusesKeysOutsideTheKind) {
  MeasurementFile file;
  Measurement m;
  m.kind = "kernel";
  m.time_s = 1;
  m.texts = {{"name", "k"}, {"op", "allreduce"}};
  file.measurements = {m};
  EXPECT_THROW(format_measurements(file), std::logic_error);
  file.measurements[0].texts.erase("name");
  file.measurements[0].texts.erase("op");
  EXPECT_THROW(format_measurements(file), std::logic_error);
}

}  // namespace
