#include "workloads/trace_builder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "platforms/config_error.hpp"

namespace stepsim::workloads {
namespace {

// Exact text of a spec (shortest round-trip doubles), the key identical specs share.
std::string kernel_key(const models::KernelSpec& spec) {
  std::string key = fmt::format("{}|{}", spec.kind, models::to_string(spec.dtype));
  for (const auto& [name, value] : spec.params) key += fmt::format("|{}={}", name, value);
  for (double bin : spec.histogram) key += fmt::format("|{}", bin);
  return key;
}

std::string collective_key(const CollectiveCall& call) {
  std::string key = fmt::format("{}|{}|{}|{}|{}|{}|{}|{}", static_cast<int>(call.op), call.bytes, call.group, call.root,
                                call.algorithm, call.options.channels, call.options.chunk_bytes, call.in_place);
  for (const auto& [k, v] : call.options.extra) key += "|" + k + "=" + v;
  const models::CompressionOptions& compression = call.options.compression;
  if (!compression.codec.empty())
    key += fmt::format("|{}|{}|{}", compression.codec, models::to_string(compression.mode), compression.threshold);
  return key;
}

// Every field of every op, with the program's stream and event names: equal keys, equal programs.
std::string program_key(const Program& p) {
  std::string key;
  for (const std::string& s : p.streams) key += s + '\n';
  key += '\x1f';
  for (const std::string& e : p.events) key += e + '\n';
  key += '\x1f';
  for (const Op& op : p.ops)
    key += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{};", static_cast<int>(op.kind), op.stream, op.name, op.kernel,
                       op.duration, op.collective, op.peer, op.group, op.bytes, static_cast<int>(op.memcpy),
                       static_cast<int>(op.host_memory), op.event);
  return key;
}

}  // namespace

TraceBuilder::TraceBuilder(std::string origin, int ranks, std::size_t max_program_ops)
    : max_program_ops_(max_program_ops) {
  trace_.origin = std::move(origin);
  trace_.ranks = ranks;
  trace_.program_of_rank.assign(static_cast<std::size_t>(ranks), -1);
}

int TraceBuilder::name(const std::string& text) {
  auto [it, added] = names_.try_emplace(text, static_cast<int>(trace_.names.size()));
  if (added) trace_.names.push_back(text);
  return it->second;
}

int TraceBuilder::kernel(const models::KernelSpec& spec, const std::string& where) {
  const std::string written = kernel_key(spec);
  if (auto it = kernel_by_written_.find(written); it != kernel_by_written_.end()) return it->second;
  models::KernelSpec completed = spec;
  models::complete_kernel(completed, where);
  auto [it, added] = kernel_by_completed_.try_emplace(kernel_key(completed), static_cast<int>(trace_.kernels.size()));
  if (added) trace_.kernels.push_back(std::move(completed));
  return kernel_by_written_[written] = it->second;
}

int TraceBuilder::collective(const CollectiveCall& call) {
  auto [it, added] = collectives_.try_emplace(collective_key(call), static_cast<int>(trace_.collectives.size()));
  if (added) trace_.collectives.push_back(call);
  return it->second;
}

int TraceBuilder::group(ProcessGroup group) {
  trace_.groups.push_back(std::move(group));
  return static_cast<int>(trace_.groups.size()) - 1;
}

void TraceBuilder::assign(const std::vector<int>& ranks, Program program) {
  auto [it, added] = programs_.try_emplace(program_key(program), static_cast<int>(trace_.programs.size()));
  if (added) trace_.programs.push_back(std::move(program));
  for (int rank : ranks) trace_.program_of_rank.at(static_cast<std::size_t>(rank)) = it->second;
}

void TraceBuilder::assign_all(Program program) {
  std::vector<int> all(static_cast<std::size_t>(trace_.ranks));
  for (int r = 0; r < trace_.ranks; ++r) all[static_cast<std::size_t>(r)] = r;
  assign(all, std::move(program));
}

Trace TraceBuilder::finish() {
  const auto idle = std::find(trace_.program_of_rank.begin(), trace_.program_of_rank.end(), -1);
  if (idle != trace_.program_of_rank.end())
    throw std::logic_error(trace_.origin + ": generator gave rank " +
                           std::to_string(idle - trace_.program_of_rank.begin()) + " no program");
  return std::move(trace_);
}

