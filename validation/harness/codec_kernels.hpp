#pragma once
/// @file The per-element and per-block arithmetic of the harness's compression codecs, shared by
/// the CUDA kernels (run_compress.cu) and the CPU reference (codec_reference.cpp), so that the GPU
/// output can be checked bit for bit against the reference on the GPU machine.
///
/// Contract: every function is deterministic and uses only IEEE-exact or correctly rounded
/// operations (integer arithmetic, power-of-two scaling, one division, rintf), so host and device
/// give identical bits. Inputs must be finite (the synthetic field is); NaN and Inf are not
/// handled, as in ZFP.
///
/// Codecs:
/// - cast: fp32 -> bf16 / fp16, round to nearest even (what __float2bfloat16_rn and __float2half_rn
///   do), and back.
/// - quant: blockwise absmax quantisation to signed `bits`-bit integers (8 or 4), one fp32 scale per
///   block: q = rint(x / s), s = absmax / (2^(bits-1) - 1); x' = q * s.
/// - zfp: fixed-rate 1-D ZFP for fp32 (P. Lindstrom, "Fixed-Rate Compressed Floating-Point Arrays",
///   IEEE TVCG 20(12), 2014, §3 and the reference implementation's 1-D float path, rounding mode
///   "never"): block of 4 values -> common exponent (8 bits + a nonzero flag), block-floating-point
///   to 32-bit integers (30 magnitude bits), the forward decorrelating lifting transform, negabinary,
///   then bit planes MSB first with ZFP's group-test coding, cut (or zero-padded) at exactly
///   4*rate bits per block.
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define HARNESS_HD __host__ __device__
#else
#define HARNESS_HD
#endif

namespace stepsim::harness::codec {

// ---- bit I/O -----------------------------------------------------------------------------------
// A codec stream is an array of 32-bit words; stream bit i is bit (i % 32) of word i / 32 (ZFP's
// LSB-first order), so the byte layout is the same on host and device (both little-endian).

/// @brief Appends bits to a word array; the caller starts it word-aligned and flushes at the end.
class BitWriter {
 public:
  HARNESS_HD explicit BitWriter(uint32_t* words) : out_(words) {}

  /// @brief Writes one bit (the low bit of `bit`) and returns it.
  HARNESS_HD uint32_t put_bit(uint32_t bit) {
    bit &= 1u;
    buffer_ |= static_cast<uint64_t>(bit) << fill_;
    if (++fill_ == 32) flush_word();
    return bit;
  }

  /// @brief Writes the low `count` bits of `bits` (LSB first) and returns bits >> count.
  HARNESS_HD uint64_t put_bits(uint64_t bits, unsigned count) {
    for (unsigned i = 0; i < count; ++i, bits >>= 1) put_bit(static_cast<uint32_t>(bits));
    return bits;
  }

  /// @brief Writes `count` zero bits.
  HARNESS_HD void pad(unsigned count) {
    for (unsigned i = 0; i < count; ++i) put_bit(0);
  }

  /// @brief Writes a partly filled last word (zero-padded); no-op when word-aligned.
  HARNESS_HD void flush() {
    if (fill_ > 0) flush_word();
  }

 private:
  HARNESS_HD void flush_word() {
    *out_++ = static_cast<uint32_t>(buffer_);
    buffer_ = 0;
    fill_ = 0;
  }

  uint32_t* out_;
  uint64_t buffer_ = 0;
  unsigned fill_ = 0;
};

/// @brief Reads bits from a word array starting at any bit offset.
class BitReader {
 public:
  HARNESS_HD BitReader(const uint32_t* words, uint64_t bit_offset)
      : in_(words + (bit_offset >> 5)),
        buffer_(*in_ >> (bit_offset & 31u)),
        left_(32u - static_cast<unsigned>(bit_offset & 31u)) {}

  /// @brief Reads one bit.
  HARNESS_HD uint32_t get_bit() {
    if (left_ == 0) {
      buffer_ = *++in_;
      left_ = 32;
    }
    uint32_t bit = buffer_ & 1u;
    buffer_ >>= 1;
    --left_;
    return bit;
  }

