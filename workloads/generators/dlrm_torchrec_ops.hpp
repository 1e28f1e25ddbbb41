#pragma once
/// @file The ops TorchRec and FBGEMM run around a sharded EmbeddingBagCollection's lookups and
/// exchanges, besides the lookup kernels and collectives themselves (framework: torchrec): the
/// KJT's permutes and splits bookkeeping, the TBE's prologue and its backward's sort, the pooled
/// all-to-all's copies, DDP's copy of each gradient into its bucket. Each host op pays the op
/// gap and a launch; kernels an op launches from C++ pay a launch only. docs/dlrm.md, "TorchRec's
/// op sequence", lists the sources (torchrec a48cef79, FBGEMM 71d6f8b2).
#include <string>

#include "workloads/generators/dlrm_trace.hpp"

namespace stepsim::workloads::dlrm::torchrec {

/// @brief fbgemm permute_2D_sparse_data of a KJT (`lengths` int32 entries, `values` int64 ones):
/// one op, seven kernels (permuted lengths, two cumsums of three and two, the values) on `stream`.
void kjt_permute(RankBuilder& rank, int stream, const std::string& name, double lengths, double values);

/// @brief Before the TBE's forward kernel: the lengths' complete cumsum to offsets (one op, three
/// kernels), their widening to int64, and bounds_check_indices (one op: a flag fill and the check).
void tbe_forward_prologue(RankBuilder& rank, const std::string& name, double bags, double lookups);

/// @brief Kernel launches of FBGEMM's exact-optimizer TBE backward besides its main kernels, for
/// `lookups` indices into `rows` rows: linearize, cub's radix sort (one tile, or onesweep's
/// histogram, scan and a pass per 8 bits of the row index, each with its memsets), run-length
/// encode, cumsum, zero fills, find_long_segments, and the cta- and warp-per-row kernels (the
/// model's embedding_backward is one of the two).
int tbe_backward_extra_launches(double lookups, double rows);

/// @brief Those launches, without op gaps (the backward is one autograd op), each a pass over the
/// lookups' int64 indices.
void tbe_backward_internals(RankBuilder& rank, const std::string& name, double lookups, double rows);

}  // namespace stepsim::workloads::dlrm::torchrec
