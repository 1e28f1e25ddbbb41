#pragma once
/// @file Handovers of NCCL's ring and NVLS kernels and the cost of each one.
///
/// NCCL's tuning model charges hwLat once per ring step (or once per NVLS collective) and
/// never per handover, but its device code hands data over many times per step:
///  - ring Simple (prims_simple.h genericOp, 2.18-2.30): every slice of every loop runs
///    waitPeer -> barrier -> copy -> barrier -> fence + postPeer, serially in the channel's
///    CTA; a chunk is CHUNKSTEPS / SLICESTEPS = 4 / 2 = 2 slices (common.h / collectives.h:
///    ALLREDUCE_CHUNKSTEPS = NCCL_STEPS/2, ALLREDUCE_SLICESTEPS = NCCL_STEPS/4), one chunk
///    per loop (enqueue.cc calcCollChunking);
///  - ring LL128 (prims_ll128.h GenericOp): each of the NCCL_LL128_MAX_NTHREADS / 32 = 20
///    warps moves WARP_SIZE x NCCL_LL128_SHMEM_ELEMS_PER_THREAD = 256 wire words (2 KiB,
///    1920 B of data) per trip and must poll those lines' flags before forwarding them, so
///    a channel hands over 20 x 1920 = 38400 B per trip; a loop's chunk is one FIFO step
///    (chunkSteps = sliceSteps = 1) of at most 576000 B;
///  - ring LL (prims_ll.h LLGenericOp): a loop's chunk of at most one FIFO step (LL buffer /
///    NCCL_STEPS = 8 lines x 512 threads x 16 B, half of it data = 32 KiB) crosses a ring step
///    in one call that opens with waitSend's and closes with postRecv's barrier of all the
///    channel's threads; inside it each thread polls only its own 16 B lines (8 B data + 8 B
///    flag), which its upstream thread stores in the same order, so its passes pipeline and
///    the call, not the pass, is the handover: one per loop (enqueue.cc calcCollChunking);
///  - NVLS (all_reduce.h runRing NVLS, ProtoSimple<1,1>): one slice per chunk, so every
///    chunk's multimem reduce and its multicast store each are one handover.
/// The cost of a handover is no NCCL constant: it is a written-down calibration per
/// architecture (table in nccl_slices.cpp, with fit set and validation residuals).
///
/// Contract: pure functions of their inputs; times in microseconds (NCCL's unit).
#include "models/collectives/nccl_tuning.hpp"

namespace stepsim::models::nccl {

/// @brief Slices per chunk of ring Simple allreduce / allgather / reduce-scatter
/// (CHUNKSTEPS / SLICESTEPS = 4 / 2).
constexpr int kSimpleRingSlicesPerChunk = 2;
/// @brief Data bytes one LL128 channel hands over per trip of its warps
/// (640 / 32 warps x 32 threads x 8 words x 15/16 data x 8 B).
constexpr double kLL128TripBytes = 20.0 * 32 * 8 * 8 * 15 / 16;

/// @brief Handovers one channel makes per step of the lowered schedule: for ring
/// allreduce / allgather / reduce-scatter, Simple loops x 2 slices, LL128 warp trips
/// summed over its loops and LL loops; for single-node NVLS allreduce 1 (a step is one chunk's reduce
/// or multicast); 0 for anything else.
int handovers_per_step(CollectiveOp op, Algo algo, Proto proto, double bytes, const NcclSystem& sys, int channels);

/// @brief Calibrated cost of one handover (us) of (algo, proto) on a GPU architecture, 0
/// where no data set calibrates it (see the table in nccl_slices.cpp).
double handover_us(Algo algo, Proto proto, int sm);

}  // namespace stepsim::models::nccl
