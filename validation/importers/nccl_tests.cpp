// Port of the parser of tools/nccl-tests-compare (parse_file, markdown_row): tables are found by
// their column names, so nccl-tests output of any version (2019-era "error" columns, the
// "#wrong" columns, columns massaged away by a blog author) and the markdown tables of write-ups
// read the same way. What the Python script took from its DATASETS table (ranks of logs without
// Rank lines, the system of each table) is read from the log itself here: the rank count from
// busbw/algbw (nccl-tests' busbw factor), the system from Rank lines, a spec table or the text
// above the table.
#include "validation/importers/nccl_tests.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "platforms/config_error.hpp"
#include "platforms/yaml_reader.hpp"
#include "validation/importers/nccl_tests_text.hpp"

namespace stepsim::validation {
namespace {

using namespace nccl_tests_text;

/// One measured point before it becomes a Measurement.
struct Point {
  int line = 0;
  std::string op;
  int ranks = 0;  ///< 0 = not known yet (text tables infer it when the table ends)
  int nodes = 0;  ///< 0 = not stated
  std::vector<std::string> params;
  double size = 0;
  std::string dtype;
  bool in_place = false;
  double time_s = 0;
  std::optional<double> algbw, busbw;
};

/// One table of the log with what was known about it where it started.
struct Table {
  int line = 0;
  std::string gpu;   ///< driver's GPU name (Rank lines, spec table), "" = not printed
  std::string hint;  ///< system token of the text above the table ("A100", "p4de")
  std::string tool;
  std::map<std::string, std::string> software;
  int gpus_flag = 0;
  bool time_derived = false;   ///< time_s computed from a bandwidth column
  bool op_assumed = false;     ///< a markdown busbw column with no collective named: allreduce
  bool ranks_inferred = false;
  std::vector<Point> points;
};

/// What the scan knows at the current line. Python's parse_file keeps the same variables.
struct Scan {
  // Reset at each section marker ("# ====", "## ---").
  std::string op;
  int rank_count = 0;
  std::set<std::string> hosts;
  std::string rank_gpu, spec_gpu;
  int per_thread = 1;
  std::string hint, tool_hint, prose;
  std::map<std::string, std::string> section_software;
  // Kept for the whole file.
  std::string origin;
  std::vector<int> long_lines;  ///< lines skipped for their length
  int gpus_flag = 0;
  std::string default_op, tests_version;
  std::map<std::string, std::string> file_software;
  // Tables.
  std::vector<std::string> header;  ///< nccl-tests column names; empty = not in a table
  int text_table = -1, md_table = -1;
  std::vector<std::string> md_header;
  std::vector<std::string> md_header_lower;   ///< md_header in lower case, once per table
  std::vector<Table> tables;

