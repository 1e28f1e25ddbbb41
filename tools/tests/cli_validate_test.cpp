// `stepsim validate` as a user runs it, on the hand-computable fixtures of validation/tests.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tools/tests/cli_run.hpp"

namespace stepsim::cli_test {
namespace {

const std::string kFixtures = std::string(STEPSIM_SOURCE_ROOT) + "/validation/tests/fixtures/";
const std::string kPlatform = kFixtures + "validate_two_gpus.yaml";
const std::string kCases = kFixtures + "validate_cases.yaml";

TEST(CliValidate, JsonHoldsCasesGroupsAndNotModelled) {
  RunResult r = run_stepsim({"validate", kPlatform, kCases, "--algo", "ring", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"platform", "engine", "min_size_bytes", "cases", "groups", "not_modelled", "notes"})
    EXPECT_TRUE(j.contains(key)) << key;
  ASSERT_EQ(j["cases"].size(), 2u);
  // 1e8 B: one ring step of 5e7 B over 100 GB/s plus the link's 1 us = 501 us, run as a
  // Simple kernel on NCCL's primitives (launch 8.4 us, + 3.4 - 0.6 us for its one step) =
  // 512.2 us against 400 us.
  const auto& big = j["cases"][0];
  EXPECT_NEAR(big["predicted_s"].get<double>(), 5.122e-4, 1e-12);
  EXPECT_NEAR(big["error"].get<double>(), 0.2805, 1e-9);
  EXPECT_NEAR(big["log_error"].get<double>(), std::log(1.2805), 1e-9);
  EXPECT_EQ(big["headline"], true);
  EXPECT_EQ(j["cases"][1]["headline"], false);
  ASSERT_EQ(j["groups"].size(), 1u);
  EXPECT_EQ(j["groups"][0]["headline_count"], 1);
  EXPECT_NEAR(j["groups"][0]["headline_geomean_error"].get<double>(), 0.2805, 1e-9);
  EXPECT_EQ(j["not_modelled"]["kernel"]["count"], 1);
  EXPECT_EQ(j["not_modelled"]["compression lz4"]["count"], 1);
}

TEST(CliValidate, TextHasAGroupTableAndTheSummary) {
  RunResult r = run_stepsim({"validate", kPlatform, kCases, "--algo", "ring"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* text : {"== two-gpus | collective | allgather, 2 ranks", "+28.0%", "geomean |error|: 28.0 %",
                           "Summary", "not modelled: kernel (1 case)", "not modelled: compression lz4 (1 case)"})
    EXPECT_NE(r.out.find(text), std::string::npos) << text << "\n" << r.out;
}

TEST(CliValidate, ReportIsOneHtmlFileWithPlots) {
  char path[] = "/tmp/stepsim-validate-XXXXXX";
  close(mkstemp(path));
  const std::string report = std::string(path) + ".html";
  RunResult r = run_stepsim({"validate", kPlatform, kCases, "--algo", "ring", "--report", report});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(report);
  std::stringstream html;
  html << in.rdbuf();
  EXPECT_EQ(html.str().rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.str().find("<svg"), std::string::npos);
  EXPECT_NE(html.str().find("validate_cases.yaml: measurements[2] (line 10)"), std::string::npos)
      << "not-modelled cases are listed";
  unlink(path);
  unlink(report.c_str());
}

TEST(CliValidate, BadInputExitsWithTwoAndSaysWhere) {
  RunResult missing = run_stepsim({"validate", kPlatform, "/nonexistent/m.yaml"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("/nonexistent/m.yaml"), std::string::npos) << missing.err;
  RunResult platform = run_stepsim({"validate", "dgx-9000", kCases});
  EXPECT_EQ(platform.exit_code, 2);
  EXPECT_NE(platform.err.find("dgx-9000"), std::string::npos) << platform.err;
  RunResult size = run_stepsim({"validate", kPlatform, kCases, "--min-size", "lots"});
  EXPECT_EQ(size.exit_code, 2);
  EXPECT_NE(size.err.find("--min-size"), std::string::npos) << size.err;
}

}  // namespace
}  // namespace stepsim::cli_test
