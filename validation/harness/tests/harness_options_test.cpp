// The harness's command line: size parsing, sweeps, the option reader's errors, and each
// subcommand's defaults, quick mode and checks (all without a GPU).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "platforms/config_error.hpp"
#include "validation/harness/cli_args.hpp"
#include "validation/harness/harness_options.hpp"

namespace stepsim::harness {
namespace {

using Words = std::vector<std::string>;

// Runs `parse` and returns the ConfigError's where() and message ("" when nothing was thrown).
template <typename Parse>
std::pair<std::string, std::string> config_error(Parse parse) {
  try {
    parse();
  } catch (const ConfigError& error) {
    return {error.where(), error.what()};
  }
  return {"", ""};
}

TEST(ParseBytes, AcceptsPlainScientificAndUnits) {
  EXPECT_EQ(parse_bytes("8", "--min"), 8u);
  EXPECT_EQ(parse_bytes("64KiB", "--min"), 65536u);
  EXPECT_EQ(parse_bytes("8GiB", "--max"), 8589934592u);
  EXPECT_EQ(parse_bytes("1e9", "--max"), 1000000000u);
  EXPECT_EQ(parse_bytes("512MB", "--max"), 512000000u);
  EXPECT_EQ(parse_bytes("1.5KiB", "--max"), 1536u);
  EXPECT_EQ(parse_bytes("4k", "--max"), 4000u);
  EXPECT_EQ(parse_bytes("0", "--max"), 0u);
}

TEST(ParseBytes, RejectsWithTheOptionAndAFix) {
  for (const char* bad : {"", "abc", "-8", "1.5", "8XB", "8 GiB", " 8", "nan", "inf", "1e30"}) {
    const auto [where, message] = config_error([&] { parse_bytes(bad, "--max"); });
    EXPECT_EQ(where, "--max") << bad;
    EXPECT_NE(message.find("fix:"), std::string::npos) << message;
  }
}

TEST(SizeSweep, IsGeometricAndStopsAtMax) {
  EXPECT_EQ(size_sweep(8, 64, 2), (std::vector<uint64_t>{8, 16, 32, 64}));
  EXPECT_EQ(size_sweep(8, 100, 2), (std::vector<uint64_t>{8, 16, 32, 64}));
  EXPECT_EQ(size_sweep(1, 1, 2), (std::vector<uint64_t>{1}));
  EXPECT_EQ(size_sweep(8, uint64_t{8} << 30, 2).size(), 31u);  // nccl-tests -b 8 -e 8G -f 2
  EXPECT_EQ(size_sweep(uint64_t{1} << 62, UINT64_MAX, 2).size(), 2u);  // no overflow past 2^63
  EXPECT_EQ(config_error([] { size_sweep(64, 8, 2); }).first, "--min");
  EXPECT_EQ(config_error([] { size_sweep(8, 64, 1); }).first, "--factor");
  EXPECT_EQ(config_error([] { size_sweep(0, 64, 2); }).first, "--min");
}

TEST(FormatBytes, UsesTheLargestExactBinaryUnit) {
  EXPECT_EQ(format_bytes(8), "8");
  EXPECT_EQ(format_bytes(1024), "1KiB");
  EXPECT_EQ(format_bytes(uint64_t{8} << 30), "8GiB");
  EXPECT_EQ(format_bytes(1536), "1536");
  EXPECT_EQ(format_bytes(0), "0");
}

TEST(CliArgs, ReadsValuesFlagsAndEqualsForm) {
  const std::vector<OptionSpec> specs = {{"max", true, "--max SIZE"}, {"quick", false, "--quick"}, {"ops", true, "--ops LIST"}};
  const CliArgs args({"--max", "1GiB", "--quick", "--ops=allreduce,reduce"}, specs, "stepsim-harness nccl");
  EXPECT_TRUE(args.has("quick"));
  EXPECT_EQ(args.bytes("max", 0, 1), uint64_t{1} << 30);
  EXPECT_EQ(args.choices("ops", {}, {"allreduce", "reduce"}), (Words{"allreduce", "reduce"}));
  EXPECT_EQ(args.text("missing", "fallback"), "fallback");
}

TEST(CliArgs, NamesTheOffendingOption) {
  const std::vector<OptionSpec> specs = {{"max", true, "--max SIZE"}, {"quick", false, "--quick"}, {"reps", true, "--reps N"}};
  auto parse = [&](Words words) { return config_error([&] { CliArgs(words, specs, "stepsim-harness nccl"); }); };
  auto [where, message] = parse({"--bogus", "1"});
  EXPECT_EQ(where, "--bogus");
  EXPECT_NE(message.find("--max, --quick, --reps"), std::string::npos) << message;
  EXPECT_EQ(parse({"--max"}).first, "--max");             // missing value
  EXPECT_EQ(parse({"--max="}).first, "--max");            // empty value
  EXPECT_EQ(parse({"--quick=yes"}).first, "--quick");     // flag with a value
  EXPECT_EQ(parse({"--reps", "3", "--reps", "4"}).first, "--reps");
  EXPECT_EQ(parse({"allreduce"}).first, "allreduce");     // not an option
  const CliArgs args({"--reps", "0x"}, specs, "stepsim-harness nccl");
  EXPECT_EQ(config_error([&] { args.integer("reps", 1, 1, 10); }).first, "--reps");
  const CliArgs big({"--reps", "11"}, specs, "stepsim-harness nccl");
  EXPECT_NE(config_error([&] { big.integer("reps", 1, 1, 10); }).second.find("[1, 10]"), std::string::npos);
}

TEST(NcclOptions, DefaultsFollowNcclTests) {
  const NcclOptions o = parse_nccl_options({});
  EXPECT_EQ(o.ops, (Words{"allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv"}));
  EXPECT_EQ(o.sizes.front(), 8u);
  EXPECT_EQ(o.sizes.back(), uint64_t{8} << 30);
  EXPECT_EQ(o.sizes.size(), 31u);
  EXPECT_EQ(o.gpus, 0);
  EXPECT_EQ(o.common.warmup, 5);
  EXPECT_EQ(o.common.repetitions, 20);
  EXPECT_EQ(o.common.out, "");
}

TEST(NcclOptions, QuickShrinksDefaultsButExplicitOptionsWin) {
  const NcclOptions quick = parse_nccl_options({"--quick"});
  EXPECT_EQ(quick.sizes.back(), uint64_t{32} << 20);  // 8 * 4^11
  EXPECT_EQ(quick.sizes[1], 32u);  // factor 4
  EXPECT_EQ(quick.common.repetitions, 5);
  const NcclOptions explicit_max = parse_nccl_options({"--quick", "--max", "1GiB", "--factor", "2", "--reps", "7", "--ops", "allreduce"});
  EXPECT_EQ(explicit_max.sizes.back(), uint64_t{1} << 30);
  EXPECT_EQ(explicit_max.common.repetitions, 7);
  EXPECT_EQ(explicit_max.ops, (Words{"allreduce"}));
}

TEST(NcclOptions, RejectsBadValues) {
  EXPECT_EQ(config_error([] { parse_nccl_options({"--ops", "allreduce,alltoal"}); }).first, "--ops");
  EXPECT_EQ(config_error([] { parse_nccl_options({"--gpus", "0"}); }).first, "--gpus");
  EXPECT_EQ(config_error([] { parse_nccl_options({"--min", "1GiB", "--max", "1MiB"}); }).first, "--min");
  EXPECT_EQ(config_error([] { parse_nccl_options({"--factor", "1"}); }).first, "--factor");
  EXPECT_EQ(config_error([] { parse_nccl_options({"--device", "1"}); }).first, "--device");  // gemm's, not nccl's
}

TEST(CopyOptions, DefaultsAndDirections) {
  const CopyOptions o = parse_copy_options({"--directions", "h2d,p2p"});
  EXPECT_EQ(o.directions, (Words{"h2d", "p2p"}));
  EXPECT_EQ(o.sizes.back(), uint64_t{1} << 30);
  EXPECT_EQ(config_error([] { parse_copy_options({"--directions", "d2x"}); }).first, "--directions");
}

TEST(GemmOptions, DefaultShapesAndOverrides) {
  const GemmOptions o = parse_gemm_options({});
  EXPECT_EQ(o.dtypes, (Words{"fp32", "tf32", "fp16", "bf16"}));
  EXPECT_EQ(o.shapes.size(), 7u + 12u);
  const GemmOptions custom = parse_gemm_options({"--shapes", "128,256,512;64,64,64,8", "--layout", "TN", "--dtypes", "bf16"});
  ASSERT_EQ(custom.shapes.size(), 2u);
  EXPECT_EQ(custom.shapes[0].m, 128);
  EXPECT_EQ(custom.shapes[0].n, 256);
  EXPECT_EQ(custom.shapes[0].k, 512);
  EXPECT_EQ(custom.shapes[0].batch, 1);
  EXPECT_EQ(custom.shapes[1].batch, 8);
  EXPECT_EQ(custom.shapes[1].layout, "TN");
  EXPECT_EQ(custom.dtypes, (Words{"bf16"}));
}

TEST(GemmOptions, RejectsBadShapes) {
  for (const char* bad : {"1,2", "1,2,3,4,5", "1,0,3", "a,b,c", "1,2,3;", "3000000000,1,1"})
    EXPECT_EQ(config_error([&] { parse_gemm_options({"--shapes", bad}); }).first, "--shapes") << bad;
  EXPECT_EQ(config_error([] { parse_gemm_options({"--shapes", "8,8,8", "--layout", "TT"}); }).first, "--layout");
  EXPECT_EQ(config_error([] { parse_gemm_options({"--layout", "NT"}); }).first, "--layout");
  EXPECT_EQ(config_error([] { parse_gemm_options({"--dtypes", "fp64"}); }).first, "--dtypes");
}

TEST(EmbeddingOptions, DefaultSweepCoversOneToFortyMillionRows) {
  const EmbeddingOptions o = parse_embedding_options({});
  EXPECT_EQ(o.passes, (Words{"forward", "backward"}));
  uint64_t smallest = UINT64_MAX, largest = 0;
  bool zipf = false, fp16 = false;
  for (const EmbeddingCase& c : o.cases) {
    smallest = std::min(smallest, c.rows);
    largest = std::max(largest, c.rows);
    zipf = zipf || c.distribution == IndexDistribution::zipf;
    fp16 = fp16 || c.dtype == "fp16";
  }
  EXPECT_EQ(smallest, 1000000u);
  EXPECT_EQ(largest, 40000000u);
  EXPECT_TRUE(zipf);
  EXPECT_TRUE(fp16);
  EXPECT_LT(parse_embedding_options({"--quick"}).cases.size(), o.cases.size());
}

TEST(EmbeddingOptions, AnyCaseOptionSelectsOneCase) {
  const EmbeddingOptions o = parse_embedding_options({"--rows", "5000", "--distribution", "zipf", "--alpha", "1.2", "--passes", "forward"});
  ASSERT_EQ(o.cases.size(), 1u);
  EXPECT_EQ(o.cases[0].rows, 5000u);
  EXPECT_EQ(o.cases[0].dim, 128);
  EXPECT_EQ(o.cases[0].distribution, IndexDistribution::zipf);
  EXPECT_DOUBLE_EQ(o.cases[0].alpha, 1.2);
  EXPECT_EQ(o.passes, (Words{"forward"}));
}

TEST(EmbeddingOptions, RejectsInconsistentCases) {
  EXPECT_EQ(config_error([] { parse_embedding_options({"--alpha", "1.1"}); }).first, "--alpha");
  EXPECT_EQ(config_error([] { parse_embedding_options({"--distribution", "zipf", "--alpha", "0"}); }).first, "--alpha");
  EXPECT_EQ(config_error([] { parse_embedding_options({"--distribution", "uniform,zipf"}); }).first, "--distribution");
  EXPECT_EQ(config_error([] { parse_embedding_options({"--dtype", "bf16"}); }).first, "--dtype");
  EXPECT_EQ(config_error([] { parse_embedding_options({"--dtype", "fp32,fp16"}); }).first, "--dtype");
  EXPECT_EQ(config_error([] { parse_embedding_options({"--rows", "0"}); }).first, "--rows");
  EXPECT_EQ(config_error([] { parse_embedding_options({"--batch", "1000000", "--pooling", "2000"}); }).first, "--pooling");
}

TEST(CompressOptions, DefaultsAndChecks) {
  const CompressOptions o = parse_compress_options({});
  EXPECT_EQ(o.sizes, (std::vector<uint64_t>{1u << 20, 4u << 20, 16u << 20, 64u << 20, 256u << 20}));
  EXPECT_EQ(o.codecs, (Words{"cast", "quant", "zfp"}));
  EXPECT_EQ(o.zfp_rates, (std::vector<int>{4, 8, 16}));
  EXPECT_EQ(o.quant_blocks, (std::vector<int>{32, 256}));
  EXPECT_EQ(o.quant_bits, (std::vector<int>{8, 4}));
  EXPECT_EQ(config_error([] { parse_compress_options({"--blocks", "48"}); }).first, "--blocks");
  EXPECT_EQ(config_error([] { parse_compress_options({"--bits", "6"}); }).first, "--bits");
  EXPECT_EQ(config_error([] { parse_compress_options({"--rates", "2"}); }).first, "--rates");
  EXPECT_EQ(config_error([] { parse_compress_options({"--min", "1000", "--max", "1000"}); }).first, "--min");
  EXPECT_EQ(config_error([] { parse_compress_options({"--min", "4KiB", "--blocks", "2048"}); }).first, "--min");
}

TEST(Help, ListsEverySubcommandAndOption) {
  const std::string main = main_help();
  for (const SubcommandInfo& info : subcommands()) {
    EXPECT_NE(main.find(info.name), std::string::npos);
    const std::string help = subcommand_help(info.name);
    for (const OptionSpec& spec : info.options) EXPECT_NE(help.find("--" + spec.name), std::string::npos) << info.name << " " << spec.name;
  }
}

}  // namespace
}  // namespace stepsim::harness
