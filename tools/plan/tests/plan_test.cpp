// `stepsim plan` (tools/plan/): on a space small enough to replay every layout, the layout the
// planner returns is within 1 % of the best replayed one, its estimates of the layouts it
// re-times are within 5 % of their replays, every layout it returns fits, and it is
// deterministic; the space honours its divisibility rules.
#include <gtest/gtest.h>

#include <limits>

#include "platforms/config_error.hpp"
#include "sim/replay.hpp"
#include "tools/plan/planner.hpp"
#include "workloads/generators/transformer_memory.hpp"
#include "workloads/workload.hpp"

namespace stepsim::plan {
namespace {

// Llama-3-8B cut to two blocks on one DGX H100, a global batch of 8 sequences of 2,048 tokens:
// every layout of the space replays in a few milliseconds.
PlanRequest small_request() {
  PlanRequest r;
  r.platform = "dgx-h100";
  r.model = "llama3-8b";
  r.model_overrides = {"model.layers=2"};
  r.gpus = 8;
  r.global_batch = 8;
  r.sequence = 2048;
  r.retime = 10;
  return r;
}

TEST(Plan, BestLayoutIsWithinOnePercentOfTheBestReplayedOne) {
  const PlanRequest r = small_request();
  const PlanResult plan = run_plan(r);
  ASSERT_FALSE(plan.retimed.empty());
  platforms::PlatformOptions options;
  const platforms::Platform platform = platforms::load_platform(r.platform, options);
  const platforms::Allocation allocation = platforms::parse_allocation("", platform);
  double best = std::numeric_limits<double>::infinity();
  int replayed = 0;
  for (const Layout& l : enumerate_layouts(plan.space)) {
    std::vector<std::string> overrides = r.model_overrides;
    for (const std::string& o : l.overrides(plan.space.sequence)) overrides.push_back(o);
    try {
      const workloads::Trace trace = workloads::load_workload(r.model, {platform, allocation}, overrides);
      if (!trace.memory->fits()) continue;
      best = std::min(best, sim::replay(trace, {platform, allocation}).iteration_time);
      ++replayed;
    } catch (const ConfigError&) {
    }
  }
  EXPECT_GT(replayed, 100);
  EXPECT_LE(plan.retimed.front().replay->iteration_time, best * 1.01);
}

TEST(Plan, EstimatesOfTheRetimedLayoutsAreWithinFivePercent) {
  PlanRequest r = small_request();
  r.model_overrides.clear();  // the whole 8B model on 8 GPUs
  r.global_batch = 16;
  r.sequence = 8192;
  const PlanResult plan = run_plan(r);
  ASSERT_EQ(plan.retimed.size(), 10u);
  for (const Candidate& c : plan.retimed) {
    EXPECT_NEAR(c.estimate_s / c.replay->iteration_time, 1, 0.05) << c.layout.label();
    EXPECT_LE(c.memory.required(), 80.0 * (1 << 30)) << c.layout.label();
  }
  const PlanResult again = run_plan(r);
  ASSERT_EQ(again.retimed.size(), plan.retimed.size());
  for (std::size_t i = 0; i < plan.retimed.size(); ++i) {
    EXPECT_EQ(again.retimed[i].layout.label(), plan.retimed[i].layout.label());
    EXPECT_EQ(again.retimed[i].replay->iteration_time, plan.retimed[i].replay->iteration_time);
  }
}

TEST(Plan, SpaceKeepsOnlyLayoutsThatDivide) {
  const PlanResult plan = run_plan(small_request());
  const Space& s = plan.space;
  for (const Layout& l : enumerate_layouts(s)) {
    EXPECT_EQ(l.gpus(), s.gpus) << l.label();
    EXPECT_EQ(s.model.heads % l.tp, 0);
    EXPECT_EQ(s.model.kv_heads % l.tp, 0);
    if (l.cp > 1) EXPECT_EQ(s.sequence % (2 * l.cp), 0);
    EXPECT_EQ(l.micro_batch * l.microbatches * l.dp_replicate * l.dp_shard, s.global_batch) << l.label();
    if (l.pp > 1) EXPECT_GE(l.microbatches, l.pp) << l.label();
  }
}

TEST(Plan, BadRequestsNameTheirFlag) {
  PlanRequest r = small_request();
  r.gpus = 12;  // one and a half DGX H100 nodes
  EXPECT_THROW(run_plan(r), ConfigError);
  r = small_request();
  r.gpus = 1 << 20;
  EXPECT_THROW(run_plan(r), ConfigError);
  r = small_request();
  r.model = "llama3-405b";  // 405e9 parameters do not fit 8 GPUs in any layout
  r.model_overrides.clear();
  try {
    run_plan(r);
    FAIL() << "405B on 8 GPUs";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("fits gpu.memory"), std::string::npos) << e.what();
  }
  r = small_request();
  r.model = "dlrm-criteo-1tb";
  try {
    run_plan(r);
    FAIL() << "a DLRM is not a transformer";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("kind: fsdp"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stepsim::plan
