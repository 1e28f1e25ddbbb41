#pragma once
/// @file What an algorithm pays at run time when it runs, as real implementations of ring,
/// tree, recursive halving/doubling, direct, hierarchical and Blink schedules do, as CUDA
/// kernels on NCCL's primitives (Blink generated its kernels on them; MSCCL and TACCL
/// programs run on them too): a kernel launch and set-up, a synchronisation per step, and a
/// protocol chosen per size from NCCL's LL, LL128 and Simple.
///
/// Model (constants from NCCL HEAD tuning.cc, nccl_versions.hpp; docs/collectives.md):
///  - launch: baseLat of NCCL's ring for the protocol (LL 6.6, LL128 14, Simple 8.4 us);
///  - per step: the protocol's hop cost beyond LL's on the node's intra path (hwLat ring
///    row: NVLink LL 0.6, LL128 1.9, Simple 3.4 us; PCIe 1.0, 2.5, 5.7 us). The presets' link
///    latencies already stand for LL's hop (docs/platforms.md), so only the difference is
///    added, as the sender's handover (Protocol::step_latency);
///  - wire efficiency: LL 8/16, LL128 120/128, Simple 1;
///  - LL128 only where NCCL enables it: sm70+ GPUs whose intra-node paths are all NVLink;
///  - the protocol: the fastest of the candidates on the schedule's makespan with each round's
///    steps sharing the links they cross evenly (the analytical engine's rule), as NCCL's tuner
///    picks by its own closed form.
///
/// Contract: pure; applies only to schedules still on the "ideal" protocol (NCCL's lowering
/// sets its own) unless AlgorithmOptions::ideal_runtime asks for the idealised schedule, and
/// leaves the data movement untouched.
#include "models/algorithm.hpp"

namespace stepsim::models {

/// @brief Sets `s`'s protocol and adds the launch to its launch latency, with a note naming
/// the choice and its alternatives.
void apply_primitives_runtime(Schedule& s, const CollectiveContext& ctx);

}  // namespace stepsim::models
