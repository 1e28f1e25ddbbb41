// Codec models: compressed sizes, times a + bytes / B on catalogue GPUs (hand-computed from
// the cited figures), error bounds, and CODEC[:key=value] parsing with its errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "models/compression/codec.hpp"
#include "platforms/config_error.hpp"
#include "platforms/loader.hpp"

namespace stepsim::models {
namespace {

using platforms::GpuModel;

GpuModel gpu(const std::string& model) {
  return platforms::load_platform("dgx-h100", {0, "", {"gpu.model=" + model}}).gpu();
}
const GpuModel& v100() {
  static const GpuModel g = gpu("V100-SXM2");
  return g;
}
const GpuModel& a100() {
  static const GpuModel g = gpu("A100-SXM4-40GB");
  return g;
}

std::string error_of(const std::string& text) {
  try {
    parse_codec(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Codec, EveryRegisteredCodecCanBeCalibratedAndTheFactorScalesItsThroughput) {
  const auto& names = platforms::calibrated_codec_names();
  for (const CodecInfo* info : CodecRegistry::instance().all())
    EXPECT_NE(std::find(names.begin(), names.end(), info->name), names.end())
        << info->name << " is missing from platforms::calibrated_codec_names()";
  const GpuModel plain = gpu("H100-SXM5-80GB");
  const GpuModel fitted = platforms::load_platform("dgx-h100", {0, "", {"calibration.codecs.zfp.throughput_scale=2.5"}}).gpu();
  const auto zfp = parse_codec("zfp:rate=8");
  const auto cast = parse_codec("cast:to=bf16");
  EXPECT_DOUBLE_EQ(zfp->compress_cost(fitted).throughput, 2.5 * zfp->compress_cost(plain).throughput);
  EXPECT_DOUBLE_EQ(zfp->decompress_cost(fitted).throughput, 2.5 * zfp->decompress_cost(plain).throughput);
  EXPECT_EQ(zfp->compress_cost(fitted).latency, zfp->compress_cost(plain).latency);
  EXPECT_EQ(cast->compress_cost(fitted).throughput, cast->compress_cost(plain).throughput);
  EXPECT_EQ(zfp->name(), "zfp");
}

TEST(Codec, ZfpFixedRateSizeIsKnownInAdvance) {
  // 1 MiB of fp32 = 262144 values = 65536 blocks of 4, each 4 r bits.
  const Bytes mib = 1 << 20;
  for (int rate : {4, 8, 16}) {
    const auto zfp = parse_codec("zfp:rate=" + std::to_string(rate));
    EXPECT_DOUBLE_EQ(zfp->compressed_bytes(mib), 65536.0 * 4 * rate / 8) << rate;
    EXPECT_DOUBLE_EQ(zfp->ratio(mib), 32.0 / rate) << rate;
  }
  // fp16 values: ratio 16 / r. A partial block is padded to a whole one.
  EXPECT_DOUBLE_EQ(parse_codec("zfp:rate=8,dtype=fp16")->ratio(mib), 2.0);
  EXPECT_DOUBLE_EQ(parse_codec("zfp:rate=8")->compressed_bytes(20), 2 * 4 * 8 / 8.0);   // 5 values: 2 blocks
  EXPECT_EQ(parse_codec("zfp")->spec(), "zfp:rate=16,dtype=fp32,throughput=60");         // MVAPICH-Plus default
}

TEST(Codec, ZfpTimesScaleFromTheV100Anchor) {
  const auto zfp = parse_codec("zfp:rate=8");
  // V100: the calibration inputs as they are, a = 10 us, B = 60 GB/s.
  EXPECT_NEAR(zfp->compress_time(60e6, v100()), 10e-6 + 1e-3, 1e-15);
  EXPECT_NEAR(zfp->decompress_time(60e6, v100()), 10e-6 + 1e-3, 1e-15);
  // A100-40GB: B scaled by 1555 / 900 GB/s of memory bandwidth, a unchanged.
  EXPECT_NEAR(zfp->compress_time(60e6, a100()), 10e-6 + 60e6 / (60e9 * 1555.0 / 900.0), 1e-15);
  // A calibrated throughput replaces the default.
  EXPECT_NEAR(parse_codec("zfp:rate=8,throughput=240")->decompress_time(60e6, v100()), 10e-6 + 0.25e-3, 1e-15);
}

TEST(Codec, ZfpErrorEstimateFallsWithRate) {
  // p = floor((4 r - 9) / 5) bit planes; error <= range 2^(3 - p), capped at 2 range.
  EXPECT_DOUBLE_EQ(parse_codec("zfp:rate=16")->error_bound(1.0), std::exp2(3 - 11));
  EXPECT_DOUBLE_EQ(parse_codec("zfp:rate=8")->error_bound(2.0), 2.0 * std::exp2(3 - 4));
  EXPECT_DOUBLE_EQ(parse_codec("zfp:rate=4")->error_bound(1.0), 2.0);
  EXPECT_FALSE(parse_codec("zfp")->lossless());
}

TEST(Codec, MpcIsLosslessWithAGivenRatio) {
  const auto mpc = parse_codec("mpc:ratio=2.5");
  EXPECT_TRUE(mpc->lossless());
  EXPECT_DOUBLE_EQ(mpc->compressed_bytes(1e6), 4e5);
  EXPECT_DOUBLE_EQ(mpc->error_bound(100.0), 0.0);
  // nvCOMP Cascaded's V100 figures stand in: 184.06 / 228.53 GB/s.
  EXPECT_NEAR(mpc->compress_time(184.06e6, v100()), 10e-6 + 1e-3, 1e-15);
  EXPECT_NEAR(mpc->decompress_time(228.53e6, v100()), 10e-6 + 1e-3, 1e-15);
  EXPECT_DOUBLE_EQ(parse_codec("mpc")->ratio(1e6), 1.2);
}

TEST(Codec, CastIsAnElementwisePassAtTheAchievableHbmRate) {
  const auto cast = parse_codec("cast");
  EXPECT_DOUBLE_EQ(cast->compressed_bytes(1e6), 5e5);
  // V100 streams 816.95 GB/s (roofline.cpp); fp32 -> bf16 moves 6 bytes per 4 raw bytes.
  const BytesPerSecond down = 816.95e9 * 4 / 6;
  EXPECT_NEAR(cast->compress_time(1e9, v100()), 5e-6 + 1e9 / down, 1e-9);
  EXPECT_NEAR(cast->decompress_time(1e9, v100()), 5e-6 + 1e9 / down, 1e-9);
  // Half a unit in the last place: 2^-8 relative for bf16, 2^-11 for fp16, which overflows past 65504.
  EXPECT_DOUBLE_EQ(cast->error_bound(4.0), 4.0 / 256);
  EXPECT_DOUBLE_EQ(parse_codec("cast:to=fp16")->error_bound(4.0), 4.0 / 2048);
  EXPECT_EQ(parse_codec("cast:to=fp16")->error_bound(1e5), std::numeric_limits<double>::infinity());
}

TEST(Codec, QuantStoresCodesAndOneScalePerBlock) {
  // 1000 fp32 values, int8, blocks of 64: 1000 code bytes + 16 scales of 4 bytes.
  const auto q8 = parse_codec("quant:bits=8,block=64");
  EXPECT_DOUBLE_EQ(q8->compressed_bytes(4000), 1000 + 16 * 4);
  EXPECT_DOUBLE_EQ(parse_codec("quant:bits=4,block=128")->compressed_bytes(4096), 512 + 8 * 4);
  // scale = range / 127 (int8), / 7 (int4); rounding errs by half a step.
  EXPECT_DOUBLE_EQ(q8->error_bound(127.0), 0.5);
  EXPECT_DOUBLE_EQ(parse_codec("quant:bits=4")->error_bound(7.0), 0.5);
  // V100: reads 4 bytes, writes 1 + 4/64 per fp32 value.
  const BytesPerSecond rate = 816.95e9 * 4 / (4 + 1 + 4.0 / 64);
  EXPECT_NEAR(q8->compress_time(1e9, v100()), 5e-6 + 1e9 / rate, 1e-9);
}

TEST(Codec, ParseRejectsUnknownCodecsKeysAndValues) {
  EXPECT_NE(error_of("lz77").find("unknown codec 'lz77'"), std::string::npos) << error_of("lz77");
  EXPECT_NE(error_of("lz77").find("zfp"), std::string::npos);   // lists the known ones
  const std::string key = error_of("zfp:ratio=4");
  EXPECT_NE(key.find("no parameter 'ratio'"), std::string::npos) << key;
  EXPECT_NE(key.find("rate"), std::string::npos) << key;        // says which keys exist
  EXPECT_NE(error_of("zfp:rate=0").find("rate=0"), std::string::npos);
  EXPECT_NE(error_of("zfp:rate=20,dtype=fp16").find("rate=20"), std::string::npos);
  EXPECT_NE(error_of("zfp:rate").find("not key=value"), std::string::npos);
  EXPECT_NE(error_of("zfp:rate=8,rate=4").find("twice"), std::string::npos);
  EXPECT_NE(error_of("quant:bits=6").find("bits=6"), std::string::npos);
  EXPECT_NE(error_of("cast:to=fp8").find("fp16"), std::string::npos);
  EXPECT_NE(error_of("").find("no codec"), std::string::npos);
  EXPECT_EQ(error_of("zfp:rate=8,dtype=bf16"), "");
}

TEST(Codec, EveryRegisteredCodecParsesWithItsDefaults) {
  for (const CodecInfo* info : CodecRegistry::instance().all()) {
    const auto codec = parse_codec(info->name);
    EXPECT_EQ(codec->spec().rfind(info->name, 0), 0u) << info->name;
    EXPECT_GT(codec->ratio(1 << 20), 1.0) << info->name;
    EXPECT_GT(codec->compress_time(1 << 20, v100()), 0.0) << info->name;
  }
  EXPECT_EQ(CodecRegistry::instance().all().size(), 4u);
}

}  // namespace
}  // namespace stepsim::models
