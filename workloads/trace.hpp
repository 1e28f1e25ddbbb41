#pragma once
/// @file The Trace: one training iteration as per-rank ordered ops on named streams.
///
/// Execution model (what sim/replay.hpp executes; after Lin et al. 2024, ../shared/papers.md
/// §3.1). Every rank runs its Program: a CPU thread issues the ops in order. A `cpu` op
/// advances the CPU clock by its duration. Issuing a GPU op (kernel, collective, send, recv,
/// memcpy) costs the CPU `launch.cpu_launch` and enqueues the op on its stream; `record` and
/// `wait` are enqueued the same way but cost the CPU nothing and the GPU nothing. A stream runs
/// its ops in order: an op starts when it was issued, the stream's previous op has finished
/// and, for kernels, `launch.kernel_gap` has passed since then (the GPU-side per-kernel gap).
/// `record E` on stream s fires when everything enqueued on s before it has finished; `wait E`
/// on stream s holds every later op of s until the most recent `record E` issued before the
/// wait (in CPU order) has fired. `sync` blocks the CPU: on an event (cudaEventSynchronize),
/// on a stream (cudaStreamSynchronize), or on the whole device when both are -1.
///
/// Communication. A collective runs within the subgroup of its ProcessGroup that holds the
/// issuing rank; the k-th collective a rank issues on a group is matched with the k-th one of
/// every other member of its subgroup (NCCL semantics): they must agree on op, bytes, root and
/// algorithm. It starts when every member's stream has reached it and ends on each member when
/// that member's part of the schedule has finished. Sends and recvs are matched in order per
/// (sender, receiver) pair and move `bytes` once both sides have reached them; a generator may
/// name the peer as a rank of a process group's subgroup (Op::group), resolved per issuing rank. The iteration
/// ends when every rank's CPU and streams are done.
///
/// SM interference. NCCL runs a collective or send/recv as one kernel of one CTA per channel
/// (ncclLaunchKernel launches a grid of nChannels blocks, NCCL src/enqueue.cc), each CTA
/// keeping its SM until the kernel ends. So from a collective's start (every member there, not
/// while a stream waits at the rendezvous) until a member is done, it holds its schedule's
/// `channels` SMs of that member's GPU; concurrent holds add up, to at most S - 1 of the GPU's
/// S = sm_count SMs. While C SMs are held, a kernel or device-to-device copy progresses at
/// (S - C) / S of its isolated rate: its isolated duration is work, consumed piecewise as C
/// changes. A compressed collective's codec steps (compress / decompress kernels,
/// models/compression/) take the whole GPU while they run: kernels and device copies make no
/// progress then, so the GPU's codec work is charged to compute in full. Collectives are not
/// slowed, nor are host copies (copy engines), nor kernels by each other. This is the SM share only: Lee et al. 2025 (arXiv:2507.03114) measure 18.9 % mean
/// and 40 % worst compute slowdown under overlap, which also includes HBM and power contention.
///
/// Compact form: ranks that run the same ops share one Program (`program_of_rank`), so an
/// FSDP trace of 1024 ranks stores one Program; kernels are interned in `kernels`.
#include <optional>
#include <string>
#include <vector>

#include "models/algorithm.hpp"
#include "models/compute/kernel.hpp"
#include "models/memory/memory.hpp"
#include "models/schedule.hpp"

