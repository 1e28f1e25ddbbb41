#pragma once
// Small traces written op by op for the replay tests: every rank gets its own Program, all
// ranks form group "world" (one subgroup) unless a test adds groups.
#include <map>
#include <string>
#include <vector>

#include "workloads/trace.hpp"

namespace stepsim::sim::testing {

class TraceBuilder {
 public:
  explicit TraceBuilder(int ranks, Seconds cpu_launch = 4e-6, Seconds kernel_gap = 5e-6) {
    t_.origin = "test-trace";
    t_.ranks = ranks;
    t_.programs.resize(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r) t_.program_of_rank.push_back(r);
    t_.launch.cpu_launch = cpu_launch;
    t_.launch.kernel_gap = kernel_gap;
    std::vector<int> all;
    for (int r = 0; r < ranks; ++r) all.push_back(r);
    add_group("world", {all});
  }

  /// A group of disjoint subgroups; returns its index.
  int add_group(const std::string& name, const std::vector<std::vector<int>>& subgroups) {
    workloads::ProcessGroup g;
    g.name = name;
    g.subgroups = subgroups;
    g.subgroup_of_rank.assign(static_cast<std::size_t>(t_.ranks), -1);
    for (std::size_t s = 0; s < subgroups.size(); ++s)
      for (int r : subgroups[s]) g.subgroup_of_rank[static_cast<std::size_t>(r)] = static_cast<int>(s);
    t_.groups.push_back(g);
    return static_cast<int>(t_.groups.size()) - 1;
  }

  void kernel(int rank, const std::string& stream, const std::string& name, Seconds duration) {
    workloads::Op op = base(rank, workloads::OpKind::kernel, stream, name);
    op.duration = duration;
    push(rank, op);
  }
  void kernel_spec(int rank, const std::string& stream, const std::string& name, const models::KernelSpec& spec) {
    workloads::Op op = base(rank, workloads::OpKind::kernel, stream, name);
    t_.kernels.push_back(spec);
    op.kernel = static_cast<int>(t_.kernels.size()) - 1;
    push(rank, op);
  }
  void collective(int rank, const std::string& stream, const std::string& name, models::CollectiveOp kind,
                  Bytes bytes, const std::string& algorithm = "ring", int group = 0, int channels = 0,
                  bool in_place = true) {
    workloads::Op op = base(rank, workloads::OpKind::collective, stream, name);
    workloads::CollectiveCall call;
    call.op = kind;
    call.bytes = bytes;
    call.group = group;
    call.algorithm = algorithm;
    call.options.channels = channels;
    call.in_place = in_place;
    t_.collectives.push_back(call);
    op.collective = static_cast<int>(t_.collectives.size()) - 1;
    push(rank, op);
  }
  void send(int rank, const std::string& stream, const std::string& name, int peer, Bytes bytes) {
    p2p(rank, workloads::OpKind::send, stream, name, peer, bytes);
  }
  void recv(int rank, const std::string& stream, const std::string& name, int peer, Bytes bytes) {
    p2p(rank, workloads::OpKind::recv, stream, name, peer, bytes);
  }
  void memcpy(int rank, const std::string& stream, const std::string& name, workloads::MemcpyKind kind, Bytes bytes) {
    workloads::Op op = base(rank, workloads::OpKind::memcpy, stream, name);
    op.memcpy = kind;
    op.bytes = bytes;
    push(rank, op);
  }
  void cpu(int rank, const std::string& name, Seconds duration) {
    workloads::Op op = base(rank, workloads::OpKind::cpu, "", name);
    op.duration = duration;
    push(rank, op);
  }
  void record(int rank, const std::string& stream, const std::string& event) {
    workloads::Op op = base(rank, workloads::OpKind::record, stream, "record " + event);
    op.event = event_index(rank, event);
    push(rank, op);
  }
  void wait(int rank, const std::string& stream, const std::string& event) {
    workloads::Op op = base(rank, workloads::OpKind::wait, stream, "wait " + event);
    op.event = event_index(rank, event);
    push(rank, op);
  }
  /// sync on a stream (event empty), an event (stream empty), or the device (both empty).
  void sync(int rank, const std::string& stream, const std::string& event, const std::string& name = "sync") {
    workloads::Op op = base(rank, workloads::OpKind::sync, stream, name);
    op.event = event.empty() ? -1 : event_index(rank, event);
    push(rank, op);
  }

  workloads::Trace& trace() { return t_; }

 private:
  workloads::Op base(int rank, workloads::OpKind kind, const std::string& stream, const std::string& name) {
    workloads::Op op;
    op.kind = kind;
    op.stream = stream.empty() ? -1 : stream_index(rank, stream);
    op.name = name_index(name);
    return op;
  }
  void p2p(int rank, workloads::OpKind kind, const std::string& stream, const std::string& name, int peer, Bytes bytes) {
    workloads::Op op = base(rank, kind, stream, name);
    op.peer = peer;
    op.bytes = bytes;
    push(rank, op);
  }
  void push(int rank, const workloads::Op& op) { t_.programs[static_cast<std::size_t>(rank)].ops.push_back(op); }
  static int index_of(std::vector<std::string>& names, const std::string& name) {
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return static_cast<int>(i);
    names.push_back(name);
    return static_cast<int>(names.size()) - 1;
  }
  int stream_index(int rank, const std::string& s) { return index_of(t_.programs[static_cast<std::size_t>(rank)].streams, s); }
  int event_index(int rank, const std::string& e) { return index_of(t_.programs[static_cast<std::size_t>(rank)].events, e); }
  int name_index(const std::string& n) { return index_of(t_.names, n); }

  workloads::Trace t_;
};

}  // namespace stepsim::sim::testing
