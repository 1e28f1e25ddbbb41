/// @file ZFP in fixed-rate mode, the codec of MVAPICH2-GDR's on-the-fly compression and of
/// Zhou et al.'s compressed collectives (papers.md §2.1; the zfp CUDA back end supports only
/// fixed-rate mode, cudacompress.c). ZFP cuts a 1-D array into blocks of 4 values and gives
/// each block exactly 4 r bits, so the compressed size is known before compressing (no size
/// exchange): ratio 32 / r for fp32 and 16 / r for fp16 / bf16 values. MVAPICH-Plus exposes
/// r as MPIR_CVAR_ZFP_RATE, default 16.
///
/// Times: calibration inputs. No published cuZFP kernel throughput was obtained (papers.md
/// §2.1; the V100 timings in data/compression/cusz-vs-cuzfp-v100-hurricane-maltempi.txt do not
/// include kernel completion). B = 60 GB/s both ways on a V100 lies within the 10-66 GB/s that
/// SZx (Yu et al., IPDPS 2022) measured for existing GPU lossy compressors (cuSZ, cuZFP) on
/// V100 / A100; a = 10 us is papers.md §2.1's 5-20 us launch-and-setup order of magnitude.
/// B is the `throughput` parameter, so a measured figure replaces it without a rebuild (and
/// docs/compression.md shows what the paper's percentages imply about it). Other GPUs scale
/// B by memory bandwidth (scale_cost). B does not depend on r here: the
/// fixed-rate coder stops at the bit budget, so a lower rate does less work, which this
/// leaves out (errs slow for low rates).
///
/// Error: fixed-rate ZFP has no strict a-priori bound, so this is a worst-case estimate. Of a
/// block's 4 r bits, 9 hold the common exponent (sign + 8 exponent bits); the rest code the
/// decorrelated coefficients one bit plane at a time from the top, at most 5 bits a plane
/// (4 value bits and a group-test bit), so p = floor((4 r - 9) / 5) planes survive. Values in
/// [-range, range] have block exponent 2^e < 2 range; truncating after p planes leaves each
/// coefficient within 2^(e - p), and the 1-D inverse transform is taken to amplify that at
/// most 4x (Lindstrom, "Fixed-Rate Compressed Floating-Point Arrays", TVCG 2014, §3): error
/// <= range x 2^(3 - p), capped at 2 range (a decoded value stays in the block's range).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "models/compression/codec.hpp"

namespace stepsim::models {
namespace {

constexpr Seconds kLatency = 10e-6;   // calibration input

class Zfp : public Codec {
 public:
  static std::vector<CodecParam> parameters() {
    return {{"rate", "bits per value, 1-32 for fp32, 1-16 for fp16/bf16 (MVAPICH-Plus default 16)", "16"},
            {"dtype", "value type: fp32, fp16, bf16", "fp32"},
            {"throughput", "GB/s of each kernel on a V100, scaled to other GPUs by memory bandwidth (calibration input)",
             "60"}};
  }

  explicit Zfp(const CodecParams& params)
      : dtype_(params.choice("dtype", {"fp32", "fp16", "bf16"})),
        rate_(params.number("rate", 1, 8 * float_bytes(dtype_))),
        anchor_{"V100-SXM2", 900e9, {kLatency, params.number("throughput", 1, 1e5) * 1e9}} {}

  std::string spec() const override {
    return fmt::format("zfp:rate={},dtype={},throughput={}", rate_, dtype_, anchor_.cost.throughput / 1e9);
  }
  bool lossless() const override { return false; }

  Bytes compressed_bytes(Bytes raw) const override {
    const double blocks = std::ceil(raw / float_bytes(dtype_) / 4);
    return blocks * 4 * rate_ / 8;
  }
  CodecCost model_compress_cost(const platforms::GpuModel& gpu) const override { return scale_cost(anchor_, nullptr, gpu, "zfp"); }
  CodecCost model_decompress_cost(const platforms::GpuModel& gpu) const override {
    return scale_cost(anchor_, nullptr, gpu, "zfp");
  }
  double error_bound(double range) const override {
    const double planes = std::max(0.0, std::floor((4 * rate_ - 9) / 5));
    return std::min(range * std::exp2(3 - planes), 2 * range);
  }

 private:
  std::string dtype_;
  double rate_;
  CostAnchor anchor_;   ///< both kernels: no published figure tells them apart
};

}  // namespace

STEPSIM_REGISTER_CODEC(Zfp, "zfp", "ZFP fixed-rate (lossy): rate r bits/value, ratio 32/r (fp32)")

}  // namespace stepsim::models
