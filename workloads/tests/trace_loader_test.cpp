// The trace format read into exact Trace structures: a round trip of every op kind, program
// sharing, group forms, `-p` overrides through params, presets, and JSON equal to YAML.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "platforms/loader.hpp"
#include "workloads/workload.hpp"

namespace stepsim::workloads {
namespace {

constexpr double kMiB = 1048576.0;

std::string describe(const Op& op) {
  return std::string(to_string(op.kind)) + " stream " + std::to_string(op.stream) + " name " + std::to_string(op.name) +
         " kernel " + std::to_string(op.kernel) + " duration " + std::to_string(op.duration) + " collective " +
         std::to_string(op.collective) + " peer " + std::to_string(op.peer) + " bytes " + std::to_string(op.bytes) +
         " memcpy " + std::to_string(static_cast<int>(op.memcpy)) + " event " + std::to_string(op.event);
}

void expect_op(const Op& actual, const Op& expected, const std::string& label) {
  EXPECT_EQ(describe(actual), describe(expected)) << label;
}

void expect_same_call(const CollectiveCall& a, const CollectiveCall& b) {
  EXPECT_EQ(a.op, b.op);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.group, b.group);
  EXPECT_EQ(a.root, b.root);
  EXPECT_EQ(a.algorithm, b.algorithm);
  EXPECT_EQ(a.options.channels, b.options.channels);
  EXPECT_EQ(a.options.chunk_bytes, b.options.chunk_bytes);
  EXPECT_EQ(a.options.extra, b.options.extra);
}

// Everything but `origin`, which names the file.
void expect_same_trace(const Trace& a, const Trace& b) {
  EXPECT_EQ(a.ranks, b.ranks);
  EXPECT_EQ(a.program_of_rank, b.program_of_rank);
  EXPECT_EQ(a.names, b.names);
  EXPECT_EQ(a.kernels, b.kernels);
  EXPECT_EQ(a.launch.cpu_launch, b.launch.cpu_launch);
  EXPECT_EQ(a.launch.kernel_gap, b.launch.kernel_gap);
  ASSERT_EQ(a.groups.size(), b.groups.size());
  for (std::size_t g = 0; g < a.groups.size(); ++g) {
    EXPECT_EQ(a.groups[g].name, b.groups[g].name);
    EXPECT_EQ(a.groups[g].subgroups, b.groups[g].subgroups);
    EXPECT_EQ(a.groups[g].subgroup_of_rank, b.groups[g].subgroup_of_rank);
  }
  ASSERT_EQ(a.collectives.size(), b.collectives.size());
  for (std::size_t c = 0; c < a.collectives.size(); ++c) expect_same_call(a.collectives[c], b.collectives[c]);
  ASSERT_EQ(a.programs.size(), b.programs.size());
  for (std::size_t p = 0; p < a.programs.size(); ++p) {
    EXPECT_EQ(a.programs[p].streams, b.programs[p].streams);
    EXPECT_EQ(a.programs[p].events, b.programs[p].events);
    ASSERT_EQ(a.programs[p].ops.size(), b.programs[p].ops.size());
    for (std::size_t i = 0; i < a.programs[p].ops.size(); ++i)
      expect_op(a.programs[p].ops[i], b.programs[p].ops[i],
                "programs[" + std::to_string(p) + "].ops[" + std::to_string(i) + "]");
  }
}

class TraceLoader : public ::testing::Test {
 protected:
  Trace parse(const std::string& text, const std::string& gpus, const std::vector<std::string>& overrides = {}) {
    const platforms::Allocation allocation = platforms::parse_allocation(gpus, platform_);
    return parse_workload(text, "t.yaml", JobContext{platform_, allocation}, overrides);
  }
  Trace load(const std::string& path, const std::string& gpus) {
    const platforms::Allocation allocation = platforms::parse_allocation(gpus, platform_);
    return load_workload(path, JobContext{platform_, allocation});
  }
  std::string write(const std::string& name, const std::string& text) {
    const std::string path =
        (std::filesystem::temp_directory_path() / (std::to_string(::getpid()) + "_" + name)).string();
    std::ofstream(path) << text;
    written_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const std::string& path : written_) std::filesystem::remove(path);
  }

