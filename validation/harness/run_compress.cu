// stepsim-harness compress: the codecs of codec_kernels.hpp as CUDA kernels on a synthetic fp32
// field (synthetic_field.hpp), compress and decompress timed separately, the round-trip error
// measured on the GPU over the whole field. At sizes up to kVerifyBytes the compressed stream and
// the decompressed values are compared bit for bit with the CPU reference (codec_reference.hpp)
// on the field as the GPU computed it; a difference stops the run.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "validation/harness/cli_args.hpp"
#include "validation/harness/codec_kernels.hpp"
#include "validation/harness/codec_reference.hpp"
#include "validation/harness/cuda_check.hpp"
#include "validation/harness/subcommands.hpp"
#include "validation/harness/synthetic_field.hpp"

namespace stepsim::harness {
namespace {

constexpr uint64_t kVerifyBytes = uint64_t{16} << 20;
constexpr unsigned kThreads = 256;

unsigned blocks_for(std::size_t threads_needed) {
  return static_cast<unsigned>((threads_needed + kThreads - 1) / kThreads);
}

// Grid-stride loop helper: i runs over [0, n) across the whole grid.
#define GRID_LOOP(i, n)                                                                      \
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)

__global__ void field_kernel(float* out, std::size_t n, uint64_t seed) {
  GRID_LOOP(i, n) out[i] = smooth_field_value(i, seed);
}

// Non-negative floats order like their bit patterns, so atomicMax on the bits is a float max.
__global__ void max_abs_diff_kernel(const float* a, const float* b, std::size_t n, unsigned* result) {
  float worst = 0.0f;
  GRID_LOOP(i, n) worst = fmaxf(worst, fabsf(a[i] - b[i]));
  for (int offset = 16; offset > 0; offset /= 2) worst = fmaxf(worst, __shfl_xor_sync(0xffffffffu, worst, offset));
  if ((threadIdx.x & 31) == 0) atomicMax(result, __float_as_uint(worst));
}

__global__ void cast_compress_kernel(const float* in, uint16_t* out, std::size_t n, bool to_bf16) {
  GRID_LOOP(i, n) {
    out[i] = to_bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(in[i])) : __half_as_ushort(__float2half_rn(in[i]));
  }
}

__global__ void cast_decompress_kernel(const uint16_t* in, float* out, std::size_t n, bool from_bf16) {
  GRID_LOOP(i, n) {
    out[i] = from_bf16 ? __bfloat162float(__ushort_as_bfloat16(in[i])) : __half2float(__ushort_as_half(in[i]));
  }
}

