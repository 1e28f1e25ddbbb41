#include "validation/harness/nccl_counts.hpp"

#include <stdexcept>

namespace stepsim::harness {

const std::vector<std::string>& collective_ops() {
  static const std::vector<std::string> ops = {"allreduce", "allgather", "reduce_scatter", "broadcast",
                                               "reduce",    "alltoall",  "sendrecv"};
  return ops;
}

CollectiveBuffers collective_buffers(const std::string& op, uint64_t size_bytes, int ranks, int elem_bytes) {
  if (ranks < 1 || elem_bytes < 1) throw std::logic_error("collective_buffers: ranks and elem_bytes must be >= 1");
  const uint64_t n = static_cast<uint64_t>(ranks);
  const uint64_t count = size_bytes / static_cast<uint64_t>(elem_bytes);
  const double ring = static_cast<double>(n - 1) / static_cast<double>(n);
  CollectiveBuffers b;
  if (op == "allreduce" || op == "broadcast" || op == "reduce" || op == "sendrecv") {
    b.send_count = b.recv_count = count;
    b.bus_factor = op == "allreduce" ? 2 * ring : 1.0;
  } else if (op == "allgather") {
    b.send_count = count / n;
    b.recv_count = b.send_count * n;
    b.bus_factor = ring;
  } else if (op == "reduce_scatter") {
    b.recv_count = count / n;
    b.send_count = b.recv_count * n;
    b.bus_factor = ring;
  } else if (op == "alltoall") {
    b.send_count = b.recv_count = (count / n) * n;
    b.bus_factor = ring;
  } else {
    throw std::logic_error("collective_buffers: unknown op '" + op + "'");
  }
  b.size_bytes = (b.send_count > b.recv_count ? b.send_count : b.recv_count) * static_cast<uint64_t>(elem_bytes);
  if (b.send_count == 0 || b.recv_count == 0) b = CollectiveBuffers{0, 0, 0, b.bus_factor};
  return b;
}

double algbw_GBps(uint64_t size_bytes, double time_s) { return static_cast<double>(size_bytes) / time_s / 1e9; }

}  // namespace stepsim::harness
