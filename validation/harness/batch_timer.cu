#include "validation/harness/batch_timer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <thread>

#include "validation/harness/cuda_check.hpp"

namespace stepsim::harness {
namespace {

// Polls instead of cudaEventSynchronize so that a hung NCCL call becomes an error, not a hang.
void wait_event(const Event& event, int device, double timeout_s) {
  CUDA_CHECK(cudaSetDevice(device));
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    cudaError_t status = cudaEventQuery(event.get());
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) CUDA_CHECK(status);
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout_s)
      throw std::runtime_error("GPU " + std::to_string(device) + " did not finish within " + std::to_string(timeout_s) +
                               " s (a hung NCCL call? rerun with NCCL_DEBUG=INFO)");
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

struct EventPair {
  std::unique_ptr<Event> start, stop;
};

// One batch of `calls` calls; returns the longest start->stop interval over the streams (s).
double timed_batch(const std::vector<const Stream*>& streams, std::vector<EventPair>& events,
                   const std::function<void()>& launch, int calls, double timeout_s) {
  for (std::size_t s = 0; s < streams.size(); ++s) {
    CUDA_CHECK(cudaSetDevice(streams[s]->device()));
    CUDA_CHECK(cudaEventRecord(events[s].start->get(), streams[s]->get()));
  }
  for (int i = 0; i < calls; ++i) launch();
  for (std::size_t s = 0; s < streams.size(); ++s) {
    CUDA_CHECK(cudaSetDevice(streams[s]->device()));
    CUDA_CHECK(cudaEventRecord(events[s].stop->get(), streams[s]->get()));
  }
  double longest = 0;
  for (std::size_t s = 0; s < streams.size(); ++s) {
    wait_event(*events[s].stop, streams[s]->device(), timeout_s);
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, events[s].start->get(), events[s].stop->get()));
    longest = std::max(longest, static_cast<double>(ms) * 1e-3);
  }
  return longest;
}

}  // namespace

void wait_streams(const std::vector<const Stream*>& streams, double timeout_s) {
  for (const Stream* stream : streams) {
    Event done(stream->device());
    CUDA_CHECK(cudaEventRecord(done.get(), stream->get()));
    wait_event(done, stream->device(), timeout_s);
  }
}

std::vector<double> time_calls(const std::vector<const Stream*>& streams, const std::function<void()>& launch,
                               const TimingPlan& plan) {
  std::vector<EventPair> events;
  for (const Stream* stream : streams)
    events.push_back({std::make_unique<Event>(stream->device()), std::make_unique<Event>(stream->device())});
  // Single-stream callers enqueue kernels, which must go to a stream of the current device.
  CUDA_CHECK(cudaSetDevice(streams.front()->device()));
  for (int i = 0; i < plan.warmup; ++i) launch();
  wait_streams(streams, plan.timeout_s);
  const double probe = timed_batch(streams, events, launch, 1, plan.timeout_s);
  const double wanted = probe > 0 ? std::ceil(plan.target_s / probe) : plan.max_batch;
  const int batch = static_cast<int>(std::clamp(wanted, 1.0, static_cast<double>(plan.max_batch)));
  std::vector<double> samples;
  for (int r = 0; r < plan.repetitions; ++r)
    samples.push_back(timed_batch(streams, events, launch, batch, plan.timeout_s) / batch);
  return samples;
}

}  // namespace stepsim::harness
