// Compute-kernel models: hand-computed rooflines, tile and wave quantisation, the embedding
// hit-rate model (uniform and histogram), and complete_kernel's checks of user input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "models/compute/kernel.hpp"
#include "models/compute/roofline.hpp"
#include "platforms/config_error.hpp"
#include "platforms/loader.hpp"

namespace stepsim::models {
namespace {

using platforms::GpuModel;

// Catalogue GPUs, read the way users get them (a preset with -p gpu.model=...).
GpuModel gpu(const std::string& model) {
  return platforms::load_platform("dgx-h100", {0, "", {"gpu.model=" + model}}).gpu();
}
const GpuModel& h100() {
  static const GpuModel g = gpu("H100-SXM5-80GB");
  return g;
}
const GpuModel& a100() {
  static const GpuModel g = gpu("A100-SXM4-40GB");
  return g;
}
const GpuModel& v100() {
  static const GpuModel g = gpu("V100-SXM2");
  return g;
}

KernelSpec spec(const std::string& kind, std::map<std::string, double> params, Dtype dtype = Dtype::bf16,
                std::vector<double> histogram = {}) {
  KernelSpec s{kind, dtype, std::move(params), std::move(histogram)};
  complete_kernel(s, "test.yaml: kernels[0]");
  return s;
}

KernelCost gemm(const GpuModel& g, double m, double n, double k, Dtype dtype = Dtype::bf16, double batch = 1) {
  return kernel_cost(spec("gemm", {{"m", m}, {"n", n}, {"k", k}, {"batch", batch}}, dtype), g);
}

void expect_rel(double actual, double expected) { EXPECT_NEAR(actual, expected, 1e-9 * std::abs(expected)); }

std::string config_error(KernelSpec s) {
  try {
    complete_kernel(s, "trace.yaml: kernels[3] (line 12)");
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.where(), "trace.yaml: kernels[3] (line 12)");
    return e.what();
  }
  ADD_FAILURE() << "no ConfigError for kind " << s.kind;
  return {};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Dtype, ParsesAliasesAndRejectsUnknown) {
  EXPECT_EQ(parse_dtype("bfloat16", "x"), Dtype::bf16);
  EXPECT_EQ(parse_dtype("half", "x"), Dtype::fp16);
  EXPECT_EQ(parse_dtype("float", "x"), Dtype::fp32);
  EXPECT_STREQ(to_string(Dtype::fp8), "fp8");
  EXPECT_EQ(bytes_of(Dtype::bf16), 2);
  EXPECT_EQ(bytes_of(Dtype::tf32), 4);
  EXPECT_EQ(bytes_of(Dtype::int64), 8);
  try {
    parse_dtype("fp64", "model.yaml: dtype (line 3)");
    FAIL() << "fp64 accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.where(), "model.yaml: dtype (line 3)");
    EXPECT_TRUE(contains(e.what(), "bf16"));
  }
}

TEST(Dtype, PeakFlopsUsesTensorRatesAndFallsBack) {
  EXPECT_EQ(peak_flops(h100(), Dtype::bf16), 989.4e12);
  EXPECT_EQ(peak_flops(h100(), Dtype::fp8), 1978.9e12);
  EXPECT_EQ(peak_flops(h100(), Dtype::int8), 1978.9e12);
  EXPECT_EQ(peak_flops(a100(), Dtype::fp32), 19.5e12);   // fp32 GEMMs do not silently use TF32
  EXPECT_EQ(peak_flops(a100(), Dtype::tf32), 156e12);
  EXPECT_EQ(peak_flops(a100(), Dtype::fp8), 312e12);     // no FP8 units: the 16-bit rate
  EXPECT_EQ(peak_flops(v100(), Dtype::bf16), 125e12);    // no bf16 tensor cores: the fp16 rate
  EXPECT_EQ(peak_flops(v100(), Dtype::tf32), 15.7e12);   // TF32 needs sm80
}

TEST(Registry, ListsEveryKind) {
  std::vector<std::string> kinds;
  for (const KernelModelInfo* info : KernelModelRegistry::instance().all()) kinds.push_back(info->kind);
  EXPECT_EQ(kinds, (std::vector<std::string>{"apex_bias_backward", "attention", "column_sum", "dot_interaction",
                                             "elementwise", "embedding_backward", "embedding_forward", "gather", "gemm",
                                             "index_add", "torch_embedding_bag"}));
}

// m = 128 x 132 rows on 132 SMs, n a multiple of 256: every 128x256 tile is full and the grid
// is whole waves, so the GEMM runs exactly at the Hopper ceiling (MAMF 794.5 / 989).
TEST(Gemm, AlignedLargeGemmRunsAtTheCeiling) {
  const double m = 128 * 132, n = 2048, k = 8192;
  const KernelCost c = gemm(h100(), m, n, k);
  EXPECT_EQ(c.bound, "compute");
  expect_rel(c.flops, 2 * m * n * k);
  expect_rel(c.bytes, (m * k + k * n + m * n) * 2);
  expect_rel(c.time, 2 * m * n * k / (989.4e12 * (794.5 / 989)));

  const double m_a = 128 * 108;  // the same on A100's 108 SMs at its ceiling 267.9 / 312
  expect_rel(gemm(a100(), m_a, n, k).time, 2 * m_a * n * k / (312e12 * (267.9 / 312)));
}

TEST(Gemm, Fp8UsesItsOwnCeilingOnlyWhereFp8UnitsExist) {
  const double m = 128 * 132, n = 2048, k = 8192;
  expect_rel(gemm(h100(), m, n, k, Dtype::fp8).time, 2 * m * n * k / (1978.9e12 * (1453.4 / 1979)));
  const double m_a = 128 * 108;
  expect_rel(gemm(a100(), m_a, n, k, Dtype::fp8).time, gemm(a100(), m_a, n, k, Dtype::bf16).time);
}

// TF32 tensor cores read 32-bit operands only K-major, so a transposed A (a weight gradient's
// TN) runs at 0.67 of the ceiling; B's transposition, 16-bit types and fp32 are unaffected.
TEST(Gemm, Tf32WithTransposedARunsBelowTheCeiling) {
  const double m = 128 * 132, n = 2048, k = 8192;
  const auto layout = [&](Dtype dtype, double ta, double tb) {
    return kernel_cost(spec("gemm", {{"m", m}, {"n", n}, {"k", k}, {"transpose_a", ta}, {"transpose_b", tb}}, dtype),
                       h100())
        .time;
  };
  expect_rel(layout(Dtype::tf32, 0, 0), 2 * m * n * k / (494.7e12 * (794.5 / 989)));
  expect_rel(layout(Dtype::tf32, 0, 1), layout(Dtype::tf32, 0, 0));
  expect_rel(layout(Dtype::tf32, 1, 0), layout(Dtype::tf32, 0, 0) / 0.67);
  expect_rel(layout(Dtype::bf16, 1, 0), layout(Dtype::bf16, 0, 0));
  expect_rel(layout(Dtype::fp32, 1, 0), layout(Dtype::fp32, 0, 0));
}

// A matrix-vector product moves every weight once for two FLOPs each: HBM-bound, exactly.
TEST(Gemm, SkinnyGemmIsExactlyMemoryBound) {
  const double m = 1, n = 8192, k = 8192;
  const KernelCost c = gemm(h100(), m, n, k);
  EXPECT_EQ(c.bound, "memory");
  expect_rel(c.time, (m * k + k * n + m * n) * 2 / (3.35e12 * (1832.0 / 2000)));
}

TEST(Gemm, TinyGemmIsNotFasterThanItsMemoryTime) {
  for (double s : {1.0, 8.0, 64.0, 100.0, 512.0}) {
    const KernelCost c = gemm(h100(), s, s, s);
    EXPECT_GE(c.time, hbm_time(c.bytes, h100())) << s;
    EXPECT_GT(c.time, 0) << s;
  }
}

TEST(Gemm, MoreWorkIsNeverFaster) {
  for (const GpuModel* g : {&h100(), &a100(), &v100()}) {
    double previous = 0;
    for (double s = 16; s <= 16384; s *= 1.37) {
      const double t = gemm(*g, s, s, s).time;
      EXPECT_GE(t, previous * (1 - 1e-12)) << g->name << " " << s;  // flat where split-K absorbs k
      previous = t;
    }
    for (double k = 64; k <= 65536; k *= 2) EXPECT_LE(gemm(*g, 4096, 4096, k).time, gemm(*g, 4096, 4096, 2 * k).time);
  }
}

TEST(Gemm, WaveAndTileQuantisationShow) {
  const double n = 512, k = 8192;  // n = 512 keeps these compute-bound
  // 66 x 2 tiles fill the 132 SMs; one more row of tiles needs a second, nearly empty wave.
  const double one_wave = gemm(h100(), 128 * 66, n, k).time / (128 * 66);
  const double two_waves = gemm(h100(), 128 * 67, n, k).time / (128 * 67);
  EXPECT_GT(two_waves, 1.9 * one_wave);
  // m just over a tile boundary: the extra row costs a whole row of tiles.
  const double m = 128 * 264;
  EXPECT_GT(gemm(h100(), m + 1, n, k).time / (m + 1), gemm(h100(), m, n, k).time / m);
}

TEST(Gemm, BatchedGemmFillsTheGpuLikeOneLargeGrid) {
  // 33 products of 1024 x 1024, 32 tiles of 128x256 each: 1056 CTAs, eight full waves.
  const KernelCost batched = gemm(h100(), 1024, 1024, 8192, Dtype::bf16, 33);
  EXPECT_EQ(batched.bound, "compute");
  expect_rel(batched.flops, 33 * 2.0 * 1024 * 1024 * 8192);
  expect_rel(batched.time, batched.flops / (989.4e12 * (794.5 / 989)));
}

TEST(Gemm, PublishedLargeGemmThroughput) {
  // cuBLAS bf16 8192^3: ~700-800 TFLOPS on H100 SXM, ~250-280 on A100 (MAMF tables).
  const double flops = 2.0 * 8192 * 8192 * 8192;
  const double h = flops / gemm(h100(), 8192, 8192, 8192).time, a = flops / gemm(a100(), 8192, 8192, 8192).time;
  EXPECT_GT(h, 700e12);
  EXPECT_LT(h, 800e12);
  EXPECT_GT(a, 250e12);
  EXPECT_LT(a, 280e12);
  // 8192^3 on a V100 (mli/transformers-benchmarks: 14 TFLOPS fp32, 95 fp16): Volta's ceilings
  // less the last of 52 waves of 128x128 tiles on 80 SMs.
  const double v = flops / gemm(v100(), 8192, 8192, 8192, Dtype::fp32).time;
  EXPECT_NEAR(v, 14e12 * (4096.0 / (52 * 80)), 1e3);
  EXPECT_NEAR(flops / gemm(v100(), 8192, 8192, 8192, Dtype::fp16).time, 95e12 * (4096.0 / (52 * 80)), 1e3);
}

// A linear layer with 479 inputs (DLRM's interaction output without padding): cuBLAS's
// element-aligned fp16 kernels, measured at 12.6 % of peak on an H100; 480 runs at the ceiling.
TEST(Gemm, UnalignedTensorCoreGemmRunsAtTheFallbackCeiling) {
  const double m = 65536, n = 1024, k = 479;
  const KernelCost c = gemm(h100(), m, n, k, Dtype::fp16);
  EXPECT_EQ(c.bound, "compute");
  // 2048 tiles of 128 x 256 run in 16 waves of 132 SMs.
  expect_rel(c.time, 2 * m * n * k / (989.4e12 * (124.5 / 989.4) * (2048 / (16 * 132.0))));
  const KernelCost aligned = gemm(h100(), m, n, 480, Dtype::fp16);
  EXPECT_LT(aligned.time * 4, c.time);  // measured 524 vs 115 us
  for (const Dtype d : {Dtype::bf16, Dtype::tf32, Dtype::fp8})
    EXPECT_GT(gemm(h100(), m, n, k, d).time, 2 * gemm(h100(), m, n, 480, d).time) << to_string(d);
  // 16 bytes: 4 tf32 elements, so 1020 is aligned for tf32 but not for fp8 (16 elements).
  expect_rel(gemm(h100(), m, n, 1020, Dtype::tf32).time, 1020.0 / 1024 * gemm(h100(), m, n, 1024, Dtype::tf32).time);
  EXPECT_GT(gemm(h100(), m, n, 1020, Dtype::fp8).time, 2 * gemm(h100(), m, n, 1024, Dtype::fp8).time);
  // Memory-bound unaligned products load element by element, at a fraction of the HBM roof that
  // depends on the transposed operand (measured on an H100: 65536 x 512 x 13 in 46 us NT, 63 us
  // NN, 81 us TN, against 23 us for the roof).
  const double roof = 3.35e12 * (1832.0 / 2000);
  const double bytes = (65536.0 * 13 + 13 * 512 + 65536.0 * 512) * 2;
  const auto narrow = [&](double ta, double tb) {
    return kernel_cost(spec("gemm", {{"m", 65536}, {"n", 512}, {"k", 13}, {"transpose_a", ta}, {"transpose_b", tb}},
                            Dtype::fp16),
                       h100());
  };
  EXPECT_EQ(narrow(0, 0).bound, "memory");
  expect_rel(narrow(0, 0).bytes, bytes);
  expect_rel(narrow(0, 0).time, bytes / (roof * 0.36));
  expect_rel(narrow(0, 1).time, bytes / (roof * 0.51));
  expect_rel(narrow(1, 0).time, bytes / (roof * 0.27));
  expect_rel(narrow(1, 1).time, bytes / (roof * 0.27));
  expect_rel(gemm(h100(), 65536, 512, 16, Dtype::fp16).time, hbm_time((65536.0 * 16 + 16 * 512 + 65536.0 * 512) * 2, h100()));
  // The fp32 CUDA-core kernels load elements: 479 and 480 cost alike (measured 1348 vs 1350 us).
  expect_rel(gemm(h100(), m, n, k, Dtype::fp32).time, 479.0 / 480 * gemm(h100(), m, n, 480, Dtype::fp32).time);
}

// DLRM's dot interaction as a batched GEMM: 65536 products of 27 x 128 by 128 x 27. A 32 x 32
// tile covers each output (fill 729 / 1024), so the fp32 product is bound by its memory,
// 2.0 GB (measured on an H100: 717-770 us), not by 128 x 256 tiles that are 98 % padding.
TEST(Gemm, SmallMatricesGetSmallTiles) {
  const double b = 65536, v = 27, d = 128;
  const KernelCost c = gemm(h100(), v, v, d, Dtype::fp32, b);
  EXPECT_EQ(c.bound, "memory");
  expect_rel(c.time, b * (v * d + d * v + v * v) * 4 / (3.35e12 * (1832.0 / 2000)));
  const double compute = 2 * v * v * d * b / (h100().fp32_flops * (794.5 / 989) * (v * v / 1024.0));
  EXPECT_LT(compute, c.time);
}

KernelCost attention(const GpuModel& g, std::map<std::string, double> params) {
  return kernel_cost(spec("attention", std::move(params)), g);
}

// 132 heads x 8 blocks of 128 queries = 1056 CTAs = 8 full waves on H100: FA2's 35 %.
TEST(Attention, HandComputedForwardAndBackward) {
  const double b = 1, h = 132, s = 1024, d = 128;
  const std::map<std::string, double> shape{{"batch", b}, {"heads", h}, {"seq_q", s}, {"head_dim", d}};
  const double forward_flops = 4 * b * h * s * s * d;
  const KernelCost forward = attention(h100(), shape);
  EXPECT_EQ(forward.bound, "compute");
  expect_rel(forward.flops, forward_flops);
  expect_rel(forward.time, forward_flops / (989.4e12 * 0.35));
  expect_rel(forward.bytes, 4 * b * s * h * d * 2 + b * h * s * 4);

  auto causal = shape;
  causal["causal"] = 1;
  expect_rel(attention(h100(), causal).time, forward.time / 2);

  auto backward = shape;
  backward["backward"] = 1;
  const KernelCost bwd = attention(h100(), backward);
  expect_rel(bwd.flops, 2.5 * forward_flops);
  expect_rel(bwd.time, 2.5 * forward_flops / (989.4e12 * 0.30));
}

TEST(Attention, GroupedQueryHeadsReadLessAndDefaultsMatch) {
  const std::map<std::string, double> mha{{"batch", 2}, {"heads", 32}, {"seq_q", 8192}, {"head_dim", 128}};
  auto explicit_mha = mha;
  explicit_mha["kv_heads"] = 32;
  explicit_mha["seq_kv"] = 8192;
  EXPECT_EQ(attention(h100(), mha).time, attention(h100(), explicit_mha).time);
  auto gqa = mha;
  gqa["kv_heads"] = 8;
  EXPECT_LT(attention(h100(), gqa).bytes, attention(h100(), mha).bytes);
  EXPECT_EQ(attention(h100(), gqa).flops, attention(h100(), mha).flops);
}

TEST(Attention, FewHeadsUnderfillTheGpu) {
  // 1 x 1 head x 1 block: one CTA on 132 SMs.
  const KernelCost c = attention(h100(), {{"batch", 1}, {"heads", 1}, {"seq_q", 128}, {"head_dim", 128}});
  expect_rel(c.time, std::max(c.flops / (989.4e12 * 0.35 / 132), hbm_time(c.bytes, h100())));
}

TEST(Elementwise, HandComputedRoofline) {
  // bf16 GELU over 1e9 elements on A100: 175 FLOPs each on the fp32 cores beat 4 bytes of HBM.
  const KernelCost gelu = kernel_cost(
      spec("elementwise", {{"elements", 1e9}, {"bytes_read", 2}, {"bytes_written", 2}, {"flops", 175}}), a100());
  EXPECT_EQ(gelu.bound, "compute");
  expect_rel(gelu.time, 175e9 / 19.5e12);
  // An add: memory-bound at Lin et al.'s measured 1391.1 GB/s.
  const KernelCost add =
      kernel_cost(spec("elementwise", {{"elements", 1e9}, {"bytes_read", 4}, {"bytes_written", 2}}), a100());
  EXPECT_EQ(add.bound, "memory");
  expect_rel(add.bytes, 6e9);
  expect_rel(add.time, 6e9 / 1391.1e9);
  // The same add over a transposed view: PyTorch's non-vectorized kernel at 0.56 of that roof;
  // the GELU stays compute-bound.
  const KernelCost strided = kernel_cost(
      spec("elementwise", {{"elements", 1e9}, {"bytes_read", 4}, {"bytes_written", 2}, {"strided", 1}}), a100());
  EXPECT_EQ(strided.bound, "memory");
  expect_rel(strided.time, 6e9 / 1391.1e9 / 0.56);
  const KernelCost strided_gelu = kernel_cost(
      spec("elementwise", {{"elements", 1e9}, {"bytes_read", 2}, {"bytes_written", 2}, {"flops", 175}, {"strided", 1}}),
      a100());
  expect_rel(strided_gelu.time, gelu.time);
  // A multi-tensor kernel (an optimizer step, a foreach op) at 0.86 of the roof.
  const KernelCost foreach_add = kernel_cost(
      spec("elementwise", {{"elements", 1e9}, {"bytes_read", 4}, {"bytes_written", 2}, {"multi_tensor", 1}}), a100());
  EXPECT_EQ(foreach_add.bound, "memory");
  expect_rel(foreach_add.time, 6e9 / 1391.1e9 / 0.86);
}

// A GPU with its own measured stream rate (the A100 80GB: gpu-benches' 1759 of 2039 GB/s)
// streams at it; the 40 GB part keeps the architecture's (Lin et al.'s 1391.1 of 1555).
TEST(Elementwise, GpuStreamRateOverridesTheArchitectures) {
  const KernelSpec add = spec("elementwise", {{"elements", 1e9}, {"bytes_read", 4}, {"bytes_written", 4}});
  expect_rel(kernel_cost(add, gpu("A100-SXM4-80GB")).time, 8e9 / (2039e9 * 0.863));
  expect_rel(kernel_cost(add, a100()).time, 8e9 / 1391.1e9);
}

// The H100 measurements the multi-tensor fraction is fitted to, each within 7 %: fused AdamW
// over the 4-layer Llama-3-8B's 1.923e9 parameters (28 B each) 21.68 ms, clip_grad_norm_'s norm
// (4 B) 2.875 ms and scale (8 B) 5.681 ms.
TEST(Elementwise, MultiTensorKernelsMatchTheH100) {
  // 2 x 128256 x 4096 embedding and output, 4 x 218,112,000 per block, the final norm's 4096.
  const double params = 2 * 128256.0 * 4096 + 4 * 218112000.0 + 4096;
  const auto foreach_time = [&](double read, double written) {
    return kernel_cost(spec("elementwise",
                            {{"elements", params}, {"bytes_read", read}, {"bytes_written", written}, {"multi_tensor", 1}},
                            Dtype::fp32),
                       h100())
        .time;
  };
  EXPECT_NEAR(foreach_time(16, 12) / 21678e-6, 1, 0.07);
  EXPECT_NEAR(foreach_time(4, 0) / 2875e-6, 1, 0.07);
  EXPECT_NEAR(foreach_time(4, 4) / 5681e-6, 1, 0.07);
}

// DLRM's fused dot interaction, 8192 samples x 27 vectors x 128 on A100: forward reads X
// (8192 x 27 x 128 x 2 B) and writes 351 pair products + 128 values per sample, memory-bound at
// Lin et al.'s 1391.1 GB/s; the backward reads that gradient and X and writes dX, with twice
// the forward's 2 b V^2 D FLOPs. In fp32 (CUDA cores, 19.5 TFLOP/s at the fp32 GEMM fraction)
// the math is no longer free but the pass stays far below a batched GEMM's tile waste.
TEST(DotInteraction, HandComputedRoofline) {
  const double b = 8192, v = 27, d = 128;
  const std::map<std::string, double> shape{{"batch", b}, {"vectors", v}, {"dim", d}};
  const double x = b * v * d * 2, z = b * (v * (v - 1) / 2 + d) * 2;
  const KernelCost forward = kernel_cost(spec("dot_interaction", shape, Dtype::fp16), a100());
  EXPECT_EQ(forward.bound, "memory");
  expect_rel(forward.flops, 2 * b * v * v * d);
  expect_rel(forward.bytes, x + z);
  expect_rel(forward.time, (x + z) / 1391.1e9);
  auto back = shape;
  back["backward"] = 1;
  const KernelCost backward = kernel_cost(spec("dot_interaction", back, Dtype::fp16), a100());
  expect_rel(backward.flops, 4 * b * v * v * d);
  expect_rel(backward.bytes, z + 2 * x);
  const KernelCost fp32 = kernel_cost(spec("dot_interaction", shape, Dtype::fp32), a100());
  expect_rel(fp32.time, std::max(2 * b * v * v * d / (19.5e12 * gemm_efficiency(a100(), Dtype::fp32)),
                                 2 * (x + z) / 1391.1e9));
  EXPECT_LT(fp32.time, gemm(a100(), v, v, d, Dtype::fp32, b).time);
}

// A 500 W limit on an H100 (TDP 700 W, measured: training 673 W, idle at full clock 120 W) leaves
// cbrt(380 / 553) = 88.2 % of the clock: compute roofs scale, memory roofs do not.
TEST(PowerLimit, ScalesComputeRoofsByTheCubeRootOfTheDynamicPower) {
  GpuModel capped = h100();
  EXPECT_EQ(power_clock_scale(capped), 1);  // no limit set: the TDP
  capped.power_limit_watts = 700;
  EXPECT_EQ(power_clock_scale(capped), 1);
  capped.power_limit_watts = 690;  // above what training draws: no slowdown
  EXPECT_EQ(power_clock_scale(capped), 1);
  capped.power_limit_watts = 500;
  const double scale = std::cbrt((500.0 - 120) / (673 - 120));
  expect_rel(power_clock_scale(capped), scale);
  expect_rel(peak_flops(capped, Dtype::bf16), 989.4e12 * scale);
  const double m = 128 * 132, n = 2048, k = 8192;
  expect_rel(gemm(capped, m, n, k).time, gemm(h100(), m, n, k).time / scale);
  expect_rel(gemm(capped, 1, 8192, 8192).time, gemm(h100(), 1, 8192, 8192).time);  // memory-bound
}

// PyTorch's EmbeddingBag kernel, 65536 one-hot bags of 128 fp32 from a table in L2: 262144
// chunks of 32 elements in 32 rounds of 8192 warps, three dependent loads each (measured on an
// H100: 92 us); HBM alone would take 23 us.
TEST(TorchEmbeddingBag, LatencyBoundRoundsOfDependentLoads) {
  const double b = 65536, d = 128;
  const auto bag = [&](double rows, double dim, double pooling, Dtype dtype) {
    return kernel_cost(
        spec("torch_embedding_bag", {{"batch", b}, {"rows", rows}, {"dim", dim}, {"pooling", pooling}}, dtype), h100());
  };
  const KernelCost c = bag(1000, d, 1, Dtype::fp32);
  EXPECT_EQ(c.bound, "latency");
  expect_rel(c.time, 32 * 3 * 0.95e-6);
  expect_rel(c.bytes, b * (16 + (8 + 512) + 512 + 16));
  EXPECT_LT(hbm_time(c.bytes, h100()), c.time / 3);
  // Pooling 4: each further lookup adds 0.37 of a load; fp16 rows halve the bytes, not the rounds.
  const KernelCost pooled = bag(1000, d, 4, Dtype::fp16);
  expect_rel(pooled.time, 32 * (3 + 3 * 0.37) * 0.95e-6);
  expect_rel(pooled.bytes, b * (16 + 4 * (8 + 256) + 256 + 16));
  // A 33-element row needs two chunks per bag: twice the rounds.
  expect_rel(bag(1000, 33, 1, Dtype::fp32).time, 2 * 8 * 3 * 0.95e-6);
  // A 10M-row table (5.1 GB) misses L2 on all but 50 MiB of it: each row load adds 0.44 us.
  const double miss = 1 - h100().l2_size / (1e7 * 512);
  expect_rel(bag(1e7, d, 4, Dtype::fp32).time, 32 * ((3 + 3 * 0.37) * 0.95e-6 + miss * 0.44e-6 * (1 + 3 * 0.37)));
}

// SGD's sparse update of one DLRM table on an H100: 65536 rows of 128 fp32 (value read, row
// read and written with an atomic, an 8-byte index) at half the HBM roof: 66 us (measured 62-70).
TEST(IndexAdd, AtomicScatterAddRunsAtHalfTheHbmRoof) {
  const KernelCost c = kernel_cost(spec("index_add", {{"rows", 65536}, {"dim", 128}}, Dtype::fp32), h100());
  expect_rel(c.bytes, 65536 * (8 + 3 * 128 * 4.0));
  expect_rel(c.time, 2 * hbm_time(c.bytes, h100()));
  EXPECT_EQ(c.bound, "memory");
  EXPECT_GT(c.time, 62e-6);
  EXPECT_LT(c.time, 70e-6);
}

// The gradient rows of one nn.EmbeddingBag on an H100: 65536 rows of 128 fp32 (an 8-byte index,
// the row read and written) at 0.54 of the HBM roof: 41 us (measured 40.9-41.6).
TEST(Gather, IndexSelectRunsAtAFractionOfTheHbmRoof) {
  const KernelCost c = kernel_cost(spec("gather", {{"rows", 65536}, {"dim", 128}}, Dtype::fp32), h100());
  expect_rel(c.bytes, 65536 * (8 + 2 * 128 * 4.0));
  expect_rel(c.time, hbm_time(c.bytes, h100()) / 0.54);
  EXPECT_GT(c.time, 40.5e-6);
  EXPECT_LT(c.time, 41.7e-6);
}

// PyTorch's DLRM interaction picks 351 pairs of each sample's 27 x 27 products; the backward
// index_adds each pair's column of 65536 gradients: 23M atomics at addresses of their own, 7.75
// ps each on an H100 (measured 177.7 us in fp16, 188.6 in fp32), where the bytes take 45 us.
TEST(IndexAdd, StridedSlicesAreOneAtomicPerElement) {
  const auto cost = [](Dtype dtype, double strided) {
    return kernel_cost(spec("index_add", {{"rows", 351}, {"dim", 65536}, {"strided", strided}}, dtype), h100());
  };
  expect_rel(cost(Dtype::fp16, 1).time, 351 * 65536 * 7.75e-12);
  EXPECT_EQ(cost(Dtype::fp16, 1).bound, "latency");
  EXPECT_NEAR(cost(Dtype::fp16, 1).time / 177.7e-6, 1, 0.03);
  EXPECT_NEAR(cost(Dtype::fp32, 1).time / 188.6e-6, 1, 0.06);
  EXPECT_LT(cost(Dtype::fp16, 0).time, 0.6 * cost(Dtype::fp16, 1).time);
  expect_rel(cost(Dtype::fp16, 1).bytes, cost(Dtype::fp16, 0).bytes);
}

KernelCost column_sum(const GpuModel& g, double rows, double cols, Dtype dtype) {
  return kernel_cost(spec("column_sum", {{"rows", rows}, {"cols", cols}}, dtype), g);
}

// PyTorch's sum over the 65536 rows of a 65536 x 256 fp16 matrix on an H100 (132 SMs, 2048
// threads each): blocks of 32 x 4 threads, 4 columns per thread, so 2 CTAs across the columns;
// the 16384 rows per block.y lane split over min(ceil(2112 / 2), 16384 / 16) = 1024 CTAs, whose
// partials the last CTA's 4 rows of threads add 256 each: 0.79 of the roof on the bytes, 5.3 us,
// 256 x 0.225 us.
TEST(ColumnSum, LastCtaAddsThePartialsOfATallMatrixInSequence) {
  const KernelCost c = column_sum(h100(), 65536, 256, Dtype::fp16);
  expect_rel(c.bytes, 65537.0 * 256 * 2);
  expect_rel(c.time, hbm_time(c.bytes, h100()) / 0.79 + 5.3e-6 + 256 * 0.225e-6);
  EXPECT_EQ(c.bound, "latency");
  // 8192 rows: 2048 per lane, 128 CTAs, 32 partials each.
  expect_rel(column_sum(h100(), 8192, 256, Dtype::fp16).time,
             hbm_time(8193.0 * 256 * 2, h100()) / 0.79 + 5.3e-6 + 32 * 0.225e-6);
  // Few rows are not split over CTAs (16 per lane); one column reduces along the rows in one CTA.
  expect_rel(column_sum(h100(), 64, 256, Dtype::fp16).time, hbm_time(65.0 * 256 * 2, h100()) / 0.79 + 5.3e-6);
  expect_rel(column_sum(h100(), 65536, 1, Dtype::fp16).time, hbm_time(65537.0 * 2, h100()) / 0.79 + 5.3e-6);
}

// The calibration set (H100 SXM, PyTorch 2.11, validation/measurements/h100-sxm/*.json.gz): the
// mean kernel time of each (rows, cols, dtype) class of reduce_kernel<128, 4> in the DLRM traces
// (bias gradients) and the FSDP trace (RMSNorm weight gradients). The bytes alone would make
// 65536 x 128 fp16 5.5 us.
TEST(ColumnSum, MatchesPyTorchsReduceKernelOnAnH100) {
  struct Case {
    double rows, cols;
    Dtype dtype;
    Seconds measured;
  };
  const Case cases[] = {{65536, 128, Dtype::fp16, 69.7e-6},  {65536, 256, Dtype::fp16, 76.3e-6},
                        {65536, 512, Dtype::fp16, 62.4e-6},  {65536, 1024, Dtype::fp16, 82.1e-6},
                        {8192, 128, Dtype::fp16, 15.6e-6},   {8192, 256, Dtype::fp16, 14.7e-6},
                        {8192, 512, Dtype::fp16, 15.2e-6},   {8192, 1024, Dtype::fp16, 17.9e-6},
                        {65536, 128, Dtype::fp32, 74.2e-6},  {65536, 256, Dtype::fp32, 92.2e-6},
                        {65536, 512, Dtype::fp32, 99.0e-6},  {65536, 1024, Dtype::fp32, 121.4e-6},
                        {8192, 128, Dtype::fp32, 14.7e-6},   {8192, 256, Dtype::fp32, 16.2e-6},
                        {8192, 512, Dtype::fp32, 17.0e-6},   {8192, 1024, Dtype::fp32, 27.2e-6},
                        {16384, 4096, Dtype::bf16, 67.8e-6}};
  double log_sum = 0;
  for (const Case& c : cases) {
    const double ratio = column_sum(h100(), c.rows, c.cols, c.dtype).time / c.measured;
    EXPECT_NEAR(ratio, 1, 0.16) << c.rows << " x " << c.cols << " " << to_string(c.dtype);
    log_sum += std::abs(std::log(ratio));
  }
  EXPECT_LT(std::exp(log_sum / std::size(cases)) - 1, 0.06);
}

// apex's fused ReLU and bias backward of DLRM's bottom MLP on rank 0 of a DGX-2 (V100, 80 SMs):
// 65536 x 128 fp16 is one CTA across the columns and min(256, 320) = 256 along the rows, so
// the last CTA adds 256 partials; 65536 x 512 has 4 CTAs across, at most 80 along.
TEST(ApexBiasBackward, GridOfFourCtasPerSmSetsTheChain) {
  const GpuModel& g = v100();
  const auto cost = [&](double rows, double cols, double relu) {
    return kernel_cost(spec("apex_bias_backward", {{"rows", rows}, {"cols", cols}, {"relu", relu}}, Dtype::fp16), g);
  };
  const KernelCost narrow = cost(65536, 128, 1);
  expect_rel(narrow.bytes, (3 * 65536.0 + 1) * 128 * 2);
  expect_rel(narrow.time, hbm_time(narrow.bytes, g) / 0.79 + 5.3e-6 + 256 * 0.225e-6);
  expect_rel(cost(65536, 512, 1).time, hbm_time((3 * 65536.0 + 1) * 512 * 2, g) / 0.79 + 5.3e-6 + 80 * 0.225e-6);
  // Without the ReLU only the gradient is read; 256 rows fit one CTA, so no partials.
  expect_rel(cost(65536, 128, 0).bytes, 65537.0 * 128 * 2);
  expect_rel(cost(256, 128, 0).time, hbm_time(257.0 * 128 * 2, g) / 0.79 + 5.3e-6);
}

// A 3-row table's update: 65536 rows land on 3, so each destination element takes 21845
// atomics one after another at 12.7 ns (the H100 fit): 277 us, where the bandwidth bound is 66
// (measured 220). A 14-row table's 4681 hits per row (59 us) stay under the bandwidth bound.
TEST(IndexAdd, CollidingAtomicsSerialiseOnTheHottestRow) {
  const auto cost = [](double hits) {
    return kernel_cost(spec("index_add", {{"rows", 65536}, {"dim", 128}, {"hottest_row_hits", hits}}, Dtype::fp32),
                       h100());
  };
  const KernelCost spread = cost(0);
  expect_rel(cost(65536.0 / 3).time, 65536.0 / 3 * 12.7e-9);
  EXPECT_EQ(cost(65536.0 / 3).bound, "latency");
  expect_rel(cost(65536.0 / 14).time, spread.time);
  EXPECT_EQ(cost(65536.0 / 14).bound, "memory");
  expect_rel(cost(65536.0 / 3).bytes, spread.bytes);
}

// Forward: DRAM bytes = T B (96 + r(4L) + r(eD)) + T B (1 - hit) L r(eD); the test reads the
// hit rate back from the reported DRAM bytes.
double forward_hit_rate(const KernelCost& c, double t, double b, double l, double row, double indices) {
  const double fixed = t * b * (96 + indices + row);
  return 1 - (c.bytes - fixed) / (t * b * l * row);
}

KernelCost lookup(const std::string& kind, const GpuModel& g, double rows, std::vector<double> histogram = {},
                  double dim = 128, double pooling = 10, double batch = 4096, double tables = 8) {
  return kernel_cost(spec(kind, {{"tables", tables}, {"rows", rows}, {"dim", dim}, {"pooling", pooling},
                                 {"batch", batch}},
                          Dtype::fp32, std::move(histogram)),
                     g);
}

TEST(Embedding, ForwardHandComputed) {
  // A100: 108 SMs x floor(64 x 0.71) = 4860 warps; B = 512 -> 10 tables at once; 0.9 x 40 MiB /
  // 10 / 512 B = 7372 rows, capped at B L = 5120 resident rows; E = 1e5: the 5120 lookups touch
  // 4991 unique rows, which fit: hit rate = 1 - unique / (B L).
  const double t = 4, e = 1e5, d = 128, l = 10, b = 512;
  const KernelCost c = lookup("embedding_forward", a100(), e, {}, d, l, b, t);
  const double unique = e * (1 - std::pow(1 - 1 / e, b * l));
  const double hit = 1 - unique / (b * l);
  const double row = 512, indices = 64;
  const double l2 = t * b * hit * l * row, dram = t * b * (96 + indices + row + (1 - hit) * l * row);
  expect_rel(c.bytes, dram);
  expect_rel(c.time, std::max(dram / 1391.1e9, l2 / 5.4e12));
  EXPECT_EQ(c.bound, "memory");
}

// A gather that casts as it pools (output_bytes 2 of fp32 rows) writes 256 B per output row
// instead of 512: the DRAM bytes drop by exactly T B 256.
TEST(Embedding, ForwardWritesItsOutputType) {
  const double t = 4, b = 512;
  const auto shape = [&](std::map<std::string, double> extra) {
    std::map<std::string, double> p = {{"tables", t}, {"rows", 1e5}, {"dim", 128}, {"pooling", 10}, {"batch", b}};
    p.insert(extra.begin(), extra.end());
    return kernel_cost(spec("embedding_forward", p, Dtype::fp32), a100());
  };
  const KernelCost own = shape({}), half = shape({{"output_bytes", 2}}), same = shape({{"output_bytes", 4}});
  expect_rel(own.bytes - half.bytes, t * b * 256);
  expect_rel(same.bytes, own.bytes);
}

TEST(Embedding, HitRateLimits) {
  const double row = 512, indices = 64;
  // One row: every lookup but the first hits.
  const double one = forward_hit_rate(lookup("embedding_forward", a100(), 1), 8, 4096, 10, row, indices);
  EXPECT_NEAR(one, 1 - 1.0 / 40960, 1e-12);
  // A billion rows: almost every lookup is a first touch.
  EXPECT_LT(forward_hit_rate(lookup("embedding_forward", a100(), 1e9), 8, 4096, 10, row, indices), 1e-4);
  // Bigger tables never hit more. (Time is not monotonic in E: hits cost L2 and misses DRAM
  // time, overlapped, so an L2-bound lookup gets faster as a few hits turn into misses.)
  double previous = 1;
  for (double e = 1; e <= 1e9; e *= 10) {
    const double hit = forward_hit_rate(lookup("embedding_forward", a100(), e), 8, 4096, 10, row, indices);
    EXPECT_LE(hit, previous) << e;
    previous = hit;
  }
  EXPECT_LT(lookup("embedding_forward", a100(), 1).time, lookup("embedding_forward", a100(), 1e9).time);
  // Backward: a resident table hits always; a huge one costs more.
  EXPECT_LT(lookup("embedding_backward", a100(), 1).time, lookup("embedding_backward", a100(), 1e9).time);
}

std::vector<double> reuse_histogram(std::size_t bin) {
  std::vector<double> h(17, 0);
  h[bin] = 1;
  return h;
}

TEST(Embedding, HistogramDrivesTheHitRate) {
  const double row = 512, indices = 64;
  // All indices unique: no hit at all, even on a small table.
  const KernelCost unique = lookup("embedding_forward", a100(), 1000, reuse_histogram(0));
  EXPECT_NEAR(forward_hit_rate(unique, 8, 4096, 10, row, indices), 0, 1e-12);
  // Every unique index used 5-8 times (mean 6.5) and all fit: hit rate 1 - 1/6.5.
  const KernelCost reused = lookup("embedding_forward", a100(), 1e9, reuse_histogram(3));
  EXPECT_NEAR(forward_hit_rate(reused, 8, 4096, 10, row, indices), 1 - 1 / 6.5, 1e-12);
  EXPECT_GT(unique.time, reused.time);
  // Backward in the same direction (pooling 40: more row traffic than the cold loads).
  EXPECT_GT(lookup("embedding_backward", a100(), 1e6, reuse_histogram(0), 128, 40).time,
            lookup("embedding_backward", a100(), 1e6, reuse_histogram(10), 128, 40).time);
}

TEST(Embedding, HistogramKeepsTheMostReusedRowsWhenL2IsShort) {
  // H100: 132 x 45 warps, B = 64 -> 93 tables at once; 0.9 x 50 MiB / 93 / 4 KiB rows = 123
  // resident rows of B L = 640 lookups. Half the unique rows used once, half 3-4 times (3.5):
  // mean 2.25, 284.4 unique rows, the 123 resident ones all from the 3.5 bin: hits 123 x 2.5.
  const double d = 1024, l = 10, b = 64, t = 1;
  std::vector<double> h(17, 0);
  h[0] = 0.5;
  h[2] = 0.5;
  const KernelCost c = lookup("embedding_forward", h100(), 1e9, h, d, l, b, t);
  const double resident = std::floor(0.9 * 50 * 1048576 / 93 / 4096);
  ASSERT_EQ(resident, 123);
  EXPECT_NEAR(forward_hit_rate(c, t, b, l, 4096, 64), resident * 2.5 / 640, 1e-12);
}

TEST(CompleteKernel, FillsDefaults) {
  const KernelSpec s = spec("gemm", {{"m", 1}, {"n", 2}, {"k", 3}});
  EXPECT_EQ(s.param("batch"), 1);
  EXPECT_THROW(s.param("heads"), std::logic_error);
}

TEST(CompleteKernel, RejectsBadInputNamingWhereAndTheAllowedParameters) {
  const std::string unknown_kind = config_error({"conv", Dtype::bf16, {}, {}});
  EXPECT_TRUE(contains(unknown_kind, "unknown kernel kind 'conv'"));
  EXPECT_TRUE(contains(unknown_kind, "apex_bias_backward, attention, column_sum, dot_interaction, elementwise, embedding_backward"));

  const std::string unknown = config_error({"gemm", Dtype::bf16, {{"m", 1}, {"n", 1}, {"k", 1}, {"kk", 1}}, {}});
  EXPECT_TRUE(contains(unknown, "unknown parameter 'kk'"));
  EXPECT_TRUE(contains(unknown, "m (required), n (required), k (required), batch (default 1)"));

  const std::string missing = config_error({"gemm", Dtype::bf16, {{"m", 1}, {"n", 1}}, {}});
  EXPECT_TRUE(contains(missing, "missing required parameter 'k'"));
  EXPECT_TRUE(contains(missing, "batch (default 1)"));

  EXPECT_TRUE(contains(config_error({"gemm", Dtype::bf16, {{"m", -1}, {"n", 1}, {"k", 1}}, {}}), "got -1"));
  EXPECT_TRUE(contains(
      config_error({"gemm", Dtype::bf16, {{"m", std::numeric_limits<double>::quiet_NaN()}, {"n", 1}, {"k", 1}}, {}}),
      "got nan"));
  EXPECT_TRUE(contains(config_error({"gemm", Dtype::bf16, {{"m", 0}, {"n", 1}, {"k", 1}}, {}}), ">= 1"));
  EXPECT_TRUE(contains(config_error({"elementwise", Dtype::bf16,
                                     {{"elements", std::numeric_limits<double>::infinity()},
                                      {"bytes_read", 2},
                                      {"bytes_written", 2}},
                                     {}}),
                       "got inf"));
}

TEST(CompleteKernel, ChecksHistograms) {
  const std::map<std::string, double> shape{{"tables", 1}, {"rows", 10}, {"dim", 4}, {"pooling", 1}, {"batch", 1}};
  EXPECT_TRUE(contains(config_error({"gemm", Dtype::bf16, {{"m", 1}, {"n", 1}, {"k", 1}}, {0.5, 0.5}}),
                       "takes no histogram"));
  EXPECT_TRUE(contains(config_error({"embedding_forward", Dtype::fp32, shape, {1.0}}), "needs 17 entries, got 1"));
  std::vector<double> negative(17, 0);
  negative[3] = -0.1;
  EXPECT_TRUE(contains(config_error({"embedding_backward", Dtype::fp32, shape, negative}), "got -0.1"));
}

}  // namespace
}  // namespace stepsim::models
