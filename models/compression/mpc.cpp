/// @file MPC, the lossless GPU compressor for floating-point data of Yang, Mukka, Hesaaraki and
/// Burtscher ("MPC: A Massively Parallel Compression Algorithm for Scientific Data", CLUSTER
/// 2015), which MVAPICH2-GDR offers beside ZFP (papers.md §2.1). Its ratio depends on the data,
/// so it is a parameter; the compressed size is then known only after compressing, which this
/// model leaves out (a real sender first tells the receiver the size; one small message).
///
/// Ratio default 1.2: calibration input. On ML tensors the redundancy a lossless float coder
/// finds is mostly in the exponent: DietGPU measured about 2.7 bits of entropy in the 8
/// exponent bits of normal-distributed data (data/compression/dietgpu-ans-float-codec-a100.txt),
/// i.e. 32 / (32 - 5.3) = 1.2 for fp32.
///
/// Times: calibration inputs. No published MPC GPU throughput was obtained (papers.md §2.1).
/// Until calibrated, B is nvCOMP Cascaded's on a V100, 184.06 GB/s compressing and 228.53 GB/s
/// decompressing (data/compression/nvcomp-cascaded-lz4-v100-rtx3090-a100-a6000.txt, block A): a
/// lossless GPU codec of the same family (delta + bit packing, as MPC's dimension-aware delta
/// and bit transposition). a = 10 us as for ZFP (papers.md §2.1). Other GPUs scale B by memory
/// bandwidth (scale_cost).
#include <fmt/format.h>

#include "models/compression/codec.hpp"

namespace stepsim::models {
namespace {

constexpr CostAnchor kV100Compress{"V100", 900e9, {10e-6, 184.06e9}};     // nvCOMP Cascaded (stand-in)
constexpr CostAnchor kV100Decompress{"V100", 900e9, {10e-6, 228.53e9}};   // nvCOMP Cascaded (stand-in)

class Mpc : public Codec {
 public:
  static std::vector<CodecParam> parameters() {
    return {{"ratio", "compression ratio the data reaches (data dependent, >= 1)", "1.2"}};
  }

  explicit Mpc(const CodecParams& params) : ratio_(params.number("ratio", 1, 1e6)) {}

  std::string spec() const override { return fmt::format("mpc:ratio={}", ratio_); }
  bool lossless() const override { return true; }
  Bytes compressed_bytes(Bytes raw) const override { return raw / ratio_; }
  CodecCost model_compress_cost(const platforms::GpuModel& gpu) const override {
    return scale_cost(kV100Compress, nullptr, gpu, "mpc");
  }
  CodecCost model_decompress_cost(const platforms::GpuModel& gpu) const override {
    return scale_cost(kV100Decompress, nullptr, gpu, "mpc");
  }
  double error_bound(double) const override { return 0; }

 private:
  double ratio_;
};

}  // namespace

STEPSIM_REGISTER_CODEC(Mpc, "mpc", "MPC (lossless): data-dependent ratio given as a parameter")

}  // namespace stepsim::models
