#include "tools/sweep/sweep_runner.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <stdexcept>

#include "platforms/config_error.hpp"
#include "tools/sweep/sweep_evaluate.hpp"
#include "tools/sweep/sweep_points.hpp"
#include "tools/sweep/sweep_progress.hpp"

namespace stepsim::sweep {
namespace {

bool write_all(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

/// One forked worker: the points (positions in the shard's list) it evaluates, and what it
/// has reported so far.
struct Worker {
  pid_t pid = -1;
  int fd = -1;
  std::vector<int> task;
  std::size_t reported = 0;     ///< records received: a worker reports its task in order
  std::string buffer;           ///< bytes after the last complete record
  std::chrono::steady_clock::time_point point_start;   ///< when its current point began
  bool timed_out = false;       ///< killed for running past the point time limit
};

/// The child side: evaluate `task` and send one record per point, `position\x1fvalue...\n`.
[[noreturn]] void worker_main(const Sweep& sweep, const std::vector<Point>& points, const std::vector<int>& task,
                              int fd, pid_t parent) {
  // A sweep killed with SIGKILL takes its workers with it; none outlives it to write stale rows.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);
  try {
    PointEvaluator evaluator(sweep);
    std::string record;
    for (int position : task) {
      record = std::to_string(position);
      for (const std::string& value : evaluator.evaluate(points[position]))
        record.append("\x1f").append(one_line(value));
      record += '\n';
      if (!write_all(fd, record)) ::_exit(1);
    }
  } catch (...) {
    // Never unwind into the parent's code that this child inherited; the parent reruns the rest.
    ::_exit(1);
  }
  ::_exit(0);
}

class Scheduler {
 public:
  Scheduler(const Sweep& sweep, const std::vector<Point>& points, int jobs, double point_time_limit,
            ResultFormat format, int out_fd, std::vector<std::string> columns, ResultTable& table,
            ProgressBar& progress, int& done)
      : sweep_(sweep), points_(points), jobs_(jobs), point_time_limit_(point_time_limit), format_(format),
        out_fd_(out_fd), columns_(std::move(columns)), table_(table), progress_(progress), done_(done) {}

  ~Scheduler() {
    // Reached with workers left only when the parent fails (an unwritable output): stop them.
    for (Worker& w : workers_) {
      if (w.pid <= 0) continue;   // already reaped (kill(-1) would signal every process)
      ::kill(w.pid, SIGKILL);
      ::close(w.fd);
      ::waitpid(w.pid, nullptr, 0);
    }
  }

  void run(std::deque<std::vector<int>> tasks) {
    tasks_ = std::move(tasks);
    while (!tasks_.empty() || !workers_.empty()) {
      while (!tasks_.empty() && static_cast<int>(workers_.size()) < jobs_) {
        start(std::move(tasks_.front()));
        tasks_.pop_front();
      }
      wait_for_output();
    }
  }

 private:
  void start(std::vector<int> task) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error(std::string("pipe failed: ") + std::strerror(errno));
    std::fflush(nullptr);   // buffered output would otherwise be written by both processes
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
    if (pid == 0) {
      ::close(fds[0]);
      worker_main(sweep_, points_, task, fds[1], parent);
    }
    ::close(fds[1]);
    Worker w;
    w.pid = pid;
    w.fd = fds[0];
    w.task = std::move(task);
    w.point_start = std::chrono::steady_clock::now();
    workers_.push_back(std::move(w));
  }

  /// A point that runs past the limit has its worker killed; reap records the point as timed out.
  void stop_overdue_workers() {
    const auto now = std::chrono::steady_clock::now();
    for (Worker& w : workers_)
      if (!w.timed_out && std::chrono::duration<double>(now - w.point_start).count() > point_time_limit_) {
        ::kill(w.pid, SIGKILL);
        w.timed_out = true;
      }
  }

  void wait_for_output() {
    std::vector<pollfd> fds;
    for (const Worker& w : workers_) fds.push_back({w.fd, POLLIN, 0});
    const int ready = ::poll(fds.data(), fds.size(), 100);
    if (ready < 0 && errno != EINTR) throw std::runtime_error(std::string("poll failed: ") + std::strerror(errno));
    std::vector<std::size_t> finished;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      char chunk[1 << 16];
      const ssize_t n = ::read(workers_[i].fd, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n > 0) {
        workers_[i].buffer.append(chunk, static_cast<std::size_t>(n));
        take_records(workers_[i]);
      } else {
        finished.push_back(i);
      }
    }
    stop_overdue_workers();
    for (std::size_t k = finished.size(); k-- > 0;) {
      reap(workers_[finished[k]]);
      workers_.erase(workers_.begin() + static_cast<std::ptrdiff_t>(finished[k]));
    }
    progress_.update(done_);
  }

