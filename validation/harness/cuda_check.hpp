#pragma once
/// @file Error checks for every CUDA runtime, NCCL and cuBLAS call: a failure throws
/// std::runtime_error naming the call, where it was made and the library's own error text, so the
/// harness stops with a clear message and a nonzero exit code instead of measuring garbage.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <stdexcept>
#include <string>

namespace stepsim::harness {

/// @brief Throws for a failed CUDA runtime call (with a hint for the usual set-up problems).
[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  std::string message = std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " +
                        cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")";
  if (status == cudaErrorInsufficientDriver)
    message += " — no NVIDIA driver is loaded, or it is older than the CUDA runtime this harness was built with; "
               "build with the CUDA toolkit that matches the driver (nvidia-smi shows the driver's CUDA version)";
  if (status == cudaErrorNoDevice) message += " — no GPU is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES)";
  if (status == cudaErrorNoKernelImageForDevice)
    message += " — this GPU's architecture is not in the build (rebuild with its sm_XX added, see validation/harness/build)";
  throw std::runtime_error(message);
}

/// @brief Throws for a failed NCCL call.
[[noreturn]] inline void throw_nccl_error(ncclResult_t status, const char* call, const char* file, int line) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: NCCL error " +
                           std::to_string(static_cast<int>(status)) + " (" + ncclGetErrorString(status) +
                           "); rerun with NCCL_DEBUG=WARN for NCCL's own explanation");
}

/// @brief Throws for a failed cuBLAS call.
[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " +
                           cublasGetStatusName(status) + " (" + cublasGetStatusString(status) + ")");
}

}  // namespace stepsim::harness

#define CUDA_CHECK(call)                                                                           \
  do {                                                                                             \
    cudaError_t status_ = (call);                                                                  \
    if (status_ != cudaSuccess) ::stepsim::harness::throw_cuda_error(status_, #call, __FILE__, __LINE__); \
  } while (0)

#define NCCL_CHECK(call)                                                                           \
  do {                                                                                             \
    ncclResult_t status_ = (call);                                                                 \
    if (status_ != ncclSuccess) ::stepsim::harness::throw_nccl_error(status_, #call, __FILE__, __LINE__); \
  } while (0)

#define CUBLAS_CHECK(call)                                                                         \
  do {                                                                                             \
    cublasStatus_t status_ = (call);                                                               \
    if (status_ != CUBLAS_STATUS_SUCCESS) ::stepsim::harness::throw_cublas_error(status_, #call, __FILE__, __LINE__); \
  } while (0)

/// Checks a kernel launch (configuration errors surface at once; faults at the next sync).
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
