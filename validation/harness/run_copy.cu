// stepsim-harness copy: cudaMemcpyAsync bandwidth on each GPU (device-to-device within the GPU,
// pinned host to device, device to pinned host) and between every ordered GPU pair
// (cudaMemcpyPeerAsync on the source GPU's stream, peer access enabled where the GPUs allow it).
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "validation/harness/cli_args.hpp"
#include "validation/harness/cuda_check.hpp"
#include "validation/harness/subcommands.hpp"

namespace stepsim::harness {
namespace {

// Enables direct peer access between every pair that supports it; returns the pairs that do not
// (their copies are staged through host memory by the driver).
std::vector<std::string> enable_peer_access(int gpus) {
  std::vector<std::string> staged;
  for (int src = 0; src < gpus; ++src) {
    for (int dst = 0; dst < gpus; ++dst) {
      if (src == dst) continue;
      int can = 0;
      CUDA_CHECK(cudaDeviceCanAccessPeer(&can, src, dst));
      if (!can) {
        staged.push_back(std::to_string(src) + "->" + std::to_string(dst));
        continue;
      }
      CUDA_CHECK(cudaSetDevice(src));
      cudaError_t status = cudaDeviceEnablePeerAccess(dst, 0);
      if (status == cudaErrorPeerAccessAlreadyEnabled)
        (void)cudaGetLastError();  // clear it so the next launch check does not report it
      else
        CUDA_CHECK(status);
    }
  }
  return staged;
}

}  // namespace

void run_copy(const CopyOptions& options, Recording& recording) {
  const int gpus = usable_gpus(options.gpus, "--gpus");
  std::vector<int> devices;
  for (int d = 0; d < gpus; ++d) devices.push_back(d);
  describe_system(devices, recording.header);
  const std::size_t max_bytes = options.sizes.back();

  std::vector<DeviceBuffer> src, dst;
  std::vector<std::unique_ptr<Stream>> streams;
  for (int d : devices) {
    src.emplace_back(d, max_bytes);
    dst.emplace_back(d, max_bytes);
    streams.push_back(std::make_unique<Stream>(d));
    fill_uniform(src.back().get(), max_bytes / sizeof(float), FillType::fp32, options.common.seed, *streams.back());
  }
  PinnedBuffer host(max_bytes);
  std::memset(host.get(), 1, max_bytes);  // touch every page before timing

  bool p2p = false;
  for (const std::string& direction : options.directions) p2p = p2p || direction == "p2p";
  if (p2p && gpus < 2) {
    std::fprintf(stderr, "copy: p2p skipped: needs at least 2 GPUs\n");
    add_note(recording.header, "p2p skipped: 1 GPU");
  }
  if (p2p && gpus > 1) {
    const std::vector<std::string> staged = enable_peer_access(gpus);
    if (!staged.empty()) {
      std::string pairs;
      for (const std::string& pair : staged) pairs += (pairs.empty() ? "" : " ") + pair;
      add_note(recording.header, "no peer access (copies staged by the driver): " + pairs);
    }
  }

  const TimingPlan plan = timing_plan(options.common);
  auto measure = [&](const std::string& direction, int from, int to, int stream_device, uint64_t size,
                     const std::function<void(cudaStream_t)>& copy) {
    const Stream& stream = *streams[stream_device];
    const SampleStats stats = summarize(time_calls({&stream}, [&] { copy(stream.get()); }, plan));
    MeasurementRecord record("copy");
    record.text("direction", direction).integer("size_bytes", static_cast<int64_t>(size));
    if (from >= 0) record.integer("src", from);
    if (to >= 0) record.integer("dst", to);
    recording.records.push_back(record.timing(stats));
    std::fprintf(stderr, "copy %s %d->%d %10s  %10.2f us  %8.2f GB/s\n", direction.c_str(), from, to,
                 format_bytes(size).c_str(), stats.mean_s * 1e6, static_cast<double>(size) / stats.mean_s / 1e9);
  };

  for (const std::string& direction : options.directions) {
    for (int g : (direction == "p2p" ? std::vector<int>{} : devices)) {
      for (uint64_t size : options.sizes) {
        if (direction == "d2d")
          measure(direction, g, g, g, size, [&](cudaStream_t s) {
            CUDA_CHECK(cudaMemcpyAsync(dst[g].get(), src[g].get(), size, cudaMemcpyDeviceToDevice, s));
          });
        if (direction == "h2d")
          measure(direction, -1, g, g, size, [&](cudaStream_t s) {
            CUDA_CHECK(cudaMemcpyAsync(dst[g].get(), host.get(), size, cudaMemcpyHostToDevice, s));
          });
        if (direction == "d2h")
          measure(direction, g, -1, g, size, [&](cudaStream_t s) {
            CUDA_CHECK(cudaMemcpyAsync(host.get(), src[g].get(), size, cudaMemcpyDeviceToHost, s));
          });
      }
    }
    if (direction != "p2p" || gpus < 2) continue;
    for (int from : devices)
      for (int to : devices)
        if (from != to)
          for (uint64_t size : options.sizes)
            measure(direction, from, to, from, size, [&](cudaStream_t s) {
              CUDA_CHECK(cudaMemcpyPeerAsync(dst[to].get(), to, src[from].get(), from, size, s));
            });
  }
}

}  // namespace stepsim::harness
