// TorchRec's and FBGEMM's ops around the lookups (see the header). Sources: pytorch/torchrec at
// a48cef79 (torchrec/sparse/jagged_tensor.py KeyedJaggedTensor.permute; distributed/dist_data.py
// KJTAllToAll and its splits awaitables; distributed/batched_embedding_kernel.py
// BaseBatchedEmbeddingBag.forward) and pytorch/FBGEMM at 71d6f8b2 (fbgemm_gpu
// split_table_batched_embeddings_ops_training.py forward; codegen/training/backward/
// embedding_backward_split_template.cu and src/split_embeddings_utils/transpose_embedding_input.cu;
// cub's radix sort dispatch, CCCL dispatch_radix_sort.cuh, for the pass count).
#include "workloads/generators/dlrm_torchrec_ops.hpp"

#include <algorithm>
#include <cmath>

namespace stepsim::workloads::dlrm::torchrec {
namespace {

models::KernelSpec pass(double elements, double bytes_read, double bytes_written) {
  return models::KernelSpec{"elementwise", models::Dtype::fp32,
                            {{"elements", std::max(elements, 1.0)}, {"bytes_read", bytes_read},
                             {"bytes_written", bytes_written}, {"flops", 1}},
                            {}};
}

/// One op launching `kernels` passes over `elements`: the op gap before the first only.
void op(RankBuilder& rank, int stream, const std::string& name, int kernels, double elements, double bytes) {
  for (int k = 0; k < kernels; ++k) rank.kernel_on(stream, name, pass(elements, bytes, bytes), k == 0);
}

constexpr double kSingleTileKeys = 2304;  // cub's one-tile radix sort of 64-bit keys (the int64 linearized indices)

}  // namespace

void kjt_permute(RankBuilder& rank, int stream, const std::string& name, double lengths, double values) {
  rank.kernel_on(stream, name, pass(lengths, 4, 4));
  for (int k = 0; k < 5; ++k) rank.kernel_on(stream, name + ".cumsum", pass(lengths, 4, 4), false);
  rank.kernel_on(stream, name + ".values", pass(values, 8, 8), false);
}

void tbe_forward_prologue(RankBuilder& rank, const std::string& name, double bags, double lookups) {
  op(rank, kCompute, name + ".offsets", 3, bags, 4);
  op(rank, kCompute, name + ".offsets_to_int64", 1, bags, 6);
  op(rank, kCompute, name + ".bounds_check", 2, lookups, 8);
}

int tbe_backward_extra_launches(double lookups, double rows) {
  // cub: one tile for few keys, else onesweep: histogram and scan (2 memsets), then per 8-bit
  // pass a memset and a onesweep kernel, over bits [0, floor(log2(rows)) + 1).
  const int passes = static_cast<int>(std::ceil((std::floor(std::log2(std::max(rows, 1.0))) + 1) / 8));
  const int sort = lookups <= kSingleTileKeys ? 1 : 4 + 2 * passes;
  // linearize 1, run-length zeros 2 + encode 2, cumsum 3, table offsets zeros 1, long-run zeros 2,
  // find_long_segments 1, the accumulator's zeros 1 (none below 1024 lookups), cta + warp 2.
  const int rest = 1 + 4 + 3 + 1 + 2 + 1 + (lookups >= 1024 ? 1 : 0) + 2;
  return sort + rest - 1;  // one of cta / warp is the model's embedding_backward kernel
}

void tbe_backward_internals(RankBuilder& rank, const std::string& name, double lookups, double rows) {
  const int launches = tbe_backward_extra_launches(lookups, rows);
  for (int k = 0; k < launches; ++k) rank.kernel_on(kCompute, name + ".sort_and_segments", pass(lookups, 8, 8), false);
}

}  // namespace stepsim::workloads::dlrm::torchrec
