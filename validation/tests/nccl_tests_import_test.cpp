// The nccl-tests importer on excerpts of every format of ../shared/data/nccl-tests (fixtures
// beside this file), and on the full published logs when that folder exists.
#include "validation/importers/nccl_tests.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "platforms/config_error.hpp"
#include "platforms/yaml_reader.hpp"

using namespace stepsim::validation;

namespace {

std::string fixture(const std::string& name) { return std::string(STEPSIM_VALIDATION_FIXTURES) + "/" + name; }

NcclTestsImport import_file(const std::string& path, const std::string& platform = "") {
  return import_nccl_tests(stepsim::platforms::read_text_file(path), path, platform);
}

/// The one measurement of `file` with these keys; fails the test when there is not exactly one.
const Measurement& find(const MeasurementFile& file, const std::string& op, double size, int ranks, bool in_place,
                        const std::string& param = "") {
  const Measurement* found = nullptr;
  int count = 0;
  for (const Measurement& m : file.measurements) {
    bool has_param = param.empty() ? m.params.empty() : (m.params.size() == 1 && m.params[0] == param);
    if (m.text("op") == op && m.number("size_bytes") == size && m.number("ranks") == ranks &&
        (m.text_or("in_place", "false") == "true") == in_place && has_param) {
      found = &m;
      ++count;
    }
  }
  EXPECT_EQ(count, 1) << op << " " << size << " bytes, " << ranks << " ranks, in_place " << in_place;
  static const Measurement none;
  return found ? *found : none;
}

/// Imported files must be valid measurement files: write and read back.
void expect_round_trip(const MeasurementFile& file) {
  MeasurementFile back = parse_measurements(format_measurements(file), "round-trip");
  ASSERT_EQ(back.measurements.size(), file.measurements.size());
  for (std::size_t i = 0; i < file.measurements.size(); ++i) EXPECT_EQ(back.measurements[i], file.measurements[i]);
  EXPECT_EQ(back.system, file.system);
  EXPECT_EQ(back.source, file.source);
}

TEST(NcclTestsImport, RecentVersionWithRankLines) {
  NcclTestsImport imported = import_file(fixture("nccl_tests_2_17.txt"), "dgx-h100");
  ASSERT_EQ(imported.groups.size(), 1u);
  const MeasurementFile& file = imported.groups[0].file;
  EXPECT_EQ(imported.groups[0].system, "h100");
  EXPECT_EQ(file.source.tool, "nccl-tests 2.17.8");
  EXPECT_EQ(file.system.platform, "dgx-h100");
  EXPECT_EQ(file.system.gpu, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(file.system.gpus, 4);
  EXPECT_EQ(file.system.nodes, 1);
  EXPECT_EQ(file.system.software.at("nccl"), "2.29.2");  // nccl-library=22902
  EXPECT_EQ(file.measurements.size(), 2u * (5 + 3));

  // "17179869184 ... 70128.7  244.98  367.46  0  70022.3  245.35  368.02  0"
  const Measurement& out = find(file, "allreduce", 17179869184.0, 4, false);
  EXPECT_EQ(out.time_s, 70128.7e-6);
  EXPECT_EQ(out.number("algbw_GBps"), 244.98);
  EXPECT_EQ(out.number("busbw_GBps"), 367.46);
  EXPECT_EQ(out.text("dtype"), "float64");
  EXPECT_EQ(out.number("nodes"), 1);
  const Measurement& in = find(file, "allreduce", 17179869184.0, 4, true);
  EXPECT_EQ(in.time_s, 70022.3e-6);
  EXPECT_EQ(in.number("busbw_GBps"), 368.02);
  // "33554432 1048576 double none -1 109.62 306.10 229.58 0 107.36 312.55 234.41 0"
  const Measurement& gather = find(file, "allgather", 33554432, 4, true);
  EXPECT_EQ(gather.time_s, 107.36e-6);
  EXPECT_EQ(gather.number("algbw_GBps"), 312.55);
  expect_round_trip(file);
}

TEST(NcclTestsImport, OldVersionOneThreadManyGpus) {
  NcclTestsImport imported = import_file(fixture("nccl_tests_2019_threads.txt"));
  ASSERT_EQ(imported.groups.size(), 1u);
  const MeasurementFile& file = imported.groups[0].file;
  EXPECT_EQ(file.system.gpu, "Tesla V100-SXM3-32GB");
  EXPECT_EQ(file.system.gpus, 12);
  EXPECT_EQ(file.source.tool, "nccl-tests");
  // Zero-byte rows are left out; 9 all_gather and 10 broadcast rows, two runs each.
  EXPECT_EQ(file.measurements.size(), 2u * (9 + 10));
  // 2019 columns "size count type time algbw busbw error ...": all_gather has no redop/root.
  const Measurement& gather = find(file, "allgather", 67108848, 12, false, "gpus_per_thread=12");
  EXPECT_EQ(gather.time_s, 915.3e-6);
  EXPECT_EQ(gather.number("busbw_GBps"), 67.21);
  EXPECT_EQ(find(file, "allgather", 67108848, 12, true, "gpus_per_thread=12").time_s, 595.5e-6);
  // broadcast has a root column and no redop: "8589934592 2147483648 float 0 70321 122.15 122.15".
  const Measurement& bcast = find(file, "broadcast", 8589934592.0, 12, false, "gpus_per_thread=12");
  EXPECT_EQ(bcast.time_s, 70321e-6);
  EXPECT_EQ(bcast.number("algbw_GBps"), 122.15);
  expect_round_trip(file);
}

TEST(NcclTestsImport, MpirunPrefixesAndSystemsFromProse) {
  NcclTestsImport imported = import_file(fixture("nccl_tests_aws_allreduce_prefixed.txt"));
  ASSERT_EQ(imported.groups.size(), 3u);
  EXPECT_EQ(imported.groups[0].system, "p4de");
  EXPECT_EQ(imported.groups[1].system, "p5");
  EXPECT_EQ(imported.groups[2].system, "");  // section (b) names no system
  // No Rank lines: the rank count comes from busbw/algbw = 2(n-1)/n of the largest row.
  const Measurement& p4de = find(imported.groups[0].file, "allreduce", 2147483648.0, 16, false);
  EXPECT_EQ(p4de.time_s, 51406e-6);
  EXPECT_EQ(p4de.number("busbw_GBps"), 78.33);
  EXPECT_FALSE(p4de.numbers.count("nodes"));  // not printed
  EXPECT_EQ(find(imported.groups[1].file, "allreduce", 8, 16, true).time_s, 72.43e-6);
  const Measurement& batch = find(imported.groups[2].file, "allreduce", 17179869184.0, 8, false);
  EXPECT_EQ(batch.time_s, 62239e-6);
  EXPECT_NE(imported.groups[0].file.source.notes.find("ranks inferred"), std::string::npos);

  EXPECT_EQ(nccl_tests_output_name("logs/aws.txt", imported.groups[0], true), "aws-p4de.yaml");
  EXPECT_EQ(nccl_tests_output_name("logs/aws.txt", imported.groups[2], true), "aws-unknown-system.yaml");
  EXPECT_EQ(nccl_tests_output_name("logs/aws.txt", imported.groups[2], false), "aws.yaml");
  for (const NcclTestsGroup& group : imported.groups) expect_round_trip(group.file);
}

TEST(NcclTestsImport, MarkdownBusbwTableWithSpecTable) {
  NcclTestsImport imported = import_file(fixture("markdown_azure_allreduce.txt"));
  ASSERT_EQ(imported.groups.size(), 1u);
  const MeasurementFile& file = imported.groups[0].file;
  EXPECT_EQ(file.system.gpu, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(file.system.software.at("nccl"), "2.18.5");
  EXPECT_EQ(file.system.software.at("cuda"), "12.5");
  EXPECT_EQ(file.system.software.at("torch"), "2.4.1");
  ASSERT_EQ(file.measurements.size(), 8u);
  // "| 1G | 228.10 |": 1 GiB, 8 ranks (-g 8), in-place (the prose says so); the time follows from
  // busbw: algbw = busbw / (2 * 7 / 8).
  const Measurement& m = find(file, "allreduce", 1073741824.0, 8, true);
  EXPECT_EQ(m.number("busbw_GBps"), 228.10);
  EXPECT_NEAR(m.time_s, 1073741824.0 / (228.10e9 / 1.75), 1e-15);
  EXPECT_EQ(find(file, "allreduce", 1024, 8, true).number("busbw_GBps"), 0.04);  // "1K" = 1024
  expect_round_trip(file);
}

TEST(NcclTestsImport, MarkdownWriteUpWithSeveralSystemsAndTools) {
  NcclTestsImport imported = import_file(fixture("markdown_stas00_systems.txt"));
  std::map<std::string, const MeasurementFile*> by_name;
  for (const NcclTestsGroup& group : imported.groups)
    by_name[nccl_tests_output_name("stas00.txt", group, true)] = &group.file;
  ASSERT_EQ(by_name.size(), 4u);
  ASSERT_TRUE(by_name.count("stas00-a100.yaml"));
  ASSERT_TRUE(by_name.count("stas00-h200-torch-distributed.yaml"));
  ASSERT_TRUE(by_name.count("stas00-b200-torch-distributed.yaml"));
  ASSERT_TRUE(by_name.count("stas00-h200.yaml"));

  // Massaged nccl-tests table: underscores in sizes, one run (taken as out-of-place).
  const Measurement& t1 = find(*by_name["stas00-a100.yaml"], "allreduce", 17179869184.0, 8, false);
  EXPECT_EQ(t1.time_s, 127997e-6);
  EXPECT_EQ(t1.number("busbw_GBps"), 234.89);
  // torch.distributed payload table: ranks from --nproc_per_node, time from algbw.
  const MeasurementFile& t2 = *by_name["stas00-h200-torch-distributed.yaml"];
  EXPECT_EQ(t2.source.tool, "torch.distributed");
  const Measurement& p = find(t2, "allreduce", 16.0 * (1 << 30), 8, false);
  EXPECT_EQ(p.number("busbw_GBps"), 482.26);
  EXPECT_DOUBLE_EQ(p.time_s, 16.0 * (1 << 30) / 275.58e9);
  // "| 16GiB | 845.67GBps | 381.80GBps |": one column per node count, 8 GPUs per node.
  const MeasurementFile& t3 = *by_name["stas00-b200-torch-distributed.yaml"];
  EXPECT_EQ(find(t3, "allreduce", 16.0 * (1 << 30), 32, false).number("nodes"), 4);
  EXPECT_EQ(find(t3, "allreduce", 16.0 * (1 << 30), 8, false).number("busbw_GBps"), 845.67);
  EXPECT_EQ(t3.system.software.at("nccl"), "2.27.7");
  // GPUs tables (payload from the prose) and the per-collective table, NVLS off as a param.
  const MeasurementFile& h200 = *by_name["stas00-h200.yaml"];
  EXPECT_EQ(find(h200, "allreduce", 8.0 * (1 << 30), 5, false).number("busbw_GBps"), 414.2);
  EXPECT_EQ(find(h200, "allreduce", 8.0 * (1 << 30), 5, false, "nvls=off").number("busbw_GBps"), 364.4);
  EXPECT_EQ(find(h200, "reduce_scatter", 16.0 * (1 << 30), 8, false).number("busbw_GBps"), 362.9);
  EXPECT_EQ(find(h200, "allreduce", 16.0 * (1 << 30), 8, false, "nvls=off").number("busbw_GBps"), 367.2);
  for (const auto& [name, file] : by_name) expect_round_trip(*file);
}

TEST(NcclTestsImport, LogsOfOneSystemMergeIntoOneFile) {
  const std::string text = stepsim::platforms::read_text_file(fixture("nccl_tests_2_17.txt"));
  std::vector<NcclTestsGroup> groups = import_nccl_tests(text, "a.log").groups;
  const NcclTestsGroup second = import_nccl_tests(text, "b.log").groups.at(0);
  groups.push_back(second);
  MeasurementFile merged = merge_nccl_tests_groups(groups, "-o out.yaml");
  EXPECT_EQ(merged.source.file, "a.log b.log");
  EXPECT_EQ(merged.measurements.size(), 2 * second.file.measurements.size());
  EXPECT_EQ(merged.system.gpu, "NVIDIA H100 80GB HBM3");
  expect_round_trip(merged);

  NcclTestsImport aws = import_file(fixture("nccl_tests_aws_allreduce_prefixed.txt"));
  try {
    merge_nccl_tests_groups(aws.groups, "-o out.yaml");
    FAIL() << "expected ConfigError";
  } catch (const stepsim::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("3 systems or tools: p4de (nccl-tests), p5 (nccl-tests), unknown system"),
              std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("-o DIR"), std::string::npos) << e.what();
  }
}

TEST(NcclTestsImport, LogWithoutTablesIsAnError) {
  try {
    import_nccl_tests("# nThread 1 nGpus 8\nsome text\n", "empty.log");
    FAIL() << "expected ConfigError";
  } catch (const stepsim::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("empty.log"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("no usable nccl-tests table"), std::string::npos);
  }
}

TEST(NcclTestsImport, OneRankRunsAreSkippedWithANote) {
  const std::string log =
      "# Collective test starting: reduce_perf\n"
      "# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20\n"
      "#  Rank  0 Group  0 Pid  1 on host device  0 [0000:b4:00] NVIDIA GeForce RTX 2080 Ti\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
      "           8             2     float     sum      -1     3.10    0.00    0.00      0\n"
      "# Collective test starting: all_reduce_perf\n"
      "# nThread 1 nGpus 2 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20\n"
      "#  Rank  0 Group  0 Pid  1 on host device  0 [0000:b4:00] NVIDIA GeForce RTX 2080 Ti\n"
      "#  Rank  1 Group  0 Pid  1 on host device  1 [0000:b5:00] NVIDIA GeForce RTX 2080 Ti\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
      "           8             2     float     sum      -1    12.25    0.00    0.00      0\n";
  NcclTestsImport imported = import_nccl_tests(log, "run.log");
  ASSERT_EQ(imported.groups.size(), 1u);
  EXPECT_EQ(imported.groups[0].system, "rtx-2080-ti");
  ASSERT_EQ(imported.groups[0].file.measurements.size(), 1u);
  EXPECT_EQ(imported.groups[0].file.measurements[0].text("op"), "allreduce");
  ASSERT_EQ(imported.notes.size(), 1u);
  EXPECT_NE(imported.notes[0].find("line 4"), std::string::npos) << imported.notes[0];
  EXPECT_NE(imported.notes[0].find("1-rank"), std::string::npos) << imported.notes[0];
}

// Every published log of ../shared/data/nccl-tests (absent in CI: skipped there).
TEST(NcclTestsImport, PublishedLogs) {
  const std::filesystem::path data = STEPSIM_SHARED_NCCL_TESTS;
  if (!std::filesystem::is_directory(data)) GTEST_SKIP() << data << " not present";
  std::map<std::string, std::size_t> groups, measurements;
  for (const auto& entry : std::filesystem::directory_iterator(data)) {
    NcclTestsImport imported = import_file(entry.path().string());
    const std::string name = entry.path().filename().string();
    groups[name] = imported.groups.size();
    for (const NcclTestsGroup& group : imported.groups) {
      measurements[name] += group.file.measurements.size();
      expect_round_trip(group.file);
    }
  }
  if (!groups.count("hgx-h100-8gpu-xxrjun.txt")) GTEST_SKIP() << "the data set changed";
  EXPECT_EQ(groups["stas00-ml-engineering-a100-h200-b200.txt"], 5u);
  EXPECT_EQ(groups["aws-p4de-p5-2node-allreduce-awsome.txt"], 3u);
  EXPECT_EQ(groups["abci-a-node-a100-allreduce-1to16nodes.txt"], 1u);
  EXPECT_EQ(measurements["abci-a-node-a100-allreduce-1to16nodes.txt"], 6u * 24 * 2);
  EXPECT_EQ(measurements["hgx-h100-8gpu-xxrjun.txt"], 200u);

  NcclTestsImport abci = import_file((data / "abci-a-node-a100-allreduce-1to16nodes.txt").string());
  const MeasurementFile& file = abci.groups[0].file;
  EXPECT_EQ(file.system.gpus, 128);
  EXPECT_EQ(file.system.nodes, 16);
  // job16: "33554432 8388608 float sum ..." at 128 ranks on 16 hosts.
  const Measurement& big = find(file, "allreduce", 33554432, 128, false);
  EXPECT_EQ(big.number("nodes"), 16);
  NcclTestsImport hgx = import_file((data / "hgx-h100-8gpu-xxrjun.txt").string());
  const Measurement& nvls = find(hgx.groups[0].file, "allreduce", 17179869184.0, 8, false);
  EXPECT_EQ(nvls.time_s, 62340.7e-6);
  EXPECT_EQ(nvls.number("busbw_GBps"), 482.27);
}

}  // namespace
