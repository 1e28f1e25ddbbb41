#include "models/checker.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <vector>

namespace stepsim::models {
namespace {

/// 2 GiB of state; beyond that the checker refuses rather than exhausting memory.
constexpr double kMaxStateWords = 1 << 28;

/// Execution model. Rounds run in order; the steps of one round read the state before the
/// round and their writes land together (a pairwise exchange in one round is legal, as in
/// recursive doubling). Several reductions into one cell in one round are legal as long as
/// their contributions are disjoint; a replace next to any other write is a conflict.
///
/// State: for every endpoint and cell, the set of ranks whose contribution it holds, as a
/// flat array of 64-bit words (`words_` per set) so thousands of ranks stay compact.
class Machine {
 public:
  explicit Machine(const Schedule& s)
      : s_(s),
        ranks_(s.spec.ranks),
        cells_(static_cast<std::int64_t>(s.num_blocks) * s.pieces),
        words_((s.spec.ranks + 63) / 64),
        state_(static_cast<std::size_t>(s.endpoints() * cells_ * words_), 0),
        owner_channel_(static_cast<std::size_t>(cells_), -1) {}

  std::uint64_t* at(int endpoint, std::int64_t cell) {
    return &state_[static_cast<std::size_t>((endpoint * cells_ + cell) * words_)];
  }
  std::int64_t cell(int block, int piece) const { return static_cast<std::int64_t>(block) * s_.pieces + piece; }
  int words() const { return words_; }
  int& owner_channel(std::int64_t cell) { return owner_channel_[static_cast<std::size_t>(cell)]; }

  void add(int endpoint, int block, int piece, int rank) {
    at(endpoint, cell(block, piece))[rank / 64] |= std::uint64_t{1} << (rank % 64);
  }

  bool empty(const std::uint64_t* set) const {
    for (int w = 0; w < words_; ++w)
      if (set[w]) return false;
    return true;
  }
  bool equal(const std::uint64_t* a, const std::vector<std::uint64_t>& b) const {
    for (int w = 0; w < words_; ++w)
      if (a[w] != b[static_cast<std::size_t>(w)]) return false;
    return true;
  }
  std::vector<std::uint64_t> single(int rank) const {
    std::vector<std::uint64_t> set(static_cast<std::size_t>(words_), 0);
    set[static_cast<std::size_t>(rank / 64)] |= std::uint64_t{1} << (rank % 64);
    return set;
  }
  std::vector<std::uint64_t> everyone() const {
    std::vector<std::uint64_t> set(static_cast<std::size_t>(words_), 0);
    for (int r = 0; r < ranks_; ++r) set[static_cast<std::size_t>(r / 64)] |= std::uint64_t{1} << (r % 64);
    return set;
  }

  /// Text of a contribution set: "{0,3,5}", or a count when long.
  std::string describe(const std::uint64_t* set) const {
    std::vector<int> members;
    for (int r = 0; r < ranks_; ++r)
      if (set[r / 64] >> (r % 64) & 1) members.push_back(r);
    std::string text = "{";
    if (members.size() > 12) {
      text.append(std::to_string(members.size())).append(" ranks");
    } else {
      for (std::size_t i = 0; i < members.size(); ++i) text.append(i ? "," : "").append(std::to_string(members[i]));
    }
    return text.append("}");
  }

