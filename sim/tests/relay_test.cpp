// Transfers relayed through a GPU (models::Step::via, NCCL's P2P/indirect): one flow over
// both legs, priced alike by both engines, loading both legs' links and contending there.
#include <gtest/gtest.h>

#include "models/algorithm.hpp"
#include "platforms/config_error.hpp"
#include "platforms/loader.hpp"
#include "sim/tests/fixtures.hpp"

namespace stepsim::sim::testing {
namespace {

// Four GPUs on an NVLink ring (link i joins gpu i and gpu i+1): GPUs 0 and 2 share no NVLink,
// so their own route is the 1 GB/s PCIe switch; GPU 1 joins both by NVLink.
const platforms::Platform& ring4() {
  static const platforms::Platform platform =
      nvlink_ring(4, [](int i) { return i == 0 ? 40e9 : 25e9; }, [](int i) { return i == 0 ? 1e-6 : 2e-6; });
  return platform;
}

models::Schedule relayed_transfer(Bytes bytes) {
  models::Schedule s = models::single_transfer(bytes, "test-relay");
  s.spec.ranks = 3;
  s.rounds[0].steps[0].dst = 2;
  s.rounds[0].steps[0].via = 1;
  return s;
}

TEST(Relay, OneFlowOverBothLegsOnBothEngines) {
  const double bytes = 1e9;
  // Latencies add, the narrower leg (gpu1-gpu2, 25 GB/s) sets the rate.
  const double expected = 1e-6 + 2e-6 + bytes / 25e9;
  for (const char* engine : {"analytical", "event"}) {
    const CollectiveResult result = run_engine(engine, relayed_transfer(bytes), ring4(), first_gpus(3));
    EXPECT_NEAR(result.time, expected, 1e-9 * expected) << engine;
    // Both NVLinks carried the bytes forward; the PCIe switch nothing.
    ASSERT_EQ(result.link_usage.size(), 2u) << engine;
    for (const LinkUsage& usage : result.link_usage) {
      EXPECT_EQ(ring4().link(usage.link).type, platforms::LinkType::nvlink) << engine;
      EXPECT_DOUBLE_EQ(usage.bytes_forward, bytes) << engine;
      EXPECT_DOUBLE_EQ(usage.bytes_backward, 0) << engine;
    }
  }
  // Without the relay the same transfer crawls over PCIe.
  models::Schedule direct = relayed_transfer(bytes);
  direct.rounds[0].steps[0].via = -1;
  EXPECT_GT(run_engine("analytical", direct, ring4(), first_gpus(3)).time, 0.5);
}

// A relayed flow 0 -> 2 (via 1) and a direct 1 -> 2 in one round share link gpu1-gpu2:
// half of its 25 GB/s each in the analytical engine's round-local count (after the relayed
// flow's 3 us); the event engine keeps the link busy from the direct flow's start (2 us)
// until both gigabytes have crossed it.
TEST(Relay, RelayedFlowContendsOnItsSecondLeg) {
  const double bytes = 1e9;
  models::Schedule s = relayed_transfer(bytes);
  models::Step direct = s.rounds[0].steps[0];
  direct.src = 1;
  direct.via = -1;
  s.rounds[0].steps.push_back(direct);
  const double analytical = run_engine("analytical", s, ring4(), first_gpus(3)).time;
  EXPECT_NEAR(analytical, 3e-6 + bytes / 12.5e9, 1e-9 * analytical);
  // Both flows start at once and share the second leg throughout; the relayed bytes then
  // take the two legs' latency to land.
  const double event = run_engine("event", s, ring4(), first_gpus(3)).time;
  EXPECT_NEAR(event, 3e-6 + 2 * bytes / 25e9, 1e-9 * event);
}

TEST(Relay, RelayMustBeAnotherRank) {
  for (int via : {0, 2, 3}) {
    models::Schedule s = relayed_transfer(1e6);
    s.rounds[0].steps[0].via = via;
    for (const char* engine : {"analytical", "event"}) {
      try {
        run_engine(engine, s, ring4(), first_gpus(3));
        ADD_FAILURE() << engine << " accepted relay " << via;
      } catch (const ConfigError& error) {
        EXPECT_NE(std::string(error.what()).find("through endpoint " + std::to_string(via)), std::string::npos)
            << error.what();
      }
    }
  }
}

// NCCL on DGX-1V GPUs 0, 1, 4 (no NVLink 1-4): the ring closes through GPU 0 and both engines
// price it alike; at 256 MiB it runs at NCCL's NVB graph (one 20 GB/s ring: busbw within 1 %
// of 20 GB/s) where the same ring over PCIe and QPI (NCCL 2.4) manages 4.
TEST(Relay, NcclNvbRingOnDgx1BothEngines) {
  const platforms::Platform platform = platforms::load_platform("dgx1-v100", {});
  platforms::Allocation allocation;
  allocation.gpus = {0, 1, 4};
  const double bytes = 256.0 * 1024 * 1024;
  auto busbw = [&](const std::string& version, const char* engine) {
    models::CollectiveContext ctx{platform, allocation, {}};
    ctx.options.extra["version"] = version;
    const models::Schedule s = models::AlgorithmRegistry::instance().get("nccl").make()->lower(
        {models::CollectiveOp::allreduce, 3, bytes, 0}, ctx);
    return bytes / run_engine(engine, s, platform, allocation).time * models::busbw_factor(s.spec.op, 3) / 1e9;
  };
  const double analytical = busbw("2.29.2", "analytical");
  EXPECT_NEAR(busbw("2.29.2", "event"), analytical, 1e-6 * analytical);
  EXPECT_NEAR(analytical, 20.0, 0.2);
  EXPECT_LT(busbw("2.4", "analytical"), 4.5);
}

}  // namespace
}  // namespace stepsim::sim::testing
