#pragma once
/// @file Reading a PyTorch profiler (Kineto) Chrome-trace JSON, plain or gzip-compressed: the
/// events the importers use, and the trace's device and distributed metadata.
///
/// Contract: keeps GPU activity (cat `kernel`, `gpu_memcpy`, `gpu_memset`), CUDA API calls
/// (cat `cuda_runtime`, `cuda_driver`), `ProfilerStep#N` annotations, torch's
/// `record_param_comms` ops and its matrix-product ops (`aten::mm`, `addmm`, `bmm`, `baddbmm`,
/// with their `Input Dims` when the profiler recorded shapes); every other event is dropped
/// while parsing, so memory follows the kept events, not the file. An NCCL kernel whose args lack torch's collective metadata gets
/// that of the `record_param_comms` op its launch ran in. Malformed JSON and
/// missing `traceEvents` are ConfigErrors naming the file (and the line for JSON errors).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace stepsim::validation {

/// @brief One kept trace event; times in microseconds as Kineto writes them.
struct KinetoEvent {
  std::string cat;
  std::string name;
  double ts = 0;
  double dur = 0;
  std::int64_t pid = 0;
  std::int64_t tid = 0;
  std::int64_t correlation = -1;  ///< links a CUDA API call to the GPU activity it launched
  nlohmann::json args;            ///< kept for GPU activity only
  double end() const { return ts + dur; }
};

/// @brief What one trace file holds.
struct KinetoProfile {
  std::string origin;
  std::string gpu;            ///< deviceProperties name of the traced device ("" = not written)
  int rank = -1;              ///< distributedInfo.rank (-1 = not written)
  int world_size = 0;         ///< distributedInfo.world_size (0 = not written)
  std::string nccl_version;   ///< distributedInfo.nccl_version
  std::string cuda_version;   ///< from cuda_runtime_version (12040 -> "12.4")
  std::map<std::string, std::vector<int>> group_ranks;  ///< distributedInfo.pg_config: pg_name -> ranks
  std::vector<KinetoEvent> gpu_events;   ///< kernels, memcpys, memsets, in ts order
  std::vector<KinetoEvent> api_calls;    ///< cuda_runtime / cuda_driver calls, in ts order
  std::vector<KinetoEvent> steps;        ///< ProfilerStep#N annotations, in ts order
  std::vector<KinetoEvent> matmuls;      ///< aten matrix-product CPU ops with their args, in ts order
};

/// @brief A matrix product as stepsim's gemm model takes it, read from an aten op's
/// `Input Dims` and `Input type`: C (m x n) = A (m x k) B (k x n), `batch` of them.
struct MatmulShape {
  double m = 0, n = 0, k = 0, batch = 1;
  std::string dtype;   ///< fp32 / fp16 / bf16
  std::string layout;  ///< NN, NT, TN or TT from `Input Strides` (T: the operand is a transposed view); "" unknown
};

/// @brief The shape of an `aten::mm`, `addmm`, `bmm` or `baddbmm` op; nullopt when the op lacks
/// recorded shapes or has a type stepsim's gemm model has no name for.
std::optional<MatmulShape> matmul_shape(const KinetoEvent& op);

/// @brief What torch.distributed (torch >= 2.1) writes into the args of an NCCL kernel.
struct NcclCall {
  std::string collective;   ///< "Collective name" as written ("allreduce", "_allgather_base", ...)
  std::string op;           ///< stepsim op; "" when stepsim has none (send, recv, gather, scatter)
  double size_bytes = 0;    ///< nccl-tests size: max(In, Out msg nelems) x dtype bytes
  std::string dtype;        ///< stepsim name ("bfloat16"); the torch name when unknown
  int group_size = 0;
  std::string group;        ///< "Process Group Name"
  std::vector<int> ranks;   ///< "Process Group Ranks" (a truncated "..." list is extended by its stride)
};

/// @brief The NCCL call of a kernel event; nullopt when its args carry no collective metadata.
std::optional<NcclCall> nccl_call(const KinetoEvent& kernel);

/// @brief Reads `path` (`.json` or gzip-compressed `.json.gz`; the content decides).
KinetoProfile read_kineto(const std::string& path);
/// @brief The same from JSON text; `origin` names it in errors.
KinetoProfile parse_kineto(const std::string& json_text, const std::string& origin);

/// @brief True for NCCL's kernels (ncclDevKernel_*, ncclKernel_*).
bool is_nccl_kernel(const KinetoEvent& event);

}  // namespace stepsim::validation