namespace stepsim::workloads {

enum class OpKind : std::uint8_t { kernel, collective, send, recv, memcpy, cpu, record, wait, sync };
const char* to_string(OpKind kind);

enum class MemcpyKind : std::uint8_t { host_to_device, device_to_host, device_to_device };
/// Where a host copy's host buffer lives: pinned memory is DMA'd directly; pageable memory is
/// staged by the driver through a pinned buffer, the CPU copying every byte, so the call
/// returns only once the copy is done and a trace follows it with a sync on its stream.
enum class HostMemory : std::uint8_t { pinned, pageable };

struct Op {
  OpKind kind = OpKind::kernel;
  int stream = -1;          ///< Program::streams index; sync: the stream, or -1
  int name = -1;            ///< Trace::names index: what the timeline and critical path show
  int kernel = -1;          ///< kernel: Trace::kernels index, or -1 when `duration` is given
  Seconds duration = 0;     ///< kernel with kernel == -1: its device time; cpu: CPU time
  int collective = -1;      ///< collective: Trace::collectives index
  int peer = -1;            ///< send / recv: the other rank: global, or within `group`
  /// send / recv: -1, or a Trace::groups index: `peer` is then a rank of the issuing rank's
  /// subgroup, so ranks that talk to their own neighbours (pipeline stages of every
  /// data-parallel replica) share one Program.
  int group = -1;
  Bytes bytes = 0;          ///< send / recv / memcpy
  MemcpyKind memcpy = MemcpyKind::device_to_device;
  HostMemory host_memory = HostMemory::pinned;  ///< memcpy h2d / d2h
  int event = -1;           ///< record / wait: Program::events index; sync: the event, or -1
};

/// @brief What one rank runs: ops in CPU issue order.
/// The most ops one rank's program may hold: 2^23, about 25 s and 1.5 GB to build and replay.
/// Generators check their own inputs against tighter limits first (transformer.hpp's
/// kMaxLayerPasses); this bound holds for every generator and trace file.
constexpr std::size_t kMaxProgramOps = std::size_t{1} << 23;

struct Program {
  std::vector<std::string> streams;   ///< e.g. "compute", "allgather", "reduce_scatter"
  std::vector<std::string> events;
  std::vector<Op> ops;
};

/// @brief A family of disjoint rank sets (like torch.distributed.new_subgroups): a collective
/// on it runs within the subgroup holding the issuing rank. Ranks within a subgroup are in
/// collective-rank order.
struct ProcessGroup {
  std::string name;
  std::vector<std::vector<int>> subgroups;
  std::vector<int> subgroup_of_rank;  ///< per global rank, -1 when not a member
};

struct CollectiveCall {
  models::CollectiveOp op = models::CollectiveOp::allreduce;
  Bytes bytes = 0;                    ///< nccl-tests `size` convention (models/schedule.hpp)
  int group = 0;                      ///< Trace::groups index
  int root = 0;                       ///< broadcast / reduce: rank within the subgroup
  std::string algorithm = "nccl";     ///< a registered algorithm
  models::AlgorithmOptions options;
  /// Whether the output buffer holds the input (NCCL's in-place call). On a one-rank subgroup
  /// an in-place call moves nothing; an out-of-place one copies its `bytes` within the GPU.
  bool in_place = true;
  bool operator==(const CollectiveCall&) const = default;
};

/// @brief Launch costs (defaults: Lin et al.'s constants, ../shared/papers.md §3.1:
/// KERNEL_LAUNCH_LENGTH 10 us - CPU and GPU event overheads = 4 us per launch call, and
/// GPU_KERNEL_OVERHEAD 5 us per kernel).
struct LaunchModel {
  Seconds cpu_launch = 4e-6;          ///< CPU time of one launch call (T4)
  Seconds kernel_gap = 5e-6;          ///< GPU time between two kernels of one stream
};

/// @brief What one iteration accomplishes, for throughput and MFU reports (0 = unknown).
struct Work {
  double items_per_rank = 0;          ///< e.g. tokens (FSDP/DDP) or samples (DLRM) per rank
  std::string item = "";              ///< "tokens", "samples"
  double model_flops_per_rank = 0;    ///< useful math per rank (no recompute), for MFU
};

struct Trace {
  std::string origin;                 ///< file or generator, for errors and reports
  int ranks = 0;
  std::vector<Program> programs;
  std::vector<int> program_of_rank;   ///< ranks entries
  std::vector<std::string> names;
  std::vector<models::KernelSpec> kernels;   ///< completed (models::complete_kernel)
  std::vector<ProcessGroup> groups;
  std::vector<CollectiveCall> collectives;
  LaunchModel launch;
  Work work;
  std::vector<std::string> notes;     ///< assumptions a generator made, shown to the user
  /// Every rank's peak device memory, where the generator models it (docs/memory.md).
  std::optional<models::MemoryReport> memory;

  const Program& program(int rank) const { return programs[program_of_rank[rank]]; }
};

/// @brief The global rank a send/recv `op` of `rank` talks to (Op::group resolved); -1 when
/// `rank` is not in the group or the peer is outside its subgroup.
int peer_rank(const Trace& trace, int rank, const Op& op);

/// @brief Structural checks a Trace must pass before replay (indices in range, streams and
/// events of the op's program, groups partition what they claim, every rank a member of the
/// subgroups it issues on, waits after a record of their event, recv/send peers valid);
/// throws ConfigError naming `trace.origin`, the rank, the op index and its name.
void validate(const Trace& trace);

}  // namespace stepsim::workloads
