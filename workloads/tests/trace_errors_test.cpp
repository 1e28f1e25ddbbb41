// Bad trace input: every case must be a ConfigError naming the file, the YAML path and line (or
// the rank and op, or the flag that set the value), what is wrong and how to fix it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "platforms/config_error.hpp"
#include "platforms/loader.hpp"
#include "workloads/workload.hpp"

namespace stepsim::workloads {
namespace {

// A valid trace for two ranks; cases replace one line of it.
const std::string kGood = R"(version: 1
kind: trace
groups:
  world: [[0, 1]]
programs:
  - ranks: all
    streams: [compute, comm]
    ops:
      - {kernel: gemm, stream: compute, m: 64, n: 64, k: 64}
      - {record: grads, stream: compute}
      - {collective: allreduce, stream: comm, group: world, size: 64MiB}
      - {wait: grads, stream: comm}
      - {cpu: 1us}
)";

// Point-to-point: rank 0 sends rank 1 two messages.
const std::string kP2p = R"(version: 1
kind: trace
programs:
  - ranks: [0]
    streams: [comm]
    ops:
      - {send: 1, size: 1MiB}
      - {send: 1, size: 1MiB}
  - ranks: [1]
    streams: [comm]
    ops:
      - {recv: 0, size: 1MiB}
      - {recv: 0, size: 1MiB}
)";

// Collectives issued per rank.
const std::string kPerRank = R"(version: 1
kind: trace
programs:
  - ranks: [0]
    streams: [comm]
    ops:
      - {collective: allreduce, size: 1MiB}
      - {collective: allreduce, size: 1MiB}
  - ranks: [1]
    streams: [comm]
    ops:
      - {collective: allreduce, size: 1MiB}
      - {collective: allreduce, size: 1MiB}
)";

std::string replace_line(const std::string& base, int line, const std::string& text) {  // 1-based
  std::string out;
  std::size_t start = 0;
  for (int n = 1; start < base.size(); ++n) {
    std::size_t end = base.find('\n', start);
    out += (n == line ? text : base.substr(start, end - start)) + "\n";
    start = end + 1;
  }
  return out;
}
std::string replace_line(int line, const std::string& text) { return replace_line(kGood, line, text); }

struct Case {
  const char* label;
  std::string yaml;
  std::vector<std::string> overrides;
  std::vector<std::string> expected;  ///< substrings of the message
};

