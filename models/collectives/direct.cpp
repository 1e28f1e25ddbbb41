/// @file Direct (one-hop) collectives: every piece of data goes straight from where it is to
/// where it must end, all in one round (allreduce: two), as NCCL's alltoall and sendrecv
/// and the "direct" allgather/reduce-scatter of MSCCL-style all-pairs schedules do. The
/// sendrecv pattern is nccl-tests' sendrecv_perf: rank r sends to (r + 1) % n.
#include "models/collectives/lowering.hpp"

namespace stepsim::models {
namespace {

class Direct : public Algorithm {
 public:
  bool supports(const CollectiveSpec&, const CollectiveContext&, std::string*) const override { return true; }

  Schedule lower(const CollectiveSpec& spec, const CollectiveContext& ctx) const override {
    lowering::require(*this, "direct", spec, ctx);
    const int n = spec.ranks;
    const int channels = lowering::channel_count(ctx);
    const bool all_pairs = spec.op == CollectiveOp::alltoall;
    const bool one_block = spec.op == CollectiveOp::broadcast || spec.op == CollectiveOp::reduce;
    Schedule s = lowering::start(spec, "direct", all_pairs ? n * n : one_block ? 1 : n, channels, channels);
    Round scatter;   // reduce-scatter, reduce, alltoall, sendrecv: data to its destination
    Round gather;    // allgather, broadcast: data from its owner to everyone
    for (int c = 0; c < channels; ++c)
      for (int src = 0; src < n; ++src)
        for (int dst = 0; dst < n; ++dst) {
          if (src == dst) continue;
          switch (spec.op) {
            case CollectiveOp::allreduce:
              scatter.steps.push_back(lowering::step(s, src, dst, dst, 1, c, Combine::reduce, c));
              gather.steps.push_back(lowering::step(s, src, dst, src, 1, c, Combine::replace, c));
              break;
            case CollectiveOp::reduce_scatter:
              scatter.steps.push_back(lowering::step(s, src, dst, dst, 1, c, Combine::reduce, c));
              break;
            case CollectiveOp::allgather:
              gather.steps.push_back(lowering::step(s, src, dst, src, 1, c, Combine::replace, c));
              break;
            case CollectiveOp::broadcast:
              if (src == spec.root) gather.steps.push_back(lowering::step(s, src, dst, 0, 1, c, Combine::replace, c));
              break;
            case CollectiveOp::reduce:
              if (dst == spec.root) scatter.steps.push_back(lowering::step(s, src, dst, 0, 1, c, Combine::reduce, c));
              break;
            case CollectiveOp::alltoall:
              scatter.steps.push_back(lowering::step(s, src, dst, src * n + dst, 1, c, Combine::replace, c));
              break;
            case CollectiveOp::sendrecv:
              if (dst == (src + 1) % n)
                scatter.steps.push_back(lowering::step(s, src, dst, src, 1, c, Combine::replace, c));
              break;
          }
        }
    for (Round* round : {&scatter, &gather})
      if (!round->steps.empty()) s.rounds.push_back(std::move(*round));
    return s;
  }
};

}  // namespace

STEPSIM_REGISTER_ALGORITHM(Direct, "direct", "one hop from owner to destination: all-pairs, star or neighbour", {})

}  // namespace stepsim::models
