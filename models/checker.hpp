#pragma once
/// @file The data-movement checker: runs a Schedule symbolically.
///
/// Contract: `check_schedule` tracks, for every endpoint and cell (block, piece), the set of
/// ranks whose contribution it holds, applies every step in dependency order and returns
/// the first violation: a step sending a cell its source does not hold, a reduction that
/// would count a contribution twice, a replace and a reduce (or two replaces) of one cell in
/// one round, a cell touched by two channels (channels run unsynchronised), a race (a write
/// into a cell that the dependency contract does not order after that cell's earlier reads
/// and writes: rounds need not complete in order), wire bytes that
/// differ from the cells' size, a malformed block_owner table (see Schedule), or a final
/// state that is not what the op promises (see CollectiveSpec). An empty optional means the
/// schedule is correct.
///
/// Compression (schedule.hpp): raw and compressed forms are tracked per endpoint and cell as
/// two buffers, each with its contribution set. Also violations: compressing a cell not held
/// raw, decompressing or sending compressed a cell not held compressed, a reduction of
/// compressed data (a reduce needs raw data on both sides), a compressed transfer whose wire
/// bytes are not block_count x compressed_piece_bytes, a codec step on a switch or between two
/// endpoints, and a final cell that the op promises but the rank holds only compressed. A
/// compressed transfer lands in a receive buffer of its own, as an MPI receive does, so it is
/// exempt from the race check; codec steps are not (they write the endpoint's own buffers).
#include <optional>
#include <string>

#include "models/schedule.hpp"

namespace stepsim::models {

struct CheckOptions {
  /// Happens-before race detection under schedule.hpp's dependency contract (state: pairs x
  /// step edges per channel, under the same size guard).
  bool check_races = true;
};

std::optional<std::string> check_schedule(const Schedule& schedule, const CheckOptions& options = {});

}  // namespace stepsim::models
