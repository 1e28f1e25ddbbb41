// stepsim-harness nccl: NCCL collectives over N GPUs driven from one process (ncclCommInitAll,
// one stream per GPU, every rank's call inside one ncclGroupStart/End), out of place, float32,
// sum; sizes and bandwidths as nccl-tests defines them (nccl_counts.hpp).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "validation/harness/cli_args.hpp"
#include "validation/harness/cuda_check.hpp"
#include "validation/harness/nccl_counts.hpp"
#include "validation/harness/subcommands.hpp"

namespace stepsim::harness {
namespace {

// NCCL's own buffers, streams and the CUDA context need memory beyond ours.
constexpr std::size_t kNcclReserveBytes = std::size_t{4} << 30;

/// One communicator per device. Aborts instead of destroying while an error unwinds the stack,
/// because ncclCommDestroy would wait for a collective that may never finish.
class Communicators {
 public:
  explicit Communicators(const std::vector<int>& devices) : comms_(devices.size(), nullptr) {
    NCCL_CHECK(ncclCommInitAll(comms_.data(), static_cast<int>(devices.size()), devices.data()));
  }
  ~Communicators() {
    const bool failing = std::uncaught_exceptions() > 0;
    for (ncclComm_t comm : comms_)
      if (comm != nullptr) (void)(failing ? ncclCommAbort(comm) : ncclCommDestroy(comm));
  }
  Communicators(const Communicators&) = delete;
  Communicators& operator=(const Communicators&) = delete;
  ncclComm_t operator[](std::size_t rank) const { return comms_[rank]; }

