#include "validation/harness/index_sampler.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace stepsim::harness {
namespace {
// Knuth's multiplicative-hash prime and the largest prime below 2^32: one of them is coprime with
// any row count below their product (~1.1e19), which makes r -> r * p mod rows a bijection.
constexpr uint64_t kScatterPrime = 2654435761ull;
constexpr uint64_t kScatterPrimeAlt = 4294967291ull;
}  // namespace

ZipfTable::ZipfTable(uint64_t rows, double alpha) : alpha_(alpha) {
  if (rows < 1 || !(alpha > 0)) throw std::logic_error("ZipfTable: rows must be >= 1 and alpha > 0");
  cumulative_.resize(rows);
  double sum = 0;
  for (uint64_t r = 0; r < rows; ++r) {
    sum += std::pow(static_cast<double>(r + 1), -alpha);
    cumulative_[r] = sum;
  }
}

uint64_t ZipfTable::rank(double u) const {
  const double target = u * cumulative_.back();
  auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), target);
  uint64_t r = static_cast<uint64_t>(it - cumulative_.begin());
  return r < rows() ? r : rows() - 1;
}

uint64_t scale_to_range(uint64_t x, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(x) * n) >> 64);
}

double unit_interval(uint64_t x) { return static_cast<double>(x >> 11) * 0x1.0p-53; }

uint64_t scatter_rank(uint64_t rank, uint64_t rows) {
  const uint64_t prime = rows % kScatterPrime != 0 ? kScatterPrime : kScatterPrimeAlt;
  return static_cast<uint64_t>((static_cast<unsigned __int128>(rank) * prime) % rows);
}

std::vector<int64_t> generate_indices(uint64_t count, uint64_t rows, IndexDistribution distribution,
                                      const ZipfTable* zipf, uint64_t seed) {
  if (rows < 1) throw std::logic_error("generate_indices: rows must be >= 1");
  if (distribution == IndexDistribution::zipf && (zipf == nullptr || zipf->rows() != rows))
    throw std::logic_error("generate_indices: zipf needs a table for the same rows");
  std::mt19937_64 generator(seed);
  std::vector<int64_t> indices(count);
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t x = generator();
    const uint64_t row = distribution == IndexDistribution::uniform ? scale_to_range(x, rows)
                                                                    : scatter_rank(zipf->rank(unit_interval(x)), rows);
    indices[i] = static_cast<int64_t>(row);
  }
  return indices;
}

}  // namespace stepsim::harness
