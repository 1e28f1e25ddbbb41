/// @file Blockwise integer quantisation: each block of `block` values is scaled by its largest
/// magnitude into signed `bits`-bit integers (symmetric absmax, as 8-bit optimisers and
/// quantised-collective libraries do), one fp32 scale stored per block.
///
/// Size: values x bits / 8 + ceil(values / block) x 4 bytes.
/// Times: one fused memory-bound kernel each way (the block's absmax found in shared memory),
/// priced by the project's elementwise model (models/compute/elementwise.cpp) on the bytes it
/// moves: the input values read, the codes and scales written (and the reverse). a = 5 us: one
/// kernel launch (calibration input, papers.md §2.1's 5-20 us range).
/// Error: scale = range / (2^(bits-1) - 1) per step, rounding to nearest errs by scale / 2.
#include <cmath>

#include <fmt/format.h>

#include "models/compression/codec.hpp"

namespace stepsim::models {
namespace {

constexpr Seconds kLaunch = 5e-6;   // calibration input
constexpr Bytes kScaleBytes = 4;    // one fp32 scale per block

class Quant : public Codec {
 public:
  static std::vector<CodecParam> parameters() {
    return {{"bits", "bits per value: 8 or 4", "8"},
            {"block", "values sharing one scale", "64"},
            {"dtype", "value type: fp32, fp16, bf16", "fp32"}};
  }

  explicit Quant(const CodecParams& params)
      : bits_(std::stoi(params.choice("bits", {"8", "4"}))),
        block_(params.integer("block", 1, 1 << 20)),
        dtype_(params.choice("dtype", {"fp32", "fp16", "bf16"})) {}

  std::string spec() const override { return fmt::format("quant:bits={},block={},dtype={}", bits_, block_, dtype_); }
  bool lossless() const override { return false; }
  Bytes compressed_bytes(Bytes raw) const override {
    const double values = raw / float_bytes(dtype_);
    return values * bits_ / 8 + std::ceil(values / block_) * kScaleBytes;
  }
  CodecCost model_compress_cost(const platforms::GpuModel& gpu) const override {
    return {kLaunch, elementwise_throughput(gpu, float_bytes(dtype_), float_bytes(dtype_), coded_bytes_per_value())};
  }
  CodecCost model_decompress_cost(const platforms::GpuModel& gpu) const override {
    return {kLaunch, elementwise_throughput(gpu, float_bytes(dtype_), coded_bytes_per_value(), float_bytes(dtype_))};
  }
  double error_bound(double range) const override { return range / (std::exp2(bits_ - 1) - 1) / 2; }

 private:
  double coded_bytes_per_value() const { return bits_ / 8.0 + kScaleBytes / block_; }

  int bits_;
  int block_;
  std::string dtype_;
};

}  // namespace

STEPSIM_REGISTER_CODEC(Quant, "quant", "blockwise int8/int4 absmax quantisation (lossy): error scale/2")

}  // namespace stepsim::models