  platforms::Platform platform_ = platforms::load_platform("dgx-a100");
  std::vector<std::string> written_;
};

// Every op kind, on two ranks with their own programs.
const std::string kRoundTrip = R"(version: 1
kind: trace
description: two ranks, allreduce overlapping a GEMM
ranks: 2
launch: {cpu_launch: 3us, kernel_gap: 2us}
groups:
  world: [[0, 1]]
programs:
  - ranks: [0]
    streams: [compute, comm]
    ops:
      - {kernel: gemm, stream: compute, name: fc1, m: 4096, n: 4096, k: 4096, dtype: bf16}
      - {gpu: 1.5ms, stream: compute, name: opaque}
      - {collective: allreduce, stream: comm, group: world, size: 64MiB, algo: ring, channels: 2, algo_params: {x: y}}
      - {record: grads_ready, stream: comm}
      - {wait: grads_ready, stream: compute}
      - {cpu: 20us, name: python}
      - {send: 1, size: 1MiB, stream: comm}
      - {memcpy: d2h, size: 2MiB, stream: compute}
      - {kernel: gemm, stream: compute, name: fc1, m: 4096, n: 4096, k: 4096, batch: 1}
      - {sync: event, event: grads_ready}
      - {sync: stream, stream: comm}
      - {sync: device}
  - ranks: "1"
    streams: [comm]
    ops:
      - {collective: allreduce, size: 64MiB, algo: ring, channels: 2, algo_params: {x: y}}
      - {recv: 0, size: 1MiB}
)";

