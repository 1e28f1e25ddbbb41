#include "validation/harness/codec_reference.hpp"

#include <cmath>
#include <stdexcept>

#include "validation/harness/codec_kernels.hpp"

namespace stepsim::harness {

std::string cast_target_name(CastTarget target) { return target == CastTarget::bf16 ? "bf16" : "fp16"; }

std::vector<uint16_t> cast_compress(const float* input, std::size_t n, CastTarget target) {
  std::vector<uint16_t> out(n);
  for (std::size_t i = 0; i < n; ++i)
    out[i] = target == CastTarget::bf16 ? codec::float_to_bf16(input[i]) : codec::float_to_fp16(input[i]);
  return out;
}

std::vector<float> cast_decompress(const uint16_t* input, std::size_t n, CastTarget target) {
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i)
    out[i] = target == CastTarget::bf16 ? codec::bf16_to_float(input[i]) : codec::fp16_to_float(input[i]);
  return out;
}

QuantLayout quant_layout(std::size_t n, int bits, int block) {
  if (bits != 8 && bits != 4) throw std::logic_error("quant_layout: bits must be 8 or 4");
  if (block < 2 || block % 2 != 0 || n % static_cast<std::size_t>(block) != 0)
    throw std::logic_error("quant_layout: block must be even and divide n");
  QuantLayout layout;
  layout.n = n;
  layout.bits = bits;
  layout.block = block;
  layout.code_bytes = n * static_cast<std::size_t>(bits) / 8;
  layout.scale_offset = (layout.code_bytes + 3) / 4 * 4;
  layout.total_bytes = layout.scale_offset + 4 * (n / static_cast<std::size_t>(block));
  return layout;
}

std::vector<uint8_t> quant_compress(const float* input, const QuantLayout& layout) {
  std::vector<uint8_t> out(layout.total_bytes, 0);
  const std::size_t block = static_cast<std::size_t>(layout.block);
  for (std::size_t start = 0; start < layout.n; start += block) {
    float absmax = 0.0f;
    for (std::size_t i = start; i < start + block; ++i) absmax = std::fmax(absmax, std::fabs(input[i]));
    float scale = codec::quant_scale(absmax, layout.bits);
    for (std::size_t i = start; i < start + block; ++i) {
      int q = codec::quantize(input[i], scale, layout.bits);
      if (layout.bits == 8)
        out[i] = static_cast<uint8_t>(static_cast<int8_t>(q));
      else if (i % 2 == 0)
        out[i / 2] = codec::pack_int4(q, codec::unpack_int4(out[i / 2], 1));
      else
        out[i / 2] = codec::pack_int4(codec::unpack_int4(out[i / 2], 0), q);
    }
    uint32_t scale_bits = codec::float_bits(scale);
    for (int b = 0; b < 4; ++b) out[layout.scale_offset + 4 * (start / block) + b] = static_cast<uint8_t>(scale_bits >> (8 * b));
  }
  return out;
}

std::vector<float> quant_decompress(const uint8_t* input, const QuantLayout& layout) {
  std::vector<float> out(layout.n);
  const std::size_t block = static_cast<std::size_t>(layout.block);
  for (std::size_t i = 0; i < layout.n; ++i) {
    uint32_t scale_bits = 0;
    for (int b = 0; b < 4; ++b) scale_bits |= static_cast<uint32_t>(input[layout.scale_offset + 4 * (i / block) + b]) << (8 * b);
    int q = layout.bits == 8 ? static_cast<int>(static_cast<int8_t>(input[i])) : codec::unpack_int4(input[i / 2], static_cast<int>(i % 2));
    out[i] = codec::dequantize(q, codec::bits_float(scale_bits));
  }
  return out;
}

namespace {
void check_zfp_arguments(std::size_t n, int rate) {
  if (n % codec::kZfpBlock != 0) throw std::logic_error("zfp: n must be a multiple of 4");
  if (rate < codec::kZfpMinRate || rate > codec::kZfpMaxRate) throw std::logic_error("zfp: rate must be in [3, 32]");
}
}  // namespace

std::size_t zfp_compressed_bytes(std::size_t n, int rate) {
  check_zfp_arguments(n, rate);
  std::size_t bits = n * static_cast<std::size_t>(rate);
  return (bits + 31) / 32 * 4;
}

std::vector<uint32_t> zfp_compress(const float* input, std::size_t n, int rate) {
  std::vector<uint32_t> out(zfp_compressed_bytes(n, rate) / 4, 0);
  codec::BitWriter writer(out.data());
  for (std::size_t start = 0; start < n; start += codec::kZfpBlock) codec::zfp_encode_block(input + start, rate, writer);
  writer.flush();
  return out;
}

std::vector<float> zfp_decompress(const uint32_t* input, std::size_t n, int rate) {
  check_zfp_arguments(n, rate);
  std::vector<float> out(n);
  const uint64_t block_bits = codec::zfp_block_bits(rate);
  for (std::size_t block = 0; block < n / codec::kZfpBlock; ++block)
    codec::zfp_decode_block(input, block * block_bits, rate, out.data() + block * codec::kZfpBlock);
  return out;
}

double max_abs_error(const float* a, const float* b, std::size_t n) {
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) worst = std::fmax(worst, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return worst;
}

}  // namespace stepsim::harness
