#include "models/memory/memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace stepsim::models {

const char* to_string(MemoryTerm term) {
  switch (term) {
    case MemoryTerm::parameters:
      return "parameters";
    case MemoryTerm::gradients:
      return "gradients";
    case MemoryTerm::optimizer:
      return "optimizer";
    case MemoryTerm::activations:
      return "activations";
    case MemoryTerm::buffers:
      return "buffers";
    case MemoryTerm::other:
      return "other";
  }
  return "?";
}

Bytes MemoryTerms::total() const {
  Bytes sum = 0;
  for (Bytes b : bytes) sum += b;
  return sum;
}

MemoryTerms& MemoryTerms::operator+=(const MemoryTerms& other) {
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] += other.bytes[i];
  return *this;
}

std::string Moment::text() const {
  std::string out = what;
  if (chunk >= 0) out += fmt::format(" of chunk {}", chunk);
  if (microbatch >= 0) out += fmt::format("{} micro-batch {}", chunk >= 0 ? "," : "", microbatch);
  return out;
}

void MemoryWalk::peak_at(const Moment& moment, const MemoryTerms& momentary) {
  MemoryTerms now = live_;
  now += momentary;
  const Bytes total = now.total();
  window_peak_ = std::max(window_peak_, total);
  if (total <= peak_bytes_) return;
  peak_ = now;
  peak_bytes_ = total;
  peak_moment_ = moment;
}

namespace {

// NCCL's connection buffers per channel and peer, one per protocol (src/init.cc at NCCL 2.29:
// DEFAULT_LL_BUFFSIZE = NCCL_LL_LINES_PER_THREAD 8 x NCCL_LL_MAX_NTHREADS 512 x NCCL_STEPS 8 x
// 16 B, DEFAULT_LL128_BUFFSIZE = NCCL_LL128_ELEMS_PER_THREAD 120 x NCCL_LL128_MAX_NTHREADS 640 x
// NCCL_STEPS 8 x 8 B, DEFAULT_BUFFSIZE 4 MiB for Simple).
constexpr Bytes kNcclBuffersPerConnection = 8.0 * 512 * 8 * 16 + 120.0 * 640 * 8 * 8 + 4194304.0;
// A communicator's connections on one rank: its ring's receive side on every channel and its
// tree's (a parent and up to three children share each channel's buffers in NCCL's tree:
// counted as two more), on the graph's channels: 16 on NVSwitch systems of Hopper and later
// (NCCL's NVLS/ring graphs), 8 before. docs/memory.md.
constexpr double kConnectionsPerChannel = 3;

// The footprint of a CUDA process outside PyTorch's caching allocator: the driver context with
// lazily loaded kernel images, cuBLAS and cuDNN handles (docs/memory.md: an assumption, not a
// measurement of ours; `nvidia-smi` shows it as the difference to torch.cuda.memory_reserved).
constexpr Bytes kCudaContext = 512.0 * 1024 * 1024;

// The caching allocator's reserve over its live blocks at the peak: docs/memory.md has the fit.
constexpr double kAllocatorOverhead = 0.157;

}  // namespace

RuntimeMemory runtime_memory(const platforms::GpuModel& gpu, int communicators) {
  const int channels = gpu.arch >= platforms::GpuArch::hopper ? 16 : 8;
  RuntimeMemory r;
  r.allocator_overhead = kAllocatorOverhead;
  r.cuda_context = kCudaContext;
  r.nccl_buffers = std::max(0, communicators) * channels * kConnectionsPerChannel * kNcclBuffersPerConnection;
  return r;
}

const RankMemory& MemoryReport::worst() const {
  if (groups.empty()) throw std::logic_error("memory report without groups");
  const RankMemory* worst = &groups.front();
  for (const RankMemory& g : groups)
    if (g.peak > worst->peak) worst = &g;
  return *worst;
}

std::string does_not_fit(const MemoryReport& report) {
  if (report.fits()) return "";
  const RankMemory* worst = &report.groups.front();
  for (const RankMemory& g : report.groups)
    if (g.required() > worst->required()) worst = &g;
  std::vector<MemoryTerm> terms(kMemoryTerms.begin(), kMemoryTerms.end());
  std::stable_sort(terms.begin(), terms.end(),
                   [&](MemoryTerm a, MemoryTerm b) { return worst->at_peak[a] > worst->at_peak[b]; });
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  std::string largest;
  for (std::size_t i = 0; i < 3; ++i)
    largest += fmt::format("{}{} {:.1f} GiB", i ? ", " : "", to_string(terms[i]), worst->at_peak[terms[i]] / kGiB);
  return fmt::format(
      "needs {:.1f} GiB per GPU without the allocator's cache ({}, at the {}) but gpu.memory is "
      "{:.1f} GiB, {:.1f} GiB short; largest terms: {}",
      worst->required() / kGiB, worst->label, worst->moment, report.capacity / kGiB,
      (worst->required() - report.capacity) / kGiB, largest);
}

bool MemoryReport::fits() const {
  for (const RankMemory& g : groups)
    if (g.required() > capacity) return false;
  return true;
}

RankMemory finish(std::string label, std::vector<int> ranks, const MemoryWalk& walk, const RuntimeMemory& runtime) {
  RankMemory r;
  r.label = std::move(label);
  r.ranks = std::move(ranks);
  r.at_peak = walk.peak();
  r.moment = walk.peak_moment().text();
  r.allocated = r.at_peak.total();
  r.reserved = r.allocated * (1 + runtime.allocator_overhead);
  r.outside = runtime.cuda_context + runtime.nccl_buffers;
  r.peak = r.reserved + r.outside;
  r.at_peak[MemoryTerm::other] += r.peak - r.allocated;
  return r;
}

}  // namespace stepsim::models
