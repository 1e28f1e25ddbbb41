#pragma once
// Test helper: one (algorithm, protocol) estimate out of a tuning result.
#include <gtest/gtest.h>

#include "models/collectives/nccl_tuning.hpp"

namespace stepsim::models::nccl {

inline Estimate pick(const Tuning& t, Algo a, Proto p) {
  for (const Estimate& e : t.estimates)
    if (e.algo == a && e.proto == p) return e;
  ADD_FAILURE() << "no estimate for " << to_string(a) << "/" << to_string(p);
  return {};
}

}  // namespace stepsim::models::nccl