std::vector<Case> cases() {
  const std::string with_params = replace_line(3, "params: {grad: 1MiB}\ngroups:");
  return {
      {"malformed YAML",
       replace_line(9, "      - {kernel: gemm, stream: compute, m: 64]"),
       {},
       {"bad.yaml (line 9)", "malformed YAML", "fix the YAML syntax at that line"}},
      {"missing version",
       replace_line(1, "# no version"),
       {},
       {"bad.yaml: version (line 2)", "missing required key 'version'", "add `version: ...`"}},
      {"wrong version",
       replace_line(1, "version: 2"),
       {},
       {"bad.yaml: version (line 1)", "unsupported version 2", "write version: 1"}},
      {"unknown kind",
       replace_line(2, "kind: trase"),
       {},
       {"bad.yaml: kind (line 2)", "unknown workload kind 'trase'", "use one of: ", "trace"}},
      {"unknown top-level key",
       replace_line(3, "grops:"),
       {},
       {"bad.yaml: grops (line 3)", "unknown key 'grops'",
        "allowed keys here: version, kind, description, ranks, launch, params, groups, programs"}},
      {"unknown op key",
       replace_line(11, "      - {collective: allreduce, stream: comm, group: world, sise: 64MiB}"),
       {},
       {"bad.yaml: programs[0].ops[2].sise (line 11)", "unknown key 'sise'",
        "allowed keys here: collective, stream, name, group, size, root, in_place, algo"}},
      {"in_place not a boolean",
       replace_line(11, "      - {collective: allreduce, stream: comm, group: world, size: 64MiB, in_place: maybe}"),
       {},
       {"bad.yaml: programs[0].ops[2].in_place (line 11)", "true or false"}},
      {"op with two kinds",
       replace_line(13, "      - {cpu: 1us, kernel: gemm}"),
       {},
       {"bad.yaml: programs[0].ops[4] (line 13)", "the op has two kinds, 'cpu' and 'kernel'", "one op per kind"}},
      {"op with no kind",
       replace_line(13, "      - {stream: comm}"),
       {},
       {"bad.yaml: programs[0].ops[4] (line 13)", "the op has no kind",
        "start the op with one of: kernel, gpu, collective"}},
      {"unknown stream",
       replace_line(9, "      - {kernel: gemm, stream: compte, m: 64, n: 64, k: 64}"),
       {},
       {"bad.yaml: programs[0].ops[0].stream (line 9)", "unknown stream 'compte'", "declared: compute, comm"}},
      {"stream left out with two streams",
       replace_line(10, "      - {record: grads}"),
       {},
       {"bad.yaml: programs[0].ops[1].stream (line 10)", "the op needs a stream", "compute, comm"}},
      {"stream declared twice",
       replace_line(7, "    streams: [compute, compute]"),
       {},
       {"bad.yaml: programs[0].streams[1] (line 7)", "stream 'compute' is declared twice"}},
      {"unknown group",
       replace_line(11, "      - {collective: allreduce, stream: comm, group: tp, size: 64MiB}"),
       {},
       {"bad.yaml: programs[0].ops[2].group (line 11)", "unknown group 'tp'",
        "declare it under groups: (known: world)"}},
      {"rank outside the job",
       replace_line(6, "  - ranks: [0, 1, 5]"),
       {},
       {"bad.yaml: programs[0].ranks[2] (line 6)",
        "rank 5 is outside the job: the job has 2 GPUs of dgx-a100 (ranks 0-1)",
        "give the job more GPUs (--gpus, --nodes)"}},
      {"group rank outside the job",
       replace_line(4, "  world: [\"0-2\"]"),
       {},
       {"bad.yaml: groups.world[0] (line 4)", "rank 2 is outside the job"}},
      {"zero size",
       replace_line(11, "      - {collective: allreduce, stream: comm, group: world, size: 0}"),
       {},
       {"bad.yaml: programs[0].ops[2].size (line 11)", "size must be > 0, got 0", "64MiB"}},
      {"negative size",
       replace_line(11, "      - {collective: allreduce, stream: comm, group: world, size: -1MiB}"),
       {},
       {"bad.yaml: programs[0].ops[2].size (line 11)", "'-1MiB' is not a valid size", "write a size"}},
      {"unknown kernel kind",
       replace_line(9, "      - {kernel: gem, stream: compute, m: 64, n: 64, k: 64}"),
       {},
       {"bad.yaml: programs[0].ops[0].kernel (line 9)", "unknown kernel kind 'gem'", "use one of: ", "gemm"}},
      {"unknown kernel parameter",
       replace_line(9, "      - {kernel: gemm, stream: compute, m: 64, n: 64, q: 64}"),
       {},
       {"bad.yaml: programs[0].ops[0].q (line 9)", "unknown key 'q'",
        "kernel, stream, name, dtype, histogram, m, n, k, batch"}},
      {"missing kernel parameter",
       replace_line(9, "      - {kernel: gemm, stream: compute, m: 64, n: 64}"),
       {},
       {"bad.yaml: programs[0].ops[0] (line 9)", "missing required parameter 'k'", "add k"}},
      {"kernel parameter below its minimum",
       replace_line(9, "      - {kernel: gemm, stream: compute, m: 0, n: 64, k: 64}"),
       {},
       {"bad.yaml: programs[0].ops[0] (line 9)", "parameter 'm' of kernel kind 'gemm' must be a finite number >= 1"}},
      {"unknown dtype",
       replace_line(9, "      - {kernel: gemm, stream: compute, m: 64, n: 64, k: 64, dtype: fp9}"),
       {},
       {"bad.yaml: programs[0].ops[0].dtype (line 9)", "unknown dtype 'fp9'", "bf16"}},
      {"wait before record",
       replace_line(replace_line(10, "      - {wait: grads, stream: comm}"), 12,
                    "      - {record: grads, stream: compute}"),
       {},
       {"bad.yaml: programs[0].ops[1].wait (line 10)", "wait on event 'grads' before any record of it",
        "add {record: grads, stream: ...} earlier"}},
      {"sync on an event never recorded",
       replace_line(13, "      - {sync: event, event: other}"),
       {},
       {"bad.yaml: programs[0].ops[4].event (line 13)", "sync on event 'other' before any record of it"}},
      {"sync on an unknown target",
       replace_line(13, "      - {sync: host}"),
       {},
       {"bad.yaml: programs[0].ops[4].sync (line 13)", "unknown value 'host'", "device, stream, event"}},
      {"sync device with a stream",
       replace_line(13, "      - {sync: device, stream: comm}"),
       {},
       {"bad.yaml: programs[0].ops[4].stream (line 13)", "unknown key 'stream'", "allowed keys here: sync, name"}},
      {"bad duration",
       replace_line(13, "      - {cpu: 1 parsec}"),
       {},
       {"bad.yaml: programs[0].ops[4].cpu (line 13)", "not a valid duration", "1.5ms"}},
      {"unknown collective",
       replace_line(11, "      - {collective: allreduced, stream: comm, size: 64MiB}"),
       {},
       {"bad.yaml: programs[0].ops[2].collective (line 11)", "unknown collective 'allreduced'",
        "allreduce, broadcast"}},
      {"unknown algorithm",
       replace_line(11, "      - {collective: allreduce, stream: comm, size: 64MiB, algo: rings}"),
       {},
       {"bad.yaml: programs[0].ops[2].algo (line 11)", "unknown algorithm 'rings'", "nccl", "ring"}},
      {"root outside the subgroup",
       replace_line(11, "      - {collective: broadcast, stream: comm, size: 64MiB, root: 2}"),
       {},
       {"bad.yaml: programs[0].ops[2].group (line 11)", "root 2 is outside a subgroup of 'world' with 2 ranks",
        "root is a rank within the subgroup: 0-1"}},
      {"rank issuing on a group it is not in",
       replace_line(replace_line(4, "  world: [[0, 1]]\n  solo: [[0]]"), 12,
                    "      - {collective: allreduce, stream: comm, group: solo, size: 64MiB}"),
       {},
       {"bad.yaml: programs[0].ops[2].group (line 12)", "rank 1 runs programs[0] but is not a member of group 'solo'",
        "add rank 1 to a subgroup of 'solo'"}},
      {"bad memcpy direction",
       replace_line(13, "      - {memcpy: h2h, size: 1MiB, stream: compute}"),
       {},
       {"bad.yaml: programs[0].ops[4].memcpy (line 13)", "unknown value 'h2h'", "h2d, d2h, d2d"}},
      {"bad host memory",
       replace_line(13, "      - {memcpy: h2d, host_memory: swapped, size: 1MiB, stream: compute}"),
       {},
       {"bad.yaml: programs[0].ops[4].host_memory (line 13)", "unknown value 'swapped'", "pinned, pageable"}},
      {"pageable copy the CPU does not wait for",
       replace_line(13, "      - {memcpy: h2d, host_memory: pageable, size: 1MiB, stream: compute}"),
       {},
       {"rank 0, programs[0].ops[4] (memcpy", "returns only once the driver has staged all of it",
        "add `{sync: stream, stream: compute}` right after it"}},
      {"pageable device-to-device copy",
       replace_line(13, "      - {memcpy: d2d, host_memory: pageable, size: 1MiB, stream: compute}\n      - {sync: stream, stream: compute}"),
       {},
       {"rank 0, programs[0].ops[4] (memcpy", "a device-to-device copy has no host memory", "drop host_memory"}},
      {"subgroups overlapping",
       replace_line(4, "  world: [[0, 1], [1]]"),
       {},
       {"bad.yaml: groups.world[1] (line 4)", "rank 1 is in subgroups 0 and 1 of group 'world'", "must be disjoint"}},
      {"bare rank in a group",
       replace_line(4, "  world: [0, 1]"),
       {},
       {"bad.yaml: groups.world[0] (line 4)", "a bare rank is ambiguous here", "[[0, ...]]"}},
      {"strided group not dividing the job",
       replace_line(4, "  world: {size: 3}"),
       {},
       {"bad.yaml: groups.world.size (line 4)", "2 ranks do not split into subgroups of 3 consecutive ranks",
        "dividing the job's 2 ranks"}},
      {"ranks mismatch with the job",
       replace_line(3, "ranks: 4\ngroups:"),
       {},
       {"bad.yaml: ranks (line 3)", "the trace is written for 4 ranks but the job has 2 GPUs of dgx-a100",
        "run it on 4 GPUs (--gpus picks them, e.g. --gpus 0-3; --nodes adds servers)"}},
      {"rank without a program",
       replace_line(6, "  - ranks: [0]"),
       {},
       {"bad.yaml: programs (line 6)", "rank 1 of the job runs no program", "`ranks: all` covers every rank",
        "--gpus"}},
      {"rank in two programs",
       replace_line(kP2p, 9, "  - ranks: [0, 1]"),
       {},
       {"bad.yaml: programs[1].ranks (line 9)", "rank 0 already runs programs[0]", "exactly one program"}},
      {"send to self",
       replace_line(kP2p, 7, "      - {send: 0, size: 1MiB}"),
       {},
       {"bad.yaml: programs[0].ops[0].send (line 7)", "rank 0 runs this program, so it would send to itself",
        "name another rank as the peer"}},
      {"peer outside the job",
       replace_line(kP2p, 7, "      - {send: 2, size: 1MiB}"),
       {},
       {"bad.yaml: programs[0].ops[0].send (line 7)", "rank 2 is outside the job"}},
      {"mismatched send/recv counts",
       replace_line(kP2p, 13, "      - {cpu: 1us}"),
       {},
       {"bad.yaml: ranks 0 -> 1", "rank 0 sends 2 messages to rank 1 but rank 1 posts 1 recvs from rank 0",
        "pair every send with a recv"}},
      {"mismatched send/recv sizes",
       replace_line(kP2p, 13, "      - {recv: 0, size: 2MiB}"),
       {},
       {"bad.yaml: rank 1, programs[1].ops[1] (recv 'recv')",
        "message #1 from rank 0 is 1MiB but the recv expects 2MiB", "same size"}},
      {"mismatched collective counts",
       replace_line(kPerRank, 13, "      - {cpu: 1us}"),
       {},
       {"bad.yaml: group 'world' subgroup 0", "rank 0 issues 2 collectives on it but rank 1 issues 1",
        "same collectives in the same order"}},
      {"mismatched collectives",
       replace_line(kPerRank, 13, "      - {collective: allgather, size: 1MiB}"),
       {},
       {"bad.yaml: rank 1, programs[1].ops[1] (collective 'allgather')",
        "collective #1 on group 'world' is allgather of 1MiB (root 0, algo nccl) but rank 0 issues allreduce of 1MiB",
        "must agree on op, size, root and algo"}},
      {"unknown parameter",
       replace_line(with_params, 12, "      - {collective: allreduce, stream: comm, group: world, size: $gradd}"),
       {},
       {"bad.yaml: programs[0].ops[2].size (line 12)", "unknown parameter '$gradd'",
        "define it under params: (defined: $grad)"}},
      {"parameter without params",
       replace_line(11, "      - {collective: allreduce, stream: comm, group: world, size: $grad}"),
       {},
       {"bad.yaml: programs[0].ops[2].size (line 11)", "unknown parameter '$grad'", "top-level `params:` section"}},
      {"bad value set by -p",
       replace_line(with_params, 12, "      - {collective: allreduce, stream: comm, group: world, size: $grad}"),
       {"params.grad=0"},
       {"bad.yaml: params.grad (set by -p workload.params.grad=0)", "size must be > 0, got 0"}},
      {"unknown key set by -p",
       kGood,
       {"colour=red"},
       {"bad.yaml: colour (set by -p workload.colour=red)", "unknown key 'colour'",
        "allowed keys here: version, kind"}},
      {"malformed -p", kGood, {"params.grad"}, {"-p workload.params.grad", "not a KEY=VALUE assignment"}},
  };
}

