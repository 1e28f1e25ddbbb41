#pragma once
/// @file GEMM cases of the harness and how each maps onto a cuBLAS (column-major) call.
///
/// Convention (the one docs/measurements.md uses for `gemm`): C[m x n] = op(A) * op(B) with
/// row-major storage, op(A) m x k and op(B) k x n; `layout` gives op(A) then op(B): N = stored as
/// written, T = stored transposed (A as k x m, B as n x k). A PyTorch linear layer y = x W^T with
/// x [tokens x in] and W [out x in] is then m = tokens, n = out, k = in, layout NT; its input
/// gradient dx = dy W is m = tokens, n = in, k = out, NN; its weight gradient dW = dy^T x is
/// m = out, n = in, k = tokens, TN.
#include <cstdint>
#include <string>
#include <vector>

namespace stepsim::harness {

/// @brief One GEMM case.
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;          ///< > 1: strided batched GEMM
  std::string layout = "NN";  ///< NN, NT or TN
  std::string label;          ///< for progress lines, e.g. "llama3-8b gate/up fwd"
};

/// @brief The default sweep: squares 256..16384 (x2, NN) then Llama-3-8B's projections at 16384
/// tokens — (n, k) in {(4096, 4096) q/o, (1024, 4096) k/v, (14336, 4096) gate/up, (4096, 14336)
/// down} — forward, input-gradient and weight-gradient; `quick` keeps squares 256, 1024, 4096.
std::vector<GemmShape> default_gemm_shapes(bool quick);

/// @brief Parses "m,n,k[,batch];..." (each 1..2^31-1) with `layout` for all (ConfigError naming
/// "--shapes" or "--layout").
std::vector<GemmShape> parse_gemm_shapes(const std::string& text, const std::string& layout);

/// @brief Arguments of cublasGemmEx / cublasGemmStridedBatchedEx for a shape. cuBLAS is
/// column-major, so the row-major C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T: cuBLAS's
/// first operand is our B, its second our A, and its m, n are our n, m.
struct CublasGemmCall {
  bool transpose_first = false;   ///< cuBLAS transa (applies to our B)
  bool transpose_second = false;  ///< cuBLAS transb (applies to our A)
  int64_t m = 0, n = 0, k = 0;    ///< cuBLAS m, n, k
  int64_t ld_first = 0, ld_second = 0, ld_c = 0;
  int64_t stride_first = 0, stride_second = 0, stride_c = 0;  ///< elements between batch members
};

/// @brief The cuBLAS call for `shape`.
CublasGemmCall cublas_call(const GemmShape& shape);

/// @brief 2*m*n*k*batch.
double gemm_flops(const GemmShape& shape);

}  // namespace stepsim::harness
