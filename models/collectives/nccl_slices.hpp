#pragma once
/// @file Slices of NCCL's ring Simple protocol and the cost of handing each one over.
///
/// NCCL's ring kernels move a chunk per ring step in SLICESPERCHUNK slices
/// (src/device/common.h / collectives.h, 2.18-2.30: ALLREDUCE_CHUNKSTEPS = NCCL_STEPS/2 = 4,
/// ALLREDUCE_SLICESTEPS = NCCL_STEPS/4 = 2, the same for allgather / reduce-scatter, so 2
/// slices per chunk), one chunk per loop (calcCollChunking). prims_simple.h genericOp
/// handles every slice as waitPeer -> barrier -> copy -> barrier -> fence + postPeer: a
/// handover the channel's CTA does serially, so a channel's step costs its slices'
/// handovers on top of the copy. NCCL's tuning model charges hwLat once per ring step and
/// never per slice or per loop; the difference is what single-node rings miss at 1-256 MiB.
///
/// Contract: pure functions of their inputs; times in microseconds (NCCL's unit).
#include "models/collectives/nccl_tuning.hpp"

namespace stepsim::models::nccl {

/// @brief Slices per chunk of ring Simple allreduce / allgather / reduce-scatter
/// (CHUNKSTEPS / SLICESTEPS = 4 / 2).
constexpr int kSimpleRingSlicesPerChunk = 2;

/// @brief Slice handovers one channel makes per ring step: loops x slices per chunk, for
/// ring Simple allreduce / allgather / reduce-scatter; 0 for anything else (LL and LL128
/// have no slices: every 8 B / 128 B line carries its own flag).
int ring_slices_per_step(CollectiveOp op, Algo algo, Proto proto, double bytes, const NcclSystem& sys,
                         int channels);

/// @brief Calibrated cost of one Simple slice handover (us) for a GPU architecture, 0 where
/// no data set calibrates it (see the table in nccl_slices.cpp for fit and residuals).
double simple_slice_overhead_us(int sm);

}  // namespace stepsim::models::nccl
