// The harness's hand-written YAML: read back by yaml-cpp with the documented keys, and loaded by
// stepsim's own measurement-file loader for a record of every kind the harness writes.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <random>
#include <string>

#include "validation/harness/measurement_writer.hpp"
#include "validation/measurement.hpp"

namespace stepsim::harness {
namespace {

SampleStats stats_of(double mean) { return SampleStats{20, mean, mean * 0.9, mean * 1.2, mean * 0.05}; }

FileHeader sample_header() {
  FileHeader h;
  h.tool = "stepsim-harness nccl";
  h.command = "stepsim-harness nccl --gpus 8 --notes 'say \"hi\"'";
  h.date = "2026-11-22";
  h.notes = "time_s: mean; started 10:00:00Z";
  h.platform = "dgx-h100";
  h.gpu = "NVIDIA H100 80GB HBM3";
  h.gpu_model = "H100-SXM5-80GB";
  h.gpus = 8;
  h.software = {{"cuda", "13.0"}, {"cuda_driver", "13.0"}, {"driver", "580.95.05"}, {"nccl", "2.28.9"}, {"cublas", "13.1.0"}};
  return h;
}

// One record of each kind, with the keys the runners write.
std::vector<MeasurementRecord> sample_records() {
  std::vector<MeasurementRecord> records;
  MeasurementRecord collective("collective");
  collective.text("op", "allreduce").integer("size_bytes", 1048576).text("dtype", "float32").integer("ranks", 8);
  collective.text("algo", "nccl").flag("in_place", false).timing(stats_of(2.31e-5)).real("algbw_GBps", 45.39).real("busbw_GBps", 79.43);
  records.push_back(collective);
  MeasurementRecord copy("copy");
  copy.text("direction", "p2p").integer("size_bytes", 8589934592).integer("src", 0).integer("dst", 7).timing(stats_of(0.02));
  records.push_back(copy);
  MeasurementRecord gemm("gemm");
  gemm.integer("m", 16384).integer("n", 4096).integer("k", 14336).text("dtype", "bf16").integer("batch", 1).text("layout", "TN");
  records.push_back(gemm.timing(stats_of(1.5e-3)));
  MeasurementRecord embedding("embedding");
  embedding.integer("rows", 40000000).integer("dim", 128).integer("pooling", 32).integer("batch", 8192).integer("tables", 1);
  embedding.text("dtype", "fp16").text("distribution", "zipf").real("alpha", 1.05).integer("seed", 1).text("pass", "backward");
  records.push_back(embedding.timing(stats_of(4e-4)));
  MeasurementRecord compression("compression");
  compression.text("codec", "zfp").integer("rate", 8).text("direction", "compress").integer("size_bytes", 268435456);
  compression.text("dtype", "fp32").integer("compressed_bytes", 67108864).real("max_abs_error", 0.0123).timing(stats_of(3e-4));
  records.push_back(compression);
  MeasurementRecord quant("compression");
  quant.text("codec", "quant").integer("bits", 4).integer("block", 32).text("direction", "decompress");
  quant.integer("size_bytes", 1048576).text("dtype", "fp32").integer("compressed_bytes", 163840).real("max_abs_error", 0);
  records.push_back(quant.timing(stats_of(5e-6)));
  MeasurementRecord cast("compression");
  cast.text("codec", "cast").text("to", "bf16").integer("bits", 16).text("direction", "compress").integer("size_bytes", 4096);
  records.push_back(cast.timing(stats_of(3e-6)));
  return records;
}

TEST(YamlScalars, PlainOnlyWhenSafe) {
  EXPECT_EQ(yaml_text("allreduce"), "allreduce");
  EXPECT_EQ(yaml_text("H100-SXM5-80GB"), "H100-SXM5-80GB");
  EXPECT_EQ(yaml_text("13.0"), "\"13.0\"");
  EXPECT_EQ(yaml_text("2026-11-22"), "\"2026-11-22\"");
  EXPECT_EQ(yaml_text("true"), "\"true\"");
  EXPECT_EQ(yaml_text("No"), "\"No\"");
  EXPECT_EQ(yaml_text(""), "\"\"");
  EXPECT_EQ(yaml_text("NVIDIA H100 80GB HBM3"), "\"NVIDIA H100 80GB HBM3\"");
  EXPECT_EQ(yaml_text("a\"b\\c\n"), "\"a\\\"b\\\\c\\x0a\"");
  EXPECT_EQ(yaml_text("key: value"), "\"key: value\"");
}

TEST(YamlScalars, RealsRoundTripExactly) {
  std::mt19937_64 gen(1);
  for (int i = 0; i < 10000; ++i) {
    const double x = std::ldexp(static_cast<double>(gen() >> 11), -static_cast<int>(gen() % 120));
    const std::string text = yaml_real(x);
    ASSERT_EQ(YAML::Load(text).as<double>(), x) << text;
  }
  EXPECT_EQ(yaml_real(2.31e-5), "2.31e-05");
  EXPECT_EQ(yaml_real(0.1), "0.1");
  EXPECT_THROW(yaml_real(NAN), std::logic_error);
  EXPECT_THROW(yaml_real(INFINITY), std::logic_error);
}

TEST(MeasurementWriter, YamlCppReadsTheDocumentedKeys) {
  const std::string text = format_measurement_file(sample_header(), sample_records());
  const YAML::Node doc = YAML::Load(text);
  EXPECT_EQ(doc["version"].as<int>(), 1);
  EXPECT_EQ(doc["source"]["tool"].as<std::string>(), "stepsim-harness nccl");
  EXPECT_EQ(doc["source"]["command"].as<std::string>(), sample_header().command);
  EXPECT_EQ(doc["source"]["date"].as<std::string>(), "2026-11-22");
  EXPECT_EQ(doc["system"]["gpu"].as<std::string>(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(doc["system"]["gpus"].as<int>(), 8);
  EXPECT_EQ(doc["system"]["nodes"].as<int>(), 1);
  EXPECT_EQ(doc["system"]["software"]["cuda"].as<std::string>(), "13.0");
  EXPECT_EQ(doc["system"]["software"]["nccl"].as<std::string>(), "2.28.9");
  const YAML::Node m = doc["measurements"];
  ASSERT_EQ(m.size(), 7u);
  EXPECT_EQ(m[0]["kind"].as<std::string>(), "collective");
  EXPECT_EQ(m[0]["size_bytes"].as<uint64_t>(), 1048576u);
  EXPECT_EQ(m[0]["in_place"].as<bool>(), false);
  EXPECT_DOUBLE_EQ(m[0]["time_s"].as<double>(), 2.31e-5);
  EXPECT_EQ(m[0]["spread"]["repetitions"].as<int>(), 20);
  EXPECT_DOUBLE_EQ(m[0]["spread"]["max_s"].as<double>(), 2.31e-5 * 1.2);
  EXPECT_EQ(m[1]["size_bytes"].as<uint64_t>(), 8589934592u);
  EXPECT_EQ(m[2]["layout"].as<std::string>(), "TN");
}

TEST(MeasurementWriter, StepsimLoaderAcceptsEveryKind) {
  const FileHeader header = sample_header();
  const validation::MeasurementFile file =
      validation::parse_measurements(format_measurement_file(header, sample_records()), "harness-output.yaml");
  EXPECT_EQ(file.source.tool, header.tool);
  EXPECT_EQ(file.source.command, header.command);
  EXPECT_EQ(file.system.platform, "dgx-h100");
  EXPECT_EQ(file.system.gpu_model, "H100-SXM5-80GB");
  EXPECT_EQ(file.system.gpus, 8);
  EXPECT_EQ(file.system.software.at("cublas"), "13.1.0");
  ASSERT_EQ(file.measurements.size(), 7u);
  const validation::Measurement& c = file.measurements[0];
  EXPECT_EQ(c.kind, "collective");
  EXPECT_EQ(c.text("op"), "allreduce");
  EXPECT_EQ(c.number("ranks"), 8);
  EXPECT_DOUBLE_EQ(c.time_s, 2.31e-5);
  ASSERT_TRUE(c.spread.has_value());
  EXPECT_EQ(c.spread->repetitions, 20);
  EXPECT_DOUBLE_EQ(c.number("busbw_GBps"), 79.43);
  EXPECT_EQ(file.measurements[1].number("dst"), 7);
  EXPECT_EQ(file.measurements[2].text("dtype"), "bf16");
  EXPECT_DOUBLE_EQ(file.measurements[3].number("alpha"), 1.05);
  EXPECT_EQ(file.measurements[4].number("compressed_bytes"), 67108864);
  EXPECT_EQ(file.measurements[5].number("block"), 32);
  EXPECT_EQ(file.measurements[6].text("to"), "bf16");
}

TEST(MeasurementWriter, EmptyFileAndFileOnDisk) {
  FileHeader header = sample_header();
  header.platform = header.gpu_model = header.notes = "";
  header.software.clear();
  const std::string text = format_measurement_file(header, {});
  EXPECT_EQ(text.find("platform"), std::string::npos);
  EXPECT_EQ(validation::parse_measurements(text, "empty.yaml").measurements.size(), 0u);
  const std::string path = ::testing::TempDir() + "harness_writer_test.yaml";
  write_measurement_file(path, sample_header(), sample_records());
  EXPECT_EQ(validation::load_measurements(path).measurements.size(), 7u);
  EXPECT_THROW(write_measurement_file("/no/such/folder/x.yaml", header, {}), std::runtime_error);
}

TEST(MeasurementWriter, RejectsProgrammingErrors) {
  MeasurementRecord record("gemm");
  record.integer("m", 1);
  EXPECT_THROW(record.integer("m", 2), std::logic_error);
  EXPECT_THROW(record.format(), std::logic_error);  // no time_s
  EXPECT_THROW(record.real("time_s", NAN), std::logic_error);
  EXPECT_EQ(record.value("m"), "1");
  EXPECT_EQ(record.value("n"), "");
}

}  // namespace
}  // namespace stepsim::harness