  void take_records(Worker& w) {
    std::size_t start = 0;
    for (std::size_t end; (end = w.buffer.find('\n', start)) != std::string::npos; start = end + 1) {
      std::vector<std::string> fields;
      for (std::size_t at = start;;) {
        const std::size_t sep = w.buffer.find('\x1f', at);
        if (sep == std::string::npos || sep > end) {
          fields.push_back(w.buffer.substr(at, end - at));
          break;
        }
        fields.push_back(w.buffer.substr(at, sep - at));
        at = sep + 1;
      }
      const int position = std::stoi(fields[0]);
      if (w.reported >= w.task.size() || w.task[w.reported] != position)
        throw std::logic_error("a sweep worker reported point " + fields[0] + " out of order");
      ++w.reported;
      w.point_start = std::chrono::steady_clock::now();
      fields.erase(fields.begin());
      record(points_[position], std::move(fields));
    }
    w.buffer.erase(0, start);
  }

  /// Writes one finished point: its line goes to the output at once.
  void record(const Point& point, std::vector<std::string> results) {
    std::vector<std::string> row = {point.id, std::to_string(point.index)};
    row.insert(row.end(), point.values.begin(), point.values.end());
    row.insert(row.end(), results.begin(), results.end());
    if (out_fd_ >= 0 && !write_all(out_fd_, row_line(columns_, row, format_)))
      throw ConfigError("--out", std::string("cannot write the results: ") + std::strerror(errno),
                        "free disk space or choose another file, then run again with --resume");
    table_.rows.push_back(std::move(row));
    ++done_;
  }

  void reap(Worker& w) {
    ::close(w.fd);
    int status = 0;
    while (::waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
    }
    w.pid = -1;
    const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    const std::string death = WIFSIGNALED(status) ? fmt::format("signal {}", WTERMSIG(status))
                                                  : fmt::format("exit status {}", WEXITSTATUS(status));
    if (w.reported == w.task.size()) return;
    if (w.timed_out) {
      // The point past the limit gets its row; the rest of the task runs in a fresh worker.
      std::vector<int> rest(w.task.begin() + static_cast<std::ptrdiff_t>(w.reported) + 1, w.task.end());
      if (!rest.empty()) tasks_.push_front(std::move(rest));
      std::vector<std::string> results(result_columns(sweep_.kind).size());
      results.push_back(fmt::format("time limit: the point ran past {:g} s (raise it with --point-time-limit)",
                                    point_time_limit_));
      record(points_[w.task[w.reported]], std::move(results));
      return;
    }
    if (w.task.size() > 1) {
      // Workers report in order, so the first unreported point is the one that killed it: it
      // runs again alone (its own death becomes its row), the rest in a fresh worker.
      std::vector<int> rest(w.task.begin() + static_cast<std::ptrdiff_t>(w.reported) + 1, w.task.end());
      if (!rest.empty()) tasks_.push_front(std::move(rest));
      tasks_.push_front({w.task[w.reported]});
      return;
    }
    std::vector<std::string> results(result_columns(sweep_.kind).size());
    results.push_back(fmt::format("internal error: the evaluating process died ({}){}", death,
                                  clean ? " without a result" : ""));
    record(points_[w.task[0]], std::move(results));
  }

