#pragma once
/// @file Collective algorithms: the interface and the self-registering registry.
///
/// Contract: an Algorithm is pure. Given what is asked (CollectiveSpec) and where it runs
/// (platform + allocation), `lower` returns a Schedule that passes the data-movement checker,
/// or throws ConfigError when the op or the allocation is not supported (`supports` says so
/// beforehand). Adding an algorithm is one file under models/collectives/ ending with
/// `STEPSIM_REGISTER_ALGORITHM(Class, "name", "one-line description", {parameters})`.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/schedule.hpp"
#include "platforms/platform.hpp"

namespace stepsim::models {

/// @brief Where a codec compresses (models/compression/compressed_schedules.hpp): every large
/// message by its sender (p2p, MVAPICH2-GDR) or inside the collective (Zhou et al.'s ring).
enum class CompressionMode : std::uint8_t { p2p, collective };
/// @brief "p2p" or "collective", as --compression-mode spells it.
const char* to_string(CompressionMode mode);

/// @brief Compression-assisted collectives; an empty codec means none. Honoured by
/// models::lower_collective (compressed_schedules.hpp), not by Algorithm::lower.
struct CompressionOptions {
  std::string codec;                        ///< CODEC[:key=value,...], e.g. "zfp:rate=8"
  CompressionMode mode = CompressionMode::collective;
  Bytes threshold = 1024.0 * 1024;          ///< p2p: smaller messages stay raw (MVAPICH-Plus default 1 MB)
  bool operator==(const CompressionOptions&) const = default;
};

/// @brief Knobs a user may set on any algorithm (0 / empty = the algorithm decides).
struct AlgorithmOptions {
  int channels = 0;            ///< parallel rings/trees
  Bytes chunk_bytes = 0;       ///< pipeline chunk size for trees and pipelined schedules
  std::map<std::string, std::string> extra;   ///< algorithm-specific (e.g. nccl proto=LL128)
  CompressionOptions compression;
  /// Price the schedule alone: no kernel launch, per-step synchronisation or protocol
  /// (primitives_runtime.hpp). A lower bound for analysis; NCCL's lowering ignores it.
  bool ideal_runtime = false;
  bool operator==(const AlgorithmOptions&) const = default;
};

/// @brief Where a collective runs: the platform and the GPUs of its ranks.
struct CollectiveContext {
  const platforms::Platform& platform;
  const platforms::Allocation& allocation;
  AlgorithmOptions options;

  int ranks() const { return allocation.ranks(); }
  int gpu_vertex(int rank) const { return platform.gpu_vertex(allocation.gpus.at(rank)); }
  int node_of(int rank) const { return platform.node_of_gpu(allocation.gpus.at(rank)); }
  const platforms::Route& route(int from_rank, int to_rank) const {
    return platform.route(gpu_vertex(from_rank), gpu_vertex(to_rank));
  }
};

class Algorithm {
 public:
  virtual ~Algorithm() = default;
  /// @brief Whether this algorithm implements `op` on this allocation, and why not (into
  /// `why_not` unless it is null).
  virtual bool supports(const CollectiveSpec& spec, const CollectiveContext& ctx,
                        std::string* why_not) const = 0;
  virtual Schedule lower(const CollectiveSpec& spec, const CollectiveContext& ctx) const = 0;
};

/// @brief One `--algo-param key=value` an algorithm understands.
struct AlgorithmParam {
  std::string name;
  std::string default_value;   ///< what applies without it, in words ("NCCL's choice")
  std::string description;     ///< accepted values and meaning
};

struct AlgorithmInfo {
  std::string name;
  std::string description;
  std::function<std::unique_ptr<Algorithm>()> make;
  std::vector<AlgorithmParam> params;   ///< every --algo-param key it reads; others are refused

  /// @brief Throws ConfigError naming `--algo-param` and listing the declared parameters (with
  /// their defaults) for a key of `options.extra` this algorithm does not declare.
  void check_params(const AlgorithmOptions& options) const;
};

/// @brief Name-ordered registry (function-local static; filled by static registrars).
class AlgorithmRegistry {
 public:
  static AlgorithmRegistry& instance();
  void add(AlgorithmInfo info);
  /// @brief Throws ConfigError naming `--algo` and listing known names when absent.
  const AlgorithmInfo& get(const std::string& name) const;
  std::vector<const AlgorithmInfo*> all() const;

 private:
  std::map<std::string, AlgorithmInfo> by_name_;
};

struct AlgorithmRegistrar {
  AlgorithmRegistrar(const char* name, const char* description, std::function<std::unique_ptr<Algorithm>()> make,
                     std::vector<AlgorithmParam> params) {
    AlgorithmRegistry::instance().add({name, description, std::move(make), std::move(params)});
  }
};

}  // namespace stepsim::models

/// Registers `Class` as `name`; the optional last argument declares its parameters,
/// `{{"key", "default", "description"}, ...}` (none: every --algo-param is refused).
#define STEPSIM_REGISTER_ALGORITHM(Class, name, description, ...)                   \
  namespace {                                                                        \
  const ::stepsim::models::AlgorithmRegistrar registrar_##Class{                     \
      name, description, [] { return std::make_unique<Class>(); },                   \
      std::vector<::stepsim::models::AlgorithmParam> __VA_ARGS__};                   \
  }