  /// @brief Reads `count` bits, the first read into the lowest bit.
  HARNESS_HD uint64_t get_bits(unsigned count) {
    uint64_t bits = 0;
    for (unsigned i = 0; i < count; ++i) bits |= static_cast<uint64_t>(get_bit()) << i;
    return bits;
  }

 private:
  const uint32_t* in_;
  uint32_t buffer_;
  unsigned left_;
};

// ---- cast ----------------------------------------------------------------------------------------

HARNESS_HD inline uint32_t float_bits(float x) {
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  return bits;
}

HARNESS_HD inline float bits_float(uint32_t bits) {
  float x;
  memcpy(&x, &bits, sizeof x);
  return x;
}

/// @brief fp32 -> bf16 bits, round to nearest even (overflow gives Inf, as on the GPU).
HARNESS_HD inline uint16_t float_to_bf16(float x) {
  uint32_t bits = float_bits(x);
  uint32_t lsb = (bits >> 16) & 1u;
  return static_cast<uint16_t>((bits + 0x7fffu + lsb) >> 16);
}

/// @brief bf16 bits -> fp32 (exact).
HARNESS_HD inline float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

/// @brief fp32 -> IEEE fp16 bits, round to nearest even, subnormals kept, overflow to Inf.
HARNESS_HD inline uint16_t float_to_fp16(float x) {
  uint32_t bits = float_bits(x);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t mag = bits & 0x7fffffffu;
  if (mag >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to Inf
  if (mag < 0x38800000u) {                                              // below 2^-14: subnormal
    if (mag <= 0x33000000u) return static_cast<uint16_t>(sign);          // <= 2^-25 rounds to 0
    uint32_t mant = (mag & 0x7fffffu) | 0x800000u;
    unsigned shift = 126u - (mag >> 23);  // value = mant * 2^(e-150), unit 2^-24
    uint32_t result = mant >> shift;
    uint32_t rest = mant & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
  }
  uint32_t result = (((mag >> 23) - 112u) << 10) | ((mag & 0x7fffffu) >> 13);
  uint32_t rest = mag & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (result & 1u))) ++result;  // carry may bump the exponent
  return static_cast<uint16_t>(sign | result);
}

/// @brief IEEE fp16 bits -> fp32 (exact).
HARNESS_HD inline float fp16_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) return bits_float(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    // Subnormal: mant * 2^-24, exact in fp32.
    float value = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -value : value;
  }
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

// ---- quant ---------------------------------------------------------------------------------------

/// @brief Largest code of a signed `bits`-bit quantiser (symmetric: 127 for 8 bits, 7 for 4).
HARNESS_HD inline int quant_max(int bits) { return (1 << (bits - 1)) - 1; }

/// @brief Scale of a block whose largest magnitude is `absmax`.
HARNESS_HD inline float quant_scale(float absmax, int bits) {
  return absmax / static_cast<float>(quant_max(bits));
}

/// @brief Code of `x` in a block of scale `scale` (0 for an all-zero block).
HARNESS_HD inline int quantize(float x, float scale, int bits) {
  if (scale == 0.0f) return 0;
  float q = rintf(x / scale);
  float limit = static_cast<float>(quant_max(bits));
  q = q > limit ? limit : (q < -limit ? -limit : q);
  return static_cast<int>(q);
}

/// @brief Value of code `q` in a block of scale `scale`.
HARNESS_HD inline float dequantize(int q, float scale) { return static_cast<float>(q) * scale; }

/// @brief Two 4-bit two's complement codes in one byte, `even` in the low nibble.
HARNESS_HD inline uint8_t pack_int4(int even, int odd) {
  return static_cast<uint8_t>((static_cast<unsigned>(even) & 0xfu) | ((static_cast<unsigned>(odd) & 0xfu) << 4));
}

/// @brief The signed code in nibble `which` (0 = low) of `byte`.
HARNESS_HD inline int unpack_int4(uint8_t byte, int which) {
  int nibble = (byte >> (4 * which)) & 0xf;
  return (nibble ^ 8) - 8;
}

// ---- zfp (fixed-rate, 1-D, fp32) -----------------------------------------------------------------

