#pragma once
// Shared by the block-level tests (compile, Float8, Megatron): what a pass's kernels are, do and
// move, read from transformer::Kernels.
#include <string>
#include <vector>

#include "workloads/generators/transformer.hpp"

namespace stepsim::workloads::testing {

/// @brief The kernel launches' names, collectives and async-TP waits left out.
inline std::vector<std::string> names(const transformer::Kernels& kernels) {
  std::vector<std::string> out;
  for (const transformer::Kernel& k : kernels)
    if (!k.comm && !k.is_wait()) out.push_back(k.name);
  return out;
}

/// @brief FLOPs of the GEMMs (2 m n k each).
inline double gemm_flops(const transformer::Kernels& kernels) {
  double flops = 0;
  for (const transformer::Kernel& k : kernels)
    if (!k.comm && k.spec.kind == "gemm") flops += 2 * k.spec.param("m") * k.spec.param("n") * k.spec.param("k");
  return flops;
}

/// @brief HBM bytes the memory-bound kernels read and write.
inline double elementwise_bytes(const transformer::Kernels& kernels) {
  double bytes = 0;
  for (const transformer::Kernel& k : kernels)
    if (!k.comm && k.spec.kind == "elementwise")
      bytes += k.spec.param("elements") * (k.spec.param("bytes_read") + k.spec.param("bytes_written"));
  return bytes;
}

}  // namespace stepsim::workloads::testing
