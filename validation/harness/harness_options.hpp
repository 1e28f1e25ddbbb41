#pragma once
/// @file The subcommands of stepsim-harness, their options and their default sweeps.
///
/// Contract: `parse_*_options` turn the words after the subcommand into a checked options struct
/// or throw stepsim::ConfigError naming the offending option; `--quick` only changes defaults
/// (explicit options still win). Nothing here touches a GPU: runtime limits (GPU count, memory)
/// are checked by the runners.
#include <cstdint>
#include <string>
#include <vector>

#include "validation/harness/cli_args.hpp"
#include "validation/harness/gemm_shapes.hpp"
#include "validation/harness/index_sampler.hpp"

namespace stepsim::harness {

/// @brief Options every subcommand takes.
struct CommonOptions {
  std::string out;          ///< measurement file ("" = standard output)
  bool quick = false;       ///< short smoke run
  int warmup = 5;           ///< untimed calls before timing
  int repetitions = 20;     ///< timed repetitions
  double target_ms = 1.0;   ///< a repetition times back-to-back calls lasting at least this long
  int max_batch = 1000;     ///< at most this many calls per repetition
  uint64_t seed = 1;        ///< seed of all generated data
  std::string platform;     ///< stepsim preset for system.platform
  std::string gpu_model;    ///< stepsim catalogue name for system.gpu_model
  std::string notes;        ///< appended to source.notes
};

/// @brief `nccl`: collective sweep over --gpus devices in one process.
struct NcclOptions {
  CommonOptions common;
  int gpus = 0;  ///< 0 = every visible GPU
  std::vector<std::string> ops;
  std::vector<uint64_t> sizes;  ///< nccl-tests sizes (bytes), ascending
};

/// @brief `copy`: cudaMemcpyAsync bandwidth.
struct CopyOptions {
  CommonOptions common;
  int gpus = 0;  ///< 0 = every visible GPU
  std::vector<std::string> directions;  ///< d2d h2d d2h p2p
  std::vector<uint64_t> sizes;
};

/// @brief `gemm`: cuBLAS GEMMs.
struct GemmOptions {
  CommonOptions common;
  int device = 0;
  std::vector<std::string> dtypes;  ///< fp32 tf32 fp16 bf16
  std::vector<GemmShape> shapes;
};

/// @brief One embedding-bag case (sum pooling, fixed pooling factor).
struct EmbeddingCase {
  uint64_t rows = 1000000;
  int64_t dim = 128;
  int64_t pooling = 32;
  int64_t batch = 8192;
  int64_t tables = 1;
  std::string dtype = "fp32";  ///< fp32 or fp16
  IndexDistribution distribution = IndexDistribution::uniform;
  double alpha = 1.05;  ///< zipf exponent (zipf only)
};

/// @brief `embedding`: embedding-bag forward and backward.
struct EmbeddingOptions {
  CommonOptions common;
  int device = 0;
  std::vector<EmbeddingCase> cases;
  std::vector<std::string> passes;  ///< forward backward
};

/// @brief `compress`: compression kernels on a synthetic fp32 field.
struct CompressOptions {
  CommonOptions common;
  int device = 0;
  std::vector<uint64_t> sizes;      ///< raw bytes
  std::vector<std::string> codecs;  ///< cast quant zfp
  std::vector<std::string> casts;   ///< bf16 fp16
  std::vector<int> quant_bits;      ///< 8 4
  std::vector<int> quant_blocks;    ///< values per scale
  std::vector<int> zfp_rates;       ///< bits per value
};

/// @brief A subcommand's name, one-line summary and options.
struct SubcommandInfo {
  std::string name;
  std::string summary;
  std::vector<OptionSpec> options;
};

/// @brief Every subcommand, in the order `--help` lists them.
const std::vector<SubcommandInfo>& subcommands();

/// @brief `stepsim-harness <name> --help` text (std::logic_error for an unknown name).
std::string subcommand_help(const std::string& name);
/// @brief `stepsim-harness --help` text.
std::string main_help();

NcclOptions parse_nccl_options(const std::vector<std::string>& args);
CopyOptions parse_copy_options(const std::vector<std::string>& args);
GemmOptions parse_gemm_options(const std::vector<std::string>& args);
EmbeddingOptions parse_embedding_options(const std::vector<std::string>& args);
CompressOptions parse_compress_options(const std::vector<std::string>& args);

/// @brief The default embedding sweep (1M..40M rows x dim 128 and a few variations).
std::vector<EmbeddingCase> default_embedding_cases(bool quick);

/// @brief "uniform" / "zipf".
std::string distribution_name(IndexDistribution distribution);

}  // namespace stepsim::harness