 private:
  std::vector<ncclComm_t> comms_;
};

// Enqueues rank `rank`'s part of one call of `op` (the caller wraps all ranks in a group).
void enqueue_rank(const std::string& op, const CollectiveBuffers& b, int rank, int ranks, const float* send, float* recv,
                  ncclComm_t comm, cudaStream_t stream) {
  if (op == "allreduce") {
    NCCL_CHECK(ncclAllReduce(send, recv, b.send_count, ncclFloat, ncclSum, comm, stream));
  } else if (op == "allgather") {
    NCCL_CHECK(ncclAllGather(send, recv, b.send_count, ncclFloat, comm, stream));
  } else if (op == "reduce_scatter") {
    NCCL_CHECK(ncclReduceScatter(send, recv, b.recv_count, ncclFloat, ncclSum, comm, stream));
  } else if (op == "broadcast") {
    NCCL_CHECK(ncclBroadcast(send, recv, b.send_count, ncclFloat, 0, comm, stream));
  } else if (op == "reduce") {
    NCCL_CHECK(ncclReduce(send, recv, b.send_count, ncclFloat, ncclSum, 0, comm, stream));
  } else if (op == "alltoall") {
    // nccl-tests' alltoall: chunk p of the send buffer goes to rank p, chunk p of the receive
    // buffer comes from rank p.
    const std::size_t chunk = b.send_count / static_cast<std::size_t>(ranks);
    NCCL_CHECK(ncclGroupStart());
    for (int peer = 0; peer < ranks; ++peer) {
      NCCL_CHECK(ncclSend(send + peer * chunk, chunk, ncclFloat, peer, comm, stream));
      NCCL_CHECK(ncclRecv(recv + peer * chunk, chunk, ncclFloat, peer, comm, stream));
    }
    NCCL_CHECK(ncclGroupEnd());
  } else if (op == "sendrecv") {
    // nccl-tests' sendrecv: a ring shift, each rank sends to the next and receives from the previous.
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclSend(send, b.send_count, ncclFloat, (rank + 1) % ranks, comm, stream));
    NCCL_CHECK(ncclRecv(recv, b.recv_count, ncclFloat, (rank + ranks - 1) % ranks, comm, stream));
    NCCL_CHECK(ncclGroupEnd());
  } else {
    throw std::logic_error("run_nccl: unknown op " + op);
  }
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

}  // namespace

void run_nccl(const NcclOptions& options, Recording& recording) {
  const int ranks = usable_gpus(options.gpus, "--gpus");
  std::vector<int> devices;
  for (int d = 0; d < ranks; ++d) devices.push_back(d);
  describe_system(devices, recording.header);

  // Every op needs a send and a receive buffer of at most `size` bytes per rank.
  std::size_t free_min = SIZE_MAX;
  for (int d : devices) {
    std::size_t free_bytes = 0, total_bytes = 0;
    device_memory(d, free_bytes, total_bytes);
    free_min = std::min(free_min, free_bytes);
  }
  const std::size_t fits = free_min > kNcclReserveBytes ? (free_min - kNcclReserveBytes) / 2 : 0;
  std::vector<uint64_t> sizes;
  for (uint64_t size : options.sizes)
    if (size <= fits) sizes.push_back(size);
  if (sizes.size() < options.sizes.size()) {
    const std::string note = "sizes above " + format_bytes(fits) + " skipped: send + receive buffers must fit in " +
                             format_bytes(free_min) + " free GPU memory less " + format_bytes(kNcclReserveBytes) +
                             " for NCCL";
    std::fprintf(stderr, "nccl: %s\n", note.c_str());
    add_note(recording.header, note);
  }
  if (sizes.empty()) throw std::runtime_error("nccl: no requested size fits in GPU memory");
  const std::size_t buffer_bytes = sizes.back();

  // Buffers before communicators: on an error the communicators are aborted first (destroyed in
  // reverse order), which frees any stuck kernel before the buffers are released.
  std::vector<DeviceBuffer> send, recv;
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<const Stream*> stream_list;
  for (int d : devices) {
    send.emplace_back(d, buffer_bytes);
    recv.emplace_back(d, buffer_bytes);
    streams.push_back(std::make_unique<Stream>(d));
    stream_list.push_back(streams.back().get());
    fill_uniform(send.back().get(), buffer_bytes / sizeof(float), FillType::fp32, options.common.seed + d, *streams.back());
    CUDA_CHECK(cudaMemsetAsync(recv.back().get(), 0, buffer_bytes, streams.back()->get()));
  }
  wait_streams(stream_list, 300);
  std::fprintf(stderr, "nccl: initialising %d rank(s)\n", ranks);
  Communicators comms(devices);

  const std::string algo = env_or("NCCL_ALGO", "nccl");
  const std::string protocol = env_or("NCCL_PROTO", "");
  const TimingPlan plan = timing_plan(options.common);
  for (const std::string& op : options.ops) {
    for (uint64_t size : sizes) {
      const CollectiveBuffers b = collective_buffers(op, size, ranks, sizeof(float));
      if (b.size_bytes == 0) continue;  // fewer elements than ranks: nothing per rank
      auto launch = [&] {
        NCCL_CHECK(ncclGroupStart());
        for (int r = 0; r < ranks; ++r)
          enqueue_rank(op, b, r, ranks, send[r].as<float>(), recv[r].as<float>(), comms[r], streams[r]->get());
        NCCL_CHECK(ncclGroupEnd());
      };
      const SampleStats stats = summarize(time_calls(stream_list, launch, plan));
      const double algbw = algbw_GBps(b.size_bytes, stats.mean_s);
      MeasurementRecord record("collective");
      record.text("op", op).integer("size_bytes", static_cast<int64_t>(b.size_bytes)).text("dtype", "float32");
      record.integer("ranks", ranks).text("algo", algo);
      if (!protocol.empty()) record.text("protocol", protocol);
      record.flag("in_place", false).timing(stats).real("algbw_GBps", algbw).real("busbw_GBps", algbw * b.bus_factor);
      recording.records.push_back(record);
      std::fprintf(stderr, "nccl %-14s %10s  %10.2f us  algbw %8.2f GB/s  busbw %8.2f GB/s\n", op.c_str(),
                   format_bytes(b.size_bytes).c_str(), stats.mean_s * 1e6, algbw, algbw * b.bus_factor);
    }
  }
}

}  // namespace stepsim::harness
