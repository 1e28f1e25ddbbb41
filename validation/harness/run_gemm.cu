// stepsim-harness gemm: cuBLAS GEMMs (cublasGemmEx, or cublasGemmStridedBatchedEx when batch > 1)
// with fp32 accumulation: fp32 (CUBLAS_COMPUTE_32F, no TF32), tf32 (CUBLAS_COMPUTE_32F_FAST_TF32 on
// fp32 data), fp16 and bf16 (16-bit A, B and C, as PyTorch runs them). Inputs are deterministic
// (fill_uniform with the seed); each shape's result is checked at a few elements against a host
// reference after it is timed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "validation/harness/codec_kernels.hpp"
#include "validation/harness/cuda_check.hpp"
#include "validation/harness/gemm_reference.hpp"
#include "validation/harness/subcommands.hpp"
#include "validation/harness/synthetic_field.hpp"

namespace stepsim::harness {
namespace {

struct DtypeSetup {
  cudaDataType_t data;
  cublasComputeType_t compute;
  FillType fill;
  std::size_t bytes;
};

DtypeSetup dtype_setup(const std::string& dtype) {
  if (dtype == "fp32") return {CUDA_R_32F, CUBLAS_COMPUTE_32F, FillType::fp32, 4};
  if (dtype == "tf32") return {CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, FillType::fp32, 4};
  if (dtype == "fp16") return {CUDA_R_16F, CUBLAS_COMPUTE_32F, FillType::fp16, 2};
  if (dtype == "bf16") return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, FillType::bf16, 2};
  throw std::logic_error("run_gemm: unknown dtype " + dtype);
}

class CublasHandle {
 public:
  CublasHandle(int device, cudaStream_t stream) {
    CUDA_CHECK(cudaSetDevice(device));
    CUBLAS_CHECK(cublasCreate(&handle_));
    CUBLAS_CHECK(cublasSetStream(handle_, stream));
  }
  ~CublasHandle() { (void)cublasDestroy(handle_); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

void launch_gemm(cublasHandle_t handle, const GemmShape& shape, const DtypeSetup& setup, const void* a, const void* b,
                 void* c) {
  const CublasGemmCall call = cublas_call(shape);
  const float alpha = 1.0f, beta = 0.0f;  // scale type is fp32 for every compute type used here
  const cublasOperation_t op_first = call.transpose_first ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = call.transpose_second ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (shape.batch == 1) {
    CUBLAS_CHECK(cublasGemmEx(handle, op_first, op_second, static_cast<int>(call.m), static_cast<int>(call.n),
                              static_cast<int>(call.k), &alpha, b, setup.data, static_cast<int>(call.ld_first), a,
                              setup.data, static_cast<int>(call.ld_second), &beta, c, setup.data,
                              static_cast<int>(call.ld_c), setup.compute, CUBLAS_GEMM_DEFAULT));
  } else {
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        handle, op_first, op_second, static_cast<int>(call.m), static_cast<int>(call.n), static_cast<int>(call.k), &alpha,
        b, setup.data, static_cast<int>(call.ld_first), call.stride_first, a, setup.data, static_cast<int>(call.ld_second),
        call.stride_second, &beta, c, setup.data, static_cast<int>(call.ld_c), call.stride_c,
        static_cast<int>(shape.batch), setup.compute, CUBLAS_GEMM_DEFAULT));
  }
}

// Compares a few output elements (corners and hashed positions of the first and last batch member)
// with the host reference; throws on a mismatch.
void check_result(const GemmShape& shape, const std::string& dtype, const DtypeSetup& setup, const DeviceBuffer& c,
                  uint64_t seed_a, uint64_t seed_b, const Stream& stream) {
  wait_streams({&stream}, 300);  // the copies below run on the legacy stream, which does not wait for ours
  CUDA_CHECK(cudaSetDevice(c.device()));
  for (int64_t member : {int64_t{0}, shape.batch - 1}) {
    std::vector<std::pair<int64_t, int64_t>> points = {
        {0, 0}, {shape.m - 1, shape.n - 1}, {0, shape.n - 1}, {shape.m - 1, 0}};
    for (uint64_t i = 0; i < 4; ++i) {
      const uint64_t h = splitmix64(seed_a * 31 + i);
      points.emplace_back(static_cast<int64_t>(h % static_cast<uint64_t>(shape.m)),
                          static_cast<int64_t>((h >> 32) % static_cast<uint64_t>(shape.n)));
    }
    for (const auto& [row, col] : points) {
      const int64_t offset = gemm_output_offset(shape, member, row, col);
      uint32_t raw = 0;
      CUDA_CHECK(cudaMemcpy(&raw, c.as<char>() + offset * static_cast<int64_t>(setup.bytes), setup.bytes, cudaMemcpyDeviceToHost));
      const float got = setup.bytes == 4 ? codec::bits_float(raw)
                        : dtype == "fp16" ? codec::fp16_to_float(static_cast<uint16_t>(raw))
                                          : codec::bf16_to_float(static_cast<uint16_t>(raw));
      const GemmReference ref = gemm_reference_element(shape, dtype, seed_a, seed_b, member, row, col);
      if (!(std::fabs(got - ref.value) <= gemm_tolerance(dtype, ref)))
        throw std::runtime_error("gemm check failed for " + shape.label + " " + dtype + ": C[" + std::to_string(member) + "][" +
                                 std::to_string(row) + "][" + std::to_string(col) + "] = " + std::to_string(got) +
                                 ", expected " + std::to_string(ref.value) + " (tolerance " +
                                 std::to_string(gemm_tolerance(dtype, ref)) + ")");
    }
  }
}

}  // namespace

