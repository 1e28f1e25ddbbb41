#pragma once
/// @file Lowering of NCCL's algorithms to Schedules (rings, trees, NVLS, CollNet, p2p).
///
/// Contract: each builder returns a Schedule that passes check_schedule for its op, with
/// `channels` channels, each moving its own piece of every block (as NCCL splits a buffer
/// over its channels). Protocol fields and launch latency are set by the caller
/// (nccl.cpp), which knows NCCL's estimate; builders only lay out the data movement.
#include <functional>
#include <vector>

#include "models/algorithm.hpp"
#include "models/collectives/nccl_tuning.hpp"

namespace stepsim::models::nccl {

/// @brief A transfer every pipeline chunk makes, `stage` rounds after the chunk enters.
struct StagedEdge {
  int src = 0;
  int dst = 0;
  Combine combine = Combine::replace;
  int stage = 0;
  int src_lane = 0;   ///< thread group at each end (Schedule::lanes)
  int dst_lane = 0;
};

/// @brief How many pipeline chunks for a pipeline `depth` stages deep.
using ChunkPolicy = std::function<int(int depth)>;

/// @brief Per channel, each node's ranks in ring order, rotated so that channel c enters
/// and leaves every node through different GPUs (and so NICs) than channel c-1, as NCCL's
/// rings and trees spread their channels over the NICs (search.cc picks one NIC per channel).
/// On a single-node NVLink mesh (nccl_mesh_rings) channel c follows NCCL's ring c instead,
/// so the channels move data over distinct NVLinks.
std::vector<std::vector<std::vector<int>>> channel_node_orders(const CollectiveContext& ctx, int channels);

/// @brief Ring allgather / reduce-scatter / allreduce (NCCL's ring: n-1 steps per phase).
Schedule lower_ring(const CollectiveSpec& spec, const CollectiveContext& ctx, int channels);
/// @brief Broadcast / reduce as NCCL's pipelined ring chain from / to the root.
Schedule lower_chain(const CollectiveSpec& spec, const CollectiveContext& ctx, int channels, const ChunkPolicy& chunks);
/// @brief Allreduce on NCCL's trees: a chain inside each node, a double binary tree over
/// the nodes (channel c uses tree c % 2), reduce up then broadcast down, pipelined. Every
/// rank but the root reduces up on lane 0 and broadcasts down on lane 1 at the same time
/// (NCCL's runTreeSplit: two thread groups); the root reduces and sends down on lane 0.
Schedule lower_tree(const CollectiveSpec& spec, const CollectiveContext& ctx, int channels, const ChunkPolicy& chunks);
/// @brief Allreduce through each node's NVSwitch (NVLS): ranks reduce into the switch, the
/// switch multicasts the sum; across nodes (NVLSTree) each channel's head GPU carries its
/// node's sum over a double binary tree of heads.
Schedule lower_nvls(const CollectiveSpec& spec, const CollectiveContext& ctx, int channels, const ChunkPolicy& chunks);
/// @brief Allreduce through the fabric's SHARP switch (CollNet): ranks reduce to their
/// node's head (directly for Direct, along the chain for Chain), heads reduce into the
/// SHARP switch, the switch returns the sum, heads broadcast it inside their node.
Schedule lower_collnet(const CollectiveSpec& spec, const CollectiveContext& ctx, int channels,
                       const ChunkPolicy& chunks, bool chain);
/// @brief alltoall / sendrecv as NCCL's p2p: one round, every rank sends each peer its block.
Schedule lower_p2p(const CollectiveSpec& spec, const CollectiveContext& ctx, int channels);

/// @brief Pipelined stages: in round t every channel's edge e moves chunk t - e.stage.
void append_staged(Schedule& s, const std::vector<std::vector<StagedEdge>>& per_channel, int chunks);

/// @brief Longest stage index + 1 of a staged layout (the pipeline depth).
int staged_depth(const std::vector<std::vector<StagedEdge>>& per_channel);

}  // namespace stepsim::models::nccl
