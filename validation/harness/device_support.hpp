#pragma once
/// @file GPU resources with owners (device memory, pinned host memory, streams, events), the
/// deterministic fill kernels, and the `system` block of a measurement file.
///
/// Contract: constructors throw (via CUDA_CHECK) when CUDA refuses; destructors never throw and
/// restore nothing but their own resource. Every object remembers its device and makes it current
/// before touching the resource, so callers may switch devices freely.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "validation/harness/measurement_writer.hpp"

namespace stepsim::harness {

/// @brief cudaMalloc'd memory on one device.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(int device, std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return data_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }
  std::size_t bytes() const { return bytes_; }
  int device() const { return device_; }

 private:
  void release();
  int device_ = 0;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// @brief Page-locked host memory usable by every device (cudaHostAllocPortable).
class PinnedBuffer {
 public:
  explicit PinnedBuffer(std::size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* get() const { return data_; }

 private:
  void* data_ = nullptr;
};

/// @brief A non-blocking stream on one device.
class Stream {
 public:
  explicit Stream(int device);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
};

/// @brief A timing event on one device.
class Event {
 public:
  explicit Event(int device);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  int device_;
  cudaEvent_t event_ = nullptr;
};

/// @brief Element types the fill kernel writes.
enum class FillType { fp32, fp16, bf16 };

/// @brief Writes element i = hash_uniform(seed, i) (in [-1, 1), rounded to `type`) for i < count,
/// on `stream` (whose device becomes current).
void fill_uniform(void* data, std::size_t count, FillType type, uint64_t seed, const Stream& stream);

/// @brief Free and total memory of `device` in bytes.
void device_memory(int device, std::size_t& free_bytes, std::size_t& total_bytes);

/// @brief Number of visible GPUs; ConfigError naming `option` when `wanted` (0 = all) exceeds it.
int usable_gpus(int wanted, const std::string& option);

/// @brief Fills gpu, gpus and software of `header` for a run on `devices`; a note goes to
/// `header.notes` when the devices are not all the same model.
void describe_system(const std::vector<int>& devices, FileHeader& header);

/// @brief Appends `note` to the header's notes ("; " separated).
void add_note(FileHeader& header, const std::string& note);

}  // namespace stepsim::harness
