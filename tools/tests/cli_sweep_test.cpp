// `stepsim sweep` and `stepsim merge` as a user runs them, including kill -9 in the middle of
// a sweep followed by --resume.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "tools/tests/cli_run.hpp"

namespace stepsim::cli_test {
namespace {

// 60 iteration replays (one process each): slow enough to be killed half-way.
const char* kSlowSweep = R"(version: 1
base:
  simulate: {platform: dgx-h100, workload: llama3-8b}
axes:
  - param: nodes
    values: [1, 2, 4]
  - param: workload.training.sequence
    values: [1024, 2048, 4096, 8192]
  - param: workload.training.micro_batch
    range: {from: 1, to: 5, step: 1}
metric: iteration_time_s
)";

const char* kFastSweep = R"(version: 1
name: allreduce on dgx1-v100
base:
  collective: {platform: dgx1-v100, op: allreduce, gpus: 0-4}
axes:
  - param: size
    range: {from: 1KiB, to: 1GiB, factor: 32}
  - param: algo
    values: [ring, tree, nccl]
metric: busbw_GBps
group_by: size
)";

/// A temporary directory, removed with everything in it when the test ends.
struct TempDir {
  std::string path;
  TempDir() {
    char name[] = "/tmp/cli-sweep-XXXXXX";
    path = mkdtemp(name);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  operator const std::string&() const { return path; }
};

std::string write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

/// The complete lines of a file (a half-written last line left out).
std::vector<std::string> complete_lines(const std::string& path) {
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> lines;
  for (std::size_t start = 0, end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
    lines.push_back(text.substr(start, end - start));
  return lines;
}

/// Starts `stepsim ARGS...` with its output thrown away; returns its pid.
pid_t start_stepsim(const std::vector<std::string>& args) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    std::vector<char*> argv = {const_cast<char*>(STEPSIM_BINARY)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(STEPSIM_BINARY, argv.data());
    _exit(127);
  }
  return pid;
}

TEST(CliSweep, KillNineThenResumeLosesAndRepeatsNoFinishedPoint) {
  const TempDir temp;
  const std::string& dir = temp;
  const std::string sweep = write_file(dir + "/slow.yaml", kSlowSweep), out = dir + "/out.csv";
  const pid_t pid = start_stepsim({"sweep", sweep, "--out", out, "--jobs", "2"});
  // Kill it (SIGKILL: no chance to clean up) once 10 rows are in the file.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  int status = 0;
  bool exited = false;
  while (complete_lines(out).size() < 11 && std::chrono::steady_clock::now() < deadline)
    if ((exited = waitpid(pid, &status, WNOHANG) == pid)) break;
    else std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_FALSE(exited) << "the sweep ended before it could be killed";
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  // Its workers die with it: the file stops growing.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::vector<std::string> before = complete_lines(out);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(complete_lines(out), before);
  ASSERT_GE(before.size(), 11u);
  ASSERT_LT(before.size(), 61u) << "the sweep had finished";

  const RunResult resumed = run_stepsim({"sweep", sweep, "--out", out, "--resume", "--jobs", "2"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const std::size_t kept = before.size() - 1;
  // Only the missing points ran again.
  EXPECT_NE(resumed.err.find(", " + std::to_string(kept) + " from " + out + ", " + std::to_string(60 - kept) +
                             " evaluated"),
            std::string::npos)
      << resumed.err;

  const std::vector<std::string> after = complete_lines(out);
  ASSERT_EQ(after.size(), 61u);
  std::map<std::string, int> ids;
  std::set<int> indices;
  for (std::size_t i = 1; i < after.size(); ++i) {
    ++ids[after[i].substr(0, after[i].find(','))];
    indices.insert(std::stoi(after[i].substr(after[i].find(',') + 1)));
    EXPECT_EQ(after[i].back(), ',') << "a point failed: " << after[i];   // empty error column
  }
  EXPECT_EQ(ids.size(), 60u);
  for (const auto& [id, count] : ids) EXPECT_EQ(count, 1) << id << " written twice";
  EXPECT_EQ(indices.size(), 60u);
  EXPECT_EQ(*indices.rbegin(), 59);
  // Every row finished before the kill is still there, unchanged, where it was.
  for (std::size_t i = 0; i < before.size(); ++i) EXPECT_EQ(after[i], before[i]);

  // And the result is the one an uninterrupted run gives.
  const RunResult full = run_stepsim({"sweep", sweep, "--out", dir + "/full.csv", "--jobs", "2"});
  ASSERT_EQ(full.exit_code, 0) << full.err;
  std::vector<std::string> a = after, b = complete_lines(dir + "/full.csv");
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b);
  EXPECT_EQ(resumed.out, full.out);
}

TEST(CliSweep, AWorkerKilledMidSweepLosesNoPoint) {
  // 300 `algo: best` points (every algorithm lowered, a few ms each) shared by two workers.
  const TempDir temp;
  const std::string& dir = temp;
  const std::string sweep = write_file(dir + "/best.yaml", R"(version: 1
base:
  collective: {platform: dgx1-v100, op: allreduce, algo: best}
axes:
  - param: gpus
    values: ["0-1", "0-2", "0-3", "0-4", "0-5", "0-6", "0-7", "0,1,4", "0,1,2,4,5", "0,1,2,4,7"]
  - param: size
    range: {from: 1KiB, to: 512GiB, factor: 2}
metric: time_s
)");
  const std::string out = dir + "/out.csv";
  const pid_t pid = start_stepsim({"sweep", sweep, "--out", out, "--jobs", "2"});
  const std::string children = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children";
  pid_t worker = 0;
  while (worker == 0 && waitpid(pid, nullptr, WNOHANG) == 0) {
    if (complete_lines(out).size() > 5) std::ifstream(children) >> worker;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GT(worker, 0) << "the sweep ended before a worker could be killed";
  // Both workers are mid-way through their 150 points, so the kill lands on a busy one.
  ASSERT_LT(complete_lines(out).size(), 200u);
  ASSERT_EQ(kill(worker, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const std::vector<std::string> lines = complete_lines(out);
  ASSERT_EQ(lines.size(), 301u);
  std::set<std::string> ids;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    ids.insert(lines[i].substr(0, lines[i].find(',')));
    // The point the worker was evaluating ran again on its own and succeeded.
    EXPECT_EQ(lines[i].back(), ',') << lines[i];
  }
  EXPECT_EQ(ids.size(), 300u);
}

/// The processes `depth` levels below `pid` (1: its children), from /proc.
std::vector<pid_t> descendants(pid_t pid, int depth) {
  std::vector<pid_t> found;
  std::ifstream children("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  for (pid_t child; children >> child;) {
    if (depth == 1) found.push_back(child);
    else
      for (pid_t below : descendants(child, depth - 1)) found.push_back(below);
  }
  return found;
}

// Event simulations run in a child process each (SimGrid keeps one simulation per process):
// after kill -9 of `stepsim sweep` (two levels down: worker, then simulation) or of `stepsim
// simulate --engine event` (one level), none of them may run on under init. Both jobs replay
// 64 ranks (about 12 s each), long enough to be killed in the middle.
TEST(CliSweep, KillNineLeavesNoSimulationRunning) {
  const TempDir temp;
  const std::string& dir = temp;
  const std::string sweep = write_file(dir + "/event.yaml", R"(version: 1
base:
  simulate: {platform: dgx-h100, workload: llama3-8b, engine: event}
axes:
  - param: nodes
    values: [8, 8]
metric: iteration_time_s
)");
  const std::vector<std::pair<std::vector<std::string>, int>> runs = {
      {{"sweep", sweep, "--jobs", "2"}, 2}, {{"simulate", "dgx-h100", "llama3-8b", "--nodes", "8", "--engine", "event"}, 1}};
  for (const auto& [args, depth] : runs) {
    const pid_t pid = start_stepsim(args);
    std::vector<pid_t> simulations;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (simulations.empty() && std::chrono::steady_clock::now() < deadline && waitpid(pid, nullptr, WNOHANG) == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      simulations = descendants(pid, depth);
    }
    ASSERT_FALSE(simulations.empty()) << args[0] << ": no simulation started before it ended";
    std::vector<pid_t> below = descendants(pid, 1);
    if (depth == 2) below.insert(below.end(), simulations.begin(), simulations.end());
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    ASSERT_EQ(waitpid(pid, nullptr, 0), pid);
    // Running, not a zombie waiting for init (or a container's init that never reaps) to collect it.
    const auto alive = [&] {
      return std::count_if(below.begin(), below.end(), [](pid_t p) {
        std::ifstream stat("/proc/" + std::to_string(p) + "/stat");
        std::string pid_field, name, state;
        return stat >> pid_field >> name >> state && state != "Z" && state != "X";
      });
    };
    const auto gone_by = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (alive() > 0 && std::chrono::steady_clock::now() < gone_by)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(alive(), 0) << args[0] << ": a process outlived kill -9 of its parent by 1 s";
    for (pid_t p : below) kill(p, SIGKILL);   // a failed check leaves nothing behind either
  }
}

TEST(CliSweep, RanksPlotsAndMergesShards) {
  const TempDir temp;
  const std::string& dir = temp;
  const std::string sweep = write_file(dir + "/fast.yaml", kFastSweep);
  const RunResult all = run_stepsim({"sweep", sweep, "--out", dir + "/all.csv", "--plot", dir + "/all.svg"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(all.out.rfind("best busbw_GBps (max) per size\n", 0), 0u) << all.out;
  EXPECT_EQ(std::count(all.out.begin(), all.out.end(), '\n'), 2 + 5);   // title, header, five sizes
  EXPECT_TRUE(all.err.find("\x1b[K") == std::string::npos) << "a progress bar on a non-terminal";
  std::ifstream svg(dir + "/all.svg");
  const std::string plot((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  EXPECT_NE(plot.find(">allreduce on dgx1-v100</text>"), std::string::npos);

  std::vector<std::string> merge = {"merge"};
  for (const char* shard : {"0/2", "1/2"}) {
    const std::string file = dir + "/shard" + std::string(1, shard[0]) + ".jsonl";
    const RunResult r = run_stepsim({"sweep", sweep, "--shard", shard, "--out", file});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    merge.push_back(file);
  }
  merge.insert(merge.end(), {"-o", dir + "/merged.csv"});
  const RunResult merged = run_stepsim(merge);
  ASSERT_EQ(merged.exit_code, 0) << merged.err;
  std::vector<std::string> a = complete_lines(dir + "/all.csv"), b = complete_lines(dir + "/merged.csv");
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b);
}

TEST(CliSweep, BadInputExitsWith2AndSaysWhereAndHowToFix) {
  const TempDir temp;
  const std::string& dir = temp;
  const std::string good = write_file(dir + "/good.yaml", kFastSweep);
  std::string unknown_key = kFastSweep;
  unknown_key.replace(unknown_key.find("group_by"), 8, "groupby");
  std::string empty_axis = kFastSweep;
  empty_axis.replace(empty_axis.find("[ring, tree, nccl]"), 18, "[]");
  std::string unknown_param = kFastSweep;
  unknown_param.replace(unknown_param.find("param: algo"), 11, "param: algorithm");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"sweep", write_file(dir + "/k.yaml", unknown_key)}, "k.yaml: groupby (line 11): unknown key 'groupby'"},
      {{"sweep", write_file(dir + "/e.yaml", empty_axis)}, "e.yaml: axes[1] (line 8): empty axis"},
      {{"sweep", write_file(dir + "/p.yaml", unknown_param)}, "unknown param 'algorithm' for a collective sweep"},
      {{"sweep", dir + "/missing.yaml"}, "cannot read the file"},
      {{"sweep", good, "--resume"}, "--resume: there is no --out file"},
      {{"sweep", good, "--out", dir + "/r.json"}, "unknown result format"},
      {{"sweep", good, "--shard", "2/2"}, "shard 2/2 does not exist"},
      {{"sweep", good, "--shard", "x"}, "--shard x: not K/N"},
      {{"sweep", good, "--plot", dir + "/p.png"}, "name a .svg file"},
  };
  for (const auto& [args, message] : cases) {
    const RunResult r = run_stepsim(args);
    EXPECT_EQ(r.exit_code, 2) << message;
    EXPECT_NE(r.err.find(message), std::string::npos) << "expected: " << message << "\ngot: " << r.err;
    EXPECT_NE(r.err.find("fix:"), std::string::npos) << r.err;
  }
  // An existing output without --resume is refused, not overwritten.
  ASSERT_EQ(run_stepsim({"sweep", good, "--out", dir + "/o.csv"}).exit_code, 0);
  const RunResult again = run_stepsim({"sweep", good, "--out", dir + "/o.csv"});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("pass --resume"), std::string::npos) << again.err;
}

}  // namespace
}  // namespace stepsim::cli_test
