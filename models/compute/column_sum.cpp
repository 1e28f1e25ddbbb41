/// @file The sum of a row-major rows x cols matrix over its rows (a linear layer's bias
/// gradient, a norm's weight gradient) as the two kernels of training loops run it:
///  - "column_sum": PyTorch's reduce_kernel for `sum(dim=0)` (what nn.Linear's backward
///    launches for the bias), its launch configuration ported from setReduceConfig
///    (ATen/native/cuda/Reduce.cuh) for a contiguous matrix;
///  - "apex_bias_backward": NVIDIA apex's MLP backward (csrc/mlp_cuda.cu, biasAddRelu_bprop and
///    biasAdd_bprop), which also applies the ReLU's gradient when `relu` is 1, its grid from
///    get_biasAddRelu_bprop_grid_size.
/// Both split the rows over a grid sized to fill the GPU once and reduce in two passes: each
/// CTA adds its slice of rows into one partial sum per column in global memory, and the last
/// CTA of a column group (a semaphore counts them) adds that group's partials, each of its
/// threads one partial after another. That tail is a chain of dependent L2 loads whose length
/// grows with the split (PyTorch: ctas_per_output / block.y partials per thread; apex: grid.y),
/// so a tall matrix costs far more than its bytes:
///     time = hbm_time(bytes) / 0.79 + 5.3 us + 0.225 us * partials_per_thread
/// (bytes: the matrix read once, plus apex's ReLU output read and input gradient written).
/// The three figures are fitted by least squares to the 17 (dtype, rows, cols) classes of
/// PyTorch's kernel in the H100 SXM traces of PyTorch 2.11 (validation/measurements/h100-sxm/
/// dlrm{,-amp,-fp32,-eager-amp-8192,-graph-*}.json.gz: bias gradients of 8192 and 65536 rows of
/// 128-1024 columns, fp16 and fp32; fsdp-llama3-8b-4layers.json.gz: the RMSNorm weight gradient,
/// bf16 16384 x 4096), geomean 5.4 %, worst -14 %: at 65536 x 128 fp16 the model gives 70 us
/// where the bytes alone take 5.5 us (measured 70.0-70.9). Calibration inputs for apex's kernel,
/// which has the same two passes, and for other GPUs (the chain is L2 latency, similar in time
/// on Volta through Hopper).
#include <algorithm>
#include <cmath>

#include "models/compute/roofline.hpp"

