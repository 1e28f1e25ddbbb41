/// @file GEMM and batched GEMM (C = A B, A m x k, B k x n, `batch` independent products in one
/// launch, as cublasGemmStridedBatched): a roofline whose compute roof is the architecture's
/// large-GEMM ceiling (roofline.cpp) times the tile and wave quantisation of the launch.
///
/// Quantisation (NVIDIA, "Matrix Multiplication Background User's Guide", docs.nvidia.com/
/// deeplearning/performance/dl-performance-matrix-multiplication: tile and wave quantisation):
/// the library covers C with CTA tiles of TM x TN; every tile costs a full tile's work, and the
/// ceil(m/TM) ceil(n/TN) batch CTAs run in waves of sm_count, the last one possibly partial.
/// A grid smaller than one wave shares the k loop among up to floor(sm_count / CTAs) CTAs per
/// tile, each taking at least 256 of k (split-K / Stream-K, Osama et al., PPoPP 2023, which
/// cuBLAS and CUTLASS use for such grids; the 256 is a calibration input, the partial-sum
/// fix-up is neglected). With s that split (1 for grids of a wave or more) the fraction of the
/// launched work that is useful is
///     q = m n batch / (ceil(m/TM) TM ceil(n/TN) TN batch) * wave_utilisation(CTAs * s),
/// taken for the better of the TM x TN and TN x TM orientations (libraries ship both), each
/// edge cut to the matrix rounded up to 32 (libraries pick smaller tiles for small matrices:
/// on an H100, cuBLAS runs DLRM's per-sample 27 x 27 x 128 products with 32 x 32 tiles, in fp32
/// and fp16 alike; validation/measurements/h100-sxm/gemm-dlrm-nt.yaml, dlrm-fp32.json.gz). So
///     time = max(2 m n k batch / (peak_flops(dtype) * ceiling * q), bytes / (hbm * hbm_efficiency))
/// with bytes = batch (m k + k n + m n) bytes_of(dtype): A and B read once, C written once.
/// fp32 GEMMs run at the fp32 rate; only dtype tf32 uses the TF32 tensor-core rate (PyTorch's
/// default is allow_tf32 = False for matmul).
///
/// Alignment: tensor-core kernels load 16-byte vectors, so cuBLAS needs every dimension (each is
/// some operand's leading dimension in one of the forward, data-gradient and weight-gradient
/// layouts) to be a multiple of 16 / bytes_of(dtype) elements; otherwise it falls back to
/// element-aligned kernels (cutlass "align1"), whose ceiling is ArchEfficiency::gemm_unaligned
/// (NVIDIA, "Matrix Multiplication Background User's Guide", Tensor Core Requirements) and whose
/// element-wide loads reach only a fraction of the HBM roof that depends on which operand is
/// stored transposed (`transpose_a`, `transpose_b`: a linear layer's forward is NT, its data
/// gradient NN, its weight gradient TN). Measured on an H100 SXM with cuBLAS (validation/
/// measurements/h100-sxm/gemm-dlrm-{nt,nn,tn}.yaml, fp16, the geomean of 65536 x 512 x 13 and
/// the batched 27 x 27 x 128 in each layout's orientation): NT 0.51 (0.48, 0.54), NN 0.36 (0.355,
/// 0.37), TN 0.27 (0.28, 0.26) of the roof, where 16-element multiples reach 0.72-0.98. TT is
/// not measured and takes TN's figure; other architectures take these as calibration inputs.
/// Aligned shapes never get slower as m, n, k or batch grow.
///
/// TF32 with A stored transposed (a weight gradient's TN): the tensor cores read 32-bit operands
/// only K-major (PTX ISA: ldmatrix's .trans and wgmma's operand transpose exist for 16-bit types
/// only), so cuBLAS's TF32 kernels for that layout run at 0.67 of the ceiling. Measured on an H100
/// SXM (validation/measurements/h100-sxm/gemm.yaml, 16 TF32 shapes >= 2048): predicted / measured
/// time 0.594 for the 4 TN shapes against 0.924 (NT) and 0.859 (NN), while fp16, bf16 and fp32
/// show no layout effect (0.88-1.02); 0.67 = 0.594 / 0.89, the NT and NN mean. Ampere has the
/// same ISA restriction, so it takes the H100 figure as a calibration input.
#include <algorithm>
#include <cmath>

#include "models/compute/roofline.hpp"

