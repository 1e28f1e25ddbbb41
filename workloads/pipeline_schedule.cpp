#include "workloads/pipeline_schedule.hpp"

#include <algorithm>
#include <stdexcept>

namespace stepsim::workloads {

const char* to_string(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::gpipe: return "GPipe";
    case PipelineSchedule::one_f_one_b: return "1F1B";
    case PipelineSchedule::interleaved_1f1b: return "Interleaved1F1B";
    case PipelineSchedule::looped_bfs: return "LoopedBFS";
  }
  return "?";
}

bool multi_stage(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::interleaved_1f1b || schedule == PipelineSchedule::looped_bfs;
}

namespace {

// Megatron-LM's interleaved order (schedules.py get_model_chunk_id / microbatch id): the k-th
// forward (or backward) of a rank runs local chunk (k / pp) mod v, reversed for backward, on
// micro-batch (k / (pp v)) pp + k mod pp.
PipelineAction interleaved(bool forward, int k, int pp, int v, int rank) {
  const int local = (k / pp) % v;
  const int chunk = (forward ? local : v - 1 - local) * pp + rank;
  return {forward, chunk, (k / (pp * v)) * pp + k % pp};
}

}  // namespace

std::vector<PipelineAction> pipeline_actions(PipelineSchedule schedule, int pp, int v, int m, int rank,
                                             PipelineRuntime runtime) {
  if (pp < 1 || v < 1 || m < 1 || rank < 0 || rank >= pp)
    throw std::invalid_argument("pipeline_actions: pp, virtual stages and micro-batches must be >= 1, rank < pp");
  if (!multi_stage(schedule) && v != 1)
    throw std::invalid_argument(std::string("pipeline_actions: ") + to_string(schedule) + " runs one stage per rank");
  std::vector<PipelineAction> out;
  switch (schedule) {
    case PipelineSchedule::gpipe:
      for (int mb = 0; mb < m; ++mb) out.push_back({true, rank, mb});
      for (int mb = 0; mb < m; ++mb) out.push_back({false, rank, mb});
      break;
    case PipelineSchedule::one_f_one_b: {
      // Schedule1F1B: min(m, pp - rank) forwards, then a backward and a forward in turn.
      const int warmup = std::min(m, pp - rank);
      int f = 0, b = 0;
      for (; f < warmup; ++f) out.push_back({true, rank, f});
      while (b < m) {
        out.push_back({false, rank, b++});
        if (f < m) out.push_back({true, rank, f++});
      }
      break;
    }
    case PipelineSchedule::interleaved_1f1b: {
      if (m % pp != 0)
        throw std::invalid_argument("pipeline_actions: interleaved 1F1B needs micro-batches a multiple of pp");
      const int total = m * v;
      // (pp - rank - 1) x 2 + (v - 1) x pp warm-up forwards; Megatron runs all of them when m == pp.
      const bool all = runtime == PipelineRuntime::megatron && m == pp;
      const int warmup = all ? total : std::min(total, (pp - rank - 1) * 2 + (v - 1) * pp);
      for (int k = 0; k < warmup; ++k) out.push_back(interleaved(true, k, pp, v, rank));
      for (int k = 0; k < total - warmup; ++k) {
        out.push_back(interleaved(true, warmup + k, pp, v, rank));
        out.push_back(interleaved(false, k, pp, v, rank));
      }
      for (int k = std::max(0, total - warmup); k < total; ++k) out.push_back(interleaved(false, k, pp, v, rank));
      break;
    }
    case PipelineSchedule::looped_bfs:
      for (int local = 0; local < v; ++local)
        for (int mb = 0; mb < m; ++mb) out.push_back({true, local * pp + rank, mb});
      for (int local = v - 1; local >= 0; --local)
        for (int mb = 0; mb < m; ++mb) out.push_back({false, local * pp + rank, mb});
      break;
  }
  return out;
}

}  // namespace stepsim::workloads
