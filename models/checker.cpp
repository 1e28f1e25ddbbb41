#include "models/checker.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <unordered_map>
#include <utility>
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
/// State: for every endpoint, cell and form (raw, and compressed when the schedule has codec
/// steps: two buffers, schedule.hpp), the set of ranks whose contribution it holds, as a flat
/// array of 64-bit words (`words_` per set) so thousands of ranks stay compact. A *slot* is a
/// (cell, form) pair.
enum Form : int { kRaw = 0, kCompressed = 1 };

bool has_codec_steps(const Schedule& s) {
  for (const Round& round : s.rounds)
    for (const Step& st : round.steps)
      if (st.is_codec() || st.compressed) return true;
  return false;
}

class Machine {
 public:
  explicit Machine(const Schedule& s)
      : s_(s),
        ranks_(s.spec.ranks),
        cells_(static_cast<std::int64_t>(s.num_blocks) * s.pieces),
        forms_(has_codec_steps(s) ? 2 : 1),
        words_((s.spec.ranks + 63) / 64),
        state_(static_cast<std::size_t>(s.endpoints() * cells_ * forms_ * words_), 0),
        owner_channel_(static_cast<std::size_t>(cells_), -1) {}

  std::uint64_t* at(int endpoint, std::int64_t slot) {
    return &state_[static_cast<std::size_t>((endpoint * slots() + slot) * words_)];
  }
  std::int64_t cell(int block, int piece) const { return static_cast<std::int64_t>(block) * s_.pieces + piece; }
  std::int64_t slot(std::int64_t cell, Form form) const { return cell * forms_ + form; }
  std::int64_t slots() const { return cells_ * forms_; }
  bool has_compressed_form() const { return forms_ == 2; }
  int words() const { return words_; }
  int& owner_channel(std::int64_t cell) { return owner_channel_[static_cast<std::size_t>(cell)]; }

