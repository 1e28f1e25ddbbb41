#pragma once
/// @file nccl-tests' buffer sizes and bandwidth definitions (nccl-tests src/*.cu,
/// GetCollByteCount and GetBw; doc/PERFORMANCE.md), so harness rows compare 1:1 with nccl-tests
/// logs.
///
/// Contract: for a sweep size S (bytes) and n ranks, count = S / elem_bytes, and per op:
/// allreduce, broadcast, reduce, sendrecv send = recv = count; allgather send = count/n,
/// recv = n*(count/n); reduce_scatter send = n*(count/n), recv = count/n; alltoall send = recv =
/// n*(count/n). The recorded size is max(send, recv) bytes (nccl-tests' "size" column),
/// algbw = size / time and busbw = algbw * factor with factor 2(n-1)/n for allreduce, (n-1)/n for
/// allgather, reduce_scatter and alltoall, and 1 for broadcast, reduce and sendrecv.
#include <cstdint>
#include <string>
#include <vector>

namespace stepsim::harness {

/// @brief The collective ops the harness measures, in sweep order.
const std::vector<std::string>& collective_ops();

/// @brief Buffers of one collective call on one rank.
struct CollectiveBuffers {
  uint64_t send_count = 0;  ///< elements in the send buffer
  uint64_t recv_count = 0;  ///< elements in the receive buffer
  uint64_t size_bytes = 0;  ///< max(send, recv) * elem_bytes: nccl-tests' "size"; 0 = nothing to do
  double bus_factor = 1;    ///< busbw / algbw
};

/// @brief Buffers for sweep size `size_bytes` of `op` over `ranks` ranks (std::logic_error for an
/// unknown op or ranks < 1).
CollectiveBuffers collective_buffers(const std::string& op, uint64_t size_bytes, int ranks, int elem_bytes);

/// @brief nccl-tests' algbw in GB/s (1e9 B/s).
double algbw_GBps(uint64_t size_bytes, double time_s);

}  // namespace stepsim::harness
