#pragma once
/// @file Deterministic test data for the harness, computed per element from (index, seed) so a
/// GPU kernel and the host produce the same values without shipping arrays around.
///
/// Contract: `hash_uniform` is bit-identical on host and device (integer arithmetic only).
/// `smooth_field_value` uses sinf, whose last bits may differ between host and device; the GPU
/// compression run therefore checks its codecs against the CPU reference on the field as the GPU
/// computed it (downloaded), never on a recomputed one.
#include <math.h>
#include <stdint.h>

#include "validation/harness/codec_kernels.hpp"  // HARNESS_HD

namespace stepsim::harness {

/// @brief SplitMix64 finaliser (Steele, Lea, Flood 2014): a well-mixed 64-bit hash of `x`.
HARNESS_HD inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// @brief A value in [-1, 1) from (seed, index), 24 random bits (exact in fp32).
HARNESS_HD inline float hash_uniform(uint64_t seed, uint64_t index) {
  uint64_t h = splitmix64(seed ^ splitmix64(index));
  return static_cast<float>(h >> 40) * (1.0f / 8388608.0f) - 1.0f;
}

/// @brief Amplitude of the seeded noise on the smooth field.
constexpr float kFieldNoise = 1e-3f;

/// @brief Element `i` of the compression test field: three sines of periods 4096, 517 and 97
/// elements (|sum| <= 1.75) plus seeded noise of amplitude 1e-3 — smooth at the scale of a ZFP
/// block, like the simulation fields ZFP targets, but not trivially compressible. Phases are taken
/// modulo the period so sinf sees small arguments at any index.
HARNESS_HD inline float smooth_field_value(uint64_t i, uint64_t seed) {
  const float two_pi = 6.28318530717958647692f;
  float a = sinf(two_pi * static_cast<float>(i % 4096u) / 4096.0f);
  float b = sinf(two_pi * static_cast<float>(i % 517u) / 517.0f + 1.0f);
  float c = sinf(two_pi * static_cast<float>(i % 97u) / 97.0f + 2.0f);
  return a + 0.5f * b + 0.25f * c + kFieldNoise * hash_uniform(seed, i);
}

}  // namespace stepsim::harness
