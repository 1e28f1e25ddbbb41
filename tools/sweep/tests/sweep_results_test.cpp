// Result files: CSV and JSON Lines read back exactly as written; half-written lines and
// damaged files are recognised.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "platforms/config_error.hpp"
#include "tools/sweep/sweep_results.hpp"

namespace stepsim::sweep {
namespace {

const std::vector<std::string> kColumns = {"point", "index", "gpus", "algo", "time_s", "steps", "chosen_algo", "error"};
const std::vector<std::vector<std::string>> kRows = {
    {"00000000000000aa", "0", "0,1,4", "ring", "1.2345e-05", "40", "ring", ""},
    {"00000000000000bb", "1", "0-3", "say \"hi\", twice", "", "", "", "--algo: cannot run\nhere, sorry"},
    {"00000000000000cc", "2", "0-7", "nccl", "0.1", "1073741824", "nccl", ""},
};

/// A fresh file name in this test program's directory (removed when the program ends).
std::string temp_path(const std::string& extension) {
  struct Dir {
    std::string path;
    ~Dir() { std::filesystem::remove_all(path); }
  };
  static Dir dir = [] {
    char name[] = "/tmp/sweep-results-XXXXXX";
    return Dir{mkdtemp(name)};
  }();
  static int files = 0;
  return dir.path + "/r" + std::to_string(files++) + extension;
}

std::string write(const std::string& extension, const std::string& tail = "") {
  const std::string path = temp_path(extension);
  const ResultFormat format = result_format(path, "--out");
  std::ofstream out(path);
  out << header_line(kColumns, format);
  for (const auto& row : kRows) out << row_line(kColumns, row, format);
  out << tail;
  return path;
}

std::vector<std::vector<std::string>> expected_rows() {
  auto rows = kRows;
  rows[1][7] = "--algo: cannot run here, sorry";   // line breaks never reach a file
  return rows;
}

TEST(SweepResults, CsvReadsBackWhatWasWritten) {
  const ReadResults r = read_results(write(".csv"), kColumns);
  EXPECT_EQ(r.table.columns, kColumns);
  EXPECT_EQ(r.table.rows, expected_rows());
  EXPECT_FALSE(r.partial_line);
}

TEST(SweepResults, JsonLinesReadBackWhatWasWrittenWithNumbersAsNumbers) {
  const std::string path = write(".jsonl");
  const ReadResults r = read_results(path);
  EXPECT_EQ(r.table.columns, kColumns);
  EXPECT_EQ(r.table.rows, expected_rows());
  std::ifstream in(path);
  std::string first, second;
  std::getline(in, first);
  std::getline(in, second);
  EXPECT_NE(first.find("\"time_s\": 1.2345e-05"), std::string::npos) << first;
  EXPECT_NE(first.find("\"index\": 0"), std::string::npos) << first;
  EXPECT_NE(second.find("\"time_s\": null"), std::string::npos) << second;
  EXPECT_NE(second.find("\"algo\": \"say \\\"hi\\\", twice\""), std::string::npos) << second;
}

TEST(SweepResults, AHalfWrittenLastLineIsSetAside) {
  for (const std::string ext : {".csv", ".jsonl"}) {
    const std::string complete = write(ext);
    const std::string partial = write(ext, "00000000000000dd,3,0-1,ri");
    const ReadResults r = read_results(partial, kColumns);
    EXPECT_TRUE(r.partial_line) << ext;
    EXPECT_EQ(r.table.rows, expected_rows()) << ext;
    std::ifstream in(complete, std::ios::binary | std::ios::ate);
    EXPECT_EQ(r.complete_bytes, static_cast<std::uintmax_t>(in.tellg())) << ext;
  }
}

TEST(SweepResults, OtherColumnsOrDamagedLinesAreConfigErrors) {
  std::vector<std::string> other = kColumns;
  other[2] = "size";
  EXPECT_THROW(read_results(write(".csv"), other), ConfigError);
  try {
    read_results(write(".csv", "00000000000000dd,3\n"), kColumns);
    FAIL() << "a short line was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("(line 5)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("2 values under 8 columns"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_results(write(".jsonl", "[1, 2]\n")), ConfigError);
}

TEST(SweepResults, FormatComesFromTheExtension) {
  EXPECT_EQ(result_format("a.csv", "--out"), ResultFormat::csv);
  EXPECT_EQ(result_format("a.jsonl", "--out"), ResultFormat::jsonl);
  try {
    result_format("a.json", "--out");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(".jsonl"), std::string::npos);
  }
}

}  // namespace
}  // namespace stepsim::sweep
