#pragma once
/// @file Running a sweep: points evaluated in parallel worker processes, results streamed to
/// the output file as they finish, resumable after any interruption.
///
/// Contract: every point of the shard (index % shards == shard) that the output does not
/// already hold is evaluated exactly once per run and written as one line as soon as its
/// result reaches the parent, so killing the sweep (even with SIGKILL) loses only points in
/// flight. Analytical collectives run in `jobs` forked workers, each evaluating an
/// interleaved share of them in-process with one platform cache; points that need a process
/// of their own (needs_own_process) get one each, at most `jobs` at a time. When a worker
/// dies, the point it was evaluating runs again in a process of its own and its unreported
/// points in a new worker; a point whose own process dies becomes a row whose error names the
/// signal. With `resume`, rows already in the file
/// are kept (a half-written last line is cut off and its point run again); rows of points
/// outside this sweep are a ConfigError. Without `resume` an existing output is a
/// ConfigError. Row order in the file follows completion; the returned table is sorted by
/// index.
#include <string>

#include "tools/sweep/sweep_file.hpp"
#include "tools/sweep/sweep_results.hpp"

namespace stepsim::sweep {

/// @brief How to run a sweep: parallelism, output file, resume, shard, progress bar.
struct RunOptions {
  int jobs = 1;
  std::string out;            ///< result file (.csv, .jsonl), or empty to keep rows in memory
  bool resume = false;
  int shard = 0;              ///< run the points with index % shards == shard
  int shards = 1;
  bool progress = false;      ///< draw a progress bar with ETA on stderr
  /// Seconds one point may run; past it its worker is killed and the point's row says so.
  double point_time_limit = 600;
};

/// @brief What a run did; `table` holds every row of the shard, resumed and new.
struct RunSummary {
  ResultTable table;
  int points = 0;             ///< points in the shard
  int resumed = 0;            ///< rows found in the output
  int evaluated = 0;          ///< points evaluated by this run
  int failed = 0;             ///< rows with an error
  bool discarded_partial_line = false;
  double seconds = 0;         ///< wall time of the evaluation
};

/// @brief Runs `sweep` as described above.
RunSummary run_sweep(const Sweep& sweep, const RunOptions& options);

}  // namespace stepsim::sweep