TEST_F(TraceLoader, RoundTripGivesTheExactStructures) {
  const Trace t = parse(kRoundTrip, "0,1");
  EXPECT_EQ(t.origin, "t.yaml");
  EXPECT_EQ(t.ranks, 2);
  EXPECT_EQ(t.launch.cpu_launch, 3e-6);
  EXPECT_EQ(t.launch.kernel_gap, 2e-6);
  EXPECT_EQ(t.program_of_rank, (std::vector<int>{0, 1}));

  ASSERT_EQ(t.groups.size(), 1u);
  EXPECT_EQ(t.groups[0].name, "world");
  EXPECT_EQ(t.groups[0].subgroups, (std::vector<std::vector<int>>{{0, 1}}));
  EXPECT_EQ(t.groups[0].subgroup_of_rank, (std::vector<int>{0, 0}));

  // Both ranks' allreduces are one interned call.
  ASSERT_EQ(t.collectives.size(), 1u);
  CollectiveCall call;
  call.op = models::CollectiveOp::allreduce;
  call.bytes = 64 * kMiB;
  call.group = 0;
  call.root = 0;
  call.algorithm = "ring";
  call.options.channels = 2;
  call.options.extra = {{"x", "y"}};
  expect_same_call(t.collectives[0], call);

  // The second GEMM writes the default batch out: the completed specs (defaults filled in) coincide.
  ASSERT_EQ(t.kernels.size(), 1u);
  models::KernelSpec gemm;
  gemm.kind = "gemm";
  gemm.dtype = models::Dtype::bf16;
  gemm.params = {{"m", 4096}, {"n", 4096}, {"k", 4096}, {"batch", 1}, {"transpose_a", 0}, {"transpose_b", 0}};
  EXPECT_EQ(t.kernels[0], gemm);

  EXPECT_EQ(t.names,
            (std::vector<std::string>{"fc1", "opaque", "allreduce", "record grads_ready", "wait grads_ready", "python",
                                      "send", "memcpy d2h", "sync grads_ready", "sync comm", "sync device", "recv"}));

  ASSERT_EQ(t.programs.size(), 2u);
  const Program& p0 = t.programs[0];
  EXPECT_EQ(p0.streams, (std::vector<std::string>{"compute", "comm"}));
  EXPECT_EQ(p0.events, (std::vector<std::string>{"grads_ready"}));
  ASSERT_EQ(p0.ops.size(), 12u);
  auto op = [](OpKind kind, int stream, int name) {
    Op o;
    o.kind = kind;
    o.stream = stream;
    o.name = name;
    return o;
  };
  Op o = op(OpKind::kernel, 0, 0);
  o.kernel = 0;
  expect_op(p0.ops[0], o, "gemm");
  o = op(OpKind::kernel, 0, 1);
  o.duration = 1.5e-3;
  expect_op(p0.ops[1], o, "gpu");
  o = op(OpKind::collective, 1, 2);
  o.collective = 0;
  expect_op(p0.ops[2], o, "collective");
  o = op(OpKind::record, 1, 3);
  o.event = 0;
  expect_op(p0.ops[3], o, "record");
  o = op(OpKind::wait, 0, 4);
  o.event = 0;
  expect_op(p0.ops[4], o, "wait");
  o = op(OpKind::cpu, -1, 5);
  o.duration = 20e-6;
  expect_op(p0.ops[5], o, "cpu");
  o = op(OpKind::send, 1, 6);
  o.peer = 1;
  o.bytes = kMiB;
  expect_op(p0.ops[6], o, "send");
  o = op(OpKind::memcpy, 0, 7);
  o.bytes = 2 * kMiB;
  o.memcpy = MemcpyKind::device_to_host;
  expect_op(p0.ops[7], o, "memcpy");
  o = op(OpKind::kernel, 0, 0);
  o.kernel = 0;
  expect_op(p0.ops[8], o, "gemm again");
  o = op(OpKind::sync, -1, 8);
  o.event = 0;
  expect_op(p0.ops[9], o, "sync event");
  expect_op(p0.ops[10], op(OpKind::sync, 1, 9), "sync stream");
  expect_op(p0.ops[11], op(OpKind::sync, -1, 10), "sync device");

  // One stream: ops may leave `stream:` out.
  const Program& p1 = t.programs[1];
  EXPECT_EQ(p1.streams, (std::vector<std::string>{"comm"}));
  EXPECT_TRUE(p1.events.empty());
  ASSERT_EQ(p1.ops.size(), 2u);
  o = op(OpKind::collective, 0, 2);
  o.collective = 0;
  expect_op(p1.ops[0], o, "rank 1 collective");
  o = op(OpKind::recv, 0, 11);
  o.peer = 0;
  o.bytes = kMiB;
  expect_op(p1.ops[1], o, "recv");
}

TEST_F(TraceLoader, RanksSharingAnEntryShareOneProgram) {
  const std::string text = R"(version: 1
kind: trace
programs:
  - ranks: all
    streams: [compute, comm]
    ops:
      - {kernel: gemm, stream: compute, m: 1024, n: 1024, k: 1024}
      - {collective: allgather, stream: comm, size: 1GiB}
)";
  const Trace t = parse(text, "0-3");
  EXPECT_EQ(t.ranks, 4);
  EXPECT_EQ(t.programs.size(), 1u);
  EXPECT_EQ(t.program_of_rank, (std::vector<int>{0, 0, 0, 0}));
  // No `groups:` and no `group:`: the collective runs on the implicit world group.
  ASSERT_EQ(t.groups.size(), 1u);
  EXPECT_EQ(t.groups[0].name, "world");
  EXPECT_EQ(t.groups[0].subgroups, (std::vector<std::vector<int>>{{0, 1, 2, 3}}));

  const std::string split = R"(version: 1
kind: trace
programs:
  - ranks: "0-1"
    streams: [compute]
    ops: [{cpu: 1us}]
  - ranks: [2, "3"]
    streams: [compute]
    ops: [{cpu: 2us}]
)";
  const Trace s = parse(split, "0-3");
  EXPECT_EQ(s.programs.size(), 2u);
  EXPECT_EQ(s.program_of_rank, (std::vector<int>{0, 0, 1, 1}));
}