class TraceErrors : public ::testing::Test {
 protected:
  std::string message(const std::string& yaml, const std::vector<std::string>& overrides) {
    const platforms::Allocation allocation = platforms::parse_allocation("0,1", platform_);
    try {
      parse_workload(yaml, "bad.yaml", JobContext{platform_, allocation}, overrides);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }
  std::string load_message(const std::string& path) {
    const platforms::Allocation allocation = platforms::parse_allocation("0,1", platform_);
    try {
      load_workload(path, JobContext{platform_, allocation});
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
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

TEST_F(TraceErrors, TheBaseTracesAreValid) {
  EXPECT_EQ(message(kGood, {}), "");
  EXPECT_EQ(message(kP2p, {}), "");
  EXPECT_EQ(message(kPerRank, {}), "");
}

TEST_F(TraceErrors, EveryBadInputSaysWhereWhatAndHow) {
  int checked = 0;
  for (const Case& c : cases()) {
    const std::string what = message(c.yaml, c.overrides);
    ++checked;
    ASSERT_FALSE(what.empty()) << c.label << ": no ConfigError";
    for (const std::string& part : c.expected) EXPECT_NE(what.find(part), std::string::npos) << c.label << ": " << what;
    EXPECT_NE(what.find("(fix: "), std::string::npos) << c.label << ": " << what;
  }
  EXPECT_GE(checked, 40);
}

TEST_F(TraceErrors, MalformedJsonNamesTheLine) {
  const std::string path = write("bad.json", "{\"version\": 1,\n \"kind\": \"trace\",\n \"programs\": [}\n");
  const std::string what = load_message(path);
  EXPECT_NE(what.find(path + " (line 3)"), std::string::npos) << what;
  EXPECT_NE(what.find("malformed JSON"), std::string::npos) << what;
  EXPECT_NE(what.find("fix the JSON syntax at that line"), std::string::npos) << what;
}

TEST_F(TraceErrors, JsonErrorsNameTheKeyPath) {
  const std::string path = write("stream.json", R"({"version": 1, "kind": "trace", "programs": [
    {"ranks": "all", "streams": ["compute"], "ops": [{"cpu": "1us"}, {"gpu": "1ms", "stream": "comm"}]}]})");
  const std::string what = load_message(path);
  EXPECT_NE(what.find(path + ": programs[0].ops[1].stream: unknown stream 'comm'"), std::string::npos) << what;
  EXPECT_NE(what.find("declared: compute"), std::string::npos) << what;

  const std::string generator = write("fsdp.json", R"({"version": 1, "kind": "fsdp", "model": "llama"})");
  const std::string kind = load_message(generator);
  EXPECT_NE(kind.find(generator + ": kind: a JSON workload must be a trace, got kind 'fsdp'"), std::string::npos)
      << kind;
  EXPECT_NE(kind.find("write a generator's workload (fsdp) in YAML"), std::string::npos) << kind;

  const std::string array = write("array.json", "[1, 2]");
  EXPECT_NE(load_message(array).find("expected a trace document (a JSON object)"), std::string::npos);
}

TEST_F(TraceErrors, UnknownWorkloadListsThePresets) {
  const std::string what = load_message("no-such-workload");
  EXPECT_NE(what.find("no-such-workload: neither a workload preset nor a readable file"), std::string::npos) << what;
  EXPECT_NE(what.find("example-trace"), std::string::npos) << what;
}

}  // namespace
}  // namespace stepsim::workloads
