/// @file Ring collectives, as NCCL runs them (papers.md §4; Patarasuk & Yuan 2009 for the
/// bandwidth-optimal ring allreduce): allgather and reduce-scatter in n-1 ring steps,
/// allreduce as reduce-scatter then allgather, broadcast and reduce as a pipelined chain
/// along the ring from / to the root. Each of `channels` channels moves its own piece of
/// every block on its own ring (channel_ring_orders: across nodes each channel enters and
/// leaves a node through other GPUs and NICs, as NCCL's rings do); unset channels default
/// to one per NIC across nodes (default_ring_channels).
#include <algorithm>
#include <string>
#include <vector>

#include "models/collectives/lowering.hpp"
#include "models/collectives/ring_order.hpp"

namespace stepsim::models {
namespace {

std::string describe_order(const std::string& label, const std::vector<int>& order) {
  std::string text = label + ":";
  for (std::size_t i = 0; i < order.size() && i < 16; ++i) text.append(" ").append(std::to_string(order[i]));
  return order.size() > 16 ? text.append(" ...") : text;
}

/// Notes naming each channel's ring (the first 8 channels; later ones repeat their pattern).
void describe_rings(Schedule& s, const std::vector<std::vector<int>>& rings, const std::string& what) {
  const bool shared = std::all_of(rings.begin(), rings.end(), [&](const auto& r) { return r == rings.front(); });
  if (shared) {
    s.notes.push_back(describe_order(what, rings.front()));
    return;
  }
  for (std::size_t c = 0; c < rings.size() && c < 8; ++c)
    s.notes.push_back(describe_order("channel " + std::to_string(c) + " " + what, rings[c]));
}

int ring_channels(const CollectiveContext& ctx) {
  return ctx.options.channels > 0 ? ctx.options.channels : default_ring_channels(ctx);
}

class Ring : public Algorithm {
 public:
  bool supports(const CollectiveSpec& spec, const CollectiveContext&, std::string* why_not) const override {
    if (spec.op == CollectiveOp::alltoall || spec.op == CollectiveOp::sendrecv) {
      if (why_not) *why_not = "a ring moves data to the next rank only; use 'direct' for " + std::string(to_string(spec.op));
      return false;
    }
    return true;
  }

  Schedule lower(const CollectiveSpec& spec, const CollectiveContext& ctx) const override {
    lowering::require(*this, "ring", spec, ctx);
    const int n = spec.ranks;
    const int channels = ring_channels(ctx);
    const std::vector<std::vector<int>> rings = channel_ring_orders(ctx, channels);
    if (spec.op == CollectiveOp::broadcast || spec.op == CollectiveOp::reduce) return chain(spec, ctx, rings);

    Schedule s = lowering::start(spec, "ring", n, channels, channels);
    describe_rings(s, rings, "ring order");
    // Position p of ring c owns block p of piece c (allgather / reduce-scatter record the rank
    // standing there as its owner): each channel's pass is the same constant shift whatever
    // its order, one compact round, so per-channel rings scale to any rank count.
    const lowering::Owned at_position = lowering::own_by_position(s, rings);
    if (n < 2) return s;
    if (spec.op != CollectiveOp::allgather) lowering::append_channel_ring_pass(s, rings, at_position, Combine::reduce, 1);
    if (spec.op != CollectiveOp::reduce_scatter)
      lowering::append_channel_ring_pass(s, rings, at_position, Combine::replace, 0);
    return s;
  }

 private:
  /// Broadcast: root -> next -> ... ; reduce: root's successor -> ... -> root, each channel
  /// along its own ring, pipelined in chunks so every hop works at once after the fill.
  static Schedule chain(const CollectiveSpec& spec, const CollectiveContext& ctx, std::vector<std::vector<int>> rings) {
    const int channels = static_cast<int>(rings.size());
    const int chunks = lowering::pipeline_chunk_count(ctx, spec.bytes, channels, spec.ranks - 1);
    Schedule s = lowering::start(spec, "ring", chunks, channels, channels);
    const bool broadcast = spec.op == CollectiveOp::broadcast;
    for (std::vector<int>& order : rings) {
      auto root = std::find(order.begin(), order.end(), spec.root);
      std::rotate(order.begin(), broadcast ? root : root + 1, order.end());
    }
    describe_rings(s, rings, "chain");
    std::string chunk_note = std::to_string(chunks) + " pipeline chunks per channel";
    if (chunks < lowering::chunk_count(ctx, spec.bytes, channels)) chunk_note += " (fewer than the chunk size asks: bounded schedule size)";
    s.notes.push_back(chunk_note);
    lowering::append_channel_chains(s, rings, broadcast ? Combine::replace : Combine::reduce);
    return s;
  }
};

}  // namespace

STEPSIM_REGISTER_ALGORITHM(Ring, "ring",
                           "NCCL-style ring: n-1 steps per phase, one ring per channel, pipelined chain for broadcast/reduce", {})

}  // namespace stepsim::models
