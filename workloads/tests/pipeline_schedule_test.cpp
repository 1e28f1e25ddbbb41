// Pipeline schedules (workloads/pipeline_schedule.hpp): every pass once, sends and recvs that
// meet in order, and the bubble of each schedule against its closed form, by list-scheduling
// the actions with uniform pass times.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>

#include "workloads/pipeline_schedule.hpp"

namespace stepsim::workloads {
namespace {

using Key = std::tuple<bool, int, int>;   // forward, chunk, micro-batch

// Runs every rank's actions in order: a pass starts when its rank is free and its inputs are
// done (the previous chunk's forward, the next chunk's backward, its own forward). Returns the
// makespan, or -1 on a deadlock.
double makespan(PipelineSchedule s, int pp, int v, int m, double tf, double tb,
                PipelineRuntime runtime = PipelineRuntime::torch) {
  const int chunks = pp * v;
  std::vector<std::vector<PipelineAction>> ranks;
  for (int r = 0; r < pp; ++r) ranks.push_back(pipeline_actions(s, pp, v, m, r, runtime));
  std::map<Key, double> done;
  std::vector<std::size_t> next(static_cast<std::size_t>(pp), 0);
  std::vector<double> free(static_cast<std::size_t>(pp), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < pp; ++r) {
      auto& i = next[static_cast<std::size_t>(r)];
      while (i < ranks[static_cast<std::size_t>(r)].size()) {
        const PipelineAction& a = ranks[static_cast<std::size_t>(r)][i];
        std::vector<Key> needs;
        if (a.forward && a.chunk > 0) needs.push_back({true, a.chunk - 1, a.microbatch});
        if (!a.forward) needs.push_back({true, a.chunk, a.microbatch});
        if (!a.forward && a.chunk + 1 < chunks) needs.push_back({false, a.chunk + 1, a.microbatch});
        double start = free[static_cast<std::size_t>(r)];
        bool ready = true;
        for (const Key& k : needs) {
          auto it = done.find(k);
          if (it == done.end()) ready = false;
          else start = std::max(start, it->second);
        }
        if (!ready) break;
        const double end = start + (a.forward ? tf : tb) / v;
        done[{a.forward, a.chunk, a.microbatch}] = end;
        free[static_cast<std::size_t>(r)] = end;
        ++i;
        progress = true;
      }
    }
  }
  for (int r = 0; r < pp; ++r)
    if (next[static_cast<std::size_t>(r)] < ranks[static_cast<std::size_t>(r)].size()) return -1;
  return *std::max_element(free.begin(), free.end());
}

TEST(PipelineSchedule, EveryPassOnceAndBackwardAfterForward) {
  for (PipelineSchedule s : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b, PipelineSchedule::interleaved_1f1b,
                             PipelineSchedule::looped_bfs}) {
    const int v = multi_stage(s) ? 3 : 1;
    for (int r = 0; r < 4; ++r) {
      const auto actions = pipeline_actions(s, 4, v, 8, r);
      std::map<Key, int> seen;
      for (std::size_t i = 0; i < actions.size(); ++i) {
        const PipelineAction& a = actions[i];
        EXPECT_EQ(a.chunk % 4, r) << to_string(s);
        EXPECT_TRUE(seen.emplace(Key{a.forward, a.chunk, a.microbatch}, static_cast<int>(i)).second) << to_string(s);
        if (!a.forward) EXPECT_LT(seen.at({true, a.chunk, a.microbatch}), static_cast<int>(i)) << to_string(s);
      }
      EXPECT_EQ(actions.size(), 2u * v * 8) << to_string(s);
    }
  }
}