  void add(int endpoint, int block, int piece, int rank) {
    at(endpoint, slot(cell(block, piece), kRaw))[rank / 64] |= std::uint64_t{1} << (rank % 64);
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
  int forms_;
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

/// What each kind of step may be: a transfer joins two endpoints; a codec step runs on one
/// rank's GPU (switches hold data in transit only), moves nothing over the wire, and only a
/// decompression may reduce; compressed data has a size to carry and cannot be reduced.
std::optional<std::string> check_step_kind(const Schedule& s, const Step& st) {
  if (st.is_codec()) {
    const std::string what = to_string(st.kind);
    if (st.src != st.dst)
      return what + " step names two endpoints (" + endpoint_name(s, st.src) + ", " + endpoint_name(s, st.dst) +
             "); it runs on one, src == dst";
    if (st.src >= s.spec.ranks) return what + " step on " + endpoint_name(s, st.src) + ": only ranks' GPUs run codecs";
    if (st.wire_bytes != 0 || st.compressed) return what + " step moves nothing: wire_bytes 0, compressed unset";
    if (st.kind == StepKind::compress && st.combine != Combine::replace)
      return "compress step reduces; only a decompression may accumulate into the raw cell";
    if (!std::isfinite(st.codec_time) || st.codec_time < 0)
      return what + " step has codec_time " + std::to_string(st.codec_time);
    if (!(s.compressed_piece_bytes > 0)) return what + " step but the schedule's compressed_piece_bytes is not set";
    return std::nullopt;
  }
  if (st.src == st.dst) return "sends to itself (" + endpoint_name(s, st.src) + ")";
  if (st.codec_time != 0) return "transfer with a codec_time (only compress / decompress steps have one)";
  if (st.compressed && st.combine == Combine::reduce)
    return "reduces compressed data: a reduce needs raw data on both sides (decompress with Combine::reduce "
           "at the destination instead)";
  if (st.compressed && !(s.compressed_piece_bytes > 0))
    return "compressed transfer but the schedule's compressed_piece_bytes is not set";
  return std::nullopt;
}

/// Structural checks that need no execution: sizes, indices, channels, wire bytes.
std::optional<std::string> check_structure(const Schedule& s) {
  const CollectiveSpec& spec = s.spec;
  if (spec.ranks < 1) return "schedule has " + std::to_string(spec.ranks) + " ranks";
  if (s.num_blocks < 1 || s.pieces < 1 || s.channels < 1 || s.lanes < 1)
    return "num_blocks, pieces, channels and lanes must be >= 1";
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
      if (auto bad = check_step_kind(s, st)) return where + *bad;
      if (st.block < 0 || st.block >= s.num_blocks)
        return where + "block " + std::to_string(st.block) + " outside [0, " + std::to_string(s.num_blocks) + ")";
      if (st.block_count < 1 || st.block_count > s.num_blocks)
        return where + "block_count " + std::to_string(st.block_count) + " outside [1, " +
               std::to_string(s.num_blocks) + "]";
      if (st.piece < 0 || st.piece >= s.pieces)
        return where + "piece " + std::to_string(st.piece) + " outside [0, " + std::to_string(s.pieces) + ")";
      if (st.channel < 0 || st.channel >= s.channels)
        return where + "channel " + std::to_string(st.channel) + " outside [0, " + std::to_string(s.channels) + ")";
      if (st.src_lane < 0 || st.src_lane >= s.lanes || st.dst_lane < 0 || st.dst_lane >= s.lanes)
        return where + "lane " + std::to_string(st.src_lane) + " -> " + std::to_string(st.dst_lane) + " outside [0, " +
               std::to_string(s.lanes) + ")";
      if (st.is_codec() && st.src_lane != st.dst_lane) return where + "codec step on two lanes";
      if (st.is_codec()) continue;
      const Bytes cells_bytes = st.block_count * (st.compressed ? s.compressed_piece_bytes : s.piece_bytes());
      if (std::abs(st.wire_bytes - cells_bytes) > 1e-9 * std::max(1.0, cells_bytes)) {
        std::ostringstream text;
        text << where << "wire_bytes " << st.wire_bytes << " but its " << st.block_count << " cell(s) hold "
             << cells_bytes << (st.compressed ? " bytes compressed" : " bytes");
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
    const std::int64_t c = m.cell(b, p);
    const std::uint64_t* have = m.at(rank, m.slot(c, kRaw));
    if (m.equal(have, want)) return std::nullopt;
    std::string text = "final state: rank " + std::to_string(rank) + " " + cell_name(b, p) + " holds " +
                       m.describe(have) + ", " + to_string(s.spec.op) + " promises " + m.describe(want.data());
    if (m.has_compressed_form() && m.equal(m.at(rank, m.slot(c, kCompressed)), want))
      text += " (it holds that only compressed: decompress it)";
    return text;
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

/// "round 2 repetition 1 step 3 (rank 0 -> rank 1, channel 0)": one step of the compact form.
std::string step_label(const Schedule& s, std::size_t r, int rep, std::size_t i) {
  const Round& round = s.rounds[r];
  const Step& st = round.steps[i];
  return "round " + std::to_string(r) + (round.repeat > 1 ? " repetition " + std::to_string(rep) : "") + " step " +
         std::to_string(i) + " (" + endpoint_name(s, st.src) + " -> " + endpoint_name(s, st.dst) + ", channel " +
         std::to_string(st.channel) + ")";
}

/// Happens-before under the dependency contract (schedule.hpp), exact.
///
/// A step of expanded round k issued by pair a = (src, channel) starts after every step of
/// rounds < k that involves a, hence after everything those steps started after. Steps of one
/// round between the same two pairs (an *edge*: src, dst, channel) are ordered alike, and an
/// edge's round-j steps start after its earlier ones (same issuer), so "all of an edge's steps
/// up to round j finished" is one number. The clock of pair q holds it for every edge of q's
/// channel: clock_[q][edge] = latest round j whose steps on that edge are known finished before
/// q's next step starts. After round k, for every step s of it, src and dst pairs take the
/// element-wise max with VC(s) (src's clock before the round: the destination is ready only
/// after s finished) and both set edge(s) to k.
///
/// Why edges, not pairs: knowing that q's step t finished does not tell that q's other steps
/// of t's round did (q's receives do not wait for one another), so per-pair entries must stay
/// one round behind t, and a plain ring, where a cell's next writer learns of its reader's send
/// only through that send's receiver, would be reported as racing.
class RaceTracker {
 public:
  enum class Kind : std::uint8_t { read, replace, reduce };
  /// One access to a cell at an endpoint: a send from it (read) or a step into it (write).
  struct Access {
    int edge;
    std::int64_t round;         ///< expanded round
    Kind kind;
    std::size_t compact_round;  ///< where it is in the Schedule, for messages
    int rep;
    std::size_t step;
  };

  /// Numbers each channel's edges: what the clocks are indexed by.
  struct Edges {
    std::vector<std::vector<int>> of;   ///< [compact round][step] -> edge within its channel
    std::vector<int> per_channel;
    /// Clock entries, pairs x edges of their channel: what the size guard weighs.
    double clock_entries(const Schedule& s) const {
      double entries = 0;
      for (int count : per_channel) entries += static_cast<double>(count) * s.endpoints() * s.lanes;
      return entries;
    }
  };
  static Edges number_edges(const Schedule& s) {
    Edges edges{std::vector<std::vector<int>>(s.rounds.size()), std::vector<int>(static_cast<std::size_t>(s.channels), 0)};
    std::unordered_map<std::int64_t, int> ids;   // (channel, src pair, dst pair) -> edge
    const std::int64_t pairs = s.pairs();
    for (std::size_t r = 0; r < s.rounds.size(); ++r)
      for (const Step& st : s.rounds[r].steps) {
        const std::int64_t key = (static_cast<std::int64_t>(st.channel) * pairs + s.pair_of(st.src, st.channel, st.src_lane)) *
                                     pairs +
                                 s.pair_of(st.dst, st.channel, st.dst_lane);
        const auto [at, added] = ids.try_emplace(key, edges.per_channel[static_cast<std::size_t>(st.channel)]);
        if (added) ++edges.per_channel[static_cast<std::size_t>(st.channel)];
        edges.of[r].push_back(at->second);
      }
    return edges;
  }

  RaceTracker(const Schedule& s, Edges edges, std::int64_t slots) : s_(s), slots_(slots), edge_of_(std::move(edges.of)) {
    clock_.resize(static_cast<std::size_t>(s.pairs()));
    for (int e = 0; e < s.endpoints(); ++e)
      for (int c = 0; c < s.channels; ++c)
        for (int l = 0; l < s.lanes; ++l)
          clock_[pair(e, c, l)].assign(static_cast<std::size_t>(edges.per_channel[static_cast<std::size_t>(c)]), -1);
  }

  /// Step i of compact round r writes `slot` (a cell's raw or compressed form) at its
  /// destination. Returns the earlier access of that slot the write is not ordered after, if any. Accesses kept are all of earlier
  /// rounds (record's land at end_round), so same-round reads and writes are left to the round
  /// rule (reads see the state before the round).
  std::optional<Access> unordered_before(std::size_t r, std::size_t i, std::int64_t slot) const {
    const Step& st = s_.rounds[r].steps[i];
    // Reductions commute: two unordered reduces of disjoint contributions (the double-count
    // check guards disjointness) sum to the same cell in either order.
    return first_unordered(st, key(st.dst, slot), [&](const Access& a) {
      return a.kind == Kind::reduce && st.combine == Combine::reduce;
    });
  }

  /// Step i of compact round r reads `slot` at its source. With one lane the read waits for
  /// every earlier step of its endpoint and channel; with lanes, only for its own lane's, so
  /// it must be ordered after the earlier writes of that slot at its source like a write is.
  /// Returns the earlier write it is not ordered after, if any.
  std::optional<Access> unordered_read(std::size_t r, std::size_t i, std::int64_t slot) const {
    if (s_.lanes == 1) return std::nullopt;
    const Step& st = s_.rounds[r].steps[i];
    return first_unordered(st, key(st.src, slot), [](const Access& a) { return a.kind == Kind::read; });
  }

  /// Notes step i of compact round r (repetition rep, expanded round k) reading slot `read` at
  /// its source and writing slot `write` at its destination; applied at end_round.
  void record(std::size_t r, int rep, std::size_t i, std::int64_t k, std::int64_t read, std::int64_t write) {
    const Step& st = s_.rounds[r].steps[i];
    const int edge = edge_of_[r][i];
    const Kind kind = st.combine == Combine::replace ? Kind::replace : Kind::reduce;
    round_accesses_.push_back({key(st.src, read), {edge, k, Kind::read, r, rep, i}});
    round_accesses_.push_back({key(st.dst, write), {edge, k, kind, r, rep, i}});
  }

  /// Ends expanded round k of compact round r: clocks and kept accesses advance.
  void end_round(std::size_t r, std::int64_t k) {
    const std::vector<Step>& steps = s_.rounds[r].steps;
    std::vector<std::pair<std::size_t, std::vector<int>>> learnt;   // destination pair, merged clock
    for (const Step& st : steps) {
      const std::size_t dst = pair(st.dst, st.channel, st.dst_lane);
      auto at = std::find_if(learnt.begin(), learnt.end(), [&](const auto& l) { return l.first == dst; });
      if (at == learnt.end()) at = learnt.insert(learnt.end(), {dst, clock_[dst]});
      const std::vector<int>& sender = clock_[pair(st.src, st.channel, st.src_lane)];
      for (std::size_t e = 0; e < sender.size(); ++e) at->second[e] = std::max(at->second[e], sender[e]);
    }
    for (auto& [dst, merged] : learnt) clock_[dst] = std::move(merged);
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const auto edge = static_cast<std::size_t>(edge_of_[r][i]);
      clock_[pair(steps[i].src, steps[i].channel, steps[i].src_lane)][edge] = static_cast<int>(k);
      clock_[pair(steps[i].dst, steps[i].channel, steps[i].dst_lane)][edge] = static_cast<int>(k);
    }
    // A replace of this round is ordered after every earlier access of its cell (it was
    // checked to be), and so is a read when the endpoint has one lane (its send waits for
    // all its earlier steps), so they supersede them; with lanes, a send waits only for its
    // own lane. Reduces alone may be unordered with earlier reduces: keep those.
    std::stable_sort(round_accesses_.begin(), round_accesses_.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t i = 0; i < round_accesses_.size();) {
      std::size_t j = i;
      bool supersedes = false;
      for (; j < round_accesses_.size() && round_accesses_[j].first == round_accesses_[i].first; ++j)
        supersedes = supersedes || round_accesses_[j].second.kind == Kind::replace ||
                     (round_accesses_[j].second.kind == Kind::read && s_.lanes == 1);
      std::vector<Access>& kept = accesses_[round_accesses_[i].first];
      if (supersedes) kept.clear();
      for (std::size_t a = i; a < j; ++a) kept.push_back(round_accesses_[a].second);
      i = j;
    }
    round_accesses_.clear();
  }

 private:
  /// @brief The first kept access of `access_key` that step `st` is not ordered after (by its
  /// source pair's clock), skipping those `exempt` says need no order.
  template <class Exempt>
  std::optional<Access> first_unordered(const Step& st, std::int64_t access_key, Exempt exempt) const {
    const std::vector<int>& known = clock_[pair(st.src, st.channel, st.src_lane)];
    const auto kept = accesses_.find(access_key);
    if (kept == accesses_.end()) return std::nullopt;
    for (const Access& a : kept->second)
      if (!exempt(a) && known[static_cast<std::size_t>(a.edge)] < a.round) return a;
    return std::nullopt;
  }

  std::size_t pair(int endpoint, int channel, int lane) const {
    return static_cast<std::size_t>(s_.pair_of(endpoint, channel, lane));
  }
  std::int64_t key(int endpoint, std::int64_t slot) const { return static_cast<std::int64_t>(endpoint) * slots_ + slot; }

  const Schedule& s_;
  std::int64_t slots_;                      ///< slots per endpoint
  std::vector<std::vector<int>> edge_of_;   ///< see Edges::of
  std::vector<std::vector<int>> clock_;     ///< [pair] -> latest known-finished round per edge
  std::unordered_map<std::int64_t, std::vector<Access>> accesses_;   ///< (endpoint, cell) -> unsuperseded accesses
  std::vector<std::pair<std::int64_t, Access>> round_accesses_;      ///< this round's, applied at end_round
};

/// One pending write of a round, applied after every step of the round has read.
struct Write {
  int dst;
  std::int64_t slot;
  Combine combine;
  std::vector<std::uint64_t> data;
  std::size_t step;   ///< index in the round, for messages
  int block, piece;
};

}  // namespace

std::optional<std::string> check_schedule(const Schedule& s, const CheckOptions& options) {
  if (auto bad = check_structure(s)) return bad;
  // The symbolic state is endpoints x cells x rank sets: meant for test-sized schedules.
  const double words = static_cast<double>(s.endpoints()) * s.num_blocks * s.pieces * ((s.spec.ranks + 63) / 64) *
                       (has_codec_steps(s) ? 2 : 1);
  if (words > kMaxStateWords)
    return "schedule too large to check symbolically (" + std::to_string(s.endpoints()) + " endpoints x " +
           std::to_string(static_cast<std::int64_t>(s.num_blocks) * s.pieces) + " cells)";
  Machine m(s);
  std::optional<RaceTracker> races;
  if (options.check_races) {
    RaceTracker::Edges edges = RaceTracker::number_edges(s);
    if (edges.clock_entries(s) > kMaxStateWords)
      return "schedule too large to check races (" + std::to_string(s.endpoints()) + " endpoints x " +
             std::to_string(static_cast<std::int64_t>(edges.clock_entries(s) / s.endpoints())) +
             " step edges); check it without CheckOptions::check_races";
    races.emplace(s, std::move(edges), m.slots());
  }
  initialise(s, m);
  const int word_count = m.words();

  std::int64_t expanded = 0;   // the expanded round, the contract's round index
  for (std::size_t r = 0; r < s.rounds.size(); ++r) {
    const Round& round = s.rounds[r];
    for (int rep = 0; rep < round.repeat; ++rep, ++expanded) {
      auto name = [&](std::size_t i, int block, int piece) {
        return step_label(s, r, rep, i) + " " + cell_name(block, piece);
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
          // Which buffer the step reads and which it writes (schedule.hpp: raw and compressed forms).
          const Form from = st.kind == StepKind::decompress || st.compressed ? kCompressed : kRaw;
          const Form to = st.kind == StepKind::compress || st.compressed ? kCompressed : kRaw;
          const std::int64_t read = m.slot(c, from), write = m.slot(c, to);
          const std::uint64_t* held = m.at(st.src, read);
          if (m.empty(held)) {
            std::string why = endpoint_name(s, st.src) + " does not hold it";
            if (st.kind == StepKind::compress) why += " raw, nothing to compress";
            else if (from == kCompressed) why += " compressed";
            else if (m.has_compressed_form() && !m.empty(m.at(st.src, m.slot(c, kCompressed))))
              why += " raw, only compressed (decompress it first)";
            return name(i, block, st.piece) + ": " + why;
          }
          if (st.combine == Combine::reduce && m.has_compressed_form() && m.empty(m.at(st.dst, write)) &&
              !m.empty(m.at(st.dst, m.slot(c, kCompressed))))
            return name(i, block, st.piece) + ": reduces into " + endpoint_name(s, st.dst) +
                   ", which holds that cell only compressed: a reduce needs raw data on both sides";
          if (races) {
            // A compressed message lands in a receive buffer of its own (the receive MPI posts
            // for it; its size is known in advance), so it cannot overwrite a compressed form
            // the destination still reads; the state keeps one compressed form per cell, which
            // reads in round order see as the message they consume (the dependency contract
            // orders a read after every earlier-round receive of its endpoint).
            if (const auto unseen = races->unordered_read(r, i, read))
              return name(i, block, st.piece) + ": read-after-write race: " + endpoint_name(s, st.src) +
                     " sends it on lane " + std::to_string(st.src_lane) + " with nothing in the dependency contract " +
                     "ordering the send after " + step_label(s, unseen->compact_round, unseen->rep, unseen->step) +
                     ", which wrote it there";
            const auto earlier = st.compressed ? std::nullopt : races->unordered_before(r, i, write);
            if (earlier) {
              const bool read = earlier->kind == RaceTracker::Kind::read;
              return name(i, block, st.piece) + ": " + (read ? "write-after-read" : "write-after-write") +
                     " race: writes into " + endpoint_name(s, st.dst) + " with nothing in the dependency contract "
                     "ordering it after the " + (read ? "send" : "write") + " of that cell in " +
                     step_label(s, earlier->compact_round, earlier->rep, earlier->step);
            }
            races->record(r, rep, i, expanded, read, write);
          }
          writes.push_back({st.dst, write, st.combine, std::vector<std::uint64_t>(held, held + word_count), i, block,
                            st.piece});
        }
      }
      // Group the round's writes per destination cell, then apply each group at once.
      std::stable_sort(writes.begin(), writes.end(), [](const Write& a, const Write& b) {
        return a.dst != b.dst ? a.dst < b.dst : a.slot < b.slot;
      });
      for (std::size_t i = 0; i < writes.size();) {
        std::size_t j = i;
        while (j < writes.size() && writes[j].dst == writes[i].dst && writes[j].slot == writes[i].slot) ++j;
        for (std::size_t k = i; k < j && j - i > 1; ++k)
          if (writes[k].combine == Combine::replace) {
            const Write& other = writes[k == i ? i + 1 : i];
            return name(writes[k].step, writes[k].block, writes[k].piece) +
                   ": replaces a cell that step " + std::to_string(other.step) + " of the same round also writes";
          }
        std::uint64_t* target = m.at(writes[i].dst, writes[i].slot);
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
      if (races) races->end_round(r, expanded);
    }
  }
  return check_final(s, m);
}

}  // namespace stepsim::models
