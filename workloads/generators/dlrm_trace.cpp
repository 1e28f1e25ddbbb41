#include "workloads/generators/dlrm_trace.hpp"

#include <algorithm>

namespace stepsim::workloads::dlrm {
namespace {

int intern(std::vector<models::KernelSpec>& items, models::KernelSpec item) {
  for (std::size_t i = 0; i < items.size(); ++i)
    if (items[i] == item) return static_cast<int>(i);
  items.push_back(std::move(item));
  return static_cast<int>(items.size()) - 1;
}

bool same(const Program& a, const Program& b) {
  if (a.streams != b.streams || a.events != b.events || a.ops.size() != b.ops.size()) return false;
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    const Op& x = a.ops[i];
    const Op& y = b.ops[i];
    if (x.kind != y.kind || x.stream != y.stream || x.name != y.name || x.kernel != y.kernel ||
        x.duration != y.duration || x.collective != y.collective || x.peer != y.peer || x.bytes != y.bytes ||
        x.memcpy != y.memcpy || x.event != y.event)
      return false;
  }
  return true;
}

}  // namespace

int TraceBuilder::name(const std::string& text) {
  auto [it, added] = names_.emplace(text, static_cast<int>(t_.names.size()));
  if (added) t_.names.push_back(text);
  return it->second;
}

int TraceBuilder::kernel(models::KernelSpec spec, const std::string& label) {
  models::complete_kernel(spec, t_.origin + ": generated kernel '" + label + "'");
  return intern(t_.kernels, std::move(spec));
}

int TraceBuilder::collective(const CollectiveCall& added) {
  // The generator's calls differ only in these fields (options stay default).
  for (std::size_t i = 0; i < t_.collectives.size(); ++i) {
    const CollectiveCall& c = t_.collectives[i];
    if (c.op == added.op && c.bytes == added.bytes && c.group == added.group && c.root == added.root &&
        c.algorithm == added.algorithm)
      return static_cast<int>(i);
  }
  t_.collectives.push_back(added);
  return static_cast<int>(t_.collectives.size()) - 1;
}

int TraceBuilder::program(Program program) {
  for (std::size_t p = 0; p < t_.programs.size(); ++p)
    if (same(t_.programs[p], program)) return static_cast<int>(p);
  t_.programs.push_back(std::move(program));
  return static_cast<int>(t_.programs.size()) - 1;
}

RankBuilder::RankBuilder(TraceBuilder& trace, Seconds op_gap) : tb_(trace), op_gap_(op_gap) {
  p_.streams = {"compute", "embedding_comm", "allreduce"};
}

void RankBuilder::kernel(const std::string& name, models::KernelSpec spec) {
  gap();
  Op op;
  op.kind = OpKind::kernel;
  op.stream = kCompute;
  op.name = tb_.name(name);
  op.kernel = tb_.kernel(std::move(spec), name);
  p_.ops.push_back(op);
}

void RankBuilder::handoff(int stream, int waiter, const std::string& event) {
  p_.events.push_back(event);
  const int e = static_cast<int>(p_.events.size()) - 1;
  p_.ops.push_back(Op{.kind = OpKind::record, .stream = stream, .event = e});
  p_.ops.push_back(Op{.kind = OpKind::wait, .stream = waiter, .event = e});
}

void RankBuilder::collective(int stream, const std::string& name, const CollectiveCall& call) {
  gap();
  Op op;
  op.kind = OpKind::collective;
  op.stream = stream;
  op.name = tb_.name(name);
  op.collective = tb_.collective(call);
  p_.ops.push_back(op);
}

void RankBuilder::cpu(const std::string& name, Seconds duration) {
  p_.ops.push_back(Op{.kind = OpKind::cpu, .name = tb_.name(name), .duration = duration});
}

void RankBuilder::upload(const std::string& stream, const std::string& name, Bytes bytes) {
  gap();
  auto it = std::find(p_.streams.begin(), p_.streams.end(), stream);
  if (it == p_.streams.end()) it = p_.streams.insert(p_.streams.end(), stream);
  Op op;
  op.kind = OpKind::memcpy;
  op.stream = static_cast<int>(it - p_.streams.begin());
  op.name = tb_.name(name);
  op.bytes = bytes;
  op.memcpy = MemcpyKind::host_to_device;
  op.host_memory = HostMemory::pageable;
  p_.ops.push_back(op);
  p_.ops.push_back(Op{.kind = OpKind::sync, .stream = op.stream, .name = tb_.name(name + ".staged"), .event = -1});
}

void RankBuilder::device_sync(const std::string& name) {
  p_.ops.push_back(Op{.kind = OpKind::sync, .stream = -1, .name = tb_.name(name), .event = -1});
}

void RankBuilder::gap() {
  if (op_gap_ > 0) p_.ops.push_back(Op{.kind = OpKind::cpu, .name = tb_.name("cpu.op_gap"), .duration = op_gap_});
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