  const Sweep& sweep_;
  const std::vector<Point>& points_;
  int jobs_;
  double point_time_limit_;   ///< seconds one point may run
  ResultFormat format_;
  int out_fd_;
  std::vector<std::string> columns_;
  ResultTable& table_;
  ProgressBar& progress_;
  int& done_;
  std::deque<std::vector<int>> tasks_;
  std::vector<Worker> workers_;
};

/// Rows already in the output, checked against the shard's points; opens the output for
/// appending after its last complete line.
int open_output(const RunOptions& options, const std::vector<std::string>& columns,
                const std::map<std::string, const Point*>& by_id, RunSummary& summary) {
  const ResultFormat format = result_format(options.out, "--out");
  std::uintmax_t keep = 0;
  if (std::filesystem::exists(options.out)) {
    if (!options.resume)
      throw ConfigError("--out " + options.out, "the file exists",
                        "pass --resume to continue that sweep, or choose another file");
    ReadResults existing = read_results(options.out, columns);
    std::map<std::string, const std::vector<std::string>*> seen;
    for (const std::vector<std::string>& row : existing.table.rows) {
      const auto point = by_id.find(row[0]);
      if (point == by_id.end())
        throw ConfigError("--out " + options.out, "it holds point " + row[0] + ", which is not a point of this sweep" +
                                                      (options.shards > 1 ? " shard" : ""),
                          "the sweep file (or --shard) changed since: write to a new --out file");
      if (row[1] != std::to_string(point->second->index))
        throw ConfigError("--out " + options.out, "it gives point " + row[0] + " index " + row[1] + ", this sweep " +
                                                      std::to_string(point->second->index),
                          "the file was edited or the sweep changed since: write to a new --out file");
      const auto [it, fresh] = seen.emplace(row[0], &row);
      if (!fresh && *it->second != row)
        throw ConfigError("--out " + options.out, "it holds two different rows for point " + row[0],
                          "remove one of them, or write to a new --out file");
      if (fresh) summary.table.rows.push_back(row);
    }
    keep = existing.complete_bytes;
    summary.discarded_partial_line = existing.partial_line;
    if (existing.table.columns.empty()) keep = 0;   // not even a complete header line
  }
  const int fd = ::open(options.out.c_str(), O_WRONLY | O_CREAT, 0644);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(keep)) != 0 || ::lseek(fd, 0, SEEK_END) < 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw ConfigError("--out " + options.out, "cannot open the file for writing: " + why, "name a writable path");
  }
  if (keep == 0 && !write_all(fd, header_line(columns, format))) {
    ::close(fd);
    throw ConfigError("--out " + options.out, "cannot write the file", "name a writable path");
  }
  return fd;
}

}  // namespace

RunSummary run_sweep(const Sweep& sweep, const RunOptions& options) {
  if (options.shards < 1 || options.shard < 0 || options.shard >= options.shards)
    throw ConfigError("--shard", fmt::format("shard {}/{} does not exist", options.shard, options.shards),
                      "write K/N with 0 <= K < N, e.g. --shard 0/4");
  const std::vector<Point> all = enumerate_points(sweep);
  if (all.empty())
    throw ConfigError(sweep.origin + ": filters", "no point passes the filters", "loosen the filters");
  std::vector<Point> points;
  for (const Point& p : all)
    if (p.index % options.shards == options.shard) points.push_back(p);
  std::map<std::string, const Point*> by_id;
  for (const Point& p : points) by_id[p.id] = &p;

  RunSummary summary;
  summary.points = static_cast<int>(points.size());
  summary.table.columns = sweep_columns(sweep);
  const ResultFormat format = options.out.empty() ? ResultFormat::csv : result_format(options.out, "--out");
  const int out_fd = options.out.empty() ? -1 : open_output(options, summary.table.columns, by_id, summary);
  summary.resumed = static_cast<int>(summary.table.rows.size());

  std::map<std::string, bool> done_ids;
  for (const auto& row : summary.table.rows) done_ids[row[0]] = true;
  std::vector<int> shared, own;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (done_ids.count(points[i].id)) continue;
    (needs_own_process(sweep, points[i]) ? own : shared).push_back(static_cast<int>(i));
  }
  const int jobs = std::max(1, options.jobs);
  std::deque<std::vector<int>> tasks;
  const std::size_t slices = std::min<std::size_t>(static_cast<std::size_t>(jobs), shared.size());
  // Interleaved shares: neighbouring points (one size, several algorithms) cost alike.
  for (std::size_t s = 0; s < slices; ++s) {
    std::vector<int> task;
    for (std::size_t i = s; i < shared.size(); i += slices) task.push_back(shared[i]);
    tasks.push_back(std::move(task));
  }
  for (int i : own) tasks.push_back({i});

  const auto start = std::chrono::steady_clock::now();
  int done = summary.resumed;
  ProgressBar progress(options.progress, summary.points);
  progress.update(done, true);
  try {
    Scheduler(sweep, points, jobs, options.point_time_limit, format, out_fd, summary.table.columns, summary.table,
              progress, done)
        .run(std::move(tasks));
  } catch (...) {
    if (out_fd >= 0) ::close(out_fd);
    throw;
  }
  progress.finish(done);
  if (out_fd >= 0) ::close(out_fd);
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  summary.evaluated = done - summary.resumed;
  // Keyed once: looking ids up inside the comparison cost more than the points' evaluation.
  std::vector<std::pair<int, std::vector<std::string>>> keyed;
  for (auto& row : summary.table.rows) keyed.emplace_back(by_id.at(row[0])->index, std::move(row));
  std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t i = 0; i < keyed.size(); ++i) summary.table.rows[i] = std::move(keyed[i].second);
  const int error_col = summary.table.column("error");
  for (const auto& row : summary.table.rows) summary.failed += row[error_col].empty() ? 0 : 1;
  return summary;
}

}  // namespace stepsim::sweep
