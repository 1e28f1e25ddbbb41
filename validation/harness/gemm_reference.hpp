#pragma once
/// @file Host check of the harness's cuBLAS results: the exact inputs the GPU fill kernel wrote
/// (hash_uniform rounded to the dtype) and the product at a few output positions, so a wrong
/// layout or leading dimension is caught on the GPU machine instead of being timed.
#include <cstdint>
#include <string>

#include "validation/harness/gemm_shapes.hpp"

namespace stepsim::harness {

/// @brief Element `index` of an operand filled with seed `seed` as `dtype` (fp32, tf32, fp16,
/// bf16; tf32 operands are stored as fp32).
float gemm_input_value(const std::string& dtype, uint64_t seed, uint64_t index);

/// @brief One output element of op(A) op(B) computed in double, and sum |a*b| over the same terms.
struct GemmReference {
  double value = 0;
  double magnitude = 0;
};

/// @brief C[row][col] of batch member `member` for operands filled with `seed_a` / `seed_b`
/// (row-major storage and layouts as in gemm_shapes.hpp).
GemmReference gemm_reference_element(const GemmShape& shape, const std::string& dtype, uint64_t seed_a,
                                     uint64_t seed_b, int64_t member, int64_t row, int64_t col);

/// @brief Offset (in elements) of C[row][col] of batch member `member`.
int64_t gemm_output_offset(const GemmShape& shape, int64_t member, int64_t row, int64_t col);

/// @brief Largest acceptable |GPU - reference| for `dtype`: input rounding and fp32 accumulation
/// relative to `magnitude`, plus output rounding relative to |value| for 16-bit outputs.
double gemm_tolerance(const std::string& dtype, const GemmReference& reference);

}  // namespace stepsim::harness
