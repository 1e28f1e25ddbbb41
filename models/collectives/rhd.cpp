/// @file Recursive halving / doubling (Thakur, Rabenseifner & Gropp, "Optimization of
/// Collective Communication Operations in MPICH", IJHPCA 2005): reduce-scatter by recursive
/// halving, allgather by recursive doubling, allreduce as Rabenseifner's halving then
/// doubling, broadcast and reduce along a binomial tree.
///
/// Non-powers of two use the paper's folding (§4.1 of the allreduce section): with p the
/// largest power of two <= n and rem = n - p, each even rank below 2*rem first hands its data
/// to the odd rank above it and sits out; p ranks run the power-of-two algorithm; the odd
/// ranks hand the result back at the end.
#include "models/collectives/lowering.hpp"

namespace stepsim::models {
namespace {

/// The p participating ranks of the folded algorithm and the blocks each one ends owning.
class Folding {
 public:
  explicit Folding(int n) : n_(n) {
    while (p_ * 2 <= n) p_ *= 2;
    rem_ = n - p_;
  }
  int p() const { return p_; }
  int rem() const { return rem_; }
  /// Real rank of virtual rank v.
  int real(int v) const { return v < rem_ ? 2 * v + 1 : v + rem_; }
  /// First block owned by virtual rank v (v = p gives n): a folded pair owns both its blocks.
  int first_block(int v) const { return v >= p_ ? n_ : v < rem_ ? 2 * v : v + rem_; }

 private:
  int n_;
  int p_ = 1;
  int rem_ = 0;
};

class RecursiveHalvingDoubling : public Algorithm {
 public:
  bool supports(const CollectiveSpec& spec, const CollectiveContext&, std::string* why_not) const override {
    if (spec.op == CollectiveOp::alltoall || spec.op == CollectiveOp::sendrecv) {
      if (why_not) *why_not = "recursive halving/doubling has no " + std::string(to_string(spec.op)) + "; use 'direct'";
      return false;
    }
    return true;
  }

  Schedule lower(const CollectiveSpec& spec, const CollectiveContext& ctx) const override {
    lowering::require(*this, "rhd", spec, ctx);
    const int n = spec.ranks;
    const int channels = lowering::channel_count(ctx);
    if (spec.op == CollectiveOp::broadcast || spec.op == CollectiveOp::reduce) {
      Schedule s = lowering::start(spec, "rhd", 1, channels, channels);
      binomial(s);
      return s;
    }
    Schedule s = lowering::start(spec, "rhd", n, channels, channels);
    const Folding f(n);
    const bool gather = spec.op == CollectiveOp::allgather;
    const bool scatter = spec.op == CollectiveOp::reduce_scatter;
    // Pre-step: even ranks below 2*rem fold into their odd neighbour.
    Round fold;
    for (int v = 0; v < f.rem(); ++v)
      for (int c = 0; c < channels; ++c)
        fold.steps.push_back(gather ? lowering::step(s, 2 * v, 2 * v + 1, 2 * v, 1, c, Combine::replace, c)
                                    : lowering::step(s, 2 * v, 2 * v + 1, 0, n, c, Combine::reduce, c));
    if (!fold.steps.empty()) s.rounds.push_back(std::move(fold));
    if (!gather) halving(s, f);
    if (!scatter) doubling(s, f);
    // Post-step: the odd rank hands the folded rank what the op promises it.
    Round unfold;
    for (int v = 0; v < f.rem(); ++v)
      for (int c = 0; c < channels; ++c) {
        const int from = 2 * v + 1, to = 2 * v;
        if (scatter) {
          unfold.steps.push_back(lowering::step(s, from, to, to, 1, c, Combine::replace, c));
        } else if (gather) {
          // Everything but the folded rank's own block, which it never gave away.
          if (to > 0) unfold.steps.push_back(lowering::step(s, from, to, 0, to, c, Combine::replace, c));
          unfold.steps.push_back(lowering::step(s, from, to, to + 1, n - to - 1, c, Combine::replace, c));
        } else {
          unfold.steps.push_back(lowering::step(s, from, to, 0, n, c, Combine::replace, c));
        }
      }
    if (!unfold.steps.empty()) s.rounds.push_back(std::move(unfold));
    return s;
  }

 private:
  /// Recursive halving, distance p/2 first: each rank keeps the half of its group's blocks
  /// that holds its own and sends (reduces) the other half to its partner.
  static void halving(Schedule& s, const Folding& f) {
    for (int mask = f.p() / 2; mask >= 1; mask /= 2) {
      Round round;
      for (int v = 0; v < f.p(); ++v) {
        const int partner = v ^ mask;
        const int half = partner & ~(mask - 1);   // first virtual rank of the half given away
        const int lo = f.first_block(half), hi = f.first_block(half + mask);
        for (int c = 0; c < s.channels; ++c)
          round.steps.push_back(lowering::step(s, f.real(v), f.real(partner), lo, hi - lo, c, Combine::reduce, c));
      }
      s.rounds.push_back(std::move(round));
    }
  }

  /// Recursive doubling, distance 1 first: each rank sends every block its group holds.
  static void doubling(Schedule& s, const Folding& f) {
    for (int mask = 1; mask < f.p(); mask *= 2) {
      Round round;
      for (int v = 0; v < f.p(); ++v) {
        const int group = v & ~(mask - 1);
        const int lo = f.first_block(group), hi = f.first_block(group + mask);
        for (int c = 0; c < s.channels; ++c)
          round.steps.push_back(lowering::step(s, f.real(v), f.real(v ^ mask), lo, hi - lo, c, Combine::replace, c));
      }
      s.rounds.push_back(std::move(round));
    }
  }

  /// Binomial tree over u = (rank - root) mod n: broadcast doubles the set of holders each
  /// round; reduce runs it backwards, u sending to u - mask once its subtree is summed.
  static void binomial(Schedule& s) {
    const int n = s.spec.ranks, root = s.spec.root;
    const bool broadcast = s.spec.op == CollectiveOp::broadcast;
    auto real = [&](int u) { return (u + root) % n; };
    for (int mask = 1; mask < n; mask *= 2) {
      Round round;
      for (int u = 0; u < n; ++u)
        for (int c = 0; c < s.channels; ++c) {
          if (broadcast && u < mask && u + mask < n)
            round.steps.push_back(lowering::step(s, real(u), real(u + mask), 0, 1, c, Combine::replace, c));
          if (!broadcast && u % (2 * mask) == mask)
            round.steps.push_back(lowering::step(s, real(u), real(u - mask), 0, 1, c, Combine::reduce, c));
        }
      s.rounds.push_back(std::move(round));
    }
  }
};

}  // namespace

STEPSIM_REGISTER_ALGORITHM(RecursiveHalvingDoubling, "rhd",
                           "recursive halving/doubling (Rabenseifner), binomial broadcast/reduce; any n by folding", {})

}  // namespace stepsim::models