constexpr int kZfpBlock = 4;            ///< values per block
constexpr int kZfpExponentBias = 127;   ///< fp32 exponent bias
constexpr int kZfpHeaderBits = 1 + 8;   ///< nonzero flag + biased common exponent
constexpr int kZfpMinRate = 3;          ///< 4*rate must hold the header (9 bits)
constexpr int kZfpMaxRate = 32;
constexpr uint32_t kNegabinaryMask = 0xaaaaaaaau;

/// @brief Bits per block at `rate` bits per value.
HARNESS_HD inline unsigned zfp_block_bits(int rate) { return static_cast<unsigned>(kZfpBlock * rate); }

/// @brief Blocks a GPU thread encodes together so that they fill whole 32-bit words (threads then
/// never share a word): 8 / gcd(8, rate), e.g. 2 at rate 4, 1 at rates 8 and 16, 8 at odd rates.
HARNESS_HD inline int zfp_group_blocks(int rate) {
  int divisor = 8;
  while (rate % divisor != 0) divisor /= 2;
  return 8 / divisor;
}

/// @brief The block's common exponent: frexp exponent of its largest magnitude (-127 when all zero).
HARNESS_HD inline int zfp_block_exponent(const float* block) {
  float largest = 0.0f;
  for (int i = 0; i < kZfpBlock; ++i) {
    float magnitude = fabsf(block[i]);
    if (largest < magnitude) largest = magnitude;
  }
  if (!(largest > 0.0f)) return -kZfpExponentBias;
  int exponent = 0;
  frexpf(largest, &exponent);
  return exponent < 1 - kZfpExponentBias ? 1 - kZfpExponentBias : exponent;  // clamp subnormals
}

// Left shift through unsigned so negative values shift without undefined behaviour.
HARNESS_HD inline int32_t shift_left1(int32_t x) { return static_cast<int32_t>(static_cast<uint32_t>(x) << 1); }

/// @brief ZFP's forward decorrelating transform of a 4-vector (in place; loses at most low bits).
HARNESS_HD inline void zfp_forward_lift(int32_t* p) {
  int32_t x = p[0], y = p[1], z = p[2], w = p[3];
  x += w; x >>= 1; w -= x;
  z += y; z >>= 1; y -= z;
  x += z; x >>= 1; z -= x;
  w += y; w >>= 1; y -= w;
  w += y >> 1; y -= w >> 1;
  p[0] = x; p[1] = y; p[2] = z; p[3] = w;
}

/// @brief ZFP's inverse transform (undoes zfp_forward_lift up to its lost low bits).
HARNESS_HD inline void zfp_inverse_lift(int32_t* p) {
  int32_t x = p[0], y = p[1], z = p[2], w = p[3];
  y += w >> 1; w -= y >> 1;
  y += w; w = shift_left1(w); w -= y;
  z += x; x = shift_left1(x); x -= z;
  y += z; z = shift_left1(z); z -= y;
  w += x; x = shift_left1(x); x -= w;
  p[0] = x; p[1] = y; p[2] = z; p[3] = w;
}

/// @brief Two's complement -> negabinary, which makes small magnitudes of either sign have
/// leading zero bit planes.
HARNESS_HD inline uint32_t to_negabinary(int32_t x) {
  return (static_cast<uint32_t>(x) + kNegabinaryMask) ^ kNegabinaryMask;
}

/// @brief Negabinary -> two's complement.
HARNESS_HD inline int32_t from_negabinary(uint32_t u) { return static_cast<int32_t>((u ^ kNegabinaryMask) - kNegabinaryMask); }

/// @brief Encodes 4 unsigned coefficients bit plane by bit plane, MSB first, within `budget` bits:
/// in each plane the bits of coefficients already found significant are sent verbatim, the rest
/// with group tests (1 = another one-bit follows, then its position in unary). Returns bits used.
HARNESS_HD inline unsigned zfp_encode_planes(BitWriter& out, const uint32_t* coefficient, unsigned budget) {
  unsigned bits = budget;
  unsigned significant = 0;  // coefficients [0, significant) already had a one-bit
  for (int plane = 31; plane >= 0 && bits > 0; --plane) {
    uint64_t x = 0;
    for (int i = 0; i < kZfpBlock; ++i) x |= static_cast<uint64_t>((coefficient[i] >> plane) & 1u) << i;
    unsigned verbatim = significant < bits ? significant : bits;
    bits -= verbatim;
    x = out.put_bits(x, verbatim);
    for (; bits > 0 && significant < kZfpBlock; x >>= 1, ++significant) {
      --bits;
      if (!out.put_bit(x != 0 ? 1u : 0u)) break;  // group test: no more one-bits in this plane
      for (; bits > 0 && significant < kZfpBlock - 1; x >>= 1, ++significant) {
        --bits;
        if (out.put_bit(static_cast<uint32_t>(x))) break;  // found the next one-bit
      }
    }
  }
  return budget - bits;
}

