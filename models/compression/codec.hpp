#pragma once
/// @file Compression codecs for compression-assisted collectives (Zhou et al., IPDPS 2023,
/// papers.md §2): how big a buffer gets, how long a GPU takes to compress and decompress it,
/// and how much error one pass adds. One self-registering model per codec.
///
/// Contract: a Codec is pure and fixed at construction from `CODEC[:key=value,...]`
/// (parse_codec), every key declared by the codec with a default and a description, unknown
/// codecs and keys rejected with ConfigError. Times follow `a + raw_bytes / B` (CodecCost),
/// throughput B counted in uncompressed bytes as every cited benchmark counts it; each codec's
/// file cites where a and B come from or marks them as calibration inputs. `error_bound` is
/// the largest absolute error one compress -> decompress pass adds to values of magnitude at
/// most `range` (0 for a lossless codec). Adding a codec is one file under
/// models/compression/ ending with `STEPSIM_REGISTER_CODEC(Class, "name", "description")`,
/// Class having `static std::vector<CodecParam> parameters()` and a constructor from
/// `const CodecParams&`.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "platforms/platform.hpp"

namespace stepsim::models {

/// @brief One kernel (or fused chain) on one buffer: `latency + raw_bytes / throughput`.
struct CodecCost {
  Seconds latency = 0;             ///< a: launch and fixed per-call work
  BytesPerSecond throughput = 0;   ///< B: uncompressed bytes per second
  Seconds time(Bytes raw) const { return latency + raw / throughput; }
};

/// @brief A CodecCost measured on one GPU, carried to others in proportion to device-memory
/// bandwidth (the codecs modelled here stream their data once or twice, so their throughput
/// follows memory bandwidth; an extrapolation wherever the GPU is not the anchor's).
struct CostAnchor {
  const char* gpu;                 ///< the GPU it was measured on, e.g. "V100-SXM2"
  BytesPerSecond hbm_bandwidth;    ///< that GPU's datasheet memory bandwidth
  CodecCost cost;
};

/// @brief The anchor's cost scaled to `gpu`: Ampere and newer use `ampere` when given, older
/// GPUs (and all when `ampere` is null) `volta`. Throws ConfigError naming `codec` when the
/// GPU has no memory bandwidth to scale by.
CodecCost scale_cost(const CostAnchor& volta, const CostAnchor* ampere, const platforms::GpuModel& gpu,
                     const std::string& codec);

class Codec {
 public:
  virtual ~Codec() = default;
  /// @brief Canonical text with every parameter, e.g. "zfp:dtype=fp32,rate=8".
  virtual std::string spec() const = 0;
  virtual bool lossless() const = 0;
  /// @brief Size of `raw` bytes once compressed (known in advance; a data-dependent codec
  /// uses its ratio parameter).
  virtual Bytes compressed_bytes(Bytes raw) const = 0;
  /// @brief The codec's cost on `gpu`, its throughput multiplied by the platform's calibrated
  /// factor for this codec (GpuModel::codec_throughput_scale, absent = 1).
  CodecCost compress_cost(const platforms::GpuModel& gpu) const { return calibrated(model_compress_cost(gpu), gpu); }
  CodecCost decompress_cost(const platforms::GpuModel& gpu) const { return calibrated(model_decompress_cost(gpu), gpu); }
  /// @brief Largest absolute error one compress -> decompress pass adds to values in
  /// [-range, range] (an estimate where the codec has no strict bound; see its file).
  virtual double error_bound(double range) const = 0;

  Seconds compress_time(Bytes raw, const platforms::GpuModel& gpu) const { return compress_cost(gpu).time(raw); }
  Seconds decompress_time(Bytes raw, const platforms::GpuModel& gpu) const { return decompress_cost(gpu).time(raw); }
  double ratio(Bytes raw) const { return raw / compressed_bytes(raw); }
  /// @brief The registered name ("zfp" of "zfp:rate=8,...").
  std::string name() const { const std::string s = spec(); return s.substr(0, s.find(':')); }

