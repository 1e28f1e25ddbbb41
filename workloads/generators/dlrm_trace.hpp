#pragma once
/// @file How the DLRM generator writes its trace: a RankBuilder appends one rank's ops on the
/// generator's three streams through the shared TraceBuilder, which interns kernels and
/// collectives and shares identical programs between ranks (workloads/trace_builder.hpp).
#include <cstdint>
#include <string>

#include "models/compute/kernel.hpp"
#include "workloads/trace.hpp"
#include "workloads/trace_builder.hpp"

namespace stepsim::workloads::dlrm {

// Streams of every rank's program.
constexpr int kCompute = 0;         // kernels
constexpr int kEmbeddingComm = 1;   // the all-to-all / reduce-scatter / all-gather of pooled embeddings
constexpr int kAllreduce = 2;       // DDP's gradient buckets
// Process groups: TorchRec's sharding and DDP's are separate communicators, so an all-to-all
// never queues behind a gradient bucket.
constexpr int kEmbeddingGroup = 0;
constexpr int kDenseGroup = 1;
// table_row_wise only: each node's ranks, and the ranks of one local index across nodes.
constexpr int kNodeGroup = 2;
constexpr int kCrossGroup = 3;

/// @brief One rank's program on the generator's three streams, written through the shared
/// ProgramWriter (workloads/trace_builder.hpp).
class RankBuilder {
 public:
  /// @param op_gap  CPU time before every kernel and collective (eager PyTorch: Lin et al.'s
  /// T1; 0 under a CUDA graph).
  RankBuilder(TraceBuilder& trace, Seconds op_gap);

  void kernel(const std::string& name, const models::KernelSpec& spec) { w_.kernel(kCompute, name, spec); }
  /// A kernel on `stream`; `host_gap` false: launched from inside an op already paid for (C++).
  void kernel_on(int stream, const std::string& name, const models::KernelSpec& spec, bool host_gap = true) {
    w_.kernel(stream, name, spec, host_gap);
  }
  /// The CPU waits for `stream`'s queued work (a host read of a value it produces).
  void stream_sync(int stream, const std::string& name) { w_.sync_stream(stream, name); }
  /// `stream` records a fresh event that `waiter` then waits for.
  void handoff(int stream, int waiter, const std::string& event);
  /// `stream` records a fresh event, returned for a later wait().
  int record(int stream, const std::string& event);
  void wait(int waiter, int event) { w_.wait(waiter, event); }
  /// The CPU waits for `event` (a device value read on the host).
  void host_wait(int event) { w_.sync_event(event); }
  /// A non-blocking host-to-device copy from pinned memory on `stream` (named on first use).
  void upload_pinned(const std::string& stream, const std::string& name, Bytes bytes);
  void collective(int stream, const std::string& name, const CollectiveCall& call) { w_.collective(stream, name, call); }
  /// CPU time before the next op (a kernel launched outside the CUDA graph).
  void cpu(const std::string& name, Seconds duration) { w_.cpu(name, duration); }
  /// A host-to-device copy on `stream` (named on first use) from a data loader's pageable memory:
  /// the driver stages it through the CPU, which waits for it.
  void upload(const std::string& stream, const std::string& name, Bytes bytes);
  /// The CPU waits for the whole device (a GPU value read on the host).
  void device_sync(const std::string& name) { w_.sync_device(name); }
  Program take() { return w_.take(); }

 private:
  ProgramWriter w_;
};

/// @brief A collective of `bytes` (nccl-tests size) on process group `group`, NCCL's choice.
CollectiveCall call(models::CollectiveOp op, Bytes bytes, int group);

/// Which operand of a product is stored transposed: a linear layer's forward multiplies by its
/// weight's transpose (NT), its data gradient by the weight (NN), its weight gradient by the
/// input's transpose (TN).
enum class Layout : std::uint8_t { nn, nt, tn };

/// @brief A (batched) GEMM kernel spec in `layout`.
models::KernelSpec gemm(models::Dtype dtype, double m, double n, double k, double batch, Layout layout);

}  // namespace stepsim::workloads::dlrm