namespace stepsim::models {
namespace {

constexpr double kMinSplitK = 256;  // least k per split (four 64-deep k-blocks): calibration input

constexpr double kSmallestTile = 32;

constexpr double kTf32TransposedA = 0.67;

double quantisation(double m, double n, double k, double batch, double tile_m, double tile_n, int sm_count) {
  tile_m = std::min(tile_m, std::ceil(m / kSmallestTile) * kSmallestTile);
  tile_n = std::min(tile_n, std::ceil(n / kSmallestTile) * kSmallestTile);
  const double ctas = std::ceil(m / tile_m) * std::ceil(n / tile_n) * batch;
  const double tile_fill = (m * n) / (std::ceil(m / tile_m) * tile_m * std::ceil(n / tile_n) * tile_n);
  const double split = ctas < sm_count ? std::clamp(k / kMinSplitK, 1.0, std::floor(sm_count / ctas)) : 1;
  return tile_fill * wave_utilisation(ctas * split, sm_count);
}

/// Whether every dimension is a whole number of 16-byte vectors of `dtype` (always for the
/// fp32 CUDA-core kernels, which load single elements). A dimension of 1 makes a matrix-vector
/// product, which cuBLAS runs with its GEMV kernels.
bool tensor_aligned(double m, double n, double k, Dtype dtype) {
  if (dtype == Dtype::fp32) return true;
  const double vector = 16 / bytes_of(dtype);
  const auto fits = [&](double d) { return d == 1 || std::fmod(d, vector) == 0; };
  return fits(m) && fits(n) && fits(k);
}

/// Fraction of the HBM roof that element-aligned kernels reach, by operand layout.
double unaligned_memory_fraction(bool transpose_a, bool transpose_b) {
  if (transpose_a) return 0.27;
  return transpose_b ? 0.51 : 0.36;
}

}  // namespace

double gemm_efficiency(const platforms::GpuModel& gpu, Dtype dtype) {
  const auto fitted = gpu.gemm_efficiency.find(to_string(dtype));
  if (fitted != gpu.gemm_efficiency.end()) return fitted->second;
  const ArchEfficiency& arch = arch_efficiency(gpu.arch);
  if (dtype == Dtype::fp8 && gpu.fp8_flops > 0) return arch.gemm_fp8;
  return dtype == Dtype::fp32 ? arch.gemm_fp32 : arch.gemm;
}

namespace {

class Gemm : public KernelModel {
 public:
  std::vector<KernelParam> params() const override {
    return {{"m", "rows of A and C", std::nullopt, 1},
            {"n", "columns of B and C", std::nullopt, 1},
            {"k", "columns of A, rows of B (the reduction)", std::nullopt, 1},
            {"batch", "independent products in one launch (batched GEMM when > 1)", 1, 1},
            {"transpose_a", "1 = A is stored transposed (k x m), e.g. a weight gradient's", 0, 0},
            {"transpose_b", "1 = B is stored transposed (n x k), e.g. a linear layer's weight in forward", 0, 0}};
  }

  KernelCost cost(const KernelSpec& spec, const platforms::GpuModel& gpu) const override {
    const double m = spec.param("m"), n = spec.param("n"), k = spec.param("k"), batch = spec.param("batch");
    const ArchEfficiency& arch = arch_efficiency(gpu.arch);
    const bool aligned = tensor_aligned(m, n, k, spec.dtype);
    const bool transposed_a = spec.param("transpose_a") != 0;
    double ceiling = aligned ? gemm_efficiency(gpu, spec.dtype) : arch.gemm_unaligned;
    if (spec.dtype == Dtype::tf32 && transposed_a) ceiling *= kTf32TransposedA;
    const double q = std::max(quantisation(m, n, k, batch, arch.gemm_tile_m, arch.gemm_tile_n, gpu.sm_count),
                              quantisation(m, n, k, batch, arch.gemm_tile_n, arch.gemm_tile_m, gpu.sm_count));
    const double flops = 2 * m * n * k * batch;
    const Bytes bytes = batch * (m * k + k * n + m * n) * bytes_of(spec.dtype);
    KernelCost cost = roofline(flops, flops / (peak_flops(gpu, spec.dtype) * ceiling * q), bytes, gpu);
    const Seconds unaligned_memory =
        hbm_time(bytes, gpu) / unaligned_memory_fraction(transposed_a, spec.param("transpose_b") != 0);
    if (!aligned && unaligned_memory > cost.time) {
      cost.time = unaligned_memory;
      cost.bound = "memory";
    }
    return cost;
  }
};

}  // namespace

STEPSIM_REGISTER_KERNEL_MODEL(Gemm, "gemm", "dense (batched) matrix product: roofline with tile/wave quantisation")

}  // namespace stepsim::models
