#include "workloads/generators/dlrm_trace.hpp"

namespace stepsim::workloads::dlrm {
RankBuilder::RankBuilder(TraceBuilder& trace, Seconds op_gap) : w_(trace, op_gap) {
  for (const char* stream : {"compute", "embedding_comm", "allreduce"}) w_.stream(stream);
}

void RankBuilder::handoff(int stream, int waiter, const std::string& event) { w_.wait(waiter, record(stream, event)); }

int RankBuilder::record(int stream, const std::string& event) {
  const int e = w_.new_event(event);
  w_.record(stream, e);
  return e;
}

void RankBuilder::upload(const std::string& stream, const std::string& name, Bytes bytes) {
  const int s = w_.stream(stream);
  w_.memcpy(s, name, MemcpyKind::host_to_device, bytes, HostMemory::pageable);
  w_.sync_stream(s, name + ".staged");
}

void RankBuilder::upload_pinned(const std::string& stream, const std::string& name, Bytes bytes) {
  w_.memcpy(w_.stream(stream), name, MemcpyKind::host_to_device, bytes, HostMemory::pinned);
}

CollectiveCall call(models::CollectiveOp op, Bytes bytes, int group) {
  CollectiveCall c;
  c.op = op;
  c.bytes = bytes;
  c.group = group;
  return c;
}

models::KernelSpec gemm(models::Dtype dtype, double m, double n, double k, double batch, Layout layout) {
  return models::KernelSpec{"gemm",
                            dtype,
                            {{"m", m},
                             {"n", n},
                             {"k", k},
                             {"batch", batch},
                             {"transpose_a", layout == Layout::tn ? 1.0 : 0.0},
                             {"transpose_b", layout == Layout::nt ? 1.0 : 0.0}},
                            {}};
}

}  // namespace stepsim::workloads::dlrm
