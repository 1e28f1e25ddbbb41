#pragma once
/// @file Embedding-bag indices generated on the host from std::mt19937_64(seed), whose output
/// sequence the C++ standard fixes; the mapping from its 64-bit words to rows is written here
/// (std::*_distribution mappings are implementation-defined), so a seed gives the same indices
/// with any standard library.
///
/// Contract:
/// - uniform: row = floor(x * rows / 2^64) (Lemire's multiply-shift) for each word x.
/// - zipf(alpha): rank r in [0, rows) with P(r) proportional to (r + 1)^-alpha, by inverse CDF:
///   u = (x >> 11) * 2^-53, r = the first rank whose cumulative weight exceeds u * total (a
///   precomputed table of rows doubles); then row = r * 2654435761 mod rows (a bijection), so hot
///   rows are spread over the table as an id hash would spread them instead of sitting together.
/// The one platform-dependent step is std::pow in the table, which may differ in the last bit
/// between libms; that moves a sample only when u falls within an ulp of a boundary.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace stepsim::harness {

/// @brief How indices are distributed over the rows.
enum class IndexDistribution { uniform, zipf };

/// @brief Cumulative Zipf weights over `rows` ranks.
class ZipfTable {
 public:
  /// @brief Builds the table (std::logic_error unless rows >= 1 and alpha > 0).
  ZipfTable(uint64_t rows, double alpha);
  /// @brief The rank (0 = most popular) for u in [0, 1).
  uint64_t rank(double u) const;
  uint64_t rows() const { return static_cast<uint64_t>(cumulative_.size()); }
  double alpha() const { return alpha_; }

 private:
  double alpha_;
  std::vector<double> cumulative_;  ///< cumulative_[r] = sum_{j <= r} (j + 1)^-alpha
};

/// @brief floor(x * n / 2^64): an unbiased-enough map of a 64-bit word to [0, n).
uint64_t scale_to_range(uint64_t x, uint64_t n);
/// @brief (x >> 11) * 2^-53, in [0, 1).
double unit_interval(uint64_t x);
/// @brief The row of Zipf rank `rank` (a bijection of [0, rows)).
uint64_t scatter_rank(uint64_t rank, uint64_t rows);

/// @brief `count` indices in [0, rows) drawn with a fresh std::mt19937_64(seed); `zipf` must be a
/// table for `rows` when distribution is zipf (std::logic_error otherwise).
std::vector<int64_t> generate_indices(uint64_t count, uint64_t rows, IndexDistribution distribution,
                                      const ZipfTable* zipf, uint64_t seed);

}  // namespace stepsim::harness