 private:
  const Schedule& s_;
  int ranks_;
  std::int64_t cells_;
  int words_;
  std::vector<std::uint64_t> state_;
  std::vector<int> owner_channel_;
};

std::string endpoint_name(const Schedule& s, int e) {
  if (e < s.spec.ranks) return "rank " + std::to_string(e);
  return "switch " + std::to_string(e - s.spec.ranks);
}

std::string cell_name(int block, int piece) {
  return "cell (block " + std::to_string(block) + ", piece " + std::to_string(piece) + ")";
}

/// The owner table, when present: allgather / reduce-scatter only, one row of num_blocks
/// ranks per piece, every rank owning as many blocks of each piece (its share of the buffer).
std::optional<std::string> check_block_owner(const Schedule& s) {
  if (s.block_owner.empty()) return std::nullopt;
  const CollectiveOp op = s.spec.op;
  if (op != CollectiveOp::allgather && op != CollectiveOp::reduce_scatter)
    return std::string("block_owner is set but ") + to_string(op) + " blocks have no owner (allgather / reduce_scatter only)";
  if (static_cast<int>(s.block_owner.size()) != s.pieces)
    return "block_owner has " + std::to_string(s.block_owner.size()) + " rows, one per piece needs " +
           std::to_string(s.pieces);
  const int n = s.spec.ranks;
  const int share = s.num_blocks / n;
  for (int p = 0; p < s.pieces; ++p) {
    const std::vector<int>& row = s.block_owner[static_cast<std::size_t>(p)];
    const std::string where = "block_owner of piece " + std::to_string(p) + ": ";
    if (static_cast<int>(row.size()) != s.num_blocks)
      return where + std::to_string(row.size()) + " entries, num_blocks is " + std::to_string(s.num_blocks);
    std::vector<int> owned(static_cast<std::size_t>(n), 0);
    for (int b = 0; b < s.num_blocks; ++b) {
      const int r = row[static_cast<std::size_t>(b)];
      if (r < 0 || r >= n)
        return where + "block " + std::to_string(b) + " owned by " + std::to_string(r) + ", not a rank";
      ++owned[static_cast<std::size_t>(r)];
    }
    for (int r = 0; r < n; ++r)
      if (owned[static_cast<std::size_t>(r)] != share)
        return where + "rank " + std::to_string(r) + " owns " + std::to_string(owned[static_cast<std::size_t>(r)]) +
               " blocks, every rank must own num_blocks / ranks = " + std::to_string(share) +
               (share == 1 ? " (the row must be a permutation of the ranks)" : "");
  }
  return std::nullopt;
}

/// Structural checks that need no execution: sizes, indices, channels, wire bytes.
std::optional<std::string> check_structure(const Schedule& s, const CheckOptions& options) {
  const CollectiveSpec& spec = s.spec;
  if (spec.ranks < 1) return "schedule has " + std::to_string(spec.ranks) + " ranks";
  if (s.num_blocks < 1 || s.pieces < 1 || s.channels < 1)
    return "num_blocks, pieces and channels must be >= 1";
  if ((spec.op == CollectiveOp::broadcast || spec.op == CollectiveOp::reduce) &&
      (spec.root < 0 || spec.root >= spec.ranks))
    return "root " + std::to_string(spec.root) + " is not a rank";
  const std::int64_t n = spec.ranks;
  if (spec.op == CollectiveOp::alltoall && s.num_blocks != n * n)
    return "alltoall needs ranks^2 = " + std::to_string(n * n) + " blocks, schedule has " +
           std::to_string(s.num_blocks);
  if (spec.op == CollectiveOp::sendrecv && s.num_blocks != n)
    return "sendrecv needs one block per rank, schedule has " + std::to_string(s.num_blocks);
  if ((spec.op == CollectiveOp::allgather || spec.op == CollectiveOp::reduce_scatter) && s.num_blocks % n != 0)
    return "allgather/reduce_scatter need a multiple of ranks blocks, schedule has " +
           std::to_string(s.num_blocks);
  if (auto bad = check_block_owner(s)) return bad;
  // nccl-tests sizes: alltoall and sendrecv count per-rank buffers, the others the whole one.
  const bool per_rank = spec.op == CollectiveOp::alltoall || spec.op == CollectiveOp::sendrecv;
  const Bytes expected_total = per_rank ? spec.bytes * n : spec.bytes;
  const Bytes total = s.block_bytes * s.num_blocks;
  if (std::abs(total - expected_total) > 1e-9 * std::max(1.0, expected_total)) {
    std::ostringstream text;
    text << "blocks cover " << total << " bytes (" << s.num_blocks << " x " << s.block_bytes << "), "
         << to_string(spec.op) << " of " << spec.bytes << " bytes moves " << expected_total;
    return text.str();
  }

  for (std::size_t r = 0; r < s.rounds.size(); ++r) {
    const Round& round = s.rounds[r];
    if (round.repeat < 0) return "round " + std::to_string(r) + " has repeat " + std::to_string(round.repeat);
    for (std::size_t i = 0; i < round.steps.size(); ++i) {
      const Step& st = round.steps[i];
      const std::string where = "round " + std::to_string(r) + " step " + std::to_string(i) + ": ";
      if (st.src < 0 || st.src >= s.endpoints() || st.dst < 0 || st.dst >= s.endpoints())
        return where + "endpoint " + std::to_string(st.src) + " -> " + std::to_string(st.dst) +
               " outside [0, " + std::to_string(s.endpoints()) + ")";
      if (st.src == st.dst) return where + "sends to itself (" + endpoint_name(s, st.src) + ")";
      if (st.block < 0 || st.block >= s.num_blocks)
        return where + "block " + std::to_string(st.block) + " outside [0, " + std::to_string(s.num_blocks) + ")";
      if (st.block_count < 1 || st.block_count > s.num_blocks)
        return where + "block_count " + std::to_string(st.block_count) + " outside [1, " +
               std::to_string(s.num_blocks) + "]";
      if (st.piece < 0 || st.piece >= s.pieces)
        return where + "piece " + std::to_string(st.piece) + " outside [0, " + std::to_string(s.pieces) + ")";
      if (st.channel < 0 || st.channel >= s.channels)
        return where + "channel " + std::to_string(st.channel) + " outside [0, " + std::to_string(s.channels) + ")";
      const Bytes cells_bytes = st.block_count * s.piece_bytes();
      if (!options.allow_compressed_wire_bytes &&
          std::abs(st.wire_bytes - cells_bytes) > 1e-9 * std::max(1.0, cells_bytes)) {
        std::ostringstream text;
        text << where << "wire_bytes " << st.wire_bytes << " but its " << st.block_count
             << " cell(s) hold " << cells_bytes << " bytes";
        return text.str();
      }
    }
  }
  return std::nullopt;
}

/// Seeds every endpoint with what the op says it starts with.
void initialise(const Schedule& s, Machine& m) {
  const int n = s.spec.ranks;
  for (int b = 0; b < s.num_blocks; ++b)
    for (int p = 0; p < s.pieces; ++p) {
      switch (s.spec.op) {
        case CollectiveOp::allgather: m.add(s.owner_of(b, p), b, p, s.owner_of(b, p)); break;
        case CollectiveOp::broadcast: m.add(s.spec.root, b, p, s.spec.root); break;
        case CollectiveOp::alltoall: m.add(b / n, b, p, b / n); break;
        case CollectiveOp::sendrecv: m.add(b, b, p, b); break;
        case CollectiveOp::reduce_scatter:
        case CollectiveOp::allreduce:
        case CollectiveOp::reduce:
          for (int r = 0; r < n; ++r) m.add(r, b, p, r);
          break;
      }
    }
}

/// Where the op promises each cell to end, and with which contributions.
std::optional<std::string> check_final(const Schedule& s, Machine& m) {
  const int n = s.spec.ranks;
  const std::vector<std::uint64_t> all = m.everyone();
  auto expect = [&](int rank, int b, int p, const std::vector<std::uint64_t>& want) -> std::optional<std::string> {
    const std::uint64_t* have = m.at(rank, m.cell(b, p));
    if (m.equal(have, want)) return std::nullopt;
    return "final state: rank " + std::to_string(rank) + " " + cell_name(b, p) + " holds " + m.describe(have) +
           ", " + to_string(s.spec.op) + " promises " + m.describe(want.data());
  };
  for (int b = 0; b < s.num_blocks; ++b)
    for (int p = 0; p < s.pieces; ++p) {
      std::optional<std::string> bad;
      switch (s.spec.op) {
        case CollectiveOp::allgather:
          for (int r = 0; r < n && !bad; ++r) bad = expect(r, b, p, m.single(s.owner_of(b, p)));
          break;
        case CollectiveOp::broadcast:
          for (int r = 0; r < n && !bad; ++r) bad = expect(r, b, p, m.single(s.spec.root));
          break;
        case CollectiveOp::allreduce:
          for (int r = 0; r < n && !bad; ++r) bad = expect(r, b, p, all);
          break;
        case CollectiveOp::reduce_scatter: bad = expect(s.owner_of(b, p), b, p, all); break;
        case CollectiveOp::reduce: bad = expect(s.spec.root, b, p, all); break;
        case CollectiveOp::alltoall: bad = expect(b % n, b, p, m.single(b / n)); break;
        case CollectiveOp::sendrecv: bad = expect((b + 1) % n, b, p, m.single(b)); break;
      }
      if (bad) return bad;
    }
  return std::nullopt;
}

/// One pending write of a round, applied after every step of the round has read.
struct Write {
  int dst;
  std::int64_t cell;
  Combine combine;
  std::vector<std::uint64_t> data;
  std::size_t step;   ///< index in the round, for messages
  int block, piece;
};

}  // namespace

std::optional<std::string> check_schedule(const Schedule& s, const CheckOptions& options) {
  if (auto bad = check_structure(s, options)) return bad;
  // The symbolic state is endpoints x cells x rank sets: meant for test-sized schedules.
  const double words = static_cast<double>(s.endpoints()) * s.num_blocks * s.pieces * ((s.spec.ranks + 63) / 64);
  if (words > kMaxStateWords)
    return "schedule too large to check symbolically (" + std::to_string(s.endpoints()) + " endpoints x " +
           std::to_string(static_cast<std::int64_t>(s.num_blocks) * s.pieces) + " cells)";
  Machine m(s);
  initialise(s, m);
  const int word_count = m.words();

  for (std::size_t r = 0; r < s.rounds.size(); ++r) {
    const Round& round = s.rounds[r];
    for (int rep = 0; rep < round.repeat; ++rep) {
      auto name = [&](std::size_t i, int block, int piece) {
        const Step& st = round.steps[i];
        return "round " + std::to_string(r) + (round.repeat > 1 ? " repetition " + std::to_string(rep) : "") +
               " step " + std::to_string(i) + " (" + endpoint_name(s, st.src) + " -> " + endpoint_name(s, st.dst) +
               ", channel " + std::to_string(st.channel) + ") " + cell_name(block, piece);
      };
      std::vector<Write> writes;
      for (std::size_t i = 0; i < round.steps.size(); ++i) {
        const Step& st = round.steps[i];
        const std::int64_t shifted =
            static_cast<std::int64_t>(st.block) + static_cast<std::int64_t>(rep) * round.block_shift;
        const int first = static_cast<int>((shifted % s.num_blocks + s.num_blocks) % s.num_blocks);
        for (int k = 0; k < st.block_count; ++k) {
          const int block = (first + k) % s.num_blocks;
          const std::int64_t c = m.cell(block, st.piece);
          int& owner = m.owner_channel(c);
          if (owner >= 0 && owner != st.channel)
            return name(i, block, st.piece) + ": cell already moved on channel " + std::to_string(owner) +
                   "; channels run unsynchronised";
          owner = st.channel;
          const std::uint64_t* held = m.at(st.src, c);
          if (m.empty(held)) return name(i, block, st.piece) + ": " + endpoint_name(s, st.src) + " does not hold it";
          writes.push_back({st.dst, c, st.combine, std::vector<std::uint64_t>(held, held + word_count), i, block, st.piece});
        }
      }
      // Group the round's writes per destination cell, then apply each group at once.
      std::stable_sort(writes.begin(), writes.end(), [](const Write& a, const Write& b) {
        return a.dst != b.dst ? a.dst < b.dst : a.cell < b.cell;
      });
      for (std::size_t i = 0; i < writes.size();) {
        std::size_t j = i;
        while (j < writes.size() && writes[j].dst == writes[i].dst && writes[j].cell == writes[i].cell) ++j;
        for (std::size_t k = i; k < j && j - i > 1; ++k)
          if (writes[k].combine == Combine::replace) {
            const Write& other = writes[k == i ? i + 1 : i];
            return name(writes[k].step, writes[k].block, writes[k].piece) +
                   ": replaces a cell that step " + std::to_string(other.step) + " of the same round also writes";
          }
        std::uint64_t* target = m.at(writes[i].dst, writes[i].cell);
        if (writes[i].combine == Combine::replace) {
          std::copy(writes[i].data.begin(), writes[i].data.end(), target);
        } else {
          std::vector<std::uint64_t> sum(target, target + word_count);
          for (std::size_t k = i; k < j; ++k) {
            for (int w = 0; w < word_count; ++w) {
              const auto word = static_cast<std::size_t>(w);
              if (sum[word] & writes[k].data[word])
                return name(writes[k].step, writes[k].block, writes[k].piece) +
                       ": reduction counts a contribution twice (sends " + m.describe(writes[k].data.data()) +
                       " into " + endpoint_name(s, writes[k].dst) + " holding " + m.describe(sum.data()) + ")";
              sum[word] |= writes[k].data[word];
            }
          }
          std::copy(sum.begin(), sum.end(), target);
        }
        i = j;
      }
    }
  }
  return check_final(s, m);
}

}  // namespace stepsim::models
