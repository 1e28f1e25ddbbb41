// The CPU reference of the harness's codecs (the GPU kernels share codec_kernels.hpp): cast
// rounding, blockwise quantisation bounds, and the fixed-rate ZFP codec's exact size, round trip
// and error behaviour, including one block worked out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "validation/harness/codec_kernels.hpp"
#include "validation/harness/codec_reference.hpp"
#include "validation/harness/synthetic_field.hpp"

namespace stepsim::harness {
namespace {

std::vector<float> smooth_field(std::size_t n, uint64_t seed = 7) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = smooth_field_value(i, seed);
  return x;
}

float max_magnitude(const std::vector<float>& x) {
  float m = 0;
  for (float v : x) m = std::fmax(m, std::fabs(v));
  return m;
}

TEST(BitStream, ReadsBackWhatWasWrittenAtAnyOffset) {
  std::mt19937_64 gen(3);
  std::vector<uint32_t> bits(1000);
  for (auto& b : bits) b = static_cast<uint32_t>(gen() & 1u);
  std::vector<uint32_t> words(1000 / 32 + 1, 0);
  codec::BitWriter writer(words.data());
  for (uint32_t b : bits) writer.put_bit(b);
  writer.flush();
  for (uint64_t offset : {0u, 1u, 31u, 32u, 33u, 500u}) {
    codec::BitReader reader(words.data(), offset);
    for (uint64_t i = offset; i < bits.size(); ++i) ASSERT_EQ(reader.get_bit(), bits[i]) << "offset " << offset << " bit " << i;
  }
}

TEST(BitStream, PutBitsIsLsbFirst) {
  std::vector<uint32_t> words(2, 0);
  codec::BitWriter writer(words.data());
  EXPECT_EQ(writer.put_bits(0b1011, 3), 0b1u);  // writes 1,1,0 and returns what is left
  writer.pad(29);
  writer.put_bits(0xffu, 4);
  writer.flush();
  EXPECT_EQ(words[0], 0b011u);
  EXPECT_EQ(words[1], 0xfu);
}

TEST(Cast, Bf16RoundsToNearestEven) {
  EXPECT_EQ(codec::float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(codec::float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie -> even
  EXPECT_EQ(codec::float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(codec::float_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(codec::float_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(codec::float_to_bf16(3.4e38f), 0x7f80);  // rounds past the largest bf16: Inf
}

TEST(Cast, Fp16RoundsToNearestEvenWithSubnormalsAndOverflow) {
  EXPECT_EQ(codec::float_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(codec::float_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(codec::float_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(codec::float_to_fp16(65519.0f), 0x7bff);
  EXPECT_EQ(codec::float_to_fp16(65520.0f), 0x7c00);
  EXPECT_EQ(codec::float_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie -> even
  EXPECT_EQ(codec::float_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(codec::float_to_fp16(std::ldexp(1.0f, -14)), 0x0400);            // smallest normal
  EXPECT_EQ(codec::float_to_fp16(std::ldexp(1.0f, -24)), 0x0001);            // smallest subnormal
  EXPECT_EQ(codec::float_to_fp16(std::ldexp(1.0f, -25)), 0x0000);            // tie -> even (0)
  EXPECT_EQ(codec::float_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(codec::float_to_fp16(std::ldexp(3.0f, -25)), 0x0002);            // 1.5 units: tie -> 2
  EXPECT_EQ(codec::float_to_fp16(-std::ldexp(1.0f, -30)), 0x8000);
}

TEST(Cast, EveryFiniteHalfAndBfloatRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    if ((bits & 0x7c00) != 0x7c00) {
      ASSERT_EQ(codec::float_to_fp16(codec::fp16_to_float(bits)), bits) << h;
    }
    if ((bits & 0x7f80) != 0x7f80) {
      ASSERT_EQ(codec::float_to_bf16(codec::bf16_to_float(bits)), bits) << h;
    }
  }
}

#if defined(__FLT16_MAX__)
TEST(Cast, Fp16MatchesTheCompilersConversion) {
  std::mt19937_64 gen(11);
  for (int i = 0; i < 200000; ++i) {
    const float x = codec::bits_float(static_cast<uint32_t>(gen()) & 0xc7ffffffu);  // |x| < 2^17 and tiny values
    const _Float16 h = static_cast<_Float16>(x);
    uint16_t expected;
    std::memcpy(&expected, &h, sizeof expected);
    ASSERT_EQ(codec::float_to_fp16(x), expected) << x;
  }
}
#endif

TEST(Cast, ErrorIsWithinHalfAnUlp) {
  const std::vector<float> x = smooth_field(1 << 14);
  const std::vector<float> bf = cast_decompress(cast_compress(x.data(), x.size(), CastTarget::bf16).data(), x.size(), CastTarget::bf16);
  const std::vector<float> hf = cast_decompress(cast_compress(x.data(), x.size(), CastTarget::fp16).data(), x.size(), CastTarget::fp16);
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_LE(std::fabs(bf[i] - x[i]), std::ldexp(std::fabs(x[i]), -8)) << i;
    ASSERT_LE(std::fabs(hf[i] - x[i]), std::ldexp(std::fabs(x[i]), -11) + std::ldexp(1.0f, -25)) << i;
  }
}

TEST(Quant, LayoutSizes) {
  const QuantLayout q8 = quant_layout(1024, 8, 32);
  EXPECT_EQ(q8.code_bytes, 1024u);
  EXPECT_EQ(q8.scale_offset, 1024u);
  EXPECT_EQ(q8.total_bytes, 1024u + 4 * 32);
  const QuantLayout q4 = quant_layout(1024, 4, 256);
  EXPECT_EQ(q4.code_bytes, 512u);
  EXPECT_EQ(q4.total_bytes, 512u + 4 * 4);
  const QuantLayout odd = quant_layout(6, 4, 2);  // 3 code bytes: scales start aligned at 4
  EXPECT_EQ(odd.scale_offset, 4u);
  EXPECT_THROW(quant_layout(1000, 8, 64), std::logic_error);
  EXPECT_THROW(quant_layout(1024, 6, 32), std::logic_error);
}

TEST(Quant, Int4PacksEveryPair) {
  for (int even = -8; even <= 7; ++even)
    for (int odd = -8; odd <= 7; ++odd) {
      const uint8_t byte = codec::pack_int4(even, odd);
      ASSERT_EQ(codec::unpack_int4(byte, 0), even);
      ASSERT_EQ(codec::unpack_int4(byte, 1), odd);
    }
}

TEST(Quant, ErrorIsAtMostHalfAStepPerBlock) {
  const std::vector<float> x = smooth_field(1 << 14);
  for (int bits : {8, 4}) {
    for (int block : {32, 64, 256}) {
      const QuantLayout layout = quant_layout(x.size(), bits, block);
      const std::vector<uint8_t> stream = quant_compress(x.data(), layout);
      ASSERT_EQ(stream.size(), layout.total_bytes);
      const std::vector<float> y = quant_decompress(stream.data(), layout);
      for (std::size_t start = 0; start < x.size(); start += block) {
        float absmax = 0;
        for (int i = 0; i < block; ++i) absmax = std::fmax(absmax, std::fabs(x[start + i]));
        const float step = absmax / static_cast<float>(codec::quant_max(bits));
        for (int i = 0; i < block; ++i)
          ASSERT_LE(std::fabs(y[start + i] - x[start + i]), 0.5f * step * (1 + 1e-5f)) << bits << "/" << block << " at " << start + i;
      }
    }
  }
}

TEST(Quant, ZeroBlockStaysZeroAndExtremesAreKept) {
  std::vector<float> x(64, 0.0f);
  x[40] = -3.0f;
  x[41] = 3.0f;
  const QuantLayout layout = quant_layout(64, 8, 32);
  const std::vector<float> y = quant_decompress(quant_compress(x.data(), layout).data(), layout);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], 0.0f);
  EXPECT_FLOAT_EQ(y[40], -3.0f);
  EXPECT_FLOAT_EQ(y[41], 3.0f);
}

TEST(Zfp, GroupsFillWholeWords) {
  for (int rate = codec::kZfpMinRate; rate <= codec::kZfpMaxRate; ++rate) {
    const int group = codec::zfp_group_blocks(rate);
    EXPECT_EQ(group * codec::kZfpBlock * rate % 32, 0) << rate;
    EXPECT_LE(group, 8);
    for (int smaller = 1; smaller < group; ++smaller) EXPECT_NE(smaller * codec::kZfpBlock * rate % 32, 0) << rate;
  }
  EXPECT_EQ(codec::zfp_group_blocks(4), 2);
  EXPECT_EQ(codec::zfp_group_blocks(8), 1);
  EXPECT_EQ(codec::zfp_group_blocks(16), 1);
  EXPECT_EQ(codec::zfp_group_blocks(3), 8);
}

TEST(Zfp, NegabinaryRoundTrips) {
  std::mt19937_64 gen(5);
  for (int i = 0; i < 100000; ++i) {
    const int32_t x = static_cast<int32_t>(gen());
    ASSERT_EQ(codec::from_negabinary(codec::to_negabinary(x)), x);
  }
  EXPECT_EQ(codec::to_negabinary(0), 0u);
  EXPECT_EQ(codec::to_negabinary(1), 1u);
  EXPECT_EQ(codec::to_negabinary(-1), 3u);  // -1 = 1*(-2) + 1
  EXPECT_EQ(codec::to_negabinary(2), 6u);   // 2 = 1*4 + 1*(-2)
}

TEST(Zfp, LiftingIsInvertedUpToItsDroppedLowBits) {
  std::mt19937_64 gen(9);
  for (int trial = 0; trial < 100000; ++trial) {
    int32_t block[4], copy[4];
    for (int i = 0; i < 4; ++i) copy[i] = block[i] = static_cast<int32_t>(gen() % (1u << 31)) - (1 << 30);
    codec::zfp_forward_lift(block);
    codec::zfp_inverse_lift(block);
    for (int i = 0; i < 4; ++i) ASSERT_LE(std::abs(block[i] - copy[i]), 4) << trial;
  }
}

// {1, 1, 1, 1} at rate 16, by hand: exponent 1 (biased 128); integers all 2^29; the transform
// leaves (2^29, 0, 0, 0); negabinary 0x60000000 (planes 30 and 29 set). Stream: flag 1, 128 in 8
// bits LSB first, plane 31 "0" (group test), plane 30 "1 1" (group test, one-bit at coefficient 0)
// then "0" (no more), plane 29 "1" (verbatim) "0", then zeros to 64 bits.
TEST(Zfp, HandWorkedBlock) {
  const float block[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  const std::vector<uint32_t> words = zfp_compress(block, 4, 16);
  ASSERT_EQ(words.size(), 2u);
  EXPECT_EQ(words[0], (1u << 0) | (1u << 8) | (1u << 10) | (1u << 11) | (1u << 13));
  EXPECT_EQ(words[1], 0u);
  const std::vector<float> back = zfp_decompress(words.data(), 4, 16);
  for (float v : back) EXPECT_EQ(v, 1.0f);
}

TEST(Zfp, SizeIsExactlyRateBitsPerValue) {
  const std::vector<float> x = smooth_field(4096);
  for (int rate = codec::kZfpMinRate; rate <= codec::kZfpMaxRate; ++rate) {
    EXPECT_EQ(zfp_compressed_bytes(x.size(), rate), x.size() * rate / 8);
    EXPECT_EQ(zfp_compress(x.data(), x.size(), rate).size() * 4, x.size() * rate / 8);
  }
  EXPECT_EQ(zfp_compressed_bytes(4, 3), 4u);  // 12 bits round up to one word
  EXPECT_THROW(zfp_compressed_bytes(6, 8), std::logic_error);
  EXPECT_THROW(zfp_compressed_bytes(8, 2), std::logic_error);
}

TEST(Zfp, ErrorFallsWithRateAndIsTinyAtRate32) {
  const std::vector<float> x = smooth_field(1 << 16);
  const float scale = max_magnitude(x);
  double previous = INFINITY;
  for (int rate : {4, 6, 8, 12, 16, 24, 32}) {
    const std::vector<uint32_t> stream = zfp_compress(x.data(), x.size(), rate);
    const std::vector<float> y = zfp_decompress(stream.data(), x.size(), rate);
    const double error = max_abs_error(x.data(), y.data(), x.size());
    EXPECT_LT(error, previous) << "rate " << rate;
    previous = error;
  }
  EXPECT_LT(previous, 1e-6 * scale);  // rate 32
  // Rate 16 keeps about 12 bit planes of the block maximum.
  const std::vector<float> y16 = zfp_decompress(zfp_compress(x.data(), x.size(), 16).data(), x.size(), 16);
  EXPECT_LT(max_abs_error(x.data(), y16.data(), x.size()), 1e-3 * scale);
}

TEST(Zfp, SpecialBlocks) {
  // zero, constant negative, mixed magnitudes, subnormals, one spike
  const std::vector<float> x = {0, 0, 0, 0,  -2.5f, -2.5f, -2.5f, -2.5f,  1e30f, 1e-30f, -1e20f, 3.0f,
                                1e-40f, -1e-41f, 0, 2e-40f,  0, 0, 7.0f, 0};
  const std::vector<float> y = zfp_decompress(zfp_compress(x.data(), x.size(), 32).data(), x.size(), 32);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y[i], 0.0f);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(y[i], -2.5f);
  EXPECT_NEAR(y[8], 1e30f, 1e23f);
  EXPECT_NEAR(y[10], -1e20f, 1e23f);  // small members of a block are relative to its maximum
  for (int i = 12; i < 16; ++i) EXPECT_NEAR(y[i], x[i], 1e-45f);
  EXPECT_NEAR(y[18], 7.0f, 1e-6f);
}

TEST(Zfp, BlocksDecodeIndependently) {
  const std::vector<float> x = smooth_field(64);
  const int rate = 12;
  const std::vector<uint32_t> stream = zfp_compress(x.data(), x.size(), rate);
  const std::vector<float> all = zfp_decompress(stream.data(), x.size(), rate);
  for (std::size_t b = 0; b < x.size() / 4; ++b) {
    float one[4];
    codec::zfp_decode_block(stream.data(), b * 4 * rate, rate, one);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(one[i], all[b * 4 + i]);
  }
}

TEST(SyntheticField, IsDeterministicBoundedAndSmooth) {
  const std::vector<float> a = smooth_field(10000, 3), b = smooth_field(10000, 3), c = smooth_field(10000, 4);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_LE(std::fabs(a[i]), 1.75f + kFieldNoise);
    if (i > 0) {
      ASSERT_LE(std::fabs(a[i] - a[i - 1]), 0.03f);  // slopes 0.0015 + 0.006 + 0.016, noise 0.002
    }
  }
  EXPECT_GT(max_magnitude(a), 1.0f);
}

TEST(SyntheticField, HashUniformCoversMinusOneToOne) {
  double sum = 0, lo = 1, hi = -1;
  for (uint64_t i = 0; i < 100000; ++i) {
    const float v = hash_uniform(1, i);
    ASSERT_GE(v, -1.0f);
    ASSERT_LT(v, 1.0f);
    sum += v;
    lo = std::fmin(lo, v);
    hi = std::fmax(hi, v);
  }
  EXPECT_NEAR(sum / 100000, 0.0, 0.01);
  EXPECT_LT(lo, -0.999);
  EXPECT_GT(hi, 0.999);
}

}  // namespace
}  // namespace stepsim::harness