ProgramWriter::ProgramWriter(TraceBuilder& trace, Seconds cpu_op_gap) : trace_(trace), cpu_op_gap_(cpu_op_gap) {}

void ProgramWriter::push(Op op) {
  if (program_.ops.size() >= trace_.max_program_ops())
    throw ConfigError(trace_.origin(),
                      fmt::format("a rank's program passes {} ops, the limit that keeps a simulation within "
                                  "seconds and a few GB",
                                  trace_.max_program_ops()),
                      "simulate fewer micro-batches (training.gradient_accumulation), layers or repetitions: an "
                      "iteration's time grows linearly in them");
  program_.ops.push_back(op);
}

int ProgramWriter::stream(const std::string& name) {
  auto& streams = program_.streams;
  auto it = std::find(streams.begin(), streams.end(), name);
  if (it != streams.end()) return static_cast<int>(it - streams.begin());
  streams.push_back(name);
  return static_cast<int>(streams.size()) - 1;
}

int ProgramWriter::event(const std::string& name) {
  auto& events = program_.events;
  auto it = std::find(events.begin(), events.end(), name);
  if (it != events.end()) return static_cast<int>(it - events.begin());
  return new_event(name);
}

int ProgramWriter::new_event(const std::string& name) {
  program_.events.push_back(name);
  return static_cast<int>(program_.events.size()) - 1;
}

void ProgramWriter::gap() {
  if (cpu_op_gap_ > 0) push(Op{.kind = OpKind::cpu, .name = trace_.name("cpu.op_gap"), .duration = cpu_op_gap_});
}

void ProgramWriter::kernel(int stream, const std::string& name, const models::KernelSpec& spec, bool host_gap) {
  const int kernel = trace_.kernel(spec, trace_.origin() + ": generated kernel '" + name + "'");
  if (host_gap) gap();
  push(Op{.kind = OpKind::kernel, .stream = stream, .name = trace_.name(name), .kernel = kernel});
}

void ProgramWriter::timed_kernel(int stream, const std::string& name, Seconds duration) {
  gap();
  push(Op{.kind = OpKind::kernel, .stream = stream, .name = trace_.name(name), .duration = duration});
}

void ProgramWriter::collective(int stream, const std::string& name, const CollectiveCall& call) {
  const int collective = trace_.collective(call);
  gap();
  push(Op{.kind = OpKind::collective, .stream = stream, .name = trace_.name(name), .collective = collective});
}

void ProgramWriter::send(int stream, const std::string& name, int peer, Bytes bytes, int group) {
  gap();
  push(Op{.kind = OpKind::send, .stream = stream, .name = trace_.name(name), .peer = peer, .group = group, .bytes = bytes});
}

void ProgramWriter::recv(int stream, const std::string& name, int peer, Bytes bytes, int group) {
  gap();
  push(Op{.kind = OpKind::recv, .stream = stream, .name = trace_.name(name), .peer = peer, .group = group, .bytes = bytes});
}

void ProgramWriter::memcpy(int stream, const std::string& name, MemcpyKind kind, Bytes bytes, HostMemory host) {
  gap();
  push(Op{.kind = OpKind::memcpy, .stream = stream, .name = trace_.name(name), .bytes = bytes, .memcpy = kind,
          .host_memory = host});
}

void ProgramWriter::cpu(const std::string& name, Seconds duration) {
  push(Op{.kind = OpKind::cpu, .name = trace_.name(name), .duration = duration});
}

void ProgramWriter::record(int stream, int event) { push(Op{.kind = OpKind::record, .stream = stream, .event = event}); }
void ProgramWriter::wait(int stream, int event) { push(Op{.kind = OpKind::wait, .stream = stream, .event = event}); }
void ProgramWriter::sync_event(int event) { push(Op{.kind = OpKind::sync, .stream = -1, .event = event}); }

void ProgramWriter::sync_stream(int stream, const std::string& name) {
  push(Op{.kind = OpKind::sync, .stream = stream, .name = trace_.name(name), .event = -1});
}

void ProgramWriter::sync_device(const std::string& name) {
  push(Op{.kind = OpKind::sync, .stream = -1, .name = trace_.name(name), .event = -1});
}

}  // namespace stepsim::workloads
