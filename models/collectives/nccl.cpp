/// @file `nccl`: NCCL's own choice of algorithm (Ring, Tree, NVLS/NVLSTree, CollNet) and
/// protocol (LL, LL128, Simple) with its channel count, from NCCL's tuning model
/// (nccl_tuning.hpp), lowered to a Schedule (nccl_lower.hpp) whose cost on an uncontended
/// platform equals NCCL's own closed-form estimate `latency + bytes / algbw`:
///  - per_step_bandwidth_cap is NCCL's per-channel bandwidth for the chosen pair (its
///    busBw / channels for rings, algBw / channels for the pipelined tree/NVLS/CollNet
///    layouts, which move every byte once per rank), so the graph's figures, not the
///    preset's wire rates, bound a channel, while the links still bound the sum;
///  - efficiency is the protocol's wire efficiency: LL carries 8 B of data per 16 B line
///    (0.5), LL128 120 B per 128 B line, Simple 1 (NCCL device.h, papers.md §4);
///  - launch_latency carries NCCL's latency estimate (baseLat + hops x hwLat) minus the
///    route latencies the engine already charges per round, because NCCL's pipelined
///    channels overlap per-step latency with data movement; step_latency is the
///    handovers a step makes that the tuning model does not charge (ring Simple: loops x
///    2 slices, ring LL128: warp trips, NVLS: one per chunk step), each at a calibrated
///    per-architecture cost (nccl_slices.hpp), 0 where none is calibrated;
///  - channels are the ones NCCL launches (enqueue.cc topoGetAlgoInfo: fewer for small
///    messages, NVLS's own count) and pipelined layouts get one chunk per NCCL loop
///    (calcCollChunking), so a message of a few loops pays the pipeline fill.
/// Options: extra `algo=ring|tree|nvls|nvls_tree|collnet|collnet_chain`, `proto=LL|LL128|
/// Simple`, `nvls=off` and `channels` force NCCL's choice (NCCL_ALGO / NCCL_PROTO /
/// NCCL_NVLS_ENABLE / NCCL_MIN/MAX_NCHANNELS); `version=2.18` picks that release's tuning
/// constants (nccl_versions.hpp); `gpus_per_thread=N` (nccl-tests -g N) charges the CPU
/// thread's serial launch of N kernels (see apply_launch_serialisation); `caller=torch` a
/// torch.distributed call's host time (see caller_overhead).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>

#include "models/collectives/lowering.hpp"
#include "models/collectives/nccl_lower.hpp"
#include "models/collectives/nccl_p2p.hpp"
#include "models/collectives/nccl_slices.hpp"
#include "models/collectives/nccl_topology.hpp"
#include "models/collectives/nccl_tuning.hpp"
#include "models/collectives/nccl_versions.hpp"
#include "platforms/config_error.hpp"

