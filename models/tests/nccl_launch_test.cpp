/// @file `gpus_per_thread`: one CPU thread launching several ranks' kernels one after another
/// (nccl-tests -g N): under NCCL 2.4 the collective waits for the launch calls before the last
/// rank's; later releases launch asynchronously, so the thread's calls only set a floor on the
/// back-to-back loop's time per call (issue_period).
#include <gtest/gtest.h>

#include "models/algorithm.hpp"
#include "platforms/config_error.hpp"
#include "platforms/loader.hpp"

namespace stepsim::models {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

/// The DGX-2 data set's run: allgather over `ranks` GPUs, NCCL 2.4 rules, `per_thread` GPUs
/// per CPU thread ("" = option absent).
Schedule lower_dgx2(int ranks, const std::string& per_thread) {
  const platforms::Platform platform = platforms::load_platform("dgx2", {});
  platforms::Allocation allocation;
  for (int g = 0; g < ranks; ++g) allocation.gpus.push_back(g);
  AlgorithmOptions options;
  options.extra["version"] = "2.4";
  if (!per_thread.empty()) options.extra["gpus_per_thread"] = per_thread;
  const CollectiveContext ctx{platform, allocation, options};
  CollectiveSpec spec;
  spec.op = CollectiveOp::allgather;
  spec.ranks = ranks;
  spec.bytes = 8 * kMiB;
  return AlgorithmRegistry::instance().get("nccl").make()->lower(spec, ctx);
}

// -g 12: the thread makes 11 launch calls of 4 us (Lin et al.'s T4, papers.md §3.1) before
// the 12th rank's kernel starts: 44 us on top of NCCL's own latency, nothing else changes.
TEST(NcclLaunch, TwelveGpusPerThreadWaitElevenLaunchCalls) {
  const Schedule alone = lower_dgx2(12, "");
  const Schedule serial = lower_dgx2(12, "12");
  EXPECT_NEAR(serial.launch_latency - alone.launch_latency, 11 * 4e-6, 1e-12);
  EXPECT_EQ(serial.algorithm, alone.algorithm);
  EXPECT_EQ(serial.channels, alone.channels);
  EXPECT_EQ(serial.rounds.size(), alone.rounds.size());
  EXPECT_DOUBLE_EQ(serial.protocol.step_latency, alone.protocol.step_latency);
  EXPECT_DOUBLE_EQ(serial.protocol.per_step_bandwidth_cap, alone.protocol.per_step_bandwidth_cap);
}

// Under NCCL 2.4 the serial launches delay the collective and set no floor.
TEST(NcclLaunch, Nccl24DelaysInsteadOfBoundingTheLoop) { EXPECT_EQ(lower_dgx2(12, "12").issue_period, 0); }

/// `op` of `bytes` over an H100 node's 8 GPUs with the nccl option `key=value` ("" = absent),
/// the release's defaults (HEAD).
Schedule lower_h100(CollectiveOp op, double bytes, const std::string& key, const std::string& value) {
  const platforms::Platform platform = platforms::load_platform("dgx-h100", {});
  platforms::Allocation allocation;
  for (int g = 0; g < 8; ++g) allocation.gpus.push_back(g);
  AlgorithmOptions options;
  if (!value.empty()) options.extra[key] = value;
  const CollectiveContext ctx{platform, allocation, options};
  return AlgorithmRegistry::instance().get("nccl").make()->lower({op, 8, bytes, 0}, ctx);
}
Schedule lower_h100(double bytes, const std::string& per_thread) {
  return lower_h100(CollectiveOp::allreduce, bytes, "gpus_per_thread", per_thread);
}

// Later releases: the thread's 8 launch calls (4 us each) bound the loop's time per call and
// delay nothing; the schedule is otherwise the one-thread-per-GPU schedule.
TEST(NcclLaunch, LaterReleasesBoundTheLoopByTheThreadsLaunchCalls) {
  const Schedule alone = lower_h100(1024, "");
  const Schedule serial = lower_h100(1024, "8");
  EXPECT_EQ(alone.issue_period, 0);
  EXPECT_NEAR(serial.issue_period, 8 * 4e-6, 1e-12);
  EXPECT_DOUBLE_EQ(serial.launch_latency, alone.launch_latency);
  EXPECT_EQ(serial.algorithm, alone.algorithm);
  EXPECT_EQ(lower_h100(1024, "12").issue_period, serial.issue_period);   // bounded by the ranks
}

// One GPU per thread is one process or thread per GPU: no serialisation, the default.
TEST(NcclLaunch, OneGpuPerThreadIsTheDefault) {
  EXPECT_DOUBLE_EQ(lower_dgx2(12, "1").launch_latency, lower_dgx2(12, "").launch_latency);
}

// A thread can only launch for the ranks of the collective: -g 12 over 4 ranks waits 3 calls.
TEST(NcclLaunch, SerialisationIsBoundedByTheRanks) {
  EXPECT_NEAR(lower_dgx2(4, "12").launch_latency - lower_dgx2(4, "").launch_latency, 3 * 4e-6, 1e-12);
}

TEST(NcclLaunch, RejectsWhatIsNotAPositiveInteger) {
  for (const char* bad : {"0", "-2", "twelve", "12x"}) EXPECT_THROW(lower_dgx2(12, bad), ConfigError) << bad;
}

/// The same allgather with `caller=VALUE` ("" = option absent).
Schedule lower_caller(const std::string& caller) {
  return lower_h100(CollectiveOp::allgather, 8 * kMiB, "caller", caller);
}

// One torch.distributed call: Lin et al.'s per-op host gap T1 (21 us) before NCCL launches;
// nothing else changes. caller=nccl is nccl-tests' direct call, the default.
TEST(NcclLaunch, TorchCallerAddsThePerOpHostGap) {
  const Schedule direct = lower_caller("");
  const Schedule torch = lower_caller("torch");
  EXPECT_NEAR(torch.launch_latency - direct.launch_latency, 21e-6, 1e-12);
  EXPECT_DOUBLE_EQ(torch.protocol.per_step_bandwidth_cap, direct.protocol.per_step_bandwidth_cap);
  EXPECT_DOUBLE_EQ(lower_caller("nccl").launch_latency, direct.launch_latency);
  try {
    lower_caller("jax");
    ADD_FAILURE() << "caller=jax accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("expected nccl or torch, got 'jax'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stepsim::models
