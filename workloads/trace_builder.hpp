#pragma once
/// @file The one way generators and the trace-file reader write a Trace: a TraceBuilder interns
/// names, kernels and collectives and stores ranks whose programs come out identical once
/// (Trace's compact form); a ProgramWriter appends one program's ops.
///
/// Contract: kernels are completed (models::complete_kernel) when first added, and specs that
/// complete to the same kernel share one index; collectives are interned on every field of the
/// call; indices are handed out in first-use order, so a generator that writes the same ops
/// gets the same trace. Every rank must be given a program before `finish`.
#include <map>
#include <string>
#include <vector>

#include "models/compute/kernel.hpp"
#include "workloads/trace.hpp"

namespace stepsim::workloads {

class TraceBuilder {
 public:
  /// @brief A trace of `ranks` programs; a program past `max_program_ops` ops is a ConfigError.
  TraceBuilder(std::string origin, int ranks, std::size_t max_program_ops = kMaxProgramOps);

  int name(const std::string& text);
  /// @brief The index of `spec` completed; `where` names it in a completion error.
  int kernel(const models::KernelSpec& spec, const std::string& where);
  int collective(const CollectiveCall& call);
  int group(ProcessGroup group);
  int group_count() const { return static_cast<int>(trace_.groups.size()); }
  const ProcessGroup& group_at(int group) const { return trace_.groups.at(static_cast<std::size_t>(group)); }
  /// @brief Gives `ranks` `program`, stored once however many rank sets share it.
  void assign(const std::vector<int>& ranks, Program program);
  /// @brief Gives every rank `program`.
  void assign_all(Program program);
  void note(std::string text) { trace_.notes.push_back(std::move(text)); }

  const std::string& origin() const { return trace_.origin; }
  std::size_t max_program_ops() const { return max_program_ops_; }
  int ranks() const { return trace_.ranks; }
  LaunchModel& launch() { return trace_.launch; }
  Work& work() { return trace_.work; }
  /// @brief The trace; throws std::logic_error when a rank has no program.
  Trace finish();

 private:
  Trace trace_;
  std::size_t max_program_ops_;
  std::map<std::string, int> names_;
  std::map<std::string, int> kernel_by_written_;
  std::map<std::string, int> kernel_by_completed_;
  std::map<std::string, int> collectives_;
  std::map<std::string, int> programs_;   ///< serialised program -> Trace::programs index
};

/// @brief One program under construction. Every kernel, collective, send, recv and host copy
/// is preceded by a `cpu` op of `cpu_op_gap` (PyTorch's per-op host time, Lin et al.'s T1)
/// when it is > 0, except kernels launched without one (`host_gap` false: a compiled graph's).
class ProgramWriter {
 public:
  ProgramWriter(TraceBuilder& trace, Seconds cpu_op_gap);

  /// @brief The stream or event of that name, added on first use.
  int stream(const std::string& name);
  int event(const std::string& name);
  /// @brief A new event, even where one of that name exists.
  int new_event(const std::string& name);

  void kernel(int stream, const std::string& name, const models::KernelSpec& spec, bool host_gap = true);
  /// @brief A kernel of a given device time (a trace file's `gpu:` op).
  void timed_kernel(int stream, const std::string& name, Seconds duration);
  void collective(int stream, const std::string& name, const CollectiveCall& call);
  /// @brief A send / recv to `peer`: a global rank, or with `group` >= 0 a rank of the issuing
  /// rank's subgroup of that group (Op::group).
  void send(int stream, const std::string& name, int peer, Bytes bytes, int group = -1);
  void recv(int stream, const std::string& name, int peer, Bytes bytes, int group = -1);
  void memcpy(int stream, const std::string& name, MemcpyKind kind, Bytes bytes, HostMemory host);
  void cpu(const std::string& name, Seconds duration);
  void record(int stream, int event);
  void wait(int stream, int event);
  /// @brief The CPU waits for `event`, for `stream` (named `name`), or for the whole device.
  void sync_event(int event);
  void sync_stream(int stream, const std::string& name);
  void sync_device(const std::string& name);

  TraceBuilder& trace() { return trace_; }
  const Program& program() const { return program_; }
  Program take() { return std::move(program_); }

 private:
  void gap();
  void push(Op op);

  TraceBuilder& trace_;
  Seconds cpu_op_gap_;
  Program program_;
};

}  // namespace stepsim::workloads