 protected:
  /// The model's own cost, before calibration (cited or marked in each codec's file).
  virtual CodecCost model_compress_cost(const platforms::GpuModel& gpu) const = 0;
  virtual CodecCost model_decompress_cost(const platforms::GpuModel& gpu) const = 0;

 private:
  CodecCost calibrated(CodecCost cost, const platforms::GpuModel& gpu) const {
    const auto it = gpu.codec_throughput_scale.find(name());
    if (it != gpu.codec_throughput_scale.end()) cost.throughput *= it->second;
    return cost;
  }
};

/// @brief A parameter a codec takes: name, meaning, default (every codec parameter has one).
struct CodecParam {
  std::string name;
  std::string description;
  std::string default_value;
};

/// @brief The parameters of one codec as given (defaults filled in), read with checks that
/// throw ConfigError naming the codec text and the key.
class CodecParams {
 public:
  CodecParams(std::string where, std::string codec, std::map<std::string, std::string> values)
      : where_(std::move(where)), codec_(std::move(codec)), values_(std::move(values)) {}
  /// @brief The value of `key` as a number in [minimum, maximum].
  double number(const std::string& key, double minimum, double maximum) const;
  /// @brief The value of `key` as a whole number in [minimum, maximum].
  int integer(const std::string& key, int minimum, int maximum) const;
  /// @brief The value of `key`, which must be one of `allowed`.
  std::string choice(const std::string& key, const std::vector<std::string>& allowed) const;

 private:
  const std::string& text(const std::string& key) const;
  std::string where_;
  std::string codec_;
  std::map<std::string, std::string> values_;
};

struct CodecInfo {
  std::string name;
  std::string description;
  std::vector<CodecParam> params;
  std::function<std::unique_ptr<Codec>(const CodecParams&)> make;
};

/// @brief Name-ordered registry (function-local static; filled by static registrars).
class CodecRegistry {
 public:
  static CodecRegistry& instance();
  void add(CodecInfo info);
  /// @brief Throws ConfigError naming `where` and listing known codecs when absent.
  const CodecInfo& get(const std::string& name, const std::string& where) const;
  std::vector<const CodecInfo*> all() const;

 private:
  std::map<std::string, CodecInfo> by_name_;
};

struct CodecRegistrar {
  CodecRegistrar(const char* name, const char* description, std::vector<CodecParam> params,
                 std::function<std::unique_ptr<Codec>(const CodecParams&)> make) {
    CodecRegistry::instance().add({name, description, std::move(params), std::move(make)});
  }
};

/// @brief Parses `CODEC[:key=value,...]` (e.g. "zfp:rate=8"); throws ConfigError naming
/// `where` for an unknown codec, an unknown or repeated key, or a bad value, listing what is
/// allowed.
std::unique_ptr<Codec> parse_codec(const std::string& text, const std::string& where = "--compression");

/// @brief Bytes per value of the floating-point dtypes codecs take: fp32 4, fp16 / bf16 2.
Bytes float_bytes(const std::string& dtype);

/// @brief Throughput, in input bytes per second, of one memory-bound pass over values of
/// `value_bytes` input bytes that reads `read` and writes `written` bytes per value, priced by
/// the elementwise kernel model (models/compute/elementwise.cpp), which is linear in elements.
BytesPerSecond elementwise_throughput(const platforms::GpuModel& gpu, Bytes value_bytes, double read, double written);

}  // namespace stepsim::models

#define STEPSIM_REGISTER_CODEC(Class, name, description)                                          \
  namespace {                                                                                     \
  const ::stepsim::models::CodecRegistrar codec_registrar_##Class{                                \
      name, description, Class::parameters(),                                                     \
      [](const ::stepsim::models::CodecParams& params) { return std::make_unique<Class>(params); }}; \
  }
