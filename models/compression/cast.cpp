/// @file Casting fp32 to a 16-bit float (bf16 or fp16) for the wire and back: ratio 2, the
/// simplest lossy "codec" and what mixed-precision communication does.
///
/// Times: a memory-bound elementwise kernel, priced by the project's elementwise model
/// (models/compute/elementwise.cpp: Lin et al.'s roofline over the architecture's achievable HBM
/// fraction), reading 4 and writing 2 bytes per value to compress, the reverse to decompress.
/// a = 5 us: one kernel launch (calibration input, papers.md §2.1's 5-20 us range).
///
/// Error: round to nearest keeps the relative error within half a unit in the last place,
/// 2^-8 for bf16 (8 significant bits) and 2^-11 for fp16 (11), so range x 2^-8 or range x 2^-11
/// (IEEE 754-2008 §4.3; bf16 as in the Google Brain float format). fp16 overflows above 65504:
/// no finite bound there.
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "models/compression/codec.hpp"

namespace stepsim::models {
namespace {

constexpr Seconds kLaunch = 5e-6;   // calibration input

class Cast : public Codec {
 public:
  static std::vector<CodecParam> parameters() { return {{"to", "16-bit type on the wire: bf16, fp16", "bf16"}}; }

  explicit Cast(const CodecParams& params) : to_(params.choice("to", {"bf16", "fp16"})) {}

  std::string spec() const override { return "cast:to=" + to_; }
  bool lossless() const override { return false; }
  Bytes compressed_bytes(Bytes raw) const override { return raw / 2; }
  CodecCost model_compress_cost(const platforms::GpuModel& gpu) const override {
    return {kLaunch, elementwise_throughput(gpu, 4, 4, 2)};
  }
  CodecCost model_decompress_cost(const platforms::GpuModel& gpu) const override {
    return {kLaunch, elementwise_throughput(gpu, 4, 2, 4)};
  }
  double error_bound(double range) const override {
    if (to_ == "fp16" && range > 65504) return std::numeric_limits<double>::infinity();
    return range * std::exp2(to_ == "bf16" ? -8 : -11);
  }

 private:
  std::string to_;
};

}  // namespace

STEPSIM_REGISTER_CODEC(Cast, "cast", "fp32 -> bf16/fp16 cast (lossy, ratio 2): half-ULP relative error")

}  // namespace stepsim::models