  void new_section() {
    op.clear();
    rank_count = 0;
    hosts.clear();
    rank_gpu.clear();
    spec_gpu.clear();
    per_thread = 1;
    hint.clear();
    tool_hint.clear();
    prose.clear();
    section_software.clear();
    end_tables();
  }
  void end_tables() {
    header.clear();
    text_table = md_table = -1;
    md_header.clear();
    md_header_lower.clear();
  }
  Table& open_table(int line) {
    Table table;
    table.line = line;
    table.gpu = rank_gpu.empty() ? spec_gpu : rank_gpu;
    table.hint = hint;
    table.tool = tool_hint.empty() ? (tests_version.empty() ? "nccl-tests" : "nccl-tests " + tests_version) : tool_hint;
    table.software = file_software;
    for (const auto& [name, version] : section_software) table.software[name] = version;
    table.gpus_flag = gpus_flag;
    tables.push_back(table);
    return tables.back();
  }
};

// The limit on what a row may state: beyond it a value is a typo or a corrupted log.
constexpr double kMaxSizeBytes = 1125899906842624.0;  // 1 PiB

[[noreturn]] void bad_row(const Scan& scan, int line, const std::string& what) {
  throw ConfigError(scan.origin + ": line " + std::to_string(line), what,
                    "correct or delete that row (nccl-tests prints sizes in bytes, times in us, bandwidths in GB/s)");
}

// A measured cell of a row: a finite number > 0 (>= 0 for a bandwidth, which small sizes print
// as 0.00), or nullopt for "N/A" (a run the version skips) and for a column the table lacks.
std::optional<double> measured_cell(const Scan& scan, const std::vector<std::string>& tokens, int index,
                                    const std::string& column, int line, const std::string& suffix = "") {
  const bool zero_allowed = column != "time";
  if (index < 0) return std::nullopt;
  if (index >= static_cast<int>(tokens.size()))
    bad_row(scan, line, "the row ends before its " + column + " column (" + std::to_string(tokens.size()) + " cells)");
  if (tokens[index] == "N/A") return std::nullopt;
  std::optional<double> value = parse_plain_number(tokens[index] + suffix);
  if (!value || !(*value > 0 || (zero_allowed && *value == 0)))
    bad_row(scan, line, column + " '" + tokens[index] + "' is not a " + (zero_allowed ? "number >= 0" : "positive number"));
  return value;
}

void read_text_row(Scan& scan, const std::vector<std::string>& tokens, int line) {
  const std::vector<std::string>& header = scan.header;
  auto column = [&](const std::string& name, int occurrence) {
    int seen = 0;
    for (std::size_t i = 0; i < header.size(); ++i)
      if (header[i] == name && seen++ == occurrence) return static_cast<int>(i);
    return -1;
  };
  const int size_col = std::max(0, column("size", 0));
  if (size_col >= static_cast<int>(tokens.size())) bad_row(scan, line, "the row ends before its size column");
  std::optional<double> size = parse_plain_number(tokens[size_col]);
  if (size && *size > kMaxSizeBytes) bad_row(scan, line, "size " + tokens[0] + " is beyond 1 PiB");
  // A zero-byte call measures only the launch, and nccl-tests prints it several times.
  if (!size || *size <= 0) return;
  const int type_col = column("type", 0);
  const std::string dtype = type_col >= 0 && type_col < static_cast<int>(tokens.size()) ? dtype_name(tokens[type_col]) : "";
  const int runs = column("time", 1) >= 0 ? 2 : 1;  // out-of-place, then in-place
  Table& table = scan.tables[scan.text_table];
  for (int run = 0; run < runs; ++run) {
    // The printed microseconds read with an exponent: "43.83e-6" is the double nearest to the
    // printed time, where 43.83 * 1e-6 would add a rounding error.
    std::optional<double> time_s = measured_cell(scan, tokens, column("time", run), "time", line, "e-6");
    if (!time_s) continue;
    Point point;
    point.line = line;
    point.op = scan.op.empty() ? scan.default_op : scan.op;
    point.ranks = scan.rank_count;
    point.nodes = static_cast<int>(scan.hosts.size());
    if (scan.per_thread > 1) point.params.push_back("gpus_per_thread=" + std::to_string(scan.per_thread));
    point.size = *size;
    point.dtype = dtype;
    point.in_place = run == 1;
    point.time_s = *time_s;
    point.algbw = measured_cell(scan, tokens, column("algbw", run), "algbw", line);
    point.busbw = measured_cell(scan, tokens, column("busbw", run), "busbw", line);
    table.points.push_back(point);
  }
}

/// The count of a markdown column named "(\d+) nodes?" ("2 nodes"), "" for another name.
std::string node_count(const std::string& column) {
  const std::size_t end = skip_digits(column, 0);
  const std::string_view rest = std::string_view(column).substr(end);
  return end > 0 && (rest == " node" || rest == " nodes") ? column.substr(0, end) : "";
}

/// Python's markdown_row: one markdown row as points, by column names.
void read_markdown_row(Scan& scan, const std::vector<std::string>& cells, int line) {
  const std::vector<std::string>& lower = scan.md_header_lower;
  auto col = [&](const std::string& name) {
    auto it = std::find(lower.begin(), lower.end(), name);
    return it == lower.end() ? -1 : static_cast<int>(it - lower.begin());
  };
  auto cell = [&](int i) { return i >= 0 && i < static_cast<int>(cells.size()) ? cells[i] : std::string(); };
  std::vector<Point> points;
  bool op_assumed = false;
  auto add = [&](const std::string& op, int ranks, int nodes, double size, double busbw, std::optional<double> algbw,
                 std::vector<std::string> params) {
    Point p;
    p.line = line;
    p.op = op;
    p.ranks = ranks;
    p.nodes = nodes;
    p.params = std::move(params);
    p.size = size;
    p.busbw = busbw;
    p.algbw = algbw;
    p.in_place = scan.prose.find("in-place") != std::string::npos;
    points.push_back(p);
  };

  int size_col = -1;
  for (std::size_t i = 0; i < lower.size() && size_col < 0; ++i)
    if (lower[i].find("size") != std::string::npos || lower[i] == "payload") size_col = static_cast<int>(i);
  const int fallback_ranks = scan.gpus_flag > 0 ? scan.gpus_flag : 8;
  if (size_col >= 0) {
    std::optional<double> size = parse_size_label(cell(size_col));
    if (!size) return;
    std::optional<double> algbw = leading_number(cell(col("algbw")));
    // Columns past the row's last cell hold nothing: a row costs its own cells, not the header's.
    for (std::size_t i = 0; i < std::min(lower.size(), cells.size()); ++i) {
      std::optional<double> v = leading_number(cell(static_cast<int>(i)));
      if (static_cast<int>(i) == size_col || !v) continue;
      if (lower[i].find("(gb/s)") != std::string::npos || lower[i] == "busbw") {
        op_assumed = op_assumed || scan.default_op.empty();
        add(scan.default_op.empty() ? "allreduce" : scan.default_op, fallback_ranks, 1, *size, *v, algbw, {});
      } else if (const std::string count = node_count(lower[i]); !count.empty()) {
        const int nodes = bounded_count(count);
        if (nodes > 0) add("allreduce", per_node_gpus(scan.prose) * nodes, nodes, *size, *v, std::nullopt, {});
      }
    }
  } else if (col("gpus") >= 0 && col("busbw") >= 0) {  // stas00 T4/T5: one payload at 4..8 GPUs
    std::optional<double> size = prose_payload(scan.prose);
    std::optional<double> gpus = leading_number(cell(col("gpus")));
    if (!size || !gpus || *gpus > 1 << 20) return;
    for (const auto& [key, params] : {std::pair<std::string, std::vector<std::string>>{"busbw", {}},
                                      {"busbw, nvls off", {"nvls=off"}}}) {
      std::optional<double> v = leading_number(cell(col(key)));
      if (v) add("allreduce", static_cast<int>(*gpus), 1, *size, *v, std::nullopt, params);
    }
  } else if (col("collective") >= 0 && col("busbw") >= 0) {  // stas00 T6: one payload, several ops
    std::string text = lowercase(cell(col("collective")));
    text.erase(std::remove(text.begin(), text.end(), '`'), text.end());
    std::optional<double> size = prose_payload(scan.prose);
    std::optional<double> busbw = leading_number(cell(col("busbw")));
    std::string op = op_from_words(text);
    if (!size || !busbw || op.empty()) return;
    std::vector<std::string> params;
    if (text.find("nccl_nvls_enable=0") != std::string::npos) params.push_back("nvls=off");
    add(op, prose_gpus(scan.prose).value_or(fallback_ranks), 1, *size, *busbw, std::nullopt, params);
  }
  if (points.empty()) return;
  if (scan.md_table < 0) {
    scan.open_table(line);
    scan.md_table = static_cast<int>(scan.tables.size()) - 1;
  }
  Table& table = scan.tables[scan.md_table];
  table.op_assumed = table.op_assumed || op_assumed;
  for (Point& p : points) {
    // Markdown tables print bandwidths only: time = size / algbw, algbw = busbw / factor.
    double algbw = p.algbw && *p.algbw > 0 ? *p.algbw : (*p.busbw > 0 ? *p.busbw / busbw_factor(p.op, p.ranks) : 0);
    if (algbw <= 0) continue;
    p.time_s = p.size / (algbw * 1e9);
    table.time_derived = true;
    table.points.push_back(p);
  }
}

/// Two-column "| GPU | NVIDIA H100 80GB HBM3 |" rows of a system-specification table.
bool read_spec_row(Scan& scan, const std::vector<std::string>& cells) {
  if (cells.size() != 2) return false;
  static const std::map<std::string, std::string> keys = {
      {"gpu", "gpu"}, {"cuda", "cuda"}, {"nvidia driver", "driver"}, {"driver", "driver"},
      {"nccl", "nccl"}, {"pytorch", "torch"}, {"torch", "torch"}};
  auto it = keys.find(lowercase(cells[0]));
  if (it == keys.end() || cells[1].empty()) return false;
  if (it->second == "gpu") scan.spec_gpu = cells[1];
  else scan.section_software[it->second] = cells[1];
  return true;
}

/// Fills the rank count of a text table that printed no Rank lines; false when it cannot.
bool finish_ranks(Table& table) {
  if (table.points.empty() || table.points.front().ranks > 0) return true;
  int ranks = 0;
  const Point* largest = nullptr;
  for (const Point& p : table.points)
    if (p.algbw && p.busbw && *p.algbw > 0 && *p.busbw > 0 && (!largest || p.size > largest->size)) largest = &p;
  if (largest) ranks = ranks_from_bandwidths(largest->op, *largest->busbw / *largest->algbw);
  if (ranks > 0) table.ranks_inferred = true;
  else ranks = table.gpus_flag;
  if (ranks <= 0) return false;
  for (Point& p : table.points) p.ranks = ranks;
  return true;
}

Measurement to_measurement(const Point& p) {
  Measurement m;
  m.kind = "collective";
  m.line = p.line;
  m.time_s = p.time_s;
  m.texts["op"] = p.op;
  if (!p.dtype.empty()) m.texts["dtype"] = p.dtype;
  if (p.in_place) m.texts["in_place"] = "true";
  m.numbers["size_bytes"] = p.size;
  m.numbers["ranks"] = p.ranks;
  if (p.nodes > 0) m.numbers["nodes"] = p.nodes;
  if (p.busbw) m.numbers["busbw_GBps"] = *p.busbw;
  if (p.algbw) m.numbers["algbw_GBps"] = *p.algbw;
  m.params = p.params;
  return m;
}

/// What a "#  Rank  0 Group  0 Pid 1 on host device  0 [0x07] NVIDIA H100" line names.
struct RankLine {
  std::string rank, host;
  std::string gpu;  ///< "" when the line ends after "device" or names no GPU after the bus id
};

/// The last " on" in [from, to) after which `rest_matches` (given its position), npos when none.
template <class RestMatches>
std::size_t last_on(const std::string& s, std::size_t from, std::size_t to, RestMatches rest_matches) {
  for (std::size_t end = to; end > from;) {
    const std::size_t on = s.rfind(" on", end - 1);
    if (on == std::string::npos || on < from) break;
    if (rest_matches(on)) return on;
    end = on;
  }
  return std::string::npos;
}

/// " on\s+(\S+)\s+device" at `on`: the host, and where "device" ends; nullopt when it is not there.
std::optional<std::pair<std::string, std::size_t>> host_before_device(const std::string& s, std::size_t on) {
  if (!has_at(s, on, " on")) return std::nullopt;
  const std::size_t host = skip_spaces(s, on + 3), host_end = skip_non_spaces(s, host);
  const std::size_t device = skip_spaces(s, host_end);
  if (host == on + 3 || host_end == host || device == host_end || !has_at(s, device, "device")) return std::nullopt;
  return std::make_pair(s.substr(host, host_end - host), device + 6);
}

/// A Rank line: ^#\s+Rank\s+(\d+).* on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s+(.*\S), or failing that
/// ^#\s+Rank\s+(\d+).* on\s+(\S+)\s+device. Each run of spaces, non-spaces or digits in them is
/// followed by a character it cannot take, so it takes all it can. The `.*` after the rank takes
/// all it can up to a line terminator and gives back from the right: the last " on" before one
/// that the rest matches after is the one std::regex settles on.
std::optional<RankLine> read_rank_line(const std::string& s) {
  if (!has_at(s, 0, "#")) return std::nullopt;
  const std::size_t word = skip_spaces(s, 1);
  const std::size_t rank = skip_spaces(s, word + 4), rank_end = skip_digits(s, rank);
  if (word == 1 || !has_at(s, word, "Rank") || rank == word + 4 || rank_end == rank) return std::nullopt;
  const std::size_t reach = std::min(s.find_first_of("\r\n", rank_end), s.size());
  RankLine result;
  result.rank = s.substr(rank, rank_end - rank);
  // The first ']' after a candidate's '['. Candidates come right to left: when a '[' lies before
  // the one of the last candidate that failed and no ']' lies between them, both meet the same
  // ']' and fail alike, so each search stops there and every character is read once.
  std::size_t failed_open = std::string::npos;
  auto gpu_after_device = [&](std::size_t device_end) {
    const std::size_t id = skip_spaces(s, device_end), id_end = skip_digits(s, id);
    const std::size_t open = skip_spaces(s, id_end);
    if (id == device_end || id_end == id || open == id_end || !has_at(s, open, "[")) return false;
    const std::size_t limit = open < failed_open ? failed_open : s.size();
    const std::size_t close = std::string_view(s).substr(0, limit).find(']', open + 1);
    const std::size_t gpu = close == std::string::npos ? s.size() : skip_spaces(s, close + 1);
    if (gpu == s.size() || gpu == close + 1) {
      failed_open = open;
      return false;
    }
    // (.*\S): up to a line terminator, without the spaces before it.
    std::size_t gpu_end = std::min(s.find_first_of("\r\n", gpu), s.size());
    while (is_space(s[gpu_end - 1])) --gpu_end;
    result.gpu = s.substr(gpu, gpu_end - gpu);
    return true;
  };
  const std::size_t full = last_on(s, rank_end, reach, [&](std::size_t on) {
    const auto host = host_before_device(s, on);
    return host && gpu_after_device(host->second);
  });
  auto short_form = [&](std::size_t on) { return host_before_device(s, on).has_value(); };
  const std::size_t on = full != std::string::npos ? full : last_on(s, rank_end, reach, short_form);
  if (on == std::string::npos) return std::nullopt;
  result.host = host_before_device(s, on)->first;
  return result;
}

/// (\d+) after "nThread " and " nGpus " of an nccl-tests header ("nThread 1 nGpus 8").
std::optional<std::pair<std::string, std::string>> threads_and_gpus(const std::string& s) {
  const std::string_view key = "nThread ", middle = " nGpus ";
  for (std::size_t pos = s.find(key); pos != std::string::npos; pos = s.find(key, pos + 1)) {
    const std::size_t threads = pos + key.size(), threads_end = skip_digits(s, threads);
    const std::size_t gpus = threads_end + middle.size(), gpus_end = skip_digits(s, gpus);
    if (threads_end > threads && has_at(s, threads_end, middle) && gpus_end > gpus)
      return std::make_pair(s.substr(threads, threads_end - threads), s.substr(gpus, gpus_end - gpus));
  }
  return std::nullopt;
}

/// The count of nccl-tests' -g flag, -g\s?(\d+)\b ("-g 8", "-g8"); "" when none.
std::string g_flag(const std::string& s) {
  for (std::size_t pos = s.find("-g"); pos != std::string::npos; pos = s.find("-g", pos + 1)) {
    const std::size_t digits = pos + 2 < s.size() && is_space(s[pos + 2]) ? pos + 3 : pos + 2;
    const std::size_t end = skip_digits(s, digits);
    if (end > digits && word_boundary(s, end)) return s.substr(digits, end - digits);
  }
  return "";
}

/// torchrun's GPUs per node, --nproc_per_node[= ](\d+); "" when none.
std::string nproc_per_node(const std::string& s) {
  const std::string_view key = "--nproc_per_node";
  for (std::size_t pos = s.find(key); pos != std::string::npos; pos = s.find(key, pos + 1)) {
    const std::size_t digits = pos + key.size() + 1, end = skip_digits(s, digits);
    if ((has_at(s, digits - 1, "=") || has_at(s, digits - 1, " ")) && end > digits)
      return s.substr(digits, end - digits);
  }
  return "";
}

/// ":?-+:?", a cell of a markdown rule row ("---", ":--:").
bool is_rule_cell(const std::string& cell) {
  const std::size_t begin = has_at(cell, 0, ":") ? 1 : 0;
  const std::size_t end = cell.size() > begin && cell.back() == ':' ? cell.size() - 1 : cell.size();
  return end > begin && std::all_of(cell.begin() + begin, cell.begin() + end, [](char c) { return c == '-'; });
}

// Longer lines are skipped (and named in the notes): no nccl-tests row, header or markdown
// row comes near it, and the bound keeps what is kept of a line per table (the markdown
// header's names, the prose before a table) small.
constexpr std::size_t kMaxLineLength = 2048;

void scan_line(Scan& scan, const std::string& raw, int line) {
  if (raw.size() > kMaxLineLength) {
    scan.long_lines.push_back(line);
    return;
  }
  const std::string s = trim(strip_prefix(raw));
  if (s.rfind("# ====", 0) == 0 || s.rfind("## ---", 0) == 0) {
    scan.new_section();
    return;
  }
  const bool comment = !s.empty() && s[0] == '#';
  if (has_at(s, 0, "#") && has_at(s, skip_spaces(s, 1), "software:")) read_versions(s, scan.file_software);

  std::string found = op_from_perf(s);
  if (!found.empty() && (s.find("Running:") != std::string::npos || s.find("starting") != std::string::npos ||
                         s.rfind("root@", 0) == 0 || s.rfind("$", 0) == 0)) {
    scan.op = found;
    scan.rank_count = 0;
    scan.hosts.clear();
    scan.end_tables();
  }
  if (const auto threads = threads_and_gpus(s)) {
    scan.rank_count = 0;
    scan.hosts.clear();
    const int threads_count = bounded_count(threads->first), gpus_count = bounded_count(threads->second);
    scan.gpus_flag = threads_count > 0 && gpus_count > 0 ? threads_count * gpus_count : 0;
    scan.per_thread = std::max(1, gpus_count);
  }
  if (const std::optional<RankLine> rank_line = read_rank_line(s)) {
    const int rank = bounded_count(rank_line->rank);
    if (rank >= 0) scan.rank_count = std::max(scan.rank_count, rank + 1);
    scan.hosts.insert(rank_line->host);
    if (!rank_line->gpu.empty()) scan.rank_gpu = rank_line->gpu;
    return;
  }
  if (const std::string gpus = comment && s.find("perf") != std::string::npos ? g_flag(s) : ""; !gpus.empty())
    scan.gpus_flag = std::max(0, bounded_count(gpus));
  if (const std::string gpus = nproc_per_node(s); !gpus.empty()) scan.gpus_flag = std::max(0, bounded_count(gpus));
  if (std::string version = capture_after(s, "nccl-tests version ", skip_non_spaces); !version.empty())
    scan.tests_version = version;
  if (comment || s.find("NCCL version") != std::string::npos) read_log_versions(s, scan.section_software);

  std::string body = s;
  body.erase(0, body.find_first_not_of('#'));
  const std::vector<std::string> tokens = split_words(body);
  auto has = [&](const char* name) { return std::find(tokens.begin(), tokens.end(), name) != tokens.end(); };
  if (has("size") && has("busbw") && has("time") && s[0] != '|') {  // nccl-tests column header, any version
    scan.header = tokens;
    scan.open_table(line);
    scan.text_table = static_cast<int>(scan.tables.size()) - 1;
    return;
  }
  if (!scan.header.empty() && !comment && !tokens.empty()) {
    auto size_char = [](char c) { return is_digit(c) || c == '_'; };  // [0-9_]+, "1048_576"
    if (std::all_of(tokens[0].begin(), tokens[0].end(), size_char)) read_text_row(scan, tokens, line);
    else if (s.rfind("```", 0) == 0) scan.end_tables();
    return;
  }
  if (s.find("Avg bus bandwidth") != std::string::npos) scan.end_tables();
  if (!s.empty() && s[0] == '|') {
    const std::vector<std::string> cells = split_cells(s);
    if (scan.md_header.empty()) {
      scan.md_header = cells;
      scan.md_header_lower.clear();
      for (const std::string& name : cells) scan.md_header_lower.push_back(lowercase(name));
      read_spec_row(scan, cells);
      return;
    }
    if (std::all_of(cells.begin(), cells.end(), [](const std::string& c) { return c.empty() || is_rule_cell(c); }))
      return;
    if (!read_spec_row(scan, cells)) read_markdown_row(scan, cells, line);
    return;
  }
  scan.md_header.clear();
  scan.md_header_lower.clear();
  scan.md_table = -1;
  if (!s.empty() && !comment && s[0] != '`') {
    scan.prose = s;
    if (std::string hint = system_token(s); !hint.empty()) scan.hint = hint;
    if (std::string tool = tool_token(s); !tool.empty()) scan.tool_hint = tool == "nccl-tests" ? "" : tool;
    read_versions(s, scan.section_software);
  }
}

std::string system_of(const Table& table) {
  if (!table.gpu.empty()) {
    std::string token = system_token(table.gpu);
    return slug(token.empty() ? table.gpu : token);
  }
  return slug(table.hint);
}

}  // namespace

namespace {

// The op of a table whose log names none, read from busbw / algbw where only one op fits:
// allreduce's factor 2(n-1)/n is the only one above 1 (nccl-tests' PERFORMANCE.md). "" when the
// ratio fits several ops; `why` then names them.
std::string infer_op(const Table& table, std::string& why) {
  const Point* largest = nullptr;
  for (const Point& p : table.points)
    if (p.algbw && p.busbw && (!largest || p.size > largest->size)) largest = &p;
  if (!largest) {
    why = "the table prints no algbw and busbw to tell the collective by";
    return "";
  }
  const double ratio = *largest->busbw / *largest->algbw;
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", ratio);
  // Bandwidths are printed with two decimals: 1.02 leaves their rounding out.
  if (ratio > 1.02 && ranks_from_bandwidths("allreduce", ratio) > 0) {
    why = "busbw / algbw = " + std::string(text) + " > 1, which only allreduce gives";
    return "allreduce";
  }
  why = "busbw / algbw = " + std::string(text) +
        (ratio > 0.98 ? " fits broadcast, reduce, sendrecv and a 2-rank allreduce"
                      : " fits allgather, reduce_scatter and alltoall");
  return "";
}

}  // namespace

NcclTestsImport import_nccl_tests(const std::string& text, const std::string& origin, const std::string& platform,
                                  const std::string& op) {
  Scan scan;
  scan.origin = origin;
  scan.default_op = op.empty() ? op_from_file_name(origin) : op;
  std::istringstream lines(text);
  std::string raw;
  for (int line = 1; std::getline(lines, raw); ++line) scan_line(scan, raw, line);

  NcclTestsImport result;
  std::map<std::pair<std::string, std::string>, std::size_t> index;  // (system, tool) -> group
  std::vector<std::vector<const Table*>> members;
  const std::string where = origin + ": line ";
  for (int line : scan.long_lines)
    result.notes.push_back(where + std::to_string(line) + ": skipped: longer than " + std::to_string(kMaxLineLength) +
                           " characters, which no nccl-tests line is");
  bool op_missing = false;
  for (Table& table : scan.tables) {
    if (table.points.empty()) continue;
    if (table.points.front().op.empty()) {
      std::string why;
      const std::string inferred = infer_op(table, why);
      if (inferred.empty()) {
        result.notes.push_back(where + std::to_string(table.line) +
                               ": table skipped: no collective named (no *_perf command line, no op in the file name, no --op), and " +
                               why);
        op_missing = true;
        continue;
      }
      for (Point& p : table.points) p.op = inferred;
      result.notes.push_back(where + std::to_string(table.line) + ": collective inferred: " + inferred + " (" + why + ")");
    }
    if (!finish_ranks(table)) {
      result.notes.push_back(where + std::to_string(table.line) +
                             ": table skipped: the log prints no Rank lines, no -g flag and no algbw to infer the rank count");
      continue;
    }
    if (table.points.front().ranks < 2) {
      result.notes.push_back(where + std::to_string(table.line) + ": table skipped: a 1-rank run measures no collective");
      continue;
    }
    if (table.op_assumed)
      result.notes.push_back(where + std::to_string(table.line) +
                             ": collective assumed: allreduce (the write-up's busbw table names none; --op names it)");
    auto key = std::make_pair(system_of(table), table.tool.rfind("nccl-tests", 0) == 0 ? "nccl-tests" : table.tool);
    auto [it, added] = index.emplace(key, result.groups.size());
    if (added) {
      NcclTestsGroup group;
      group.system = key.first;
      group.tool = key.second;
      group.file.source.file = origin;
      group.file.system.platform = platform;
      result.groups.push_back(group);
      members.emplace_back();
    }
    members[it->second].push_back(&table);
  }
  if (result.groups.empty()) {
    std::string reasons;
    for (const std::string& note : result.notes) reasons += "; " + note.substr(origin.size() + 2);
    if (op_missing)
      throw ConfigError(origin, "no usable nccl-tests table" + reasons,
                        "name the collective with --op (allreduce, allgather, reduce_scatter, broadcast, reduce, "
                        "alltoall or sendrecv)");
    throw ConfigError(origin, "no usable nccl-tests table found" + reasons,
                      "pass the output of an nccl-tests binary (all_reduce_perf ...) with its column header "
                      "(size ... time algbw busbw), or a markdown table with size and busbw columns");
  }

  for (std::size_t g = 0; g < result.groups.size(); ++g) {
    MeasurementFile& file = result.groups[g].file;
    std::set<std::string> gpus, tools;
    bool inferred = false, derived = false, hinted = false;
    int max_nodes = 0;
    for (const Table* table : members[g]) {
      tools.insert(table->tool);
      if (!table->gpu.empty()) gpus.insert(table->gpu);
      hinted = hinted || (table->gpu.empty() && !table->hint.empty());
      inferred = inferred || table->ranks_inferred;
      derived = derived || table->time_derived;
      for (const auto& [name, version] : table->software) file.system.software.emplace(name, version);
      for (const Point& p : table->points) {
        file.measurements.push_back(to_measurement(p));
        file.system.gpus = std::max(file.system.gpus, p.ranks);
        max_nodes = std::max(max_nodes, p.nodes);
      }
    }
    file.system.nodes = std::max(1, max_nodes);
    if (gpus.size() == 1) file.system.gpu = *gpus.begin();
    file.source.tool = platforms::join({tools.begin(), tools.end()}, ", ");
    std::vector<std::string> notes = {"stepsim import nccl-tests: " + std::to_string(members[g].size()) + " table(s)"};
    if (hinted) notes.push_back("system named by the text above the tables ('" + result.groups[g].system + "')");
    if (inferred) notes.push_back("ranks inferred from busbw/algbw (the log prints no Rank lines)");
    if (derived) notes.push_back("time_s derived from the printed bandwidth (the table prints no time)");
    file.source.notes = platforms::join(notes, "; ");
  }
  return result;
}

MeasurementFile merge_nccl_tests_groups(const std::vector<NcclTestsGroup>& groups, const std::string& output) {
  if (groups.empty()) throw std::logic_error("merge_nccl_tests_groups: no groups");
  std::vector<std::string> kinds;
  for (const NcclTestsGroup& g : groups) {
    const std::string kind = (g.system.empty() ? "unknown system" : g.system) + " (" + g.tool + ")";
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) kinds.push_back(kind);
  }
  if (kinds.size() > 1)
    throw ConfigError(output, "the logs hold " + std::to_string(kinds.size()) + " systems or tools: " + platforms::join(kinds),
                      "pass -o DIR (a folder) to write one file per log and system");
  MeasurementFile merged = groups[0].file;
  std::vector<std::string> files = {merged.source.file}, notes = {merged.source.notes};
  for (std::size_t i = 1; i < groups.size(); ++i) {
    const MeasurementFile& next = groups[i].file;
    merged.measurements.insert(merged.measurements.end(), next.measurements.begin(), next.measurements.end());
    if (std::find(files.begin(), files.end(), next.source.file) == files.end()) files.push_back(next.source.file);
    if (std::find(notes.begin(), notes.end(), next.source.notes) == notes.end()) notes.push_back(next.source.notes);
    if (next.source.tool != merged.source.tool) merged.source.tool = groups[0].tool;
    if (next.system.gpu != merged.system.gpu) merged.system.gpu.clear();
    merged.system.gpus = std::max(merged.system.gpus, next.system.gpus);
    merged.system.nodes = std::max(merged.system.nodes, next.system.nodes);
    for (const auto& [name, version] : next.system.software) merged.system.software.emplace(name, version);
  }
  merged.source.file = platforms::join(files, " ");
  merged.source.notes = platforms::join(notes, " | ");
  return merged;
}

std::string nccl_tests_output_name(const std::string& log_path, const NcclTestsGroup& group, bool several) {
  std::string stem = log_path.substr(log_path.find_last_of('/') + 1);
  if (std::size_t dot = stem.rfind('.'); dot != std::string::npos && dot > 0) stem.resize(dot);
  if (!several) return stem + ".yaml";
  std::string name = stem + "-" + (group.system.empty() ? "unknown-system" : group.system);
  if (group.tool != "nccl-tests") name += "-" + slug(group.tool);
  return name + ".yaml";
}

}  // namespace stepsim::validation