TEST(PipelineSchedule, SendsAndRecvsMeetInOrder) {
  // The activations rank r sends to r + 1 (mod pp) in its order are the ones r + 1 consumes
  // in its order, and likewise for gradients going back.
  for (PipelineSchedule s : {PipelineSchedule::one_f_one_b, PipelineSchedule::interleaved_1f1b, PipelineSchedule::looped_bfs}) {
    const int pp = 4, v = multi_stage(s) ? 2 : 1, chunks = pp * v;
    for (int r = 0; r < pp; ++r) {
      const int next = (r + 1) % pp;
      std::vector<std::pair<int, int>> sent, received, grads_sent, grads_received;
      for (const PipelineAction& a : pipeline_actions(s, pp, v, 8, r)) {
        if (a.forward && a.chunk + 1 < chunks) sent.push_back({a.chunk + 1, a.microbatch});
        if (!a.forward && a.chunk > 0 && (a.chunk - 1) % pp == (r + pp - 1) % pp) grads_sent.push_back({a.chunk - 1, a.microbatch});
      }
      for (const PipelineAction& a : pipeline_actions(s, pp, v, 8, next)) {
        if (a.forward && a.chunk > 0) received.push_back({a.chunk, a.microbatch});
      }
      for (const PipelineAction& a : pipeline_actions(s, pp, v, 8, (r + pp - 1) % pp))
        if (!a.forward && a.chunk + 1 < chunks) grads_received.push_back({a.chunk, a.microbatch});
      EXPECT_EQ(sent, received) << to_string(s) << " rank " << r;
      EXPECT_EQ(grads_sent, grads_received) << to_string(s) << " rank " << r;
    }
  }
}

TEST(PipelineSchedule, BubblesMatchTheirClosedForms) {
  // Uniform passes (backward twice the forward): 1F1B and GPipe take (m + p - 1)(tf + tb),
  // a bubble of (p - 1) / (m + p - 1); interleaved over v chunks (m v + p - 1)(tf + tb) / v,
  // a bubble of (p - 1) / (v m + p - 1).
  const double tf = 1, tb = 2;
  for (int p : {2, 4, 8})
    for (int m : {8, 16, 32}) {
      for (PipelineSchedule s : {PipelineSchedule::one_f_one_b, PipelineSchedule::gpipe}) {
        const double t = makespan(s, p, 1, m, tf, tb);
        EXPECT_NEAR(t, (m + p - 1) * (tf + tb), 1e-9) << to_string(s) << " p " << p << " m " << m;
        EXPECT_NEAR(1 - m * (tf + tb) / t, double(p - 1) / (m + p - 1), 1e-9);
      }
      for (int v : {2, 4}) {
        const double t = makespan(PipelineSchedule::interleaved_1f1b, p, v, m, tf, tb);
        EXPECT_NEAR(1 - m * (tf + tb) / t, double(p - 1) / (v * m + p - 1), 1e-9) << "p " << p << " m " << m << " v " << v;
      }
    }
}

TEST(PipelineSchedule, MegatronRunsEveryForwardFirstWhenMicroBatchesEqualRanks) {
  // pp = m = 4, v = 2: torch's last rank warms up with (v - 1) pp = 4 forwards and then runs a
  // forward before each backward, Megatron's runs all 8 first; with more micro-batches than
  // ranks both keep torch's count.
  const auto first_backward = [](const std::vector<PipelineAction>& actions) {
    return std::find_if(actions.begin(), actions.end(), [](const PipelineAction& a) { return !a.forward; }) -
           actions.begin();
  };
  EXPECT_EQ(first_backward(pipeline_actions(PipelineSchedule::interleaved_1f1b, 4, 2, 4, 3)), 5);
  EXPECT_EQ(first_backward(pipeline_actions(PipelineSchedule::interleaved_1f1b, 4, 2, 4, 3, PipelineRuntime::megatron)), 8);
  EXPECT_EQ(first_backward(pipeline_actions(PipelineSchedule::interleaved_1f1b, 4, 2, 8, 3, PipelineRuntime::megatron)), 5);
  for (PipelineRuntime runtime : {PipelineRuntime::torch, PipelineRuntime::megatron})
    EXPECT_NEAR(makespan(PipelineSchedule::interleaved_1f1b, 4, 2, 4, 1, 2, runtime), (4 * 2 + 3) * 3.0 / 2, 1e-9);
}

TEST(PipelineSchedule, LoopedBfsFinishes) {
  EXPECT_GT(makespan(PipelineSchedule::looped_bfs, 4, 2, 8, 1, 2), 0);
}

TEST(PipelineSchedule, RulesAreChecked) {
  EXPECT_THROW(pipeline_actions(PipelineSchedule::one_f_one_b, 4, 2, 8, 0), std::invalid_argument);
  EXPECT_THROW(pipeline_actions(PipelineSchedule::interleaved_1f1b, 4, 2, 6, 0), std::invalid_argument);
  EXPECT_THROW(pipeline_actions(PipelineSchedule::gpipe, 4, 1, 8, 4), std::invalid_argument);
}

}  // namespace
}  // namespace stepsim::workloads
