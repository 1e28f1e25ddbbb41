#pragma once
/// @file CPU reference of the harness's compression codecs (per-block arithmetic in
/// codec_kernels.hpp): the unit tests exercise it here, and the GPU run compares its kernels'
/// output with it byte for byte.
///
/// Contract: stream layouts are exactly what the CUDA kernels write:
/// - cast: n 16-bit values;
/// - quant: n codes (1 byte each for 8 bits; 2 per byte for 4 bits, even index in the low
///   nibble), then one fp32 scale per block at `QuantLayout::scale_offset`;
/// - zfp: n/4 blocks of exactly 4*rate bits, LSB-first in 32-bit words, zero-padded to a word.
/// Parameters outside the documented ranges are programming errors (std::logic_error): the
/// command line checks them first.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace stepsim::harness {

/// @brief Target of the cast codec.
enum class CastTarget { bf16, fp16 };

/// @brief "bf16" / "fp16".
std::string cast_target_name(CastTarget target);

/// @brief fp32 -> 16-bit, round to nearest even.
std::vector<uint16_t> cast_compress(const float* input, std::size_t n, CastTarget target);
/// @brief 16-bit -> fp32.
std::vector<float> cast_decompress(const uint16_t* input, std::size_t n, CastTarget target);

/// @brief Byte layout of a blockwise-quantised array.
struct QuantLayout {
  std::size_t n = 0;             ///< values
  int bits = 8;                  ///< 8 or 4
  int block = 64;                ///< values per scale (even, divides n)
  std::size_t code_bytes = 0;    ///< n * bits / 8
  std::size_t scale_offset = 0;  ///< code_bytes rounded up to 4
  std::size_t total_bytes = 0;   ///< scale_offset + 4 * n / block
};

/// @brief The layout for `n` values (logic_error unless bits is 4 or 8, block even and dividing n).
QuantLayout quant_layout(std::size_t n, int bits, int block);
/// @brief Quantises `input` (layout.n values) into layout.total_bytes bytes.
std::vector<uint8_t> quant_compress(const float* input, const QuantLayout& layout);
/// @brief Dequantises a stream of `layout`.
std::vector<float> quant_decompress(const uint8_t* input, const QuantLayout& layout);

/// @brief Size of the fixed-rate ZFP stream of n values (n a multiple of 4): n*rate/8 bytes,
/// rounded up to whole 32-bit words.
std::size_t zfp_compressed_bytes(std::size_t n, int rate);
/// @brief Compresses n values (a multiple of 4) at `rate` bits per value (3..32).
std::vector<uint32_t> zfp_compress(const float* input, std::size_t n, int rate);
/// @brief Decompresses n values.
std::vector<float> zfp_decompress(const uint32_t* input, std::size_t n, int rate);

/// @brief max_i |a[i] - b[i]|, computed in double.
double max_abs_error(const float* a, const float* b, std::size_t n);

}  // namespace stepsim::harness
