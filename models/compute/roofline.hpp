#pragma once
/// @file What the compute models share: the per-architecture efficiency table (one place, so
/// `stepsim calibrate` can replace it), CTA wave quantisation, and the roofline itself.
///
/// Contract: a kernel's time is max(compute time, memory time); compute time is
/// flops / (peak_flops(dtype) * efficiency), memory time is bytes / (hbm_bandwidth * hbm).
/// Internal to models/compute/ (and its tests).
#include "models/compute/kernel.hpp"

namespace stepsim::models {

/// @brief Efficiency figures of one GPU architecture (sources in roofline.cpp).
struct ArchEfficiency {
  int gemm_tile_m = 128;         ///< CTA tile of the library's large-GEMM kernels (either orientation)
  int gemm_tile_n = 128;
  double gemm = 1;               ///< fraction of dense peak a wave-aligned large GEMM reaches
  double gemm_fp8 = 1;           ///< the same for FP8 GEMMs (GPUs with FP8 units)
  double gemm_fp32 = 1;          ///< the same for fp32 GEMMs on the CUDA cores (SGEMM)
  double gemm_unaligned = 1;     ///< the same for tensor-core GEMMs with a dimension not a multiple of 16 bytes
  double attention_forward = 1;  ///< fraction of dense peak of the fused attention kernel
  double attention_backward = 1;
  double hbm = 1;                ///< fraction of datasheet HBM bandwidth streaming kernels reach
};

const ArchEfficiency& arch_efficiency(platforms::GpuArch arch);

/// @brief Per-SM limits of a compute capability (CUDA C++ Programming Guide, "Technical
/// Specifications per Compute Capability").
struct SmLimits {
  int sm_version;
  double warps;          ///< maximum resident warps per SM
  Bytes shared_memory;   ///< maximum shared memory per SM
};
/// @brief The limits of the newest listed compute capability not above `sm_version`.
const SmLimits& sm_limits(int sm_version);

/// @brief Fraction of the SM slots of the launched waves that `ctas` equal CTAs keep busy:
/// ctas / (ceil(ctas / sm_count) * sm_count). A grid of 133 CTAs on 132 SMs runs two waves
/// and keeps 50.4 % of them busy.
double wave_utilisation(double ctas, int sm_count);

/// @brief Time to move `bytes` through HBM at the architecture's achievable fraction.
Seconds hbm_time(Bytes bytes, const platforms::GpuModel& gpu);

/// @brief The roofline: `flops` and `bytes` as reported, time the larger of the two times,
/// bound "compute" or "memory" by which one it is.
KernelCost roofline(double flops, Seconds compute_time, Bytes bytes, const platforms::GpuModel& gpu);

}  // namespace stepsim::models