/// @brief Inverse of zfp_encode_planes: the coefficients as far as `budget` bits tell.
HARNESS_HD inline void zfp_decode_planes(BitReader& in, uint32_t* coefficient, unsigned budget) {
  for (int i = 0; i < kZfpBlock; ++i) coefficient[i] = 0;
  unsigned bits = budget;
  unsigned significant = 0;
  for (int plane = 31; plane >= 0 && bits > 0; --plane) {
    unsigned verbatim = significant < bits ? significant : bits;
    bits -= verbatim;
    uint64_t x = in.get_bits(verbatim);
    for (; significant < kZfpBlock && bits > 0; x += uint64_t{1} << significant, ++significant) {
      --bits;
      if (!in.get_bit()) break;
      for (; significant < kZfpBlock - 1 && bits > 0; ++significant) {
        --bits;
        if (in.get_bit()) break;
      }
    }
    for (int i = 0; x != 0; ++i, x >>= 1) coefficient[i] += static_cast<uint32_t>(x & 1u) << plane;
  }
}

/// @brief Compresses one block of 4 values into exactly 4*rate bits of `out`.
HARNESS_HD inline void zfp_encode_block(const float* block, int rate, BitWriter& out) {
  const unsigned block_bits = zfp_block_bits(rate);
  int exponent = zfp_block_exponent(block);
  unsigned biased = static_cast<unsigned>(exponent + kZfpExponentBias);
  if (biased == 0) {  // all zero: one flag bit, then padding
    out.put_bit(0);
    out.pad(block_bits - 1);
    return;
  }
  out.put_bits(2u * biased + 1u, kZfpHeaderBits);  // flag 1 then the biased exponent
  // Block floating point: |x| * 2^(30 - exponent) < 2^30, truncated to an integer. ldexpf per value
  // (not a precomputed 2^(30 - exponent), which overflows fp32 for subnormal blocks) is exact.
  int32_t integer[kZfpBlock];
  for (int i = 0; i < kZfpBlock; ++i) integer[i] = static_cast<int32_t>(ldexpf(block[i], 30 - exponent));
  zfp_forward_lift(integer);
  uint32_t coefficient[kZfpBlock];
  for (int i = 0; i < kZfpBlock; ++i) coefficient[i] = to_negabinary(integer[i]);
  unsigned budget = block_bits - kZfpHeaderBits;
  unsigned used = zfp_encode_planes(out, coefficient, budget);
  out.pad(budget - used);
}

/// @brief Decompresses the block that starts at bit `bit_offset` of `words`.
HARNESS_HD inline void zfp_decode_block(const uint32_t* words, uint64_t bit_offset, int rate, float* block) {
  BitReader in(words, bit_offset);
  if (!in.get_bit()) {
    for (int i = 0; i < kZfpBlock; ++i) block[i] = 0.0f;
    return;
  }
  int exponent = static_cast<int>(in.get_bits(kZfpHeaderBits - 1)) - kZfpExponentBias;
  uint32_t coefficient[kZfpBlock];
  zfp_decode_planes(in, coefficient, zfp_block_bits(rate) - kZfpHeaderBits);
  int32_t integer[kZfpBlock];
  for (int i = 0; i < kZfpBlock; ++i) integer[i] = from_negabinary(coefficient[i]);
  zfp_inverse_lift(integer);
  // One correctly rounded step per value (2^(exponent - 30) itself underflows for small blocks).
  for (int i = 0; i < kZfpBlock; ++i) block[i] = ldexpf(static_cast<float>(integer[i]), exponent - 30);
}

}  // namespace stepsim::harness::codec
