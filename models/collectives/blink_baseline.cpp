/// @file The baseline the Blink paper measured against (papers.md §1): NCCL 2.4, whose rings
/// run over NVLink when the job's GPUs hold an NVLink Hamiltonian cycle and over PCIe when
/// they do not. That NCCL had neither trees inside a server nor NVB paths (a hop relayed
/// through a third GPU's NVLinks, NCCL 2.8+), so a fragmented allocation loses NVLink
/// entirely. Here:
///  - one server with NVLink rings: NCCL's own ring search on the direct NVLinks
///    (nccl_mesh_rings, NVB off), one channel per ring found;
///  - one server without: one ring, ring_order's widest Hamiltonian cycle over the
///    platform's routes (PCIe switches, CPUs, QPI), as NCCL 2.4 built its PCIe ring;
///  - several servers: the `ring` algorithm's rings (nodes in order, one channel per NIC).
/// Allreduce, allgather, reduce-scatter run the ring passes; broadcast and reduce a
/// pipelined chain along each ring from (to) the root. The protocol is ideal, as blink's,
/// so comparing the two shows how they use the topology, not protocol overheads.
#include <algorithm>

#include "models/collectives/lowering.hpp"
#include "models/collectives/nccl_topology.hpp"
#include "models/collectives/ring_order.hpp"

namespace stepsim::models {
namespace {

std::string describe(const std::vector<int>& ring) {
  std::string text;
  for (int r : ring) {
    if (!text.empty()) text += ' ';
    text += std::to_string(r);
  }
  return text;
}

class BlinkRingBaseline : public Algorithm {
 public:
  bool supports(const CollectiveSpec& spec, const CollectiveContext&, std::string* why_not) const override {
    if (spec.op != CollectiveOp::alltoall && spec.op != CollectiveOp::sendrecv) return true;
    if (why_not)
      *why_not = "rings move data to the next rank only; use 'direct' for " + std::string(to_string(spec.op));
    return false;
  }

  Schedule lower(const CollectiveSpec& spec, const CollectiveContext& ctx) const override {
    lowering::require(*this, "blink-ring-baseline", spec, ctx);
    std::vector<std::vector<int>> rings;
    std::string how;
    if (ctx.allocation.nodes(ctx.platform) > 1) {
      rings = channel_ring_orders(ctx, default_ring_channels(ctx));
      how = "rings across servers, one channel per NIC";
    } else if (const nccl::MeshRings mesh = nccl::nccl_mesh_rings(ctx, /*nvb=*/false); mesh.channels > 0) {
      rings = mesh.rings;
      how = std::to_string(mesh.channels) + " NVLink ring(s) of NCCL's search";
    } else {
      rings = {ring_order(ctx)};
      how = "no NVLink ring: one ring over the platform's routes (PCIe)";
    }
    const int channels = static_cast<int>(rings.size());
    const int n = spec.ranks;
    if (spec.op == CollectiveOp::broadcast || spec.op == CollectiveOp::reduce) {
      const bool broadcast = spec.op == CollectiveOp::broadcast;
      for (std::vector<int>& ring : rings) {
        const auto root = std::find(ring.begin(), ring.end(), spec.root);
        std::rotate(ring.begin(), broadcast ? root : root + 1, ring.end());
      }
      const int chunks = lowering::pipeline_chunk_count(ctx, spec.bytes, channels, n - 1);
      Schedule s = lowering::start(spec, "blink-ring-baseline", chunks, channels, channels);
      s.notes.push_back(how);
      for (std::size_t c = 0; c < rings.size() && c < 8; ++c)
        s.notes.push_back("chain " + std::to_string(c) + ": " + describe(rings[c]));
      lowering::append_channel_chains(s, rings, broadcast ? Combine::replace : Combine::reduce);
      return s;
    }
    Schedule s = lowering::start(spec, "blink-ring-baseline", n, channels, channels);
    s.notes.push_back(how);
    for (std::size_t c = 0; c < rings.size() && c < 8; ++c)
      s.notes.push_back("ring " + std::to_string(c) + ": " + describe(rings[c]));
    const lowering::Owned at_position = lowering::own_by_position(s, rings);
    if (spec.op != CollectiveOp::allgather)
      lowering::append_channel_ring_pass(s, rings, at_position, Combine::reduce, 1);
    if (spec.op != CollectiveOp::reduce_scatter)
      lowering::append_channel_ring_pass(s, rings, at_position, Combine::replace, 0);
    return s;
  }
};

}  // namespace

STEPSIM_REGISTER_ALGORITHM(
    BlinkRingBaseline, "blink-ring-baseline",
    "Blink's baseline, NCCL 2.4: NVLink rings if the GPUs hold an NVLink cycle, else one PCIe ring", {})

}  // namespace stepsim::models
