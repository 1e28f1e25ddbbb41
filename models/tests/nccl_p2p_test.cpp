/// @file NCCL 2.19+'s p2p channel split (nccl_p2p.hpp): per-peer channel counts by size as
/// addP2pToPlan computes them, the per-channel cap, and the releases and systems it skips.
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "models/algorithm.hpp"
#include "models/checker.hpp"
#include "platforms/loader.hpp"

namespace stepsim::models {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

Schedule lower(const std::string& preset, int ranks, CollectiveOp op, double bytes, const std::string& version) {
  const platforms::Platform platform = platforms::load_platform(preset, {});
  platforms::Allocation allocation;
  for (int g = 0; g < ranks; ++g) allocation.gpus.push_back(g);
  AlgorithmOptions options;
  options.extra["version"] = version;
  const CollectiveContext ctx{platform, allocation, options};
  CollectiveSpec spec;
  spec.op = op;
  spec.ranks = ranks;
  spec.bytes = bytes;
  Schedule s = AlgorithmRegistry::instance().get("nccl").make()->lower(spec, ctx);
  const std::optional<std::string> problem = check_schedule(s);
  EXPECT_FALSE(problem) << preset << " " << to_string(op) << " " << bytes << ": " << problem.value_or("");
  return s;
}

// dgx-h100: 12 search channels -> 24 compute -> 32 p2p channels; NVSwitch pairs get 36, so
// 32 per peer. 8 ranks start on 32 / 2 / 2 = 4 (4 x 8 <= 32), 4 ranks on 8; a 512 KiB step
// doubles the count while a part exceeds 32 steps = 16 MiB.
TEST(NcclP2p, SendrecvChannelsDoubleAsPartsExceedThirtyTwoSteps) {
  const struct {
    int ranks;
    double mib;
    int channels;
  } cases[] = {{8, 32, 4}, {8, 64, 4}, {8, 128, 8}, {8, 256, 16}, {8, 512, 32}, {8, 4096, 32},
               {4, 32, 8}, {4, 128, 8}, {4, 256, 16}, {4, 1024, 32}, {8, 0.125, 2}};
  for (const auto& c : cases) {
    const Schedule s = lower("dgx-h100", c.ranks, CollectiveOp::sendrecv, c.mib * kMiB, "2.29.2");
    EXPECT_EQ(s.channels, c.channels) << c.ranks << " ranks, " << c.mib << " MiB";
  }
}

// Each part is capped at the ring graph's per-compute-channel share (30 GB/s / 2), and all
// of a rank's parts together at NCCL's estimate (360 GB/s here), scaled by the achieved
// efficiency the lowering applies to both.
TEST(NcclP2p, PartCapIsAComputeChannelUntilTheEstimateBinds) {
  const Schedule few = lower("dgx-h100", 8, CollectiveOp::sendrecv, 64 * kMiB, "2.29.2");
  const Schedule all = lower("dgx-h100", 8, CollectiveOp::sendrecv, 1024 * kMiB, "2.29.2");
  EXPECT_NEAR(few.protocol.per_step_bandwidth_cap / all.protocol.per_step_bandwidth_cap, 15.0 / (360.0 / 32), 1e-9);
}

// Alltoall: 64 MiB per rank is 8 MiB per peer, 4 channels each; 7 peers x 4 parts fit the 32
// p2p channels.
TEST(NcclP2p, AlltoallSplitsEachPeer) {
  EXPECT_EQ(lower("dgx-h100", 8, CollectiveOp::alltoall, 64 * kMiB, "2.29.2").channels, 4);
}

// DGX-1V: some pairs have no NVLink (2 channels each, PCIe step 128 KiB), so every peer gets
// at most 2 channels.
TEST(NcclP2p, MeshWithoutAllPairsNvlinkGetsTwoChannelsPerPeer) {
  EXPECT_EQ(lower("dgx1-v100", 8, CollectiveOp::sendrecv, 1024 * kMiB, "2.29.2").channels, 2);
}

// Releases before the compute-channel doubling keep one channel set for all peers.
TEST(NcclP2p, OlderReleasesKeepTheGraphChannels) {
  const Schedule old = lower("dgx-h100", 8, CollectiveOp::sendrecv, 64 * kMiB, "2.8.4");
  for (const std::string& note : old.notes) EXPECT_EQ(note.find("nccl p2p:"), std::string::npos) << note;
  const Schedule head = lower("dgx-h100", 8, CollectiveOp::sendrecv, 64 * kMiB, "2.29.2");
  bool noted = false;
  for (const std::string& note : head.notes) noted |= note.find("nccl p2p: 4 channel(s) per peer of 32") == 0;
  EXPECT_TRUE(noted);
}

// DGX-1V: pairs without an NVLink relay through a GPU NVLinked to both (NCCL 2.8+'s
// P2P/indirect); NVLinked pairs and NCCL 2.4 go direct.
TEST(NcclP2p, PairsWithoutNvlinkRelayThroughACommonNeighbour) {
  const platforms::Platform platform = platforms::load_platform("dgx1-v100", {});
  auto nvlinked = [&](int a, int b) {
    return platform.route(platform.gpu_vertex(a), platform.gpu_vertex(b)).worst == platforms::LinkType::nvlink;
  };
  int relayed = 0;
  const Schedule head = lower("dgx1-v100", 8, CollectiveOp::alltoall, 64 * kMiB, "2.29.2");
  for (const Step& step : head.rounds.at(0).steps) {
    if (nvlinked(step.src, step.dst)) {
      EXPECT_EQ(step.via, -1) << step.src << " -> " << step.dst;
      continue;
    }
    ASSERT_GE(step.via, 0) << step.src << " -> " << step.dst;
    EXPECT_TRUE(nvlinked(step.src, step.via) && nvlinked(step.via, step.dst))
        << step.src << " -> " << step.via << " -> " << step.dst;
    ++relayed;
  }
  EXPECT_EQ(relayed, 8 * 3 * 2);   // 3 non-NVLink peers per GPU, 2 channels each
  const Schedule old = lower("dgx1-v100", 8, CollectiveOp::alltoall, 64 * kMiB, "2.4");
  for (const Step& step : old.rounds.at(0).steps) EXPECT_EQ(step.via, -1);
}

}  // namespace
}  // namespace stepsim::models