TEST_F(TraceLoader, GroupForms) {
  const std::string text = R"(version: 1
kind: trace
groups:
  everyone: all
  pairs: {size: 2}
  strided: {size: 2, stride: 2}
  listed: ["0-1", [3, 2]]
programs:
  - ranks: all
    streams: [comm]
    ops:
      - {collective: allreduce, group: everyone, size: 1MiB}
      - {collective: allreduce, group: pairs, size: 1MiB}
      - {collective: broadcast, group: strided, size: 1MiB, root: 1}
      - {collective: allreduce, group: listed, size: 1MiB}
      - {collective: allreduce, group: listed, size: 1MiB, in_place: false}
)";
  const Trace t = parse(text, "0-3");
  ASSERT_EQ(t.groups.size(), 4u);
  using Subgroups = std::vector<std::vector<int>>;
  EXPECT_EQ(t.groups[0].subgroups, (Subgroups{{0, 1, 2, 3}}));
  EXPECT_EQ(t.groups[1].subgroups, (Subgroups{{0, 1}, {2, 3}}));
  EXPECT_EQ(t.groups[2].subgroups, (Subgroups{{0, 2}, {1, 3}}));
  EXPECT_EQ(t.groups[2].subgroup_of_rank, (std::vector<int>{0, 1, 0, 1}));
  // Members keep the written order: it is the collective-rank order.
  EXPECT_EQ(t.groups[3].subgroups, (Subgroups{{0, 1}, {3, 2}}));
  // An out-of-place call is a call of its own; calls are in place unless they say otherwise.
  ASSERT_EQ(t.collectives.size(), 5u);
  EXPECT_EQ(t.collectives[2].root, 1);
  EXPECT_TRUE(t.collectives[3].in_place);
  EXPECT_FALSE(t.collectives[4].in_place);
}

const std::string kParams = R"(version: 1
kind: trace
params:
  grad: 64MiB
  hidden: 2048
programs:
  - ranks: all
    streams: [compute, comm]
    ops:
      - {kernel: gemm, stream: compute, m: $hidden, n: $hidden, k: 512}
      - {collective: allreduce, stream: comm, size: $grad}
)";

TEST_F(TraceLoader, ParamsAndOverrides) {
  const Trace plain = parse(kParams, "0,1");
  EXPECT_EQ(plain.collectives[0].bytes, 64 * kMiB);
  EXPECT_EQ(plain.kernels[0].params.at("m"), 2048);

  const Trace changed = parse(kParams, "0,1", {"params.grad=128MiB", "params.hidden=4096", "launch.cpu_launch=1us"});
  EXPECT_EQ(changed.collectives[0].bytes, 128 * kMiB);
  EXPECT_EQ(changed.kernels[0].params.at("m"), 4096);
  EXPECT_EQ(changed.kernels[0].params.at("k"), 512);
  EXPECT_EQ(changed.launch.cpu_launch, 1e-6);
  EXPECT_EQ(changed.launch.kernel_gap, LaunchModel{}.kernel_gap);
}