namespace stepsim::models {
namespace {

constexpr double kFirstPassEfficiency = 0.79;
constexpr Seconds kFixed = 5.3e-6;
constexpr Seconds kPerPartial = 0.225e-6;

double last_pow2(double n) { return std::exp2(std::floor(std::log2(n))); }

double threads_per_sm(const platforms::GpuModel& gpu) { return sm_limits(gpu.sm_version).warps * 32; }

/// Partials each thread of PyTorch's last CTA adds (0 when the rows are not split over CTAs):
/// setReduceConfig for a contiguous rows x cols input reduced over its rows. With one column
/// the reduction runs along the contiguous dimension (block.x over the rows, vectorized by 4).
double torch_partials_per_thread(double rows, double cols, const platforms::GpuModel& gpu) {
  constexpr double kMaxThreads = 512;  // max_reduce_threads
  const bool along_rows = cols == 1;
  const double vec = along_rows ? 1 : std::fmod(cols, 4) == 0 ? 4 : std::fmod(cols, 2) == 0 ? 2 : 1;
  double dim0 = along_rows ? rows : cols / vec;
  if (along_rows && dim0 > 128) dim0 /= 4;
  const double dim1 = along_rows ? 1 : rows;
  const double max_threads = kMaxThreads / vec;
  const auto capped_pow2 = [&](double d) { return d < max_threads ? last_pow2(d) : max_threads; };
  double width = std::min(capped_pow2(dim0), 32.0);
  const double height = std::min(capped_pow2(dim1), max_threads / width);
  width = std::min(capped_pow2(dim0), max_threads / height);

  double values_per_thread = along_rows ? std::ceil(rows / width) : rows;
  double outputs_per_cta = along_rows ? 1 : width;
  const bool rows_over_block_y = values_per_thread >= height * 16 || values_per_thread >= 256;
  if (rows_over_block_y)
    values_per_thread = std::ceil(values_per_thread / height);
  else
    outputs_per_cta *= height;
  const double grid_x = std::ceil((along_rows ? 1 : cols / vec) / outputs_per_cta);
  const double target_grid = gpu.sm_count * std::floor(threads_per_sm(gpu) / (width * height));
  if (!rows_over_block_y || values_per_thread < 256 || grid_x > target_grid) return 0;
  const double ctas_per_output = std::max(std::min(std::ceil(target_grid / grid_x), std::ceil(values_per_thread / 16)),
                                          std::ceil(values_per_thread / 256));
  if (ctas_per_output <= 1) return 0;
  return std::ceil(ctas_per_output / (along_rows ? width * height : height));
}

/// Partials apex's last CTA adds per thread: its grid.y (block 32 x 16 threads, 16 rows each
/// thread, 128 columns per CTA when cols is a multiple of 128, else 32; at most 4 CTAs per SM).
double apex_partials_per_thread(double rows, double cols, const platforms::GpuModel& gpu) {
  const double cols_per_cta = std::fmod(cols, 128) == 0 ? 128 : 32;
  const double grid_x = std::ceil(cols / cols_per_cta);
  const double grid_y = std::min(std::ceil(rows / 256), std::ceil(gpu.sm_count * 4 / grid_x));
  return grid_y > 1 ? grid_y : 0;
}

KernelCost split_reduction(Bytes bytes, double partials, const platforms::GpuModel& gpu) {
  KernelCost cost;
  cost.bytes = bytes;
  const Seconds stream = hbm_time(bytes, gpu) / kFirstPassEfficiency;
  const Seconds tail = kFixed + kPerPartial * partials;
  cost.time = stream + tail;
  cost.bound = stream >= tail ? "memory" : "latency";
  return cost;
}

const std::vector<KernelParam> kShape = {{"rows", "rows summed (the batch or token count)", std::nullopt, 1},
                                         {"cols", "columns, one sum each (the layer's output features)", std::nullopt, 1}};

class ColumnSum : public KernelModel {
 public:
  std::vector<KernelParam> params() const override { return kShape; }

  KernelCost cost(const KernelSpec& spec, const platforms::GpuModel& gpu) const override {
    const double rows = spec.param("rows"), cols = spec.param("cols");
    const Bytes bytes = (rows + 1) * cols * bytes_of(spec.dtype);
    return split_reduction(bytes, torch_partials_per_thread(rows, cols, gpu), gpu);
  }
};

class ApexBiasBackward : public KernelModel {
 public:
  std::vector<KernelParam> params() const override {
    std::vector<KernelParam> params = kShape;
    params.push_back({"relu", "1 = the ReLU's gradient too (reads the output, writes the input gradient)", 0, 0});
    return params;
  }

  KernelCost cost(const KernelSpec& spec, const platforms::GpuModel& gpu) const override {
    const double rows = spec.param("rows"), cols = spec.param("cols");
    const double passes = spec.param("relu") != 0 ? 3 : 1;
    const Bytes bytes = (passes * rows + 1) * cols * bytes_of(spec.dtype);
    return split_reduction(bytes, apex_partials_per_thread(rows, cols, gpu), gpu);
  }
};

}  // namespace

STEPSIM_REGISTER_KERNEL_MODEL(ColumnSum, "column_sum",
                              "sum of a matrix over its rows (PyTorch's reduce_kernel: bias and norm weight gradients)")
STEPSIM_REGISTER_KERNEL_MODEL(ApexBiasBackward, "apex_bias_backward",
                              "NVIDIA apex MLP's bias gradient, with the ReLU gradient when relu = 1")

}  // namespace stepsim::models