// One warp per quant block: absmax by warp shuffle, lane 0 stores the scale, lanes store codes.
__global__ void quant_compress_kernel(const float* in, uint8_t* codes, float* scales, std::size_t n, int block,
                                      int bits) {
  const std::size_t warp = (blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (warp >= n / block) return;  // whole warps leave together
  const float* x = in + warp * block;
  float absmax = 0.0f;
  for (int i = lane; i < block; i += 32) absmax = fmaxf(absmax, fabsf(x[i]));
  for (int offset = 16; offset > 0; offset /= 2) absmax = fmaxf(absmax, __shfl_xor_sync(0xffffffffu, absmax, offset));
  const float scale = codec::quant_scale(absmax, bits);
  if (lane == 0) scales[warp] = scale;
  if (bits == 8) {
    for (int i = lane; i < block; i += 32)
      codes[warp * block + i] = static_cast<uint8_t>(static_cast<int8_t>(codec::quantize(x[i], scale, 8)));
  } else {
    for (int p = lane; p < block / 2; p += 32)
      codes[(warp * block) / 2 + p] =
          codec::pack_int4(codec::quantize(x[2 * p], scale, 4), codec::quantize(x[2 * p + 1], scale, 4));
  }
}

__global__ void quant_decompress_kernel(const uint8_t* codes, const float* scales, float* out, std::size_t n, int block,
                                        int bits) {
  GRID_LOOP(i, n) {
    const int q = bits == 8 ? static_cast<int>(static_cast<int8_t>(codes[i])) : codec::unpack_int4(codes[i / 2], static_cast<int>(i & 1));
    out[i] = codec::dequantize(q, scales[i / block]);
  }
}

// One thread per group of `group_blocks` ZFP blocks, chosen so a group fills whole 32-bit words
// and threads never share a word.
__global__ void zfp_compress_kernel(const float* in, uint32_t* out, std::size_t groups, int rate, int group_blocks) {
  const std::size_t words_per_group = static_cast<std::size_t>(group_blocks) * codec::zfp_block_bits(rate) / 32;
  GRID_LOOP(g, groups) {
    codec::BitWriter writer(out + g * words_per_group);
    for (int b = 0; b < group_blocks; ++b)
      codec::zfp_encode_block(in + (g * group_blocks + b) * codec::kZfpBlock, rate, writer);
    writer.flush();
  }
}

__global__ void zfp_decompress_kernel(const uint32_t* in, float* out, std::size_t blocks, int rate) {
  GRID_LOOP(b, blocks) {
    float values[codec::kZfpBlock];
    codec::zfp_decode_block(in, b * codec::zfp_block_bits(rate), rate, values);
    for (int i = 0; i < codec::kZfpBlock; ++i) out[b * codec::kZfpBlock + i] = values[i];
  }
}

/// The buffers and stream every codec uses.
struct Workspace {
  int device;
  const Stream& stream;
  const DeviceBuffer& field;
  const DeviceBuffer& compressed;
  const DeviceBuffer& restored;
  const DeviceBuffer& error;
};

template <typename T>
std::vector<T> download(const void* device_data, std::size_t count, const Stream& stream) {
  std::vector<T> host(count);
  wait_streams({&stream}, 300);
  CUDA_CHECK(cudaMemcpy(host.data(), device_data, count * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

float measure_error(const Workspace& w, std::size_t n) {
  CUDA_CHECK(cudaMemsetAsync(w.error.get(), 0, sizeof(unsigned), w.stream.get()));
  max_abs_diff_kernel<<<blocks_for(n) < 4096 ? blocks_for(n) : 4096, kThreads, 0, w.stream.get()>>>(
      w.field.as<float>(), w.restored.as<float>(), n, w.error.as<unsigned>());
  CUDA_CHECK_LAUNCH();
  const unsigned bits = download<unsigned>(w.error.get(), 1, w.stream)[0];
  return codec::bits_float(bits);
}

// Throws when the GPU's bytes differ from the reference's.
void expect_same_bytes(const void* gpu, const void* cpu, std::size_t bytes, const std::string& what) {
  if (std::memcmp(gpu, cpu, bytes) == 0) return;
  std::size_t at = 0;
  while (static_cast<const uint8_t*>(gpu)[at] == static_cast<const uint8_t*>(cpu)[at]) ++at;
  throw std::runtime_error(what + " differs from the CPU reference at byte " + std::to_string(at) + " of " +
                           std::to_string(bytes) + " (GPU " + std::to_string(static_cast<const uint8_t*>(gpu)[at]) +
                           ", CPU " + std::to_string(static_cast<const uint8_t*>(cpu)[at]) + ")");
}

struct CodecCase {
  std::string label;                       ///< progress and error messages
  std::size_t compressed_bytes;
  std::function<void(MeasurementRecord&)> describe;  ///< codec-specific keys
  std::function<void()> compress, decompress;         ///< enqueue one call
  /// CPU reference of (field prefix) -> (compressed bytes, restored values).
  std::function<std::pair<std::vector<uint8_t>, std::vector<float>>(const std::vector<float>&)> reference;
};

void run_case(const CodecCase& codec_case, const Workspace& w, std::size_t n, const CompressOptions& options,
              Recording& recording) {
  const TimingPlan plan = timing_plan(options.common);
  const SampleStats compress = summarize(time_calls({&w.stream}, codec_case.compress, plan));
  const SampleStats decompress = summarize(time_calls({&w.stream}, codec_case.decompress, plan));
  const float error = measure_error(w, n);
  const uint64_t raw_bytes = n * sizeof(float);
  if (raw_bytes <= kVerifyBytes) {
    const std::vector<float> input = download<float>(w.field.get(), n, w.stream);
    const auto [bytes, values] = codec_case.reference(input);
    if (bytes.size() != codec_case.compressed_bytes)
      throw std::logic_error(codec_case.label + ": reference size " + std::to_string(bytes.size()) + " != " +
                             std::to_string(codec_case.compressed_bytes));
    expect_same_bytes(download<uint8_t>(w.compressed.get(), bytes.size(), w.stream).data(), bytes.data(), bytes.size(),
                      codec_case.label + " compressed stream");
    expect_same_bytes(download<float>(w.restored.get(), n, w.stream).data(), values.data(), n * sizeof(float),
                      codec_case.label + " decompressed values");
  }
  for (const auto& [direction, stats] : {std::make_pair("compress", compress), std::make_pair("decompress", decompress)}) {
    MeasurementRecord record("compression");
    codec_case.describe(record);
    record.text("direction", direction).integer("size_bytes", static_cast<int64_t>(raw_bytes)).text("dtype", "fp32");
    record.integer("compressed_bytes", static_cast<int64_t>(codec_case.compressed_bytes));
    record.real("max_abs_error", error).timing(stats);
    recording.records.push_back(record);
  }
  std::fprintf(stderr, "compress %-16s %9s  ratio %6.2f  compress %9.2f us (%7.1f GB/s)  decompress %9.2f us (%7.1f GB/s)  max err %.3g%s\n",
               codec_case.label.c_str(), format_bytes(raw_bytes).c_str(),
               static_cast<double>(raw_bytes) / static_cast<double>(codec_case.compressed_bytes), compress.mean_s * 1e6,
               raw_bytes / compress.mean_s / 1e9, decompress.mean_s * 1e6, raw_bytes / decompress.mean_s / 1e9,
               static_cast<double>(error), raw_bytes <= kVerifyBytes ? "  (matches CPU reference)" : "");
}

template <typename T>
std::vector<uint8_t> as_bytes(const std::vector<T>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

}  // namespace

void run_compress(const CompressOptions& options, Recording& recording) {
  const int device = options.device;
  usable_gpus(device + 1, "--device");
  describe_system({device}, recording.header);
  Stream stream(device);
  const std::size_t n_max = options.sizes.back() / sizeof(float);
  // Largest stream: zfp at 32 bits per value is as large as the input.
  DeviceBuffer field(device, n_max * sizeof(float)), compressed(device, n_max * sizeof(float));
  DeviceBuffer restored(device, n_max * sizeof(float)), error(device, sizeof(unsigned));
  field_kernel<<<blocks_for(n_max) < 65536 ? blocks_for(n_max) : 65536, kThreads, 0, stream.get()>>>(
      field.as<float>(), n_max, options.common.seed);
  CUDA_CHECK_LAUNCH();
  const Workspace w{device, stream, field, compressed, restored, error};
  const cudaStream_t s = stream.get();
  add_note(recording.header, "field: sum of sines (periods 4096, 517, 97 values) plus seeded noise of amplitude 1e-3");

  for (uint64_t size : options.sizes) {
    const std::size_t n = size / sizeof(float);
    const float* in = field.as<float>();
    float* out = restored.as<float>();
    for (const std::string& codec_name : options.codecs) {
      std::vector<CodecCase> cases;
      if (codec_name == "cast") {
        for (const std::string& target : options.casts) {
          const bool bf16 = target == "bf16";
          const CastTarget cast = bf16 ? CastTarget::bf16 : CastTarget::fp16;
          uint16_t* packed = compressed.as<uint16_t>();
          cases.push_back({"cast " + target, n * 2,
                           [=](MeasurementRecord& r) { r.text("codec", "cast").text("to", target).integer("bits", 16); },
                           [=] { cast_compress_kernel<<<blocks_for(n), kThreads, 0, s>>>(in, packed, n, bf16); CUDA_CHECK_LAUNCH(); },
                           [=] { cast_decompress_kernel<<<blocks_for(n), kThreads, 0, s>>>(packed, out, n, bf16); CUDA_CHECK_LAUNCH(); },
                           [=](const std::vector<float>& x) {
                             const std::vector<uint16_t> c = cast_compress(x.data(), x.size(), cast);
                             return std::make_pair(as_bytes(c), cast_decompress(c.data(), c.size(), cast));
                           }});
        }
      }
      if (codec_name == "quant") {
        for (int bits : options.quant_bits) {
          for (int block : options.quant_blocks) {
            const QuantLayout layout = quant_layout(n, bits, block);
            uint8_t* codes = compressed.as<uint8_t>();
            float* scales = reinterpret_cast<float*>(codes + layout.scale_offset);
            const std::size_t quant_blocks = n / static_cast<std::size_t>(block);
            cases.push_back({"quant int" + std::to_string(bits) + "/" + std::to_string(block), layout.total_bytes,
                             [=](MeasurementRecord& r) { r.text("codec", "quant").integer("bits", bits).integer("block", block); },
                             [=] {
                               quant_compress_kernel<<<blocks_for(quant_blocks * 32), kThreads, 0, s>>>(in, codes, scales, n, block, bits);
                               CUDA_CHECK_LAUNCH();
                             },
                             [=] {
                               quant_decompress_kernel<<<blocks_for(n), kThreads, 0, s>>>(codes, scales, out, n, block, bits);
                               CUDA_CHECK_LAUNCH();
                             },
                             [=](const std::vector<float>& x) {
                               const std::vector<uint8_t> c = quant_compress(x.data(), layout);
                               return std::make_pair(c, quant_decompress(c.data(), layout));
                             }});
          }
        }
      }
      if (codec_name == "zfp") {
        for (int rate : options.zfp_rates) {
          const int group_blocks = codec::zfp_group_blocks(rate);
          const std::size_t blocks = n / codec::kZfpBlock;
          const std::size_t groups = blocks / static_cast<std::size_t>(group_blocks);
          uint32_t* words = compressed.as<uint32_t>();
          cases.push_back({"zfp rate " + std::to_string(rate), zfp_compressed_bytes(n, rate),
                           [=](MeasurementRecord& r) { r.text("codec", "zfp").integer("rate", rate); },
                           [=] {
                             zfp_compress_kernel<<<blocks_for(groups), kThreads, 0, s>>>(in, words, groups, rate, group_blocks);
                             CUDA_CHECK_LAUNCH();
                           },
                           [=] {
                             zfp_decompress_kernel<<<blocks_for(blocks), kThreads, 0, s>>>(words, out, blocks, rate);
                             CUDA_CHECK_LAUNCH();
                           },
                           [=](const std::vector<float>& x) {
                             const std::vector<uint32_t> c = zfp_compress(x.data(), x.size(), rate);
                             return std::make_pair(as_bytes(c), zfp_decompress(c.data(), x.size(), rate));
                           }});
        }
      }
      for (const CodecCase& codec_case : cases) run_case(codec_case, w, n, options, recording);
    }
  }
}

}  // namespace stepsim::harness