namespace stepsim::models {
namespace {

using nccl::Algo;
using nccl::Proto;

std::string fmt(const char* format, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, format, a, b, c, d);
  return buf;
}

/// NCCL_NVLS_ENABLE=0 as `nvls=0|off|false` (the stas00 runs compare both settings).
bool nvls_disabled(const AlgorithmOptions& options) {
  auto it = options.extra.find("nvls");
  if (it == options.extra.end()) return false;
  const std::string& v = it->second;
  if (v == "0" || v == "off" || v == "false") return true;
  if (v == "1" || v == "on" || v == "true") return false;
  throw ConfigError("--algo nccl option 'nvls'", "expected on or off, got '" + v + "'", "write nvls=off or nvls=on");
}

/// CPU time of one kernel-launch call: Lin et al.'s T4 (papers.md §3.1), their
/// KERNEL_LAUNCH_LENGTH 10 us minus the profiler's CPU (2 us) and GPU (4 us) event overheads.
constexpr Seconds kLaunchCall = 4e-6;

/// `gpus_per_thread=N`: one CPU thread drives N of the ranks (nccl-tests -g N, one group
/// call) and makes their launch calls one after another; the number of ranks it serves
/// (0 without the option).
int ranks_per_thread(const AlgorithmOptions& options, int ranks) {
  auto it = options.extra.find("gpus_per_thread");
  if (it == options.extra.end()) return 0;
  int n = 0;
  std::size_t used = 0;
  try {
    n = std::stoi(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != it->second.size() || n < 1)
    throw ConfigError("--algo nccl option 'gpus_per_thread'", "expected a positive integer, got '" + it->second + "'",
                      "write gpus_per_thread=12 for nccl-tests -g 12");
  return std::min(n, ranks);
}

/// How the thread's serial launches cost a back-to-back loop, by NCCL release. NCCL 2.4 (the
/// DGX-2 data set, 12 GPUs per thread): the last rank starts N-1 launch calls after the first
/// and, as no rank of a ring or tree can finish before every rank has joined, every call pays
/// that delay: launch_latency (fits its 1-4 MiB points; treating it as the floor below instead
/// takes that data set from 13.4 % to 22.7 %). Later releases launch asynchronously and the
/// thread runs ahead of the GPUs, so the launches bound the loop only when the GPUs finish
/// first: issue_period = N launch calls (the Azure 8-GPU runs, NCCL 2.18/2.20: flat 25-45 us
/// per call from 1 KiB to 256 KiB; adding the delay instead would take them from 6 % to
/// 15-25 % geomean at >= 1 MiB).
void apply_launch_serialisation(const AlgorithmOptions& options, int ranks, Schedule& s) {
  const int n = ranks_per_thread(options, ranks);
  if (n < 1) return;
  if (nccl::nccl_version(options).era == nccl::Era::v2_4)
    s.launch_latency += (n - 1) * kLaunchCall;
  else
    s.issue_period = n * kLaunchCall;
}

/// `caller=torch`: the collective is one torch.distributed call on an otherwise idle device
/// (PyTorch-level benchmarks such as stas00's all_reduce_bench.py): before NCCL launches, the
/// CPU spends Lin et al.'s mean per-op gap T1 (21 us, papers.md §3.1) in PyTorch, and the
/// device waits for it. `caller=nccl` (default): NCCL's API called directly, as nccl-tests does.
Seconds caller_overhead(const AlgorithmOptions& options) {
  auto it = options.extra.find("caller");
  if (it == options.extra.end() || it->second == "nccl") return 0;
  if (it->second == "torch") return 21e-6;
  throw ConfigError("--algo nccl option 'caller'", "expected nccl or torch, got '" + it->second + "'",
                    "write caller=torch for torch.distributed calls, caller=nccl for nccl-tests");
}

nccl::Forced forced_choice(const AlgorithmOptions& options) {
  nccl::Forced f;
  for (const auto& [key, value] : options.extra) {
    if (key == "nvls" || key == "version" || key == "gpus_per_thread" || key == "caller") continue;
    if (key == "algo") {
      f.has_algo = true;
      f.algo = nccl::parse_algo(value);
    } else if (key == "proto") {
      f.has_proto = true;
      f.proto = nccl::parse_proto(value);
    } else {
      throw ConfigError("--algo nccl option '" + key + "'", "unknown option",
                        "nccl accepts algo=, proto=, nvls=, version=, gpus_per_thread= and caller=");
    }
  }
  f.channels = options.channels;
  return f;
}

/// NVLink SHARP's multimem reductions move less than the NVLink rate: NVIDIA measured it and
/// modelled it from NCCL 2.28 (tuning.cc nvlsEfficiency, 0.85 Hopper, 0.74 Blackwell). An
/// older release's model omits it, yet its NVLS kernels ran on the same switches, so NVLS
/// channels never beat HEAD's estimate for the same choice (GB/s per launched channel).
double nvls_hardware_bound(const CollectiveSpec& spec, const nccl::NcclSystem& sys, const nccl::Estimate& e,
                           const nccl::VersionConstants& version, bool forced_channels, int channels) {
  // Unforced on HEAD, HEAD's estimate for the same choice is `e` itself.
  if (&version == &nccl::head_version() && !forced_channels) return e.alg_bw / channels;
  nccl::Forced same;
  same.has_algo = same.has_proto = true;
  same.algo = e.algo;
  same.proto = e.proto;
  return nccl::nccl_tune(spec.op, spec.bytes, sys, same, nccl::head_version()).choice.alg_bw / channels;
}

Seconds inherent_latency(const Schedule& s, const CollectiveContext& ctx, bool fluid) {
  const double cap = s.protocol.per_step_bandwidth_cap;
  const Seconds makespan = lowering::uncontended_makespan(s, ctx, [&](std::size_t r, std::size_t i) {
    return fluid ? s.protocol.step_latency + s.rounds[r].steps[i].wire_bytes / cap : 0.0;
  });
  const Seconds stream = fluid ? s.num_blocks * (s.protocol.step_latency + s.piece_bytes() / cap) : 0.0;
  return std::max(0.0, makespan - stream);
}

/// Expanded transfers a fluid pipeline's chunks may add up to (about two per rank, channel
/// and chunk): beyond it chunks get coarser, which the fill accounting in inherent_latency
/// absorbs, so only contention detail is lost. Why a budget: the event engine issues every
/// expanded transfer as a flow (a 512-rank tree at 256 chunks: 2 M flows, 211 s).
constexpr double kFluidTransferBudget = 131072;

/// NCCL_STEPS (device.h): buffer slots per connection, each one FIFO step.
constexpr int kNcclSteps = 8;

/// Transfers in flight per connection for the lowered schedule: NCCL keeps NCCL_STEPS FIFO
/// slots per connection, one loop's chunk each in its pipelined layouts (non-ring chunks are
/// one FIFO step: enqueue.cc chunkSteps = 1), so `loops` NCCL chunks lowered as `chunks`
/// transfers allow NCCL_STEPS x chunks / loops of them in flight, at least one (a lowered
/// chunk wider than the window waits for the previous one's credit). Rings lower whole ring
/// steps whose every transfer already waits for the previous step's data: no bound (0).
int slots_in_flight(Algo algo, bool chain, bool p2p, int loops, int chunks) {
  if ((algo == Algo::ring && !chain) || p2p) return 0;
  return std::max(1, static_cast<int>(static_cast<std::int64_t>(kNcclSteps) * chunks / std::max(1, loops)));
}

class Nccl : public Algorithm {
 public:
  bool supports(const CollectiveSpec& spec, const CollectiveContext&, std::string* why_not) const override {
    if (spec.ranks < 1) {
      if (why_not) *why_not = "no ranks";
      return false;
    }
    return true;
  }

  Schedule lower(const CollectiveSpec& spec, const CollectiveContext& ctx) const override {
    lowering::require(*this, "nccl", spec, ctx);
    nccl::NcclSystem sys = nccl::nccl_system(ctx);
    if (nvls_disabled(ctx.options)) sys.nvls = false;
    const nccl::VersionConstants& version = nccl::nccl_version(ctx.options);
    const nccl::Tuning tuning = nccl::nccl_tune(spec.op, spec.bytes, sys, forced_choice(ctx.options), version);
    const nccl::Estimate& e = tuning.choice;
    const int graph_channels = std::max(1, e.channels);
    const bool p2p = spec.op == CollectiveOp::alltoall || spec.op == CollectiveOp::sendrecv;
    const bool chain = spec.op == CollectiveOp::broadcast || spec.op == CollectiveOp::reduce;
    // NCCL 2.19+ splits each peer's bytes over a size-dependent share of its p2p channels.
    const int peers = spec.op == CollectiveOp::alltoall ? spec.ranks - 1 : 1;
    const std::optional<nccl::P2pChannels> p2p_split =
        p2p && ctx.options.channels <= 0
            ? nccl::p2p_channels(ctx, sys, tuning.graphs, version,
                                 spec.op == CollectiveOp::alltoall ? spec.bytes / spec.ranks : spec.bytes)
            : std::nullopt;
    // The channels NCCL launches (fewer for small messages, NVLS's own count) unless forced.
    const int channels = p2p_split                             ? p2p_split->per_peer
                         : p2p || ctx.options.channels > 0 ? graph_channels
                             : nccl::launch_channels(e.algo, e.proto, spec.bytes, sys.ranks, graph_channels,
                                                     nccl::nvls_channels(version, sys));

    // Pipeline chunks per channel. LL and LL128 forward every line as soon as its flag
    // arrives (prims_ll.h / prims_ll128.h: each thread polls its own lines and passes them on),
    // so their pipelines are fluid: as many chunks as the lowering allows, down to one line
    // of data, and a hop adds its latency, not a chunk's transmission. Simple hands over whole
    // slices, one per NCCL loop (calcCollChunking; non-ring slices are one FIFO step), so its
    // pipelined layouts get one chunk per loop and a message of a few loops pays the fill.
    // Ring chains (broadcast, reduce) under Simple are the exception: NCCL's tuning charges
    // them one hop (sameChannels) and the DGX-2 data (12-deep chains, 2-64 MiB) run 2-4x
    // faster than 512 KiB slices through a 12-deep chain would allow, so their chunks are as
    // fine as 4 KiB pieces allow.
    const int loops = nccl::loop_count(spec.op, e.algo, e.proto, spec.bytes, sys, channels);
    const double line_data = e.proto == Proto::ll ? 8.0 : 120.0;   // data bytes per LL / LL128 line
    const bool fluid = e.proto != Proto::simple && !p2p && (e.algo != Algo::ring || chain);
    // A fluid pipeline's chunks stay within the transfer budget unless its fill, (depth - 1)
    // chunks' transmission, would then exceed half of NCCL's latency estimate, which absorbs it.
    const double stream_time = spec.bytes / (e.alg_bw * kGB);
    const nccl::ChunkPolicy chunks = [&](int depth) {
      const double piece = e.proto == Proto::simple ? (chain ? 4096.0 : spec.bytes / loops / channels) : line_data;
      double most = std::min<double>(lowering::kMaxChunks, std::floor(spec.bytes / (channels * piece)));
      if (fluid) {
        const double budget = std::floor(kFluidTransferBudget / (2.0 * spec.ranks * channels));
        const double fill_bound = std::ceil((depth - 1) * stream_time / (0.5 * e.latency_us * 1e-6));
        most = std::min(most, std::max({static_cast<double>(loops), budget, fill_bound}));
      }
      return static_cast<int>(std::max(1.0, most));
    };

    Schedule s;
    if (p2p) {
      s = nccl::lower_p2p(spec, ctx, channels);
    } else if (e.algo == Algo::ring) {
      s = chain ? nccl::lower_chain(spec, ctx, channels, chunks) : nccl::lower_ring(spec, ctx, channels);
    } else if (e.algo == Algo::tree) {
      s = nccl::lower_tree(spec, ctx, channels, chunks);
    } else if (e.algo == Algo::nvls || e.algo == Algo::nvls_tree) {
      s = nccl::lower_nvls(spec, ctx, channels, chunks);
    } else {
      s = nccl::lower_collnet(spec, ctx, channels, chunks, e.algo == Algo::collnet_chain);
    }
    s.algorithm = std::string("nccl:") + (p2p ? "p2p" : nccl::to_string(e.algo)) + "/" + nccl::to_string(e.proto);
    const std::string relay_note = nccl::nvb_paths(ctx) ? nccl::relay_nvb_hops(s, ctx) : std::string();

    // Per-channel cap (bytes/s). Rings: a channel's link carries busBw / channels (each
    // rank sends one block per step). Pipelined layouts: each rank moves the whole buffer
    // once per direction at algBw. p2p alltoall: the rank's n-1 peers share its channels.
    // Ring and tree channels each carry the graph's per-channel share (fewer launched
    // channels move less); NVLS splits its graph bandwidth over the channels it launches.
    const int n = spec.ranks;
    const bool nvls = e.algo == Algo::nvls || e.algo == Algo::nvls_tree;
    double per_channel = e.alg_bw / (nvls ? channels : graph_channels);
    if (e.algo == Algo::ring && !p2p) {
      const double nsteps = spec.op == CollectiveOp::allreduce ? 2.0 * (n - 1)
                            : (spec.op == CollectiveOp::allgather || spec.op == CollectiveOp::reduce_scatter) ? n - 1.0
                                                                                                             : n;
      if (!chain) per_channel = e.alg_bw * nsteps / n / graph_channels;
    }
    if (spec.op == CollectiveOp::alltoall && n > 1) per_channel = e.alg_bw * (n - 1.0) / n / graph_channels / (n - 1);
    if (nvls) {
      per_channel = std::min(per_channel, nvls_hardware_bound(spec, sys, e, version, ctx.options.channels > 0, channels));
      // AllGather/ReduceScatter: a rank's n blocks cross its channel at once (multicast out
      // or reduced in), each at 1/n of the channel, so the rank moves its bytes at algBw.
      if (spec.op != CollectiveOp::allreduce) per_channel /= n;
    }
    // A p2p part runs on a compute channel of its own while the rank's parts fit its p2p
    // channels, and shares them beyond; all parts together stay within NCCL's estimate.
    if (p2p_split)
      per_channel = std::min(per_channel * graph_channels / channels,
                             p2p_split->channel_bw * std::min(1.0, static_cast<double>(p2p_split->total) / (peers * channels)));
    // A calibrated platform scales the protocol's achieved bandwidth (wire efficiency and
    // per-channel cap alike) and NCCL's latency estimate (platforms/calibration.hpp).
    const platforms::Calibration& calibration = ctx.platform.calibration;
    // Broadcast and reduce run ring chains, kernels of their own (one step per chunk,
    // BROADCAST/REDUCE_CHUNKSTEPS), so they have a factor of their own: ring_chain.
    const platforms::ProtocolCalibration& fitted = calibration.protocol(nccl::to_string(e.proto));
    const std::string algo_key = p2p                             ? "p2p"
                                 : chain && e.algo == Algo::ring ? "ring_chain"
                                                                 : nccl::to_string(e.algo);
    const double achieved = fitted.efficiency_scale * calibration.algorithm_efficiency_scale(algo_key);
    s.protocol.name = nccl::to_string(e.proto);
    s.protocol.efficiency = nccl::wire_efficiency(e.proto) * achieved;
    s.protocol.step_latency = nccl::handovers_per_step(spec.op, e.algo, e.proto, spec.bytes, sys, channels) *
                              nccl::handover_us(e.algo, e.proto, sys.sm) * 1e-6;
    s.protocol.per_step_bandwidth_cap = per_channel * kGB * achieved;
    s.protocol.slots_in_flight = slots_in_flight(e.algo, chain, p2p, loops, s.num_blocks);
    s.launch_latency = std::max(0.0, e.latency_us * fitted.latency_scale * 1e-6 - inherent_latency(s, ctx, fluid)) +
                       caller_overhead(ctx.options);
    apply_launch_serialisation(ctx.options, spec.ranks, s);

    s.notes.push_back(std::string("nccl choice: ") + s.algorithm + ", " + std::to_string(channels) +
                      " channels launched (graph has " + std::to_string(graph_channels) + "), " +
                      std::to_string(loops) + " loop(s)");
    if (p2p_split)
      s.notes.push_back(fmt("nccl p2p: %.0f channel(s) per peer of %.0f (addP2pToPlan), %.1f GB/s per channel",
                            p2p_split->per_peer, p2p_split->total, per_channel));
    s.notes.push_back(fmt("nccl estimate: latency %.2f us, algbw %.2f GB/s, busbw-model %.2f GB/s, time %.2f us",
                          e.latency_us, e.alg_bw, e.bus_bw, e.time_us));
    s.notes.push_back(fmt("nccl graphs: ring %.0f x %.1f GB/s, tree %.0f x %.1f GB/s", tuning.graphs.ring.channels,
                          tuning.graphs.ring.bw_intra, tuning.graphs.tree.channels, tuning.graphs.tree.bw_intra) +
                      fmt(", nvls %.0f x %.1f GB/s", tuning.graphs.nvls.channels, tuning.graphs.nvls.bw_intra));
    s.notes.push_back(fmt("nccl system: sm%.0f, %.0f node(s) x %.0f ranks, intra %.1f GB/s/GPU", sys.sm, sys.nodes,
                          sys.ppn, sys.intra_bw) +
                      std::string(sys.intra == nccl::IntraPath::nvlink ? " NVLink"
                                  : sys.mesh_ring_channels > 0 ? " NVB (NVLink via a GPU; PCI latency rows)"
                                                               : " PCIe") +
                      (sys.nvswitch ? " (NVSwitch)" : "") + (sys.nvls ? ", NVLS" : "") +
                      (sys.collnet ? ", CollNet" : "") +
                      (sys.nodes > 1 ? fmt(", %.0f NIC(s) x %.1f GB/s", sys.nics_per_node, sys.nic_bw) : ""));
    std::string others = "nccl alternatives (us):";
    for (const nccl::Estimate& alt : tuning.estimates)
      if (alt.enabled)
        others += std::string(" ") + nccl::to_string(alt.algo) + "/" + nccl::to_string(alt.proto) +
                  fmt("=%.1f", alt.time_us);
    s.notes.push_back(others);
    if (!relay_note.empty()) s.notes.push_back(relay_note);
    return s;
  }
};

}  // namespace

STEPSIM_REGISTER_ALGORITHM(
    Nccl, "nccl", "NCCL's choice (ring/tree/NVLS/CollNet x LL/LL128/Simple, channels) from its tuning model",
    {{"algo", "NCCL's choice", "ring|tree|nvls|nvls_tree|collnet|collnet_chain: force the algorithm (NCCL_ALGO)"},
     {"proto", "NCCL's choice", "LL|LL128|Simple: force the protocol (NCCL_PROTO)"},
     {"nvls", "on", "on|off: NVLink SHARP allowed (NCCL_NVLS_ENABLE)"},
     {"version", "the newest modelled", "2.4 ... 2.28: that release's tuning constants"},
     {"gpus_per_thread", "0", "N: one CPU thread launches N ranks' kernels (nccl-tests -g N)"},
     {"caller", "nccl", "nccl|torch: a torch.distributed call adds PyTorch's host time"}})

}  // namespace stepsim::models
