#pragma once
/// @file Units used everywhere inside stepsim, and the parsers that turn user text into them.
///
/// Inside the code there is one convention: time in seconds, sizes in bytes, bandwidth in
/// bytes per second, all as `double`. Users write explicit units in YAML and on the command
/// line (`25GBps`, `200Gbps`, `0.7us`, `64MiB`, `1e9`); these parsers convert once, at the edge.
#include <string>
#include <string_view>

namespace stepsim {

using Seconds = double;
using Bytes = double;
using BytesPerSecond = double;

constexpr double kGB = 1e9;  ///< nccl-tests' GB (algbw, busbw are in 1e9 B/s)

/// @brief Parses a size: `8`, `1e9`, `64KiB`, `1GiB`, `512MB`, `4k` (bytes when bare), at most 1 PiB.
/// Throws std::invalid_argument with a message naming the accepted forms or the limit.
Bytes parse_size(std::string_view text);

/// @brief Parses a bandwidth: `25GBps`, `25GB/s`, `200Gbps`, `12.5e9Bps`, at most 1000 TB/s. The
/// unit is required (a bare `25` is refused, not read as 25 B/s); only 0 may go without one.
BytesPerSecond parse_bandwidth(std::string_view text);

/// @brief Parses a duration: `0.7us`, `1.5ms`, `2ns`, `3s`, at most 1e6 s. The unit is required;
/// only 0 may go without one.
Seconds parse_duration(std::string_view text);

/// @brief Formats bytes as the shortest exact binary-unit form (`64MiB`) or plain bytes.
std::string format_size(Bytes bytes);

}  // namespace stepsim