void run_gemm(const GemmOptions& options, Recording& recording) {
  const int device = options.device;
  usable_gpus(device + 1, "--device");
  describe_system({device}, recording.header);
  Stream stream(device);
  CublasHandle handle(device, stream.get());

  // One allocation per operand, sized for the largest shape at 4 bytes per element.
  std::size_t a_elems = 0, b_elems = 0, c_elems = 0;
  for (const GemmShape& s : options.shapes) {
    a_elems = std::max<std::size_t>(a_elems, static_cast<std::size_t>(s.m * s.k * s.batch));
    b_elems = std::max<std::size_t>(b_elems, static_cast<std::size_t>(s.k * s.n * s.batch));
    c_elems = std::max<std::size_t>(c_elems, static_cast<std::size_t>(s.m * s.n * s.batch));
  }
  DeviceBuffer a(device, a_elems * 4), b(device, b_elems * 4), c(device, c_elems * 4);
  const uint64_t seed_a = options.common.seed, seed_b = options.common.seed + 1;
  const TimingPlan plan = timing_plan(options.common);

  for (const std::string& dtype : options.dtypes) {
    const DtypeSetup setup = dtype_setup(dtype);
    fill_uniform(a.get(), a_elems, setup.fill, seed_a, stream);
    fill_uniform(b.get(), b_elems, setup.fill, seed_b, stream);
    for (const GemmShape& shape : options.shapes) {
      const SampleStats stats = summarize(time_calls({&stream}, [&] { launch_gemm(handle.get(), shape, setup, a.get(), b.get(), c.get()); }, plan));
      check_result(shape, dtype, setup, c, seed_a, seed_b, stream);
      MeasurementRecord record("gemm");
      record.integer("m", shape.m).integer("n", shape.n).integer("k", shape.k).text("dtype", dtype);
      record.integer("batch", shape.batch).text("layout", shape.layout).timing(stats);
      recording.records.push_back(record);
      std::fprintf(stderr, "gemm %-4s %-24s m=%-6lld n=%-6lld k=%-6lld batch=%-4lld %s  %10.2f us  %8.1f TFLOP/s\n",
                   dtype.c_str(), shape.label.c_str(), static_cast<long long>(shape.m), static_cast<long long>(shape.n),
                   static_cast<long long>(shape.k), static_cast<long long>(shape.batch), shape.layout.c_str(),
                   stats.mean_s * 1e6, gemm_flops(shape) / stats.mean_s / 1e12);
    }
  }
}

}  // namespace stepsim::harness
