#pragma once
/// @file Per-GPU memory: the terms a training iteration's device memory is made of, a walk that
/// follows one rank's allocations through its iteration and keeps the peak, and the costs that
/// sit outside PyTorch's caching allocator (docs/memory.md has every formula and its source).
///
/// Contract: bytes are doubles (units.hpp). A walk holds live bytes per term; `allocate` and
/// `release` move them, `peak_at` compares the live bytes plus a momentary extra (a kernel's
/// workspace, a buffer that exists only inside one op) with the peak so far and keeps the
/// larger, with the term breakdown and the moment's name. The first moment of a tie wins, so
/// the same walk gives the same report bit for bit.
#include <array>
#include <string>
#include <vector>

#include "platforms/platform.hpp"

namespace stepsim::models {

/// @brief What device memory holds. `buffers`: unsharded parameters and gradients in flight,
/// communication and loss buffers; `other`: what the caching allocator reserves beyond its live
/// blocks (fragmentation) and what lives outside it (CUDA context, NCCL's buffers).
enum class MemoryTerm : std::uint8_t { parameters, gradients, optimizer, activations, buffers, other };
inline constexpr std::array<MemoryTerm, 6> kMemoryTerms = {MemoryTerm::parameters, MemoryTerm::gradients,
                                                           MemoryTerm::optimizer,  MemoryTerm::activations,
                                                           MemoryTerm::buffers,    MemoryTerm::other};
const char* to_string(MemoryTerm term);

/// @brief Bytes per term.
struct MemoryTerms {
  std::array<Bytes, kMemoryTerms.size()> bytes{};
  Bytes& operator[](MemoryTerm term) { return bytes[static_cast<std::size_t>(term)]; }
  Bytes operator[](MemoryTerm term) const { return bytes[static_cast<std::size_t>(term)]; }
  Bytes total() const;
  MemoryTerms& operator+=(const MemoryTerms& other);
};

/// @brief A point of an iteration: what runs (a static text), and for which pipeline chunk and
/// micro-batch (-1: none); formatted only for the peak's report.
struct Moment {
  const char* what = "";
  int chunk = -1;
  int microbatch = -1;
  std::string text() const;
};

/// @brief One rank's allocations over its iteration, in program order.
class MemoryWalk {
 public:
  void allocate(MemoryTerm term, Bytes bytes) { live_[term] += bytes; }
  void release(MemoryTerm term, Bytes bytes) { live_[term] -= bytes; }
  /// @brief A point of the iteration: live bytes plus `momentary` (gone right after) against
  /// the peak so far.
  void peak_at(const Moment& moment, const MemoryTerms& momentary = {});
  const MemoryTerms& live() const { return live_; }
  const MemoryTerms& peak() const { return peak_; }
  Bytes peak_bytes() const { return peak_bytes_; }
  const Moment& peak_moment() const { return peak_moment_; }
  /// @brief Starts a window (an action of the iteration) whose own peak `window_peak` reports.
  void open_window() { window_peak_ = live_.total(); }
  Bytes window_peak() const { return window_peak_; }

 private:
  MemoryTerms live_, peak_;
  Bytes peak_bytes_ = -1;
  Moment peak_moment_;
  Bytes window_peak_ = 0;
};

/// @brief Costs outside the iteration's tensors, added to every rank's peak.
struct RuntimeMemory {
  /// PyTorch's caching allocator reserves whole segments (2 MiB granules for blocks over 1 MiB,
  /// cached after use and split for smaller requests): reserved = allocated x (1 + this).
  double allocator_overhead = 0;
  Bytes cuda_context = 0;  ///< driver context, kernel images, cuBLAS handles
  Bytes nccl_buffers = 0;  ///< every communicator's connection buffers
};

/// @brief The runtime costs of a job whose ranks each belong to `communicators` NCCL
/// communicators on `gpu` (docs/memory.md: the context, NCCL's per-channel buffers and the
/// allocator factor, with their sources).
RuntimeMemory runtime_memory(const platforms::GpuModel& gpu, int communicators);

/// @brief One rank's (or one pipeline stage's ranks') peak.
struct RankMemory {
  std::string label;       ///< e.g. "stage 3" or "every rank"
  std::vector<int> ranks;  ///< the ranks it stands for
  MemoryTerms at_peak;     ///< the walk's terms at its peak, `other` filled by `finish`
  Bytes allocated = 0;     ///< the caching allocator's peak of live blocks (torch max_memory_allocated)
  Bytes reserved = 0;      ///< what it reserves at that peak (torch max_memory_reserved)
  Bytes outside = 0;       ///< what lives outside the allocator (context, NCCL)
  Bytes peak = 0;          ///< reserved + outside: the device memory the rank takes
  std::string moment;      ///< where in the iteration the peak falls
  /// Per action of the rank's iteration (a pipeline chunk's forward or backward, in program
  /// order): the allocated bytes at its peak and after it, and the index of its last op in the
  /// rank's program (filled by the generator), for the timeline's memory track.
  std::vector<Bytes> action_peak, action_after;
  std::vector<int> action_last_op;
  /// @brief What the rank cannot run without: its live blocks and what lives outside them. The
  /// allocator's reserve above that is given back (cache flushes and retries) when memory is short.
  Bytes required() const { return allocated + outside; }
};

/// @brief Every rank's peak: `per_rank[r]` indexes `ranks`.
struct MemoryReport {
  std::vector<RankMemory> groups;
  std::vector<int> group_of_rank;
  std::vector<std::string> notes;  ///< the assumptions behind the terms
  Bytes capacity = 0;              ///< gpu.memory
  /// @brief The group with the largest peak (the first on a tie).
  const RankMemory& worst() const;
  /// @brief Whether every group's required bytes fit `capacity`.
  bool fits() const;
  /// @brief Fits, but the allocator's usual reserve does not: it will flush its cache and retry.
  bool tight() const { return fits() && worst().peak > capacity; }
};

/// @brief "" when every rank fits its GPU; else a sentence: the group that misses most, what it
/// requires against the capacity, by how much, and its three largest terms.
std::string does_not_fit(const MemoryReport& report);

/// @brief A group's entry from its walk: `other` gets the allocator's reserve and the runtime.
RankMemory finish(std::string label, std::vector<int> ranks, const MemoryWalk& walk, const RuntimeMemory& runtime);

}  // namespace stepsim::models
