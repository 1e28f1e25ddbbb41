#include "validation/harness/device_support.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "platforms/config_error.hpp"
#include "validation/harness/cuda_check.hpp"
#include "validation/harness/run_info.hpp"
#include "validation/harness/synthetic_field.hpp"

namespace stepsim::harness {

DeviceBuffer::DeviceBuffer(int device, std::size_t bytes) : device_(device), bytes_(bytes) {
  CUDA_CHECK(cudaSetDevice(device));
  cudaError_t status = cudaMalloc(&data_, bytes == 0 ? 1 : bytes);
  if (status != cudaSuccess) {
    data_ = nullptr;
    throw std::runtime_error("cudaMalloc of " + std::to_string(bytes) + " bytes on GPU " + std::to_string(device) +
                             " failed: " + cudaGetErrorString(status) + " (lower the sizes, e.g. --max)");
  }
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : device_(other.device_), data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    device_ = other.device_;
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::release() {
  if (data_ == nullptr) return;
  // Errors here can only repeat an earlier failure that is already being reported.
  (void)cudaSetDevice(device_);
  (void)cudaFree(data_);
  data_ = nullptr;
}

PinnedBuffer::PinnedBuffer(std::size_t bytes) { CUDA_CHECK(cudaHostAlloc(&data_, bytes, cudaHostAllocPortable)); }

PinnedBuffer::~PinnedBuffer() { (void)cudaFreeHost(data_); }

Stream::Stream(int device) : device_(device) {
  CUDA_CHECK(cudaSetDevice(device));
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

Stream::~Stream() {
  (void)cudaSetDevice(device_);
  (void)cudaStreamDestroy(stream_);
}

Event::Event(int device) : device_(device) {
  CUDA_CHECK(cudaSetDevice(device));
  CUDA_CHECK(cudaEventCreate(&event_));
}

Event::~Event() {
  (void)cudaSetDevice(device_);
  (void)cudaEventDestroy(event_);
}

namespace {

__device__ inline void store_value(float* out, std::size_t i, float v) { out[i] = v; }
__device__ inline void store_value(__half* out, std::size_t i, float v) { out[i] = __float2half_rn(v); }
__device__ inline void store_value(__nv_bfloat16* out, std::size_t i, float v) { out[i] = __float2bfloat16_rn(v); }

template <typename T>
__global__ void fill_uniform_kernel(T* out, std::size_t count, uint64_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    store_value(out, i, hash_uniform(seed, i));
}

std::string read_file_text(const char* path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace

void fill_uniform(void* data, std::size_t count, FillType type, uint64_t seed, const Stream& on) {
  if (count == 0) return;
  CUDA_CHECK(cudaSetDevice(on.device()));  // a kernel must go to a stream of the current device
  const cudaStream_t stream = on.get();
  const unsigned threads = 256;
  const std::size_t wanted = (count + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(wanted < 65536 ? wanted : 65536);  // grid-stride beyond
  switch (type) {
    case FillType::fp32: fill_uniform_kernel<<<blocks, threads, 0, stream>>>(static_cast<float*>(data), count, seed); break;
    case FillType::fp16: fill_uniform_kernel<<<blocks, threads, 0, stream>>>(static_cast<__half*>(data), count, seed); break;
    case FillType::bf16:
      fill_uniform_kernel<<<blocks, threads, 0, stream>>>(static_cast<__nv_bfloat16*>(data), count, seed);
      break;
  }
  CUDA_CHECK_LAUNCH();
}

void device_memory(int device, std::size_t& free_bytes, std::size_t& total_bytes) {
  CUDA_CHECK(cudaSetDevice(device));
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
}

int usable_gpus(int wanted, const std::string& option) {
  int visible = 0;
  CUDA_CHECK(cudaGetDeviceCount(&visible));
  if (wanted > visible)
    throw ConfigError(option, "asks for " + std::to_string(wanted) + " GPUs but " + std::to_string(visible) + " are visible",
                      "lower " + option + " (nvidia-smi -L lists the GPUs; check CUDA_VISIBLE_DEVICES)");
  return wanted > 0 ? wanted : visible;
}

void add_note(FileHeader& header, const std::string& note) {
  header.notes += (header.notes.empty() ? "" : "; ") + note;
}

void describe_system(const std::vector<int>& devices, FileHeader& header) {
  std::string names;
  for (int device : devices) {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    if (device == devices.front()) header.gpu = prop.name;
    if (prop.name != header.gpu) names += " GPU " + std::to_string(device) + " is " + prop.name + ";";
  }
  if (!names.empty()) add_note(header, "GPUs differ:" + names.substr(0, names.size() - 1));
  header.gpus = static_cast<int>(devices.size());
  int runtime = 0, driver_api = 0, nccl = 0, cublas_major = 0, cublas_minor = 0, cublas_patch = 0;
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  CUDA_CHECK(cudaDriverGetVersion(&driver_api));
  NCCL_CHECK(ncclGetVersion(&nccl));
  CUBLAS_CHECK(cublasGetProperty(MAJOR_VERSION, &cublas_major));
  CUBLAS_CHECK(cublasGetProperty(MINOR_VERSION, &cublas_minor));
  CUBLAS_CHECK(cublasGetProperty(PATCH_LEVEL, &cublas_patch));
  header.software = {{"cuda", format_cuda_version(runtime)}, {"cuda_driver", format_cuda_version(driver_api)}};
  const std::string driver = parse_driver_version(read_file_text("/proc/driver/nvidia/version"));
  if (!driver.empty()) header.software.emplace_back("driver", driver);
  header.software.emplace_back("nccl", format_nccl_version(nccl));
  header.software.emplace_back("cublas", std::to_string(cublas_major) + "." + std::to_string(cublas_minor) + "." +
                                             std::to_string(cublas_patch));
}

}  // namespace stepsim::harness
