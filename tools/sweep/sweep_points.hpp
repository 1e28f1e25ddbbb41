#pragma once
/// @file The points of a sweep: axes combined (grid or zip), filtered, numbered and named.
///
/// Contract: enumeration is deterministic. A grid varies the last axis fastest; a zip takes
/// the i-th value of every axis. Filters drop points; the survivors are numbered 0..n-1 in
/// that order (`index`, which `--shard K/N` slices). A point's `id` is a hash of everything
/// that determines its result (the kind, the base and the axis values), so it is the same on
/// every machine and run, and a changed base gives new ids rather than stale matches.
#include <map>
#include <string>
#include <vector>

#include "tools/sweep/sweep_file.hpp"

namespace stepsim::sweep {

/// @brief One point of a sweep.
struct Point {
  int index = 0;                     ///< position among the points that pass the filters
  std::vector<std::string> values;   ///< one per axis, in the sweep's axis order
  std::string id;                    ///< 16 lowercase hex digits
};

/// @brief Every point of `sweep`, in enumeration order.
std::vector<Point> enumerate_points(const Sweep& sweep);

/// @brief The base with the point's axis values applied: every field and dotted path that
/// the point sets.
std::map<std::string, std::string> point_settings(const Sweep& sweep, const std::vector<std::string>& values);

/// @brief FNV-1a (64 bit) of `text` as 16 hex digits: stable across platforms and runs,
/// unlike std::hash.
std::string stable_hash(const std::string& text);

}  // namespace stepsim::sweep
