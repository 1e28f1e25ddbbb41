#pragma once
/// @file A closed-form estimate of one torchtitan (FSDP2, TP/SP, PP, CP) transformer iteration,
/// for `stepsim plan`, which times thousands of layouts where a replay times one. It prices the
/// same kernels the fsdp generator emits (layer_block, embedding_block, head_block) with the same
/// kernel models, and the collectives through a pricer the caller supplies (sim's collective
/// model on the group's GPUs), but replays no trace: one block's forward and backward are run
/// once on a rank's CPU, compute stream and NCCL streams, FSDP's gathers and reductions overlap
/// each block as the generator issues them, and the pipeline schedule is list-scheduled with
/// those pass times. Internal to workloads/generators/ and tools/plan/.
///
/// Contract: deterministic; the pricer is called once per distinct (group, op, bytes).
#include <functional>

#include "workloads/generators/transformer_layout.hpp"
#include "workloads/trace.hpp"

namespace stepsim::workloads::transformer {

/// @brief The process groups of a layout a collective runs on.
enum class LayoutGroup : std::uint8_t { tp, cp, ep, fsdp, replicate, pp };

/// @brief A collective's time and the SMs (NCCL channels) it holds on each member.
struct CollectiveCost {
  Seconds time = 0;
  int channels = 0;
};
/// @brief Prices `op` of `bytes` (nccl-tests size; sendrecv: one pipeline hop) on `group`.
using CollectivePricer = std::function<CollectiveCost(LayoutGroup group, models::CollectiveOp op, Bytes bytes)>;

/// @brief The passes of one block, the embedding and the head on one rank, before FSDP and the
/// pipeline compose them: what layouts with the same model, tokens, tp, cp, checkpointing and
/// precision share (`stepsim plan` computes them once for all).
struct PassTimes {
  struct Pass {
    Seconds elapsed = 0;     ///< the compute stream's busy time or the CPU's issue time, the longer
    Seconds kernels = 0;     ///< device time of its kernels
    Seconds sm_seconds = 0;  ///< SM-seconds its overlapped (async) collectives hold
  };
  Pass forward, recompute, backward, embedding_forward, embedding_backward, head_forward, head_backward;
};

struct IterationEstimate {
  Seconds iteration = 0;  ///< the slowest pipeline stage's
  Seconds compute = 0;    ///< its kernels' device time
  Seconds pipeline = 0;   ///< the forwards and backwards, bubbles and hops included
  Seconds tail = 0;       ///< after the last backward: reductions left, clipping, the step
};

/// @brief The block passes of `layout` (torchtitan's: framework megatron and MoE are not covered,
/// std::invalid_argument) on `gpu`.
PassTimes pass_times(const IterationLayout& layout, const platforms::GpuModel& gpu, const LaunchModel& launch,
                     const CollectivePricer& price);
/// @brief The estimate of `layout` from its passes (SHARD_GRAD_OP with pipelines is not covered).
IterationEstimate estimate_iteration(const IterationLayout& layout, const PassTimes& passes,
                                     const platforms::GpuModel& gpu, const LaunchModel& launch,
                                     const CollectivePricer& price);

}  // namespace stepsim::workloads::transformer
