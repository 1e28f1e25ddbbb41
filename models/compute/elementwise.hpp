#pragma once
/// @file How a generator marks an `elementwise` spec (models/compute/elementwise.cpp) with the
/// kernel path PyTorch runs it on; the parameter names belong to that model.
#include "models/compute/kernel.hpp"

namespace stepsim::models {

/// @brief `spec` on PyTorch's non-vectorized path (an operand transposed, sliced or broadcast,
/// or a widening cast): 0.56 of the HBM roof.
inline KernelSpec strided(KernelSpec spec) {
  spec.params["strided"] = 1;
  return spec;
}

/// @brief `spec` as a multi_tensor_apply kernel (foreach op, fused optimizer, GradScaler's
/// unscale): 0.86 of the HBM roof.
inline KernelSpec multi_tensor(KernelSpec spec) {
  spec.params["multi_tensor"] = 1;
  return spec;
}

}  // namespace stepsim::models
