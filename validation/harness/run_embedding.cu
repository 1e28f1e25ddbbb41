// stepsim-harness embedding: an embedding bag with sum pooling and a fixed pooling factor, the
// lookup pattern of DLRM-style models. Forward: out[t][b][:] = sum_p table_t[idx[t][b][p]][:].
// Backward: grad_table_t[idx[t][b][p]][:] += grad_out[t][b][:] with atomics (duplicate indices
// within and across bags collide, which is what a skewed distribution costs). One thread per
// output element, so a warp reads 32 consecutive elements of a row. Indices come from the host
// (index_sampler.hpp) and are identical for a given seed on any machine.
#include <cuda_fp16.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "validation/harness/cli_args.hpp"
#include "validation/harness/cuda_check.hpp"
#include "validation/harness/subcommands.hpp"

namespace stepsim::harness {
namespace {

__device__ inline float load_float(const float* p) { return *p; }
__device__ inline float load_float(const __half* p) { return __half2float(*p); }
__device__ inline void store_float(float* p, float v) { *p = v; }
__device__ inline void store_float(__half* p, float v) { *p = __float2half_rn(v); }
__device__ inline void add_atomic(float* p, float v) { atomicAdd(p, v); }
__device__ inline void add_atomic(__half* p, float v) { atomicAdd(p, __float2half_rn(v)); }

struct BagShape {
  int64_t rows, dim, pooling, batch, tables;
};

template <typename T>
__global__ void bag_forward(const T* table, const int64_t* indices, T* out, BagShape s) {
  const int64_t total = s.tables * s.batch * s.dim;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t bag = e / s.dim, d = e % s.dim, t = bag / s.batch;
    const int64_t* idx = indices + bag * s.pooling;
    const T* base = table + t * s.rows * s.dim + d;
    float sum = 0.0f;
    for (int64_t p = 0; p < s.pooling; ++p) sum += load_float(base + idx[p] * s.dim);
    store_float(out + e, sum);
  }
}

template <typename T>
__global__ void bag_backward(const T* grad_out, const int64_t* indices, T* grad_table, BagShape s) {
  const int64_t total = s.tables * s.batch * s.dim;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t bag = e / s.dim, d = e % s.dim, t = bag / s.batch;
    const int64_t* idx = indices + bag * s.pooling;
    T* base = grad_table + t * s.rows * s.dim + d;
    const float g = load_float(grad_out + e);
    for (int64_t p = 0; p < s.pooling; ++p) add_atomic(base + idx[p] * s.dim, g);
  }
}

unsigned grid_for(int64_t total, unsigned threads) {
  const int64_t blocks = (total + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65536 * 16 ? blocks : 65536 * 16);  // grid-stride beyond
}

/// The buffers of one case: forward reads table, writes out; backward reads grad_out, adds into grad_table.
struct BagBuffers {
  const DeviceBuffer& table;
  const DeviceBuffer& indices;
  const DeviceBuffer& out;
  const DeviceBuffer& grad_out;
  const DeviceBuffer& grad_table;
};

template <typename T>
void launch_pass(bool forward, const BagBuffers& b, const BagShape& shape, cudaStream_t stream) {
  const unsigned threads = 256;
  const unsigned blocks = grid_for(shape.tables * shape.batch * shape.dim, threads);
  if (forward)
    bag_forward<T><<<blocks, threads, 0, stream>>>(b.table.as<T>(), b.indices.as<int64_t>(), b.out.as<T>(), shape);
  else
    bag_backward<T><<<blocks, threads, 0, stream>>>(b.grad_out.as<T>(), b.indices.as<int64_t>(), b.grad_table.as<T>(), shape);
  CUDA_CHECK_LAUNCH();
}

std::string case_label(const EmbeddingCase& c) {
  std::string label = std::to_string(c.rows) + " rows x " + std::to_string(c.dim) + " " + c.dtype + ", pooling " +
                      std::to_string(c.pooling) + ", batch " + std::to_string(c.batch) + ", " + std::to_string(c.tables) +
                      " table(s), " + distribution_name(c.distribution);
  if (c.distribution == IndexDistribution::zipf) label += "(" + std::to_string(c.alpha).substr(0, 4) + ")";
  return label;
}

}  // namespace

