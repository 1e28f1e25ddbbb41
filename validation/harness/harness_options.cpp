#include "validation/harness/harness_options.hpp"

#include <cstdint>
#include <stdexcept>

#include "platforms/config_error.hpp"
#include "validation/harness/nccl_counts.hpp"

namespace stepsim::harness {
namespace {

constexpr uint64_t kKiB = 1024, kMiB = 1024 * kKiB, kGiB = 1024 * kMiB;

const std::vector<OptionSpec>& common_specs() {
  static const std::vector<OptionSpec> specs = {
      {"out", true, "--out FILE: write the measurement file there (default: standard output)"},
      {"quick", false, "--quick: short smoke run (smaller sweep, fewer repetitions)"},
      {"warmup", true, "--warmup N: untimed calls before timing each case (default 5, quick 2)"},
      {"reps", true, "--reps N: timed repetitions per case (default 20, quick 5)"},
      {"target-ms", true, "--target-ms X: each repetition times back-to-back calls lasting at least X ms (default 1)"},
      {"max-batch", true, "--max-batch N: at most N back-to-back calls per repetition (default 1000)"},
      {"seed", true, "--seed N: seed of all generated data (default 1)"},
      {"platform", true, "--platform NAME: stepsim preset this machine corresponds to (system.platform)"},
      {"gpu-model", true, "--gpu-model NAME: stepsim catalogue GPU name (system.gpu_model)"},
      {"notes", true, "--notes TEXT: free text appended to source.notes"},
  };
  return specs;
}

std::vector<OptionSpec> with_common(std::vector<OptionSpec> specs) {
  specs.insert(specs.end(), common_specs().begin(), common_specs().end());
  return specs;
}

const OptionSpec kMin{"min", true, "--min SIZE: smallest size (8, 64KiB, 1e6 ...)"};
const OptionSpec kMax{"max", true, "--max SIZE: largest size (8GiB, 1e9 ...)"};
const OptionSpec kFactor{"factor", true, "--factor N: multiply the size by N each step (integer >= 2)"};
const OptionSpec kGpus{"gpus", true, "--gpus N: use GPUs 0..N-1 (default: all visible)"};
const OptionSpec kDevice{"device", true, "--device D: the GPU to use (default 0)"};

CommonOptions parse_common(const CliArgs& args) {
  CommonOptions c;
  c.out = args.text("out", "");
  c.quick = args.has("quick");
  c.warmup = static_cast<int>(args.integer("warmup", c.quick ? 2 : 5, 0, 1000));
  c.repetitions = static_cast<int>(args.integer("reps", c.quick ? 5 : 20, 1, 100000));
  c.target_ms = args.real("target-ms", 1.0, 0.0, 10000.0);
  c.max_batch = static_cast<int>(args.integer("max-batch", 1000, 1, 1000000));
  c.seed = static_cast<uint64_t>(args.integer("seed", 1, 0, INT64_MAX));
  c.platform = args.text("platform", "");
  c.gpu_model = args.text("gpu-model", "");
  c.notes = args.text("notes", "");
  return c;
}

std::vector<uint64_t> parse_sweep(const CliArgs& args, uint64_t min, uint64_t max, uint64_t factor) {
  return size_sweep(args.bytes("min", min, 1), args.bytes("max", max, 1),
                    static_cast<uint64_t>(args.integer("factor", static_cast<int64_t>(factor), 2, 1 << 20)));
}

std::string single_choice(const CliArgs& args, const std::string& name, const std::string& fallback,
                          const std::vector<std::string>& choices) {
  const std::vector<std::string> items = args.choices(name, {fallback}, choices);
  if (items.size() != 1) throw ConfigError("--" + name, "takes one value, got " + args.text(name, ""), "give one of them");
  return items[0];
}

std::vector<int> to_ints(const std::vector<int64_t>& values) { return std::vector<int>(values.begin(), values.end()); }

const SubcommandInfo& find_subcommand(const std::string& name) {
  for (const SubcommandInfo& info : subcommands())
    if (info.name == name) return info;
  throw std::logic_error("unknown subcommand " + name);
}

CliArgs read_args(const std::string& name, const std::vector<std::string>& args) {
  return CliArgs(args, find_subcommand(name).options, "stepsim-harness " + name);
}

}  // namespace

const std::vector<SubcommandInfo>& subcommands() {
  static const std::vector<SubcommandInfo> table = {
      {"nccl", "NCCL collective sweep over N GPUs in one process (nccl-tests sizes and busbw)",
       with_common({kGpus,
                    {"ops", true, "--ops LIST: of allreduce,allgather,reduce_scatter,broadcast,reduce,alltoall,sendrecv (default all)"},
                    {kMin.name, true, kMin.help + " (default 8)"},
                    {kMax.name, true, kMax.help + " (default 8GiB, quick 32MiB; capped to GPU memory)"},
                    {kFactor.name, true, kFactor.help + " (default 2, quick 4)"}})},
      {"copy", "cudaMemcpyAsync bandwidth: device-to-device, pinned host<->device, peer-to-peer",
       with_common({kGpus,
                    {"directions", true, "--directions LIST: of d2d,h2d,d2h,p2p (default all; p2p needs 2 GPUs)"},
                    {kMin.name, true, kMin.help + " (default 8)"},
                    {kMax.name, true, kMax.help + " (default 1GiB, quick 32MiB)"},
                    {kFactor.name, true, kFactor.help + " (default 2, quick 4)"}})},
      {"gemm", "cuBLAS GEMM (cublasGemmEx / strided batched) in fp32, tf32, fp16, bf16",
       with_common({kDevice,
                    {"dtypes", true, "--dtypes LIST: of fp32,tf32,fp16,bf16 (default all)"},
                    {"shapes", true, "--shapes 'm,n,k[,batch];...': replace the default shapes"},
                    {"layout", true, "--layout NN|NT|TN: layout of --shapes (default NN)"}})},
      {"embedding", "embedding-bag kernels (sum pooling): forward gather and backward atomic scatter-add",
       with_common({kDevice,
                    {"rows", true, "--rows N: rows per table (any of rows..dtype selects one case instead of the default sweep)"},
                    {"dim", true, "--dim N: embedding dimension (default 128)"},
                    {"pooling", true, "--pooling N: indices per bag (default 32)"},
                    {"batch", true, "--batch N: bags per table (default 8192)"},
                    {"tables", true, "--tables N: tables (default 1)"},
                    {"distribution", true, "--distribution uniform|zipf (default uniform)"},
                    {"alpha", true, "--alpha X: zipf exponent (default 1.05)"},
                    {"dtype", true, "--dtype fp32|fp16: table dtype (default fp32)"},
                    {"passes", true, "--passes LIST: of forward,backward (default both)"}})},
      {"compress", "compression kernels (cast, blockwise quant, fixed-rate ZFP) on a synthetic fp32 field",
       with_common({kDevice,
                    {kMin.name, true, kMin.help + " of the raw field (default 1MiB)"},
                    {kMax.name, true, kMax.help + " of the raw field (default 256MiB, quick 16MiB)"},
                    {kFactor.name, true, kFactor.help + " (default 4)"},
                    {"codecs", true, "--codecs LIST: of cast,quant,zfp (default all)"},
                    {"casts", true, "--casts LIST: of bf16,fp16 (default both)"},
                    {"bits", true, "--bits LIST: quant bits, of 8,4 (default both)"},
                    {"blocks", true, "--blocks LIST: quant values per scale, multiples of 32 up to 4096 (default 32,256)"},
                    {"rates", true, "--rates LIST: zfp bits per value, 3..32 (default 4,8,16)"}})},
  };
  return table;
}

std::string subcommand_help(const std::string& name) {
  const SubcommandInfo& info = find_subcommand(name);
  std::string text = "usage: stepsim-harness " + name + " [options]\n" + info.summary + "\n\noptions:\n";
  for (const OptionSpec& spec : info.options) text += "  " + spec.help + "\n";
  return text;
}

std::string main_help() {
  std::string text =
      "usage: stepsim-harness <subcommand> [options]\n"
      "Measures GPUs and writes stepsim measurement files (docs/measurements.md).\n\nsubcommands:\n";
  for (const SubcommandInfo& info : subcommands()) text += "  " + info.name + std::string(11 - info.name.size(), ' ') + info.summary + "\n";
  return text + "\n'stepsim-harness <subcommand> --help' lists its options.\n";
}

NcclOptions parse_nccl_options(const std::vector<std::string>& words) {
  const CliArgs args = read_args("nccl", words);
  NcclOptions o;
  o.common = parse_common(args);
  o.gpus = static_cast<int>(args.integer("gpus", 0, 1, 1024));
  o.ops = args.choices("ops", collective_ops(), collective_ops());
  o.sizes = parse_sweep(args, 8, o.common.quick ? 32 * kMiB : 8 * kGiB, o.common.quick ? 4 : 2);
  return o;
}

CopyOptions parse_copy_options(const std::vector<std::string>& words) {
  const CliArgs args = read_args("copy", words);
  CopyOptions o;
  o.common = parse_common(args);
  o.gpus = static_cast<int>(args.integer("gpus", 0, 1, 1024));
  const std::vector<std::string> all = {"d2d", "h2d", "d2h", "p2p"};
  o.directions = args.choices("directions", all, all);
  o.sizes = parse_sweep(args, 8, o.common.quick ? 32 * kMiB : 1 * kGiB, o.common.quick ? 4 : 2);
  return o;
}

GemmOptions parse_gemm_options(const std::vector<std::string>& words) {
  const CliArgs args = read_args("gemm", words);
  GemmOptions o;
  o.common = parse_common(args);
  o.device = static_cast<int>(args.integer("device", 0, 0, 1023));
  const std::vector<std::string> all = {"fp32", "tf32", "fp16", "bf16"};
  o.dtypes = args.choices("dtypes", all, all);
  if (args.has("layout") && !args.has("shapes"))
    throw ConfigError("--layout", "applies to --shapes only", "give --shapes too, or drop --layout");
  o.shapes = args.has("shapes") ? parse_gemm_shapes(args.text("shapes", ""), args.text("layout", "NN"))
                                : default_gemm_shapes(o.common.quick);
  return o;
}

EmbeddingOptions parse_embedding_options(const std::vector<std::string>& words) {
  const CliArgs args = read_args("embedding", words);
  EmbeddingOptions o;
  o.common = parse_common(args);
  o.device = static_cast<int>(args.integer("device", 0, 0, 1023));
  const std::vector<std::string> passes = {"forward", "backward"};
  o.passes = args.choices("passes", passes, passes);
  bool single = false;
  for (const char* name : {"rows", "dim", "pooling", "batch", "tables", "distribution", "alpha", "dtype"})
    single = single || args.has(name);
  if (!single) {
    o.cases = default_embedding_cases(o.common.quick);
    return o;
  }
  EmbeddingCase c;
  c.rows = static_cast<uint64_t>(args.integer("rows", static_cast<int64_t>(c.rows), 1, int64_t{1} << 40));
  c.dim = args.integer("dim", c.dim, 1, 65536);
  c.pooling = args.integer("pooling", c.pooling, 1, 65536);
  c.batch = args.integer("batch", c.batch, 1, int64_t{1} << 24);
  c.tables = args.integer("tables", c.tables, 1, 65536);
  c.dtype = single_choice(args, "dtype", c.dtype, {"fp32", "fp16"});
  c.distribution = single_choice(args, "distribution", "uniform", {"uniform", "zipf"}) == "zipf" ? IndexDistribution::zipf
                                                                                               : IndexDistribution::uniform;
  if (args.has("alpha") && c.distribution != IndexDistribution::zipf)
    throw ConfigError("--alpha", "applies to --distribution zipf only", "add --distribution zipf or drop --alpha");
  c.alpha = args.real("alpha", c.alpha, 1e-6, 10.0);
  const double indices = static_cast<double>(c.tables) * static_cast<double>(c.batch) * static_cast<double>(c.pooling);
  if (indices > static_cast<double>(int64_t{1} << 30))
    throw ConfigError("--pooling", "tables x batch x pooling = " + std::to_string(static_cast<int64_t>(indices)) + " indices exceeds 2^30",
                      "lower --batch, --pooling or --tables");
  o.cases = {c};
  return o;
}

CompressOptions parse_compress_options(const std::vector<std::string>& words) {
  const CliArgs args = read_args("compress", words);
  CompressOptions o;
  o.common = parse_common(args);
  o.device = static_cast<int>(args.integer("device", 0, 0, 1023));
  o.sizes = parse_sweep(args, 1 * kMiB, o.common.quick ? 16 * kMiB : 256 * kMiB, 4);
  o.codecs = args.choices("codecs", {"cast", "quant", "zfp"}, {"cast", "quant", "zfp"});
  o.casts = args.choices("casts", {"bf16", "fp16"}, {"bf16", "fp16"});
  o.quant_bits = to_ints(args.integers("bits", {8, 4}, 4, 8));
  for (int bits : o.quant_bits)
    if (bits != 4 && bits != 8) throw ConfigError("--bits", "quant bits must be 8 or 4, got " + std::to_string(bits), "write e.g. --bits 8,4");
  o.quant_blocks = to_ints(args.integers("blocks", {32, 256}, 32, 4096));
  for (int block : o.quant_blocks)
    if (block % 32 != 0)
      throw ConfigError("--blocks", "block " + std::to_string(block) + " is not a multiple of 32 (one warp per block)", "write e.g. --blocks 32,256");
  o.zfp_rates = to_ints(args.integers("rates", {4, 8, 16}, 3, 32));
  // Kernels work on whole warps of values and whole quant blocks: sizes must divide evenly.
  for (uint64_t size : o.sizes) {
    uint64_t unit = 128;  // 32 fp32 values: whole ZFP thread groups at any rate
    for (int block : o.quant_blocks) unit = unit > 4u * static_cast<uint64_t>(block) ? unit : 4u * static_cast<uint64_t>(block);
    if (size % unit != 0)
      throw ConfigError("--min", "size " + std::to_string(size) + " is not a multiple of " + std::to_string(unit) + " bytes",
                        "use power-of-two sizes of at least 16KiB, e.g. --min 1MiB");
  }
  return o;
}

std::vector<EmbeddingCase> default_embedding_cases(bool quick) {
  using D = IndexDistribution;
  const uint64_t M = 1000000;
  // rows, dim, pooling, batch, tables, dtype, distribution, alpha
  if (quick) return {{M, 128, 32, 8192, 2, "fp32", D::uniform, 1.05}, {M, 128, 32, 8192, 2, "fp32", D::zipf, 1.05}};
  return {
      {M, 128, 1, 8192, 8, "fp32", D::uniform, 1.05},       {M, 128, 32, 8192, 8, "fp32", D::uniform, 1.05},
      {M, 128, 32, 8192, 8, "fp32", D::zipf, 1.05},         {M, 256, 8, 8192, 4, "fp32", D::uniform, 1.05},
      {M, 64, 32, 8192, 8, "fp16", D::uniform, 1.05},       {10 * M, 128, 32, 8192, 1, "fp32", D::uniform, 1.05},
      {10 * M, 128, 32, 8192, 1, "fp32", D::zipf, 1.05},    {40 * M, 128, 1, 8192, 1, "fp32", D::uniform, 1.05},
      {40 * M, 128, 32, 8192, 1, "fp32", D::uniform, 1.05}, {40 * M, 128, 32, 8192, 1, "fp32", D::zipf, 1.05},
      {40 * M, 128, 32, 8192, 1, "fp32", D::zipf, 1.2},     {40 * M, 128, 32, 8192, 1, "fp16", D::uniform, 1.05},
  };
}

std::string distribution_name(IndexDistribution distribution) {
  return distribution == IndexDistribution::zipf ? "zipf" : "uniform";
}

}  // namespace stepsim::harness
