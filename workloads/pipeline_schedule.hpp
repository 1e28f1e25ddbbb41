#pragma once
/// @file Pipeline-parallel schedules: the order in which one pipeline rank runs the forward and
/// backward passes of its model chunks over the micro-batches, as torch.distributed.pipelining
/// (torch/distributed/pipelining/schedules.py) and Megatron-LM's schedules.py order them.
///
/// Contract: `pp` ranks hold `pp x virtual_stages` chunks, chunk c on rank c mod pp (rank r
/// holds r, r + pp, ...). Each rank's list holds the forward and the backward of each of its
/// chunks for each of the `microbatches` micro-batches exactly once, every backward after its
/// forward; chunk c's forward of a micro-batch needs chunk c - 1's output and its backward
/// needs chunk c + 1's input gradient. The k-th activation rank r sends to rank r + 1 (mod pp)
/// is the k-th that rank r + 1 receives from it, and likewise for gradients, so sends and recvs
/// matched in order per rank pair meet.
#include <string>
#include <vector>

namespace stepsim::workloads {

enum class PipelineSchedule {
  gpipe,              ///< every forward, then every backward (ScheduleGPipe)
  one_f_one_b,        ///< pp - r forwards, then backward and forward alternate (Schedule1F1B)
  interleaved_1f1b,   ///< Megatron's interleaved 1F1B over virtual stages (ScheduleInterleaved1F1B)
  looped_bfs,         ///< each chunk's forwards in turn, then each chunk's backwards in reverse (ScheduleLoopedBFS)
};

/// @brief torchtitan's names: GPipe, 1F1B, Interleaved1F1B, LoopedBFS.
const char* to_string(PipelineSchedule schedule);
/// @brief Whether a rank holds several chunks (virtual stages) under `schedule`.
bool multi_stage(PipelineSchedule schedule);

struct PipelineAction {
  bool forward = true;
  int chunk = 0;        ///< global chunk (virtual stage) index, 0 .. pp x virtual_stages - 1
  int microbatch = 0;
  bool operator==(const PipelineAction&) const = default;
};

/// @brief Whose implementation runs the schedule. They differ in one case: interleaved 1F1B with
/// as many micro-batches as ranks, which Megatron-LM (schedules.py: all_warmup_microbatches)
/// runs as every forward, then every backward, where torch (ScheduleInterleaved1F1B,
/// _get_warmup_ops) keeps its warm-up of (v - 1) pp + 2 (pp - 1 - rank) forwards.
enum class PipelineRuntime { torch, megatron };

/// @brief Rank `rank`'s actions in issue order. Single-stage schedules need virtual_stages 1;
/// interleaved 1F1B needs microbatches to be a multiple of pp (Megatron's and torch's rule);
/// std::invalid_argument otherwise (the generator checks first and names the key).
std::vector<PipelineAction> pipeline_actions(PipelineSchedule schedule, int pp, int virtual_stages, int microbatches,
                                             int rank, PipelineRuntime runtime = PipelineRuntime::torch);

}  // namespace stepsim::workloads