TEST_F(TraceLoader, JsonAndYamlFormsGiveEqualTraces) {
  const std::string json = R"({
  "version": 1,
  "kind": "trace",
  "description": "two ranks, allreduce overlapping a GEMM",
  "ranks": 2,
  "launch": {"cpu_launch": "3us", "kernel_gap": "2us"},
  "groups": {"world": [[0, 1]]},
  "programs": [
    {"ranks": [0], "streams": ["compute", "comm"], "ops": [
      {"kernel": "gemm", "stream": "compute", "name": "fc1", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16"},
      {"gpu": "1.5ms", "stream": "compute", "name": "opaque"},
      {"collective": "allreduce", "stream": "comm", "group": "world", "size": "64MiB", "algo": "ring", "channels": 2,
       "algo_params": {"x": "y"}},
      {"record": "grads_ready", "stream": "comm"},
      {"wait": "grads_ready", "stream": "compute"},
      {"cpu": "20us", "name": "python"},
      {"send": 1, "size": 1048576, "stream": "comm"},
      {"memcpy": "d2h", "size": "2MiB", "stream": "compute"},
      {"kernel": "gemm", "stream": "compute", "name": "fc1", "m": 4096, "n": 4096, "k": 4096, "batch": 1},
      {"sync": "event", "event": "grads_ready"},
      {"sync": "stream", "stream": "comm"},
      {"sync": "device"}]},
    {"ranks": "1", "streams": ["comm"], "ops": [
      {"collective": "allreduce", "size": "64MiB", "algo": "ring", "channels": 2, "algo_params": {"x": "y"}},
      {"recv": 0, "size": "1MiB"}]}
  ]
})";
  const Trace from_json = load(write("trace.json", json), "0,1");
  const Trace from_yaml = load(write("trace.yaml", kRoundTrip), "0,1");
  EXPECT_EQ(from_json.origin.substr(from_json.origin.size() - 10), "trace.json");
  expect_same_trace(from_json, from_yaml);
  expect_same_trace(from_yaml, parse(kRoundTrip, "0,1"));
}

TEST_F(TraceLoader, JsonTracesTakeParamsAndOverrides) {
  const std::string json = R"({"version": 1, "kind": "trace", "params": {"grad": "64MiB"},
    "programs": [{"ranks": "all", "streams": ["comm"], "ops": [{"collective": "allreduce", "size": "$grad"}]}]})";
  const platforms::Allocation allocation = platforms::parse_allocation("0-7", platform_);
  const Trace t = load_workload(write("params.json", json), JobContext{platform_, allocation}, {"params.grad=1GiB"});
  EXPECT_EQ(t.collectives[0].bytes, 1024 * kMiB);
  EXPECT_EQ(t.ranks, 8);
}

TEST_F(TraceLoader, ShippedPresetsLoadAndDescribeThemselves) {
  const auto presets = list_workload_presets();
  ASSERT_FALSE(presets.empty());
  for (std::size_t i = 1; i < presets.size(); ++i) EXPECT_LT(presets[i - 1].name, presets[i].name);
  bool found = false;
  for (const WorkloadPresetInfo& preset : presets) {
    EXPECT_FALSE(preset.description.empty()) << preset.name;
    found = found || preset.name == "example-trace";
  }
  EXPECT_TRUE(found);

  const Trace t = load("example-trace", "");
  EXPECT_EQ(t.origin, "example-trace.yaml (preset)");
  EXPECT_EQ(t.ranks, 8);
  EXPECT_EQ(t.programs.size(), 1u);
  EXPECT_EQ(t.collectives.size(), 1u);  // both layers' allreduces are the same call
  EXPECT_EQ(t.kernels.size(), 3u);      // two GEMM shapes and the optimizer
}

// The complete example of docs/trace.md (its first yaml block) is a valid trace.
TEST_F(TraceLoader, DocumentedExampleLoads) {
  std::ifstream in(std::string(STEPSIM_DOCS_DIR) + "/trace.md");
  ASSERT_TRUE(in) << STEPSIM_DOCS_DIR;
  std::string line, yaml;
  bool inside = false;
  while (std::getline(in, line)) {
    if (inside && line == "```") break;
    if (inside) yaml += line + "\n";
    inside = inside || line == "```yaml";
  }
  ASSERT_FALSE(yaml.empty());
  const Trace t = parse(yaml, "0,1");
  EXPECT_EQ(t.programs.size(), 2u);
  EXPECT_EQ(t.groups.size(), 2u);
  EXPECT_EQ(t.collectives[0].bytes, 64 * kMiB);
}

TEST_F(TraceLoader, GeneratorsAreListedWithDescriptions) {
  bool found = false;
  for (const GeneratorInfo* info : GeneratorRegistry::instance().all()) {
    EXPECT_FALSE(info->description.empty()) << info->kind;
    found = found || info->kind == "trace";
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace stepsim::workloads
