#pragma once
/// @file The NCCL tuner table behind `stepsim tuner-table` (docs/sweep.md, "Tuner tables"):
/// the predicted best collective algorithm per op and message-size range.
///
/// Contract: `build_tuner_table` predicts, with the analytical engine, every candidate at
/// every sampled size (min, 2·min, 4·min, ... up to max, plus max itself), keeps the fastest
/// candidate per size (the first listed wins a tie) and merges neighbouring sizes with the
/// same (algorithm, protocol, channels) into one range. The ranges of one op cover
/// [min, max] without gap or overlap: the range of a sampled size runs to one byte below the
/// next sampled size. Candidates a case does not support are skipped; a size at which no
/// candidate runs is a ConfigError. The table depends on its inputs only (deterministic).
#include <string>
#include <vector>

#include "models/algorithm.hpp"
#include "platforms/units.hpp"

namespace stepsim::sweep {

/// @brief One candidate: a registry algorithm (e.g. "nccl", "blink") with its --algo-param
/// assignments (e.g. {"algo=ring", "proto=LL128"} forces one NCCL algorithm and protocol).
struct TunerCandidate {
  std::string algo;
  std::vector<std::string> params;
  /// @brief "nccl[algo=ring,proto=LL]" style label for messages and tests.
  std::string label() const;
};

/// @brief What a plugin can apply: every NCCL algorithm × protocol, forced one pair at a time.
std::vector<TunerCandidate> nccl_candidates();

/// @brief What to tabulate; sizes in bytes, min ≤ max, both > 0.
struct TunerRequest {
  std::vector<models::CollectiveOp> ops;
  Bytes min_bytes = 1024;
  Bytes max_bytes = 8.0 * 1024 * 1024 * 1024;
  std::vector<TunerCandidate> candidates;
};

/// @brief One row: sizes [min_bytes, max_bytes] of `op` use this choice. `algorithm` is
/// NCCL's name (ring, tree, nvls, ...) for an NCCL schedule and "stepsim:NAME" otherwise.
struct TunerRow {
  models::CollectiveOp op;
  Bytes min_bytes = 0;
  Bytes max_bytes = 0;
  std::string algorithm;
  std::string protocol;
  int channels = 0;
  double busbw_GBps = 0;      ///< predicted at the largest sampled size of the range
  std::string candidate;      ///< TunerCandidate::label() of the winner
};

/// @brief The sampled sizes: min·2^k ≤ max, then max when it is not one of them.
std::vector<Bytes> tuner_sizes(Bytes min_bytes, Bytes max_bytes);

/// @brief Builds the table (see the file contract); ctx.options is the base of every candidate.
std::vector<TunerRow> build_tuner_table(const TunerRequest& request, const models::CollectiveContext& ctx);

/// @brief CSV with the header `op,min_bytes,max_bytes,algorithm,protocol,channels,predicted_busbw_GBps`.
std::string tuner_table_csv(const std::vector<TunerRow>& rows);

}  // namespace stepsim::sweep
