/// @file NCCL's ring search on NVLink meshes (nccl_graph_search.hpp) on the DGX-1 presets:
/// rings fit the links, totals match a hand count of the links, PCIe fallback where no
/// NVLink ring exists, and every op's schedule on those rings passes the checker.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <utility>

#include "models/algorithm.hpp"
#include "models/checker.hpp"
#include "models/collectives/nccl_graph_search.hpp"
#include "models/collectives/nccl_topology.hpp"
#include "models/collectives/nccl_tuning.hpp"
#include "models/tests/test_platforms.hpp"
#include "platforms/loader.hpp"

namespace stepsim::models {
namespace {

// papers.md §6 (nvidia-smi topo of DGX-1V): NV2 pairs, then NV1 pairs. DGX-1P has the same
// pairs with one link each.
const std::vector<std::pair<int, int>> kNv2 = {{0, 3}, {0, 4}, {1, 2}, {1, 5}, {2, 3}, {4, 7}, {5, 6}, {6, 7}};
const std::vector<std::pair<int, int>> kNv1 = {{0, 1}, {0, 2}, {1, 3}, {2, 6}, {3, 7}, {4, 5}, {4, 6}, {5, 7}};

/// The hybrid cube-mesh over `gpus` (global indices) in NCCL's figures: per_link GB/s per
/// link, NV2 pairs doubled when `doubled`.
nccl::NvlinkMesh cube_mesh(const std::vector<int>& gpus, double per_link, bool doubled) {
  const int n = static_cast<int>(gpus.size());
  nccl::NvlinkMesh mesh{n, std::vector<double>(static_cast<std::size_t>(n * n), 0.0)};
  auto add = [&](const std::vector<std::pair<int, int>>& pairs, double bw) {
    for (auto [a, b] : pairs) {
      const auto ia = std::find(gpus.begin(), gpus.end(), a) - gpus.begin();
      const auto ib = std::find(gpus.begin(), gpus.end(), b) - gpus.begin();
      if (ia == n || ib == n) continue;
      mesh.bw[static_cast<std::size_t>(ia * n + ib)] = bw;
      mesh.bw[static_cast<std::size_t>(ib * n + ia)] = bw;
    }
  };
  add(kNv2, doubled ? 2 * per_link : per_link);
  add(kNv1, per_link);
  return mesh;
}

const std::vector<double>& volta_speeds() { return nccl::search_speeds(70, false); }

/// Every ring visits every GPU once over direct links, and no directed link carries more
/// than its capacity (rings x speed).
void expect_rings_fit(const nccl::NvlinkMesh& mesh, const nccl::MeshRings& found) {
  ASSERT_EQ(static_cast<int>(found.rings.size()), found.channels);
  std::vector<double> load(mesh.bw.size(), 0.0);
  for (const std::vector<int>& ring : found.rings) {
    ASSERT_EQ(static_cast<int>(ring.size()), mesh.gpus);
    EXPECT_EQ(static_cast<int>(std::set<int>(ring.begin(), ring.end()).size()), mesh.gpus);
    for (std::size_t i = 0; i < ring.size(); ++i) {
      const int a = ring[i];
      const int b = ring[(i + 1) % ring.size()];
      ASSERT_GT(mesh.at(a, b), 0) << "hop " << a << "->" << b << " has no NVLink";
      load[static_cast<std::size_t>(a * mesh.gpus + b)] += found.bw;
    }
  }
  for (std::size_t l = 0; l < load.size(); ++l) EXPECT_LE(load[l], mesh.bw[l] + 1e-9) << "link " << l;
}

// DGX-1V at NCCL's SM70 20 GB/s per NVLink: the NV2 pairs alone form one 8-cycle
// 0-3-2-1-5-6-7-4, so 40 GB/s carries 2 rings (80 GB/s); at 20 GB/s every GPU's 6 links
// (2 x 2 + 2 x 1 = 6 x 20 = 120 GB/s out) take 6 rings, which the search finds: the
// whitepaper's three interwoven rings in both directions.
TEST(NcclGraphSearch, Dgx1VoltaFullNodeUsesAllSixLinks) {
  const nccl::NvlinkMesh mesh = cube_mesh({0, 1, 2, 3, 4, 5, 6, 7}, 20.0, true);
  const nccl::MeshRings found = nccl::search_mesh_rings(mesh, volta_speeds(), nccl::kMaxGraphChannels, true);
  EXPECT_EQ(found.channels, 6);
  EXPECT_DOUBLE_EQ(found.bw, 20.0);
  EXPECT_FALSE(found.nvb);
  expect_rings_fit(mesh, found);
}

// DGX-1P at NCCL's SM60 18 GB/s: 4 single links per GPU, 4 x 18 = 72 GB/s: 4 rings at 18
// (two edge-disjoint Hamiltonian cycles, each both ways). 9 GB/s (8 rings) only ties.
TEST(NcclGraphSearch, Dgx1PascalFullNodeUsesAllFourLinks) {
  const nccl::NvlinkMesh mesh = cube_mesh({0, 1, 2, 3, 4, 5, 6, 7}, 18.0, false);
  const nccl::MeshRings found = nccl::search_mesh_rings(mesh, nccl::search_speeds(60, false),
                                                        nccl::kMaxGraphChannels, true);
  EXPECT_EQ(found.channels, 4);
  EXPECT_DOUBLE_EQ(found.bw, 18.0);
  expect_rings_fit(mesh, found);
}

// GPUs 0-3 of DGX-1V are fully connected (NV2 0-3, 1-2, 2-3; NV1 0-1, 0-2, 1-3): GPUs 0 and
// 1 have 4 links inside the quad, so 4 rings at 20 GB/s (80 GB/s); the NV2 pairs alone
// hold no 4-cycle, so 40 GB/s finds nothing.
TEST(NcclGraphSearch, Dgx1VoltaQuadHasNvlinkRings) {
  const nccl::NvlinkMesh mesh = cube_mesh({0, 1, 2, 3}, 20.0, true);
  const nccl::MeshRings found = nccl::search_mesh_rings(mesh, volta_speeds(), nccl::kMaxGraphChannels, true);
  EXPECT_EQ(found.channels, 4);
  EXPECT_DOUBLE_EQ(found.bw, 20.0);
  expect_rings_fit(mesh, found);
}

// GPUs 0, 1, 4: GPU 1 and 4 share no NVLink, so no ring runs on direct NVLinks (the Blink
// paper's fragmented allocation, NCCL 2.4-era). NVB paths (1 -> 0 -> 4) close one ring at
// 20 GB/s: the NV1 link 0-1 carries it both ways.
TEST(NcclGraphSearch, Dgx1VoltaTripleNeedsNvbOrPcie) {
  const nccl::NvlinkMesh mesh = cube_mesh({0, 1, 4}, 20.0, true);
  EXPECT_EQ(nccl::search_mesh_rings(mesh, volta_speeds(), nccl::kMaxGraphChannels, false).channels, 0);
  const nccl::MeshRings nvb = nccl::search_mesh_rings(mesh, volta_speeds(), nccl::kMaxGraphChannels, true);
  EXPECT_EQ(nvb.channels, 1);
  EXPECT_DOUBLE_EQ(nvb.bw, 20.0);
  EXPECT_TRUE(nvb.nvb);
}

/// A context over `gpus` of a preset (the context refers to the allocation and options).
struct Job {
  const platforms::Platform& platform;
  platforms::Allocation allocation;
  AlgorithmOptions options;
  CollectiveContext context() const { return {platform, allocation, options}; }
};

Job job(const platforms::Platform& platform, const std::vector<int>& gpus) { return {platform, {gpus}, {}}; }

// From the preset: the full DGX-1V gets the 6 x 20 GB/s ring graph; with NCCL 2.4 (no NVB
// paths) GPUs {0, 1, 4} (no NVLink 1-4) and {0, 1, 6} (none from 6 to 0 or 1) ring over
// PCIe, below NCCL's Gen3 x16 12 GB/s (the ring crosses the CPU).
TEST(NcclGraphSearch, PresetGraphsAndPcieFallback) {
  const platforms::Platform platform = platforms::load_platform("dgx1-v100", {});
  const nccl::NcclSystem full = nccl::nccl_system(job(platform, {0, 1, 2, 3, 4, 5, 6, 7}).context());
  EXPECT_EQ(full.mesh_ring_channels, 6);
  EXPECT_DOUBLE_EQ(full.mesh_ring_bw, 20.0);
  EXPECT_EQ(full.intra, nccl::IntraPath::nvlink);
  const nccl::Tuning tuning = nccl::nccl_tune(CollectiveOp::allreduce, 1024.0 * 1024 * 1024, full);
  EXPECT_EQ(tuning.graphs.ring.channels, 6);
  EXPECT_NEAR(tuning.choice.bus_bw, 120.0, 1e-9);

  for (const std::vector<int>& gpus : {std::vector<int>{0, 1, 4}, std::vector<int>{0, 1, 6}}) {
    Job split_job = job(platform, gpus);
    split_job.options.extra["version"] = "2.4";
    const nccl::NcclSystem split = nccl::nccl_system(split_job.context());
    EXPECT_EQ(split.mesh_ring_channels, 0);
    EXPECT_EQ(split.intra, nccl::IntraPath::pcie);
    EXPECT_LT(split.intra_bw, 12.0);
  }
  // GPU 6 has no NVLink to 0 or 1 and no rank of the job relays for it: PCIe with HEAD too.
  EXPECT_EQ(nccl::nccl_system(job(platform, {0, 1, 6}).context()).mesh_ring_channels, 0);
}

// NCCL 2.8+ closes {0, 1, 4} with the NVB path 1 -> 0 -> 4 (one 20 GB/s ring, PCI latency
// rows as NCCL's typeIntra NVB takes); the ring's hops between 1 and 4 relay through GPU 0's
// memory and cross only NVLinks.
TEST(NcclGraphSearch, NvbRingRelaysThroughTheCommonNeighbour) {
  const platforms::Platform platform = platforms::load_platform("dgx1-v100", {});
  const Job triple = job(platform, {0, 1, 4});
  const nccl::NcclSystem sys = nccl::nccl_system(triple.context());
  EXPECT_EQ(sys.mesh_ring_channels, 1);
  EXPECT_DOUBLE_EQ(sys.mesh_ring_bw, 20.0);
  EXPECT_EQ(sys.intra, nccl::IntraPath::pcie);

  const CollectiveContext ctx = triple.context();
  Schedule s;
  const CollectiveSpec spec{CollectiveOp::allreduce, 3, 256.0 * 1024 * 1024, 0};
  ASSERT_EQ(test_support::lower_and_check("nccl", spec, ctx, &s), std::nullopt);
  int relayed = 0;
  for (const Round& round : s.rounds)
    for (const Step& step : round.steps) {
      const bool nvlinked = ctx.route(step.src, step.dst).worst == platforms::LinkType::nvlink;
      EXPECT_EQ(step.via, nvlinked ? -1 : 0) << step.src << " -> " << step.dst;
      relayed += step.via >= 0;
    }
  EXPECT_GT(relayed, 0);
}

// The allreduce schedule spreads its channels over the rings: on the full DGX-1V it sends
// over all 32 directed NVLink pairs, never over a pair without an NVLink.
TEST(NcclGraphSearch, AllreduceChannelsUseDistinctLinks) {
  const platforms::Platform platform = platforms::load_platform("dgx1-v100", {});
  const Job full = job(platform, {0, 1, 2, 3, 4, 5, 6, 7});
  const CollectiveContext ctx = full.context();
  Schedule s;
  const CollectiveSpec spec{CollectiveOp::allreduce, 8, 1024.0 * 1024 * 1024, 0};
  ASSERT_EQ(test_support::lower_and_check("nccl", spec, ctx, &s), std::nullopt);
  std::set<std::pair<int, int>> pairs;
  for (const Round& round : s.rounds)
    for (const Step& step : round.steps) pairs.insert({step.src, step.dst});
  EXPECT_EQ(pairs.size(), 32u);
  for (auto [a, b] : pairs)
    EXPECT_EQ(ctx.route(a, b).hops.size(), 1u) << a << "->" << b;
  EXPECT_LE(s.rounds.size(), 2u);   // one compact round per pass
}

// Every op at 2..8 ranks (contiguous and scattered allocations) on the mesh rings, at a
// size where NCCL launches every channel and at one where it launches few.
TEST(NcclGraphSearch, EveryOpPassesTheChecker) {
  const platforms::Platform platform = platforms::load_platform("dgx1-v100", {});
  const std::vector<std::vector<int>> allocations = {
      {0, 3}, {0, 1, 4}, {1, 2, 3}, {0, 1, 2, 3}, {0, 1, 2, 3, 4}, {0, 3, 4, 7, 2}, {0, 1, 2, 3, 4, 5},
      {1, 2, 5, 6, 0, 3}, {0, 1, 2, 3, 4, 5, 6}, {0, 1, 2, 3, 4, 5, 6, 7}};
  for (const std::vector<int>& gpus : allocations) {
    const Job j = job(platform, gpus);
    const CollectiveContext ctx = j.context();
    const int n = static_cast<int>(gpus.size());
    for (CollectiveOp op : all_ops())
      for (double bytes : {64.0 * 1024, 256.0 * 1024 * 1024}) {
        const CollectiveSpec spec{op, n, bytes, n - 1};
        EXPECT_EQ(test_support::lower_and_check("nccl", spec, ctx), std::nullopt)
            << to_string(op) << " on " << n << " ranks, " << bytes << " B";
      }
  }
}

}  // namespace
}  // namespace stepsim::models
