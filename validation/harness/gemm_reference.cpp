#include "validation/harness/gemm_reference.hpp"

#include <cmath>

#include "validation/harness/codec_kernels.hpp"
#include "validation/harness/synthetic_field.hpp"

namespace stepsim::harness {

float gemm_input_value(const std::string& dtype, uint64_t seed, uint64_t index) {
  const float value = hash_uniform(seed, index);
  if (dtype == "fp16") return codec::fp16_to_float(codec::float_to_fp16(value));
  if (dtype == "bf16") return codec::bf16_to_float(codec::float_to_bf16(value));
  return value;
}

GemmReference gemm_reference_element(const GemmShape& shape, const std::string& dtype, uint64_t seed_a,
                                     uint64_t seed_b, int64_t member, int64_t row, int64_t col) {
  const bool a_transposed = shape.layout[0] == 'T';
  const bool b_transposed = shape.layout[1] == 'T';
  const int64_t a_base = member * shape.m * shape.k;
  const int64_t b_base = member * shape.k * shape.n;
  GemmReference ref;
  for (int64_t l = 0; l < shape.k; ++l) {
    const int64_t a_index = a_base + (a_transposed ? l * shape.m + row : row * shape.k + l);
    const int64_t b_index = b_base + (b_transposed ? col * shape.k + l : l * shape.n + col);
    const double product = static_cast<double>(gemm_input_value(dtype, seed_a, static_cast<uint64_t>(a_index))) *
                           static_cast<double>(gemm_input_value(dtype, seed_b, static_cast<uint64_t>(b_index)));
    ref.value += product;
    ref.magnitude += std::fabs(product);
  }
  return ref;
}

int64_t gemm_output_offset(const GemmShape& shape, int64_t member, int64_t row, int64_t col) {
  return member * shape.m * shape.n + row * shape.n + col;
}

double gemm_tolerance(const std::string& dtype, const GemmReference& reference) {
  // A wrong layout misses by about 2 / sqrt(k) of the magnitude (0.015 at k = 16384): the bounds
  // below stay far under that while covering accumulation order and rounding.
  const double input = dtype == "tf32" ? 1e-3 : 1e-4;
  const double output = dtype == "fp16" ? std::ldexp(1.0, -10) : dtype == "bf16" ? std::ldexp(1.0, -7) : 0.0;
  return input * reference.magnitude + output * std::fabs(reference.value) + 1e-5;
}

}  // namespace stepsim::harness