void run_embedding(const EmbeddingOptions& options, Recording& recording) {
  const int device = options.device;
  usable_gpus(device + 1, "--device");
  describe_system({device}, recording.header);
  Stream stream(device);
  const TimingPlan plan = timing_plan(options.common);
  bool backward = false;
  for (const std::string& pass : options.passes) backward = backward || pass == "backward";
  std::map<std::pair<uint64_t, double>, std::unique_ptr<ZipfTable>> zipf_tables;  // reused across cases

  for (const EmbeddingCase& c : options.cases) {
    const std::size_t elem = c.dtype == "fp16" ? 2 : 4;
    const BagShape shape{static_cast<int64_t>(c.rows), c.dim, c.pooling, c.batch, c.tables};
    const std::size_t table_bytes = c.rows * static_cast<std::size_t>(c.dim * c.tables) * elem;
    const std::size_t out_bytes = static_cast<std::size_t>(c.tables * c.batch * c.dim) * elem;
    const std::size_t index_count = static_cast<std::size_t>(c.tables * c.batch * c.pooling);
    const std::size_t needed = (table_bytes + out_bytes) * (backward ? 2 : 1) + index_count * sizeof(int64_t);
    std::size_t free_bytes = 0, total_bytes = 0;
    device_memory(device, free_bytes, total_bytes);
    if (needed + (std::size_t{1} << 30) > free_bytes) {
      const std::string note = "skipped " + case_label(c) + ": needs " + format_bytes(needed) + ", " +
                               format_bytes(free_bytes) + " free";
      std::fprintf(stderr, "embedding: %s\n", note.c_str());
      add_note(recording.header, note);
      continue;
    }
    std::fprintf(stderr, "embedding: %s: generating %zu indices\n", case_label(c).c_str(), index_count);
    const ZipfTable* zipf = nullptr;
    if (c.distribution == IndexDistribution::zipf) {
      std::unique_ptr<ZipfTable>& cached = zipf_tables[{c.rows, c.alpha}];
      if (!cached) cached = std::make_unique<ZipfTable>(c.rows, c.alpha);
      zipf = cached.get();
    }
    const std::vector<int64_t> host_indices = generate_indices(index_count, c.rows, c.distribution, zipf, options.common.seed);

    DeviceBuffer table(device, table_bytes), out(device, out_bytes), indices(device, index_count * sizeof(int64_t));
    DeviceBuffer grad_table = backward ? DeviceBuffer(device, table_bytes) : DeviceBuffer();
    DeviceBuffer grad_out = backward ? DeviceBuffer(device, out_bytes) : DeviceBuffer();
    const FillType fill = c.dtype == "fp16" ? FillType::fp16 : FillType::fp32;
    fill_uniform(table.get(), table_bytes / elem, fill, options.common.seed, stream);
    if (backward) fill_uniform(grad_out.get(), out_bytes / elem, fill, options.common.seed + 1, stream);
    if (backward) CUDA_CHECK(cudaMemsetAsync(grad_table.get(), 0, table_bytes, stream.get()));
    CUDA_CHECK(cudaMemcpyAsync(indices.get(), host_indices.data(), index_count * sizeof(int64_t), cudaMemcpyHostToDevice,
                               stream.get()));

    const BagBuffers buffers{table, indices, out, grad_out, grad_table};
    for (const std::string& pass : options.passes) {
      const bool forward = pass == "forward";
      auto launch = [&] {
        if (c.dtype == "fp16")
          launch_pass<__half>(forward, buffers, shape, stream.get());
        else
          launch_pass<float>(forward, buffers, shape, stream.get());
      };
      const SampleStats stats = summarize(time_calls({&stream}, launch, plan));
      MeasurementRecord record("embedding");
      record.integer("rows", static_cast<int64_t>(c.rows)).integer("dim", c.dim).integer("pooling", c.pooling);
      record.integer("batch", c.batch).integer("tables", c.tables).text("dtype", c.dtype);
      record.text("distribution", distribution_name(c.distribution));
      if (c.distribution == IndexDistribution::zipf) record.real("alpha", c.alpha);
      record.integer("seed", static_cast<int64_t>(options.common.seed)).text("pass", pass).timing(stats);
      recording.records.push_back(record);
      const double row_bytes = static_cast<double>(index_count) * static_cast<double>(c.dim * static_cast<int64_t>(elem));
      std::fprintf(stderr, "embedding %-8s %10.2f us  %8.1f GB/s of rows\n", pass.c_str(), stats.mean_s * 1e6,
                   row_bytes / stats.mean_s / 1e9);
    }
    wait_streams({&stream}, 300);  // before the buffers of this case are freed
  }
}

}  // namespace stepsim::harness
