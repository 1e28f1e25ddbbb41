/// @file The per-architecture efficiency table and the shared roofline helpers.
///
/// Sources of the table (every figure not marked "calibration input" is published):
///  - GEMM ceilings: Maximum Achievable Matmul FLOPS (MAMF), the best bf16 matmul TFLOPS over a
///    brute-force shape search with cuBLAS via torch.matmul, in github.com/stas00/ml-engineering
///    (compute/accelerator/README.md, "Maximum Achievable Matmul FLOPS comparison table", and
///    its H200 -> B200 upgrade note): A100 SXM 267.9/312 = 85.9 % (CUDA 12.1); H100/H200 SXM
///    794.5/989 = 80.3 %; B200 SXM 1745.0/2250 = 77.6 %; fp8 H200 1453.4/1979 = 73.4 %, B200
///    3432.5/4500 = 76.3 %. The best shape is tile- and wave-aligned, so the ceiling is what a
///    GEMM reaches when the quantisation of gemm.cpp wastes nothing. fp32 GEMMs (CUDA cores) take
///    the same fraction where no SGEMM figure is published; Volta's is measured (below).
///  - Tiles: the largest CTA tiles of CUTLASS' and cuBLAS' tensor-core GEMMs, 128x256 (or
///    256x128) on sm80/sm90 and per SM of Blackwell's 2-SM 256x256 MMA; 128x128 on older GPUs.
///  - Attention: FlashAttention-2 (Dao, arXiv 2307.08691) reaches 50-73 % of peak on A100, the
///    forward pass at the top of that range; FlashAttention-3 (Shah et al., arXiv 2407.08608):
///    "FlashAttention-2 achieving only 35% utilization on the H100" (FA3 reaches 75 %). PyTorch's
///    scaled_dot_product_attention dispatches to FlashAttention-2 (or cuDNN) on H100 in 2024,
///    so Hopper uses the FA2 figure.
///  - Unaligned tensor-core GEMMs (a dimension not a multiple of 16 bytes, gemm.cpp): measured
///    on an H100 SXM with cuBLAS (stepsim-harness gemm, validation/measurements/h100-sxm/
///    gemm-dlrm-{nt,nn,tn}.yaml): fp16 65536 x 1024 x 479 in the three layouts of a linear layer
///    122.6, 118.3 and 132.5 TFLOP/s (mean 124.5 = 12.6 % of 989.4) against 558-659 with 480.
///    (Their memory-bound rate, by layout, is in gemm.cpp.) Other architectures use the same
///    fraction as a calibration input.
///  - HBM: Lin et al.'s measured peak DRAM bandwidth (papers.md §3.1, ml_perf_model utils.py):
///    A100-40GB 1391.1 of 1555 GB/s, V100 816.95 of 900, P100 543.4 of 732; Hopper from the
///    STREAM triad of github.com/te42kyfo/gpu-benches (cuda-stream/h100_pcie.txt): 1832 of
///    2000 GB/s. A GPU whose own stream rate is published overrides its architecture's figure
///    (gpus.yaml hbm_efficiency).
#include "models/compute/roofline.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace stepsim::models {

const ArchEfficiency& arch_efficiency(platforms::GpuArch arch) {
  using platforms::GpuArch;
  constexpr double kUnaligned = 124.5 / 989.4;
  // Pascal, Volta and Turing have no FP8 units (fp8 runs at the 16-bit rate, see peak_flops)
  // and no FlashAttention-2 (sm80+); their figures are calibration inputs (estimates) until
  // `stepsim calibrate` measures them.
  // Volta's GEMMs: 14 of 15.7 TFLOP/s (SGEMM) and 95 of 125 (fp16 tensor cores) measured with
  // 8192^3 torch.matmul on a V100 (github.com/mli/transformers-benchmarks README, "MatMul FP32 /
  // FP16: 14 / 95").
  static const ArchEfficiency pascal{128, 128, 0.75, 0.75, 0.75, kUnaligned, 0.30, 0.25, 543.4 / 732};
  static const ArchEfficiency volta{128, 128, 95.0 / 125, 95.0 / 125, 14.0 / 15.7, kUnaligned, 0.30, 0.25,
                                    816.95 / 900};
  static const ArchEfficiency turing{128, 128, 0.80, 0.80, 0.80, kUnaligned, 0.30, 0.25, 0.90};
  constexpr double kAmpereMamf = 267.9 / 312, kHopperMamf = 794.5 / 989, kBlackwellMamf = 1745.0 / 2250;
  // Ampere: attention backward 0.55 is a calibration input within FA2's reported 50-73 %.
  static const ArchEfficiency ampere{128, 256, kAmpereMamf, kAmpereMamf, kAmpereMamf, kUnaligned, 0.70, 0.55,
                                     1391.1 / 1555};
  // Hopper: attention backward 0.30 is a calibration input (FA2's backward trails its forward).
  static const ArchEfficiency hopper{128, 256, kHopperMamf, 1453.4 / 1979, kHopperMamf, kUnaligned, 0.35, 0.30,
                                     1832.0 / 2000};
  // Blackwell: attention and HBM figures are calibration inputs (Hopper's FA2 figures; FA2 is
  // not tuned for sm100 either).
  static const ArchEfficiency blackwell{128, 256, kBlackwellMamf, 3432.5 / 4500, kBlackwellMamf, kUnaligned, 0.35, 0.30,
                                        0.90};
  switch (arch) {
    case GpuArch::pascal: return pascal;
    case GpuArch::volta: return volta;
    case GpuArch::turing: return turing;
    case GpuArch::ampere: return ampere;
    case GpuArch::hopper: return hopper;
    case GpuArch::blackwell: return blackwell;
  }
  throw std::logic_error("arch_efficiency: unknown GPU architecture");
}

const SmLimits& sm_limits(int sm_version) {
  constexpr double kKiB = 1024;
  static const SmLimits kSmLimits[] = {{60, 64, 64 * kKiB},  {70, 64, 96 * kKiB},  {75, 32, 64 * kKiB},
                                       {80, 64, 164 * kKiB}, {86, 48, 100 * kKiB}, {89, 48, 100 * kKiB},
                                       {90, 64, 228 * kKiB}, {100, 64, 228 * kKiB}};
  const SmLimits* best = &kSmLimits[0];
  for (const SmLimits& limits : kSmLimits)
    if (limits.sm_version <= sm_version) best = &limits;
  return *best;
}

double wave_utilisation(double ctas, int sm_count) {
  if (ctas <= 0) return 1;
  const double slots = std::ceil(ctas / sm_count) * sm_count;
  return ctas / slots;
}

Seconds hbm_time(Bytes bytes, const platforms::GpuModel& gpu) {
  const double efficiency = gpu.hbm_efficiency > 0 ? gpu.hbm_efficiency : arch_efficiency(gpu.arch).hbm;
  return bytes / (gpu.hbm_bandwidth * efficiency);
}

KernelCost roofline(double flops, Seconds compute_time, Bytes bytes, const platforms::GpuModel& gpu) {
  const Seconds memory_time = hbm_time(bytes, gpu);
  KernelCost cost;
  cost.flops = flops;
  cost.bytes = bytes;
  cost.time = std::max(compute_time, memory_time);
  cost.bound = compute_time >= memory_time ? "compute" : "memory";
  return cost;
}

}  // namespace stepsim::models
