/// @file Ring collectives, as NCCL runs them (papers.md §4; Patarasuk & Yuan 2009 for the
/// bandwidth-optimal ring allreduce): allgather and reduce-scatter in n-1 ring steps,
/// allreduce as reduce-scatter then allgather, broadcast and reduce as a pipelined chain
/// along the ring from / to the root. Each of `channels` channels moves its own piece of
/// every block, as NCCL splits a buffer over its rings.
#include <algorithm>

#include "models/collectives/lowering.hpp"
#include "models/collectives/ring_order.hpp"

namespace stepsim::models {
namespace {

std::string describe_order(const std::vector<int>& order) {
  std::string text = "ring order:";
  for (std::size_t i = 0; i < order.size() && i < 16; ++i) text.append(" ").append(std::to_string(order[i]));
  return order.size() > 16 ? text.append(" ...") : text;
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
    const int channels = lowering::channel_count(ctx);
    const std::vector<int> order = ring_order(ctx);
    if (spec.op == CollectiveOp::broadcast || spec.op == CollectiveOp::reduce) return chain(spec, ctx, order);

    Schedule s = lowering::start(spec, "ring", n, channels, channels);
    s.notes.push_back(describe_order(order));
    if (n < 2) return s;
    // Position p owns the block of the rank standing there (its allgather input, its
    // reduce-scatter output); with the identity order the pass is one compact round.
    const lowering::Owned own = [&](int, int p, int c) {
      return std::vector<lowering::CellRun>{{order[static_cast<std::size_t>(p)], 1, c}};
    };
    const std::vector<std::vector<int>> rings = {order};
    if (spec.op != CollectiveOp::allgather) lowering::append_ring_pass(s, rings, own, Combine::reduce, 1);
    if (spec.op != CollectiveOp::reduce_scatter) lowering::append_ring_pass(s, rings, own, Combine::replace, 0);
    return s;
  }

 private:
  /// Broadcast: root -> next -> ... ; reduce: root's successor -> ... -> root, both pipelined
  /// in chunks so every hop works at once after the fill.
  static Schedule chain(const CollectiveSpec& spec, const CollectiveContext& ctx, std::vector<int> order) {
    const int channels = lowering::channel_count(ctx);
    const int chunks = lowering::chunk_count(ctx, spec.bytes, channels);
    Schedule s = lowering::start(spec, "ring", chunks, channels, channels);
    auto root = std::find(order.begin(), order.end(), spec.root);
    const bool broadcast = spec.op == CollectiveOp::broadcast;
    std::rotate(order.begin(), broadcast ? root : root + 1, order.end());
    s.notes.push_back(describe_order(order));
    s.notes.push_back(std::to_string(chunks) + " pipeline chunks per channel");
    lowering::append_chains(s, {order}, broadcast ? Combine::replace : Combine::reduce);
    return s;
  }
};

}  // namespace

STEPSIM_REGISTER_ALGORITHM(Ring, "ring",
                           "NCCL-style ring: n-1 steps per phase, pipelined chain for broadcast/reduce")

}  // namespace stepsim::models
