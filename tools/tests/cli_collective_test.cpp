// `stepsim collective` and `stepsim presets` as a user runs them.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "tools/tests/cli_run.hpp"

namespace stepsim::cli_test {
namespace {

nlohmann::json run_json(std::vector<std::string> args) {
  args.insert(args.begin(), "collective");
  args.push_back("--format");
  args.push_back("json");
  RunResult r = run_stepsim(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(CliCollective, JsonHasTheNcclTestsKeysAndDefinitions) {
  auto j = run_json({"dgx-h100", "--op", "allreduce", "--size", "1GiB"});
  for (const char* key : {"op", "algo", "ranks", "nodes", "size_bytes", "time_s", "algbw_GBps", "busbw_GBps"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["op"], "allreduce");
  EXPECT_EQ(j["algo"], "nccl");
  EXPECT_EQ(j["ranks"], 8);
  EXPECT_EQ(j["nodes"], 1);
  EXPECT_EQ(j["size_bytes"].get<double>(), 1073741824.0);
  const double time = j["time_s"].get<double>();
  ASSERT_GT(time, 0);
  EXPECT_NEAR(j["algbw_GBps"].get<double>(), 1073741824.0 / time / 1e9, 1e-9);
  EXPECT_NEAR(j["busbw_GBps"].get<double>(), j["algbw_GBps"].get<double>() * 2 * 7 / 8, 1e-9);
}

// nccl-tests -g 8 with a current NCCL: the thread's 8 launch calls (4 us each) bound a small
// call's time in the back-to-back loop, both engines alike; a large call is the GPUs' time.
TEST(CliCollective, OneThreadsLaunchCallsBoundSmallCallsOnly) {
  const std::vector<std::string> serial = {"--algo", "nccl", "--algo-param", "gpus_per_thread=8"};
  for (const char* engine : {"analytical", "event"}) {
    auto with = [&](const char* size, bool per_thread) {
      std::vector<std::string> args = {"dgx-h100", "--op", "allreduce", "--size", size, "--engine", engine};
      if (per_thread) args.insert(args.end(), serial.begin(), serial.end());
      return run_json(args)["time_s"].get<double>();
    };
    EXPECT_LT(with("1KiB", false), 32e-6) << engine;
    EXPECT_DOUBLE_EQ(with("1KiB", true), 32e-6) << engine;
    EXPECT_DOUBLE_EQ(with("1GiB", true), with("1GiB", false)) << engine;
  }
}

// A calibrated ring_chain factor scales NCCL's broadcast and reduce (ring chains) and leaves
// the ring collectives alone.
TEST(CliCollective, RingChainFactorScalesOnlyBroadcastAndReduce) {
  const std::string half = "calibration.algorithms.ring_chain.efficiency_scale=0.5";
  auto busbw = [&](const char* op, bool calibrated) {
    std::vector<std::string> args = {"dgx-a100", "--op", op, "--size", "4GiB"};
    if (calibrated) args.insert(args.end(), {"-p", half});
    return run_json(args)["busbw_GBps"].get<double>();
  };
  for (const char* op : {"broadcast", "reduce"}) EXPECT_NEAR(busbw(op, true) / busbw(op, false), 0.5, 0.02) << op;
  for (const char* op : {"allreduce", "allgather"}) EXPECT_DOUBLE_EQ(busbw(op, true), busbw(op, false)) << op;
}

// A link's achieved fraction (the preset's `achieved_fraction`, or a calibrated factor on top)
// is what the wire achieves: NCCL still sizes its graph from the links it detects (12 NVLinks,
// the NIC's port rate), so its channels and choice do not move; the fraction shows only where
// the achieved rate falls below NCCL's per-channel figures.
TEST(CliCollective, AchievedFractionsScaleTheWireNotNcclsView) {
  auto run = [&](const char* preset, const char* nodes, const std::string& fraction) {
    std::vector<std::string> args = {preset, "--op", "allreduce", "--size", "1GiB", "--nodes", nodes};
    if (!fraction.empty()) args.insert(args.end(), {"-p", fraction});
    return run_json(args);
  };
  struct Case {
    const char* preset;
    const char* nodes;
    const char* key;
  };
  for (const Case& c : {Case{"dgx-a100", "1", "calibration.links.nvlink.bandwidth_scale="},
                        Case{"dgx-h100", "2", "calibration.links.network.bandwidth_scale="},
                        Case{"dgx-a100", "1", "node.nvswitch.achieved_fraction="}}) {
    const std::string key = c.key;
    const auto base = run(c.preset, c.nodes, "");
    const auto slight = run(c.preset, c.nodes, key + "0.97");
    EXPECT_EQ(slight["channels"], base["channels"]) << key;
    EXPECT_EQ(slight["schedule"], base["schedule"]) << key;
    const auto halved = run(c.preset, c.nodes, key + "0.3");
    EXPECT_EQ(halved["channels"], base["channels"]) << key;
    EXPECT_LT(halved["busbw_GBps"].get<double>(), 0.6 * base["busbw_GBps"].get<double>()) << key;
  }
}

// For the engines a link achieving half its rate is a link rated at half: a ring allgather over
// NVLinks achieving 0.5 of 25 GB/s each takes what one over 12.5 GB/s NVLinks takes.
TEST(CliCollective, EnginesMoveDataAtTheAchievedRate) {
  for (const char* engine : {"analytical", "event"}) {
    auto time = [&](const std::string& setting) {
      return run_json({"dgx-h100", "--op", "allgather", "--size", "256MiB", "--algo", "ring", "--engine", engine,
                       "-p", setting})["time_s"].get<double>();
    };
    const double achieved = time("node.nvswitch.achieved_fraction=0.5");
    EXPECT_NEAR(achieved, time("gpu.nvlink_bandwidth=12.5GBps"), 1e-9 * achieved) << engine;
    EXPECT_GT(achieved, 1.8 * time("node.nvswitch.achieved_fraction=1")) << engine;
  }
}

TEST(CliCollective, EveryAlgorithmPassesTheCheckerThroughTheCli) {
  for (const char* algo : {"ring", "tree", "rhd", "direct", "nccl"}) {
    for (const char* op : {"allreduce", "broadcast"}) {
      RunResult r = run_stepsim({"collective", "dgx1-v100", "--gpus", "0,1,2,4,5", "--op", op, "--size",
                                 "4MiB", "--algo", algo, "--check"});
      EXPECT_EQ(r.exit_code, 0) << algo << " " << op << ": " << r.err;
    }
  }
}

TEST(CliCollective, BestPicksTheFastestCandidate) {
  auto j = run_json({"dgx1-v100", "--op", "allgather", "--size", "64MiB", "--algo", "best"});
  ASSERT_TRUE(j.contains("candidates"));
  ASSERT_GE(j["candidates"].size(), 3u);
  double fastest = INFINITY;
  std::string fastest_name;
  for (const auto& c : j["candidates"])
    if (c["time_s"].get<double>() < fastest) {
      fastest = c["time_s"].get<double>();
      fastest_name = c["algo"].get<std::string>();
    }
  EXPECT_EQ(j["algo"], fastest_name);
  EXPECT_EQ(j["time_s"].get<double>(), fastest);
}

TEST(CliCollective, EnginesAgreeOnAnUncontendedRing) {
  std::vector<std::string> base = {"dgx-h100", "--op", "allgather", "--size", "256MiB", "--algo", "ring"};
  auto analytical = run_json(base);
  base.insert(base.end(), {"--engine", "event"});
  auto event = run_json(base);
  const double a = analytical["time_s"].get<double>();
  const double e = event["time_s"].get<double>();
  EXPECT_LT(std::abs(a - e) / a, 1e-3) << a << " vs " << e;
}

TEST(CliCollective, NodesAndAllocationsShapeTheJob) {
  auto multi = run_json({"dgx-h100", "--nodes", "2", "--op", "allreduce", "--size", "64MiB", "--algo", "ring"});
  EXPECT_EQ(multi["ranks"], 16);
  EXPECT_EQ(multi["nodes"], 2);
  auto fragmented = run_json({"dgx-h100", "--nodes", "2", "--gpus", "n0:0-2,n1:0-4", "--op", "allreduce",
                              "--size", "64MiB", "--algo", "ring"});
  EXPECT_EQ(fragmented["ranks"], 8);
  EXPECT_EQ(fragmented["nodes"], 2);
  // Crossing the network makes the same 8-rank allreduce slower than inside one server.
  auto local = run_json({"dgx-h100", "--op", "allreduce", "--size", "64MiB", "--algo", "ring"});
  EXPECT_GT(fragmented["time_s"].get<double>(), local["time_s"].get<double>());
}

TEST(CliCollective, SameInputSameOutputBitForBit) {
  std::vector<std::string> args = {"collective", "dgx1-v100", "--op", "allreduce", "--size", "100MB",
                                   "--algo", "best", "--format", "json"};
  RunResult first = run_stepsim(args);
  RunResult second = run_stepsim(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, second.out);
}

TEST(CliCollective, CompressionOverEdrBeatsTheBaselineCollectiveModeMost) {
  // Zhou et al.'s setting: V100s, 4 per node, EDR between nodes, one MVAPICH-style ring.
  const std::vector<std::string> base = {"dgx1-v100", "--nodes", "2", "--gpus", "n0:0-3,n1:0-3", "--op", "allgather",
                                         "--size", "256MiB", "--algo", "ring", "--channels", "1", "--check"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_json(args)["time_s"].get<double>();
  };
  const double baseline = with({});
  const double p2p = with({"--compression", "zfp:rate=8", "--compression-mode", "p2p"});
  const double collective = with({"--compression", "zfp:rate=8", "--compression-mode", "collective"});
  EXPECT_LT(p2p, baseline);
  EXPECT_LT(collective, p2p);
  auto j = run_json({"dgx1-v100", "--op", "allreduce", "--size", "64MiB", "--algo", "ring", "--compression", "mpc"});
  EXPECT_EQ(j["schedule"], "compressed_ring");
  bool noted = false;
  for (const auto& note : j["notes"]) noted = noted || note.get<std::string>().find("codec mpc:ratio=1.2") != std::string::npos;
  EXPECT_TRUE(noted) << j["notes"];
}

TEST(CliCollective, CompressionMisuseExitsWithTheOptionNamed) {
  auto expect_error = [](std::vector<std::string> extra, const std::string& what) {
    std::vector<std::string> args = {"collective", "dgx1-v100", "--op", "allgather", "--size", "64MiB"};
    args.insert(args.end(), extra.begin(), extra.end());
    const RunResult r = run_stepsim(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
  };
  expect_error({"--compression-mode", "p2p"}, "--compression-mode: given without --compression");
  expect_error({"--compression", "lz77"}, "unknown codec 'lz77'");
  expect_error({"--compression", "zfp:bits=8"}, "no parameter 'bits'");
  expect_error({"--compression", "zfp"}, "--compression-mode");   // default algorithm nccl has no compressed ring
  expect_error({"--compression", "zfp", "--compression-mode", "p2p", "--compression-threshold", "big"},
               "--compression-threshold");
}

TEST(CliPresets, ListsEveryRequiredPreset) {
  RunResult r = run_stepsim({"presets"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"dgx1-p100", "dgx1-v100", "dgx2", "dgx-a100", "dgx-h100", "dgx-h200", "dgx-b200",
                           "gb200-nvl72", "pcie-gen3-x2", "pcie-gen4-x4", "pcie-gen4-x8"})
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
}

}  // namespace
}  // namespace stepsim::cli_test

namespace stepsim::cli_test {
namespace {

TEST(CliImport, NvidiaSmiTopoOfADgx1vPredictsLikeThePreset) {
  const std::string topo = std::string(STEPSIM_SOURCE_ROOT) + "/platforms/tests/dgx1v_topo.txt";
  char path[] = "/tmp/stepsim-imported-XXXXXX";
  close(mkstemp(path));
  RunResult imported = run_stepsim({"import", "nvidia-smi-topo", topo, "-o", path, "--gpu-model", "V100-SXM2"});
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  const std::vector<std::string> request = {"--op", "allreduce", "--size", "1GiB", "--algo", "ring",
                                            "--format", "json"};
  std::vector<std::string> mine = {"collective", path};
  std::vector<std::string> preset = {"collective", "dgx1-v100"};
  mine.insert(mine.end(), request.begin(), request.end());
  preset.insert(preset.end(), request.begin(), request.end());
  RunResult from_import = run_stepsim(mine);
  RunResult from_preset = run_stepsim(preset);
  unlink(path);
  ASSERT_EQ(from_import.exit_code, 0) << from_import.err;
  ASSERT_EQ(from_preset.exit_code, 0) << from_preset.err;
  EXPECT_EQ(nlohmann::json::parse(from_import.out)["time_s"], nlohmann::json::parse(from_preset.out)["time_s"]);
}

TEST(CliImport, NvidiaSmiTopoReadsP2pFiles) {
  const std::string fixtures = std::string(STEPSIM_SOURCE_ROOT) + "/platforms/tests/";
  RunResult ok = run_stepsim({"import", "nvidia-smi-topo", fixtures + "hgx_h100_topo.txt", "--gpu-model",
                              "H100-SXM5-80GB", "--p2p", fixtures + "h100_p2p_r.txt", "--p2p", fixtures + "h100_p2p_r.txt"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("every GPU pair OK"), std::string::npos) << ok.out;
  // A -p2p file of another machine: exit 2, naming the file.
  RunResult bad = run_stepsim({"import", "nvidia-smi-topo", fixtures + "hgx_h100_topo.txt", "--gpu-model",
                               "H100-SXM5-80GB", "--p2p", fixtures + "l4_p2p_r.txt"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("l4_p2p_r.txt: the P2P matrix has 2 GPUs, the topology matrix 8"), std::string::npos)
      << bad.err;
}

}  // namespace
}  // namespace stepsim::cli_test
