// Pipeline schedules through the replay: uniform stages (fixed-duration forward and backward
// kernels, activations passed with send/recv on their own streams as the fsdp generator does)
// against the closed forms of the bubble, on both engines.
#include <gtest/gtest.h>

#include <string>

#include "platforms/config_error.hpp"
#include "platforms/loader.hpp"
#include "sim/replay.hpp"
#include "workloads/pipeline_schedule.hpp"
#include "workloads/trace_builder.hpp"

namespace stepsim::sim {
namespace {

using workloads::PipelineAction;
using workloads::PipelineSchedule;

constexpr Seconds kForward = 100, kBackward = 200;   // per micro-batch on a whole stage

// p pipeline ranks, one program each; a chunk's passes take kForward / v and kBackward / v.
workloads::Trace uniform_pipeline(PipelineSchedule s, int p, int v, int m) {
  workloads::TraceBuilder b("uniform-pipeline", p);
  b.launch() = {0, 0};
  workloads::ProcessGroup pp{"pp", {{}}, std::vector<int>(static_cast<std::size_t>(p), 0)};
  for (int r = 0; r < p; ++r) pp.subgroups[0].push_back(r);
  const int group = b.group(pp);
  const int chunks = p * v;
  for (int r = 0; r < p; ++r) {
    workloads::ProgramWriter w(b, 0);
    const int compute = w.stream("compute"), send_next = w.stream("send_next"), recv_prev = w.stream("recv_prev"),
              send_prev = w.stream("send_prev"), recv_next = w.stream("recv_next");
    auto receive = [&](int stream, int peer, const std::string& name) {
      w.recv(stream, name, peer, 1, group);
      const int e = w.event(name);
      w.record(stream, e);
      w.wait(compute, e);
    };
    auto pass_on = [&](int stream, int peer, const std::string& name) {
      const int e = w.event(name);
      w.record(compute, e);
      w.wait(stream, e);
      w.send(stream, name, peer, 1, group);
    };
    for (const PipelineAction& a : workloads::pipeline_actions(s, p, v, m, r)) {
      const int next = (a.chunk + 1) % p, prev = (a.chunk + p - 1) % p;
      if (a.forward) {
        if (a.chunk > 0) receive(recv_prev, prev, "activation");
        w.timed_kernel(compute, "forward", kForward / v);
        if (a.chunk + 1 < chunks) pass_on(send_next, next, "activation_out");
      } else {
        if (a.chunk + 1 < chunks) receive(recv_next, next, "gradient");
        w.timed_kernel(compute, "backward", kBackward / v);
        if (a.chunk > 0) pass_on(send_prev, prev, "gradient_out");
      }
    }
    b.assign({r}, w.take());
  }
  return b.finish();
}

class ReplayPipelineTest : public ::testing::Test {
 protected:
  ReplayPipelineTest() : platform_(platforms::load_platform("dgx-h100")) {}
  Prediction run(const workloads::Trace& t, const std::string& engine = "analytical") {
    allocation_.gpus.clear();
    for (int g = 0; g < t.ranks; ++g) allocation_.gpus.push_back(g);
    return replay(t, Placement{platform_, allocation_}, {engine});
  }
  platforms::Platform platform_;
  platforms::Allocation allocation_;
};

TEST_F(ReplayPipelineTest, OneFOneBBubbleIsPMinusOneOverMPlusPMinusOne) {
  for (int p : {2, 4, 8})
    for (int m : {4, 16}) {
      const Prediction r = run(uniform_pipeline(PipelineSchedule::one_f_one_b, p, 1, m));
      const double bubble = 1 - m * (kForward + kBackward) / r.iteration_time;
      EXPECT_NEAR(bubble, double(p - 1) / (m + p - 1), 1e-6) << "p " << p << " m " << m;
    }
}

TEST_F(ReplayPipelineTest, TheBubbleIsThePipelineGroupsExposedTime) {
  // Every rank computes m (tf + tb); the rest of the iteration it waits for the pp group's
  // transfers (exposed there) or has finished early (idle).
  const int p = 4, m = 8;
  const Prediction r = run(uniform_pipeline(PipelineSchedule::one_f_one_b, p, 1, m));
  ASSERT_EQ(r.breakdown.by_group.count("pp"), 1u);
  const GroupTime& pp = r.breakdown.by_group.at("pp");
  EXPECT_NEAR(r.breakdown.compute, m * (kForward + kBackward), 1e-6 * r.iteration_time);
  EXPECT_NEAR(pp.exposed + r.breakdown.idle, r.iteration_time - r.breakdown.compute, 1e-6 * r.iteration_time);
  EXPECT_NEAR(pp.exposed, r.breakdown.exposed_communication, 1e-9 * r.iteration_time);
  EXPECT_GE(pp.communication, pp.exposed);
  EXPECT_GT(pp.exposed, 0.1 * r.iteration_time);
}

TEST_F(ReplayPipelineTest, InterleavedBubbleShrinksWithTheVirtualStages) {
  for (int v : {2, 4}) {
    const int p = 4, m = 8;
    const Prediction r = run(uniform_pipeline(PipelineSchedule::interleaved_1f1b, p, v, m));
    const double bubble = 1 - m * (kForward + kBackward) / r.iteration_time;
    EXPECT_NEAR(bubble, double(p - 1) / (v * m + p - 1), 1e-6) << "v " << v;
  }
}

TEST_F(ReplayPipelineTest, AStageReceivingBeforeItSendsDeadlocksAndIsReported) {
  // Two stages whose p2p share one stream and each receive before they send: the counts match
  // (one message each way), the order cannot finish.
  workloads::TraceBuilder b("mismatched-pipeline", 2);
  const int group = b.group(workloads::ProcessGroup{"pp", {{0, 1}}, {0, 0}});
  for (int r = 0; r < 2; ++r) {
    workloads::ProgramWriter w(b, 0);
    const int s = w.stream("p2p");
    w.recv(s, r == 0 ? "gradient" : "activation", 1 - r, 1024, group);
    w.timed_kernel(w.stream("compute"), "pass", 1e-3);
    w.send(s, r == 0 ? "activation" : "gradient", 1 - r, 1024, group);
    b.assign({r}, w.take());
  }
  const workloads::Trace t = b.finish();
  try {
    run(t);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("recv 'gradient'"), std::string::npos) << m;
    EXPECT_NE(m.find("recv 'activation'"), std::string::npos) << m;
  }
}

TEST_F(ReplayPipelineTest, EnginesAgreeWhereNoLinkIsShared) {
  const workloads::Trace t = uniform_pipeline(PipelineSchedule::looped_bfs, 4, 2, 8);
  const Seconds analytical = run(t).iteration_time, event = run(t, "event").iteration_time;
  EXPECT_NEAR(event, analytical, 1e-3 * analytical);
}

}  // namespace
}  // namespace stepsim::sim
