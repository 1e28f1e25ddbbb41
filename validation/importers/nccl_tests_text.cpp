#include "validation/importers/nccl_tests_text.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace stepsim::validation::nccl_tests_text {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool is_word_char(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

bool word_boundary(const std::string& text, std::size_t pos) {
  const bool word_before = pos > 0 && pos <= text.size() && is_word_char(text[pos - 1]);
  const bool word_after = pos < text.size() && is_word_char(text[pos]);
  return word_before != word_after;
}

bool has_at(const std::string& text, std::size_t pos, std::string_view literal) {
  if (pos > text.size() || text.size() - pos < literal.size()) return false;
  // A loop rather than memcmp: it is called at every position of a line, and the sanitizers'
  // memcmp interceptor costs more than the few characters compared.
  for (std::size_t i = 0; i < literal.size(); ++i)
    if (text[pos + i] != literal[i]) return false;
  return true;
}

namespace {

template <class InClass>
std::size_t skip_run(const std::string& text, std::size_t pos, InClass in_class) {
  while (pos < text.size() && in_class(text[pos])) ++pos;
  return pos;
}

}  // namespace

std::size_t skip_spaces(const std::string& text, std::size_t pos) { return skip_run(text, pos, is_space); }

std::size_t skip_digits(const std::string& text, std::size_t pos) { return skip_run(text, pos, is_digit); }

std::size_t skip_non_spaces(const std::string& text, std::size_t pos) {
  return skip_run(text, pos, [](char c) { return !is_space(c); });
}

namespace {

/// Where "\.\d+" starting at `pos` ends (".5" of "1.5"); `pos` when there is none.
std::size_t skip_fraction(const std::string& text, std::size_t pos) {
  if (!has_at(text, pos, ".")) return pos;
  const std::size_t end = skip_digits(text, pos + 1);
  return end > pos + 1 ? end : pos;
}

/// Where \d+(?:\.\d+)? starting at `pos` ends ("8", "1.5"); npos when no digit is there.
std::size_t decimal_end(const std::string& text, std::size_t pos) {
  const std::size_t end = skip_digits(text, pos);
  return end > pos ? skip_fraction(text, end) : std::string::npos;
}

/// Where a version of up to three numbers starting at `pos` ends ("2.18", "2.18.5"): npos when
/// fewer than `min_parts` numbers are there. Each number takes all its digits, as \d+ does.
std::size_t version_end(const std::string& text, std::size_t pos, int min_parts) {
  std::size_t end = skip_digits(text, pos);
  if (end == pos) return std::string::npos;
  int parts = 1;
  for (std::size_t next; parts < 3 && (next = skip_fraction(text, end)) > end; end = next) ++parts;
  return parts >= min_parts ? end : std::string::npos;
}

/// Where the first run of digits that `matches` (given its start) begins, npos when none does.
/// This is std::regex_search of a regex that starts with \d+: it matches first at the start of
/// a run or nowhere in it, as a start inside the run meets the same end of it and the same rest.
template <class Matches>
std::size_t first_digit_run(const std::string& text, Matches matches) {
  for (std::size_t pos = 0; pos < text.size(); ++pos)
    if (is_digit(text[pos]) && (pos == 0 || !is_digit(text[pos - 1])) && matches(pos)) return pos;
  return std::string::npos;
}

/// The digits from `start` on ("8" of "8x").
std::string digits_from(const std::string& text, std::size_t start) {
  return text.substr(start, skip_digits(text, start) - start);
}

}  // namespace

std::string trim(const std::string& text) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

namespace {

/// Length of the tag ^(\d+:\s?|\[\d+,\d+\]<stdout>:) at the start of a line, 0 when none.
std::size_t tag_length(const std::string& line) {
  const std::size_t digits = skip_digits(line, 0);
  if (digits > 0) {  // "0: " (srun), one space or none
    if (!has_at(line, digits, ":")) return 0;
    return digits + 1 < line.size() && is_space(line[digits + 1]) ? digits + 2 : digits + 1;
  }
  if (!has_at(line, 0, "[")) return 0;  // "[1,0]<stdout>:" (Open MPI)
  const std::size_t job = skip_digits(line, 1);
  if (job == 1 || !has_at(line, job, ",")) return 0;
  const std::size_t rank = skip_digits(line, job + 1);
  const std::string_view rest = "]<stdout>:";
  if (rank == job + 1 || !has_at(line, rank, rest)) return 0;
  return rank + rest.size();
}

}  // namespace

std::string strip_prefix(const std::string& line) { return line.substr(tag_length(line)); }

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

std::vector<std::string> split_cells(const std::string& row) {
  std::string inner = row;
  inner.erase(0, inner.find_first_not_of('|'));
  inner.erase(inner.find_last_not_of('|') + 1);
  std::vector<std::string> cells;
  std::size_t start = 0;
  for (std::size_t bar; (bar = inner.find('|', start)) != std::string::npos; start = bar + 1)
    cells.push_back(trim(inner.substr(start, bar - start)));
  cells.push_back(trim(inner.substr(start)));
  return cells;
}

std::optional<double> parse_plain_number(const std::string& token) {
  std::string text = token;
  text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

int bounded_count(const std::string& digits) {
  if (digits.empty() || digits.size() > 6 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return -1;
  return std::stoi(digits);
}

std::optional<double> leading_number(const std::string& cell) {
  std::string text = trim(cell);
  text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
  const std::size_t end = decimal_end(text, 0);
  if (end == std::string::npos) return std::nullopt;
  return parse_plain_number(text.substr(0, end));
}

std::optional<double> parse_size_label(const std::string& label) {
  std::string text = trim(label);
  text.erase(std::remove_if(text.begin(), text.end(), [](char c) { return c == '_' || c == ','; }), text.end());
  // The whole label is ([0-9.]+)\s*([KMGkmg]?)(i?[Bb]?): a number, spaces, a unit letter, an
  // 'i' for binary units, a 'B'. No part can take a character of the next, so each takes all it can.
  const std::size_t number_end = skip_run(text, 0, [](char c) { return is_digit(c) || c == '.'; });
  if (number_end == 0) return std::nullopt;
  std::size_t pos = skip_spaces(text, number_end);
  char unit = 0;
  if (pos < text.size() && std::string_view("KMGkmg").find(text[pos]) != std::string_view::npos) unit = text[pos++];
  const bool binary = has_at(text, pos, "i");
  if (binary) ++pos;
  if (has_at(text, pos, "B") || has_at(text, pos, "b")) ++pos;
  if (pos != text.size()) return std::nullopt;
  const std::optional<double> parsed = parse_plain_number(text.substr(0, number_end));
  if (!parsed) return std::nullopt;
  const double value = *parsed;
  if (unit == 0) return value;
  const char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(unit)));
  const int power = lower == 'k' ? 1 : lower == 'm' ? 2 : 3;
  if (binary) return value * std::pow(1024.0, power);
  return std::pow(2.0, std::round(std::log2(value * std::pow(1000.0, power))));
}

std::string dtype_name(const std::string& type) {
  static const std::map<std::string, std::string> names = {
      {"float", "float32"}, {"double", "float64"}, {"half", "float16"}, {"bfloat16", "bfloat16"},
      {"int8", "int8"},     {"uint8", "uint8"},    {"int32", "int32"},  {"uint32", "uint32"},
      {"int64", "int64"},   {"uint64", "uint64"}};
  auto it = names.find(type);
  return it == names.end() ? type : it->second;
}

std::string op_from_perf(const std::string& text) {
  // The leftmost "<binary>_perf"; at one position "reduce_scatter" is tried before "reduce".
  if (text.find("_perf") == std::string::npos) return "";  // most lines name no binary
  static const std::vector<std::string_view> binaries = {"all_reduce", "all_gather", "reduce_scatter", "broadcast",
                                                         "reduce",     "alltoall",   "sendrecv"};
  for (std::size_t pos = 0; pos < text.size(); ++pos)
    for (std::string_view binary : binaries)
      if (has_at(text, pos, binary) && has_at(text, pos + binary.size(), "_perf"))
        return op_from_words(std::string(binary));
  return "";
}

std::string op_from_words(const std::string& text) {
  // Longest names first, so "reduce_scatter" is not read as "reduce".
  static const std::vector<std::pair<std::string, std::string>> names = {
      {"reduce_scatter", "reduce_scatter"}, {"reduce-scatter", "reduce_scatter"}, {"all_reduce", "allreduce"},
      {"all-reduce", "allreduce"},          {"all_gather", "allgather"},         {"all-gather", "allgather"},
      {"broadcast", "broadcast"},           {"alltoall", "alltoall"},            {"sendrecv", "sendrecv"},
      {"reduce", "reduce"}};
  for (const auto& [word, op] : names)
    if (text.find(word) != std::string::npos) return op;
  return "";
}

std::string op_from_file_name(const std::string& path) {
  const std::string name = lowercase(path.substr(path.find_last_of('/') + 1));
  static const std::vector<std::pair<std::string, std::string>> names = {
      {"allreduce", "allreduce"}, {"all_reduce", "allreduce"}, {"allgather", "allgather"},
      {"all_gather", "allgather"}, {"reducescatter", "reduce_scatter"}, {"reduce_scatter", "reduce_scatter"},
      {"alltoall", "alltoall"}, {"broadcast", "broadcast"}, {"sendrecv", "sendrecv"}};
  for (const auto& [word, op] : names)
    if (name.find(word) != std::string::npos) return op;
  return "";
}

double busbw_factor(const std::string& op, int ranks) {
  if (ranks < 1) return 1;
  const double n = ranks;
  if (op == "allreduce") return 2 * (n - 1) / n;
  if (op == "allgather" || op == "reduce_scatter" || op == "alltoall") return (n - 1) / n;
  return 1;
}

int ranks_from_bandwidths(const std::string& op, double ratio) {
  double n = 0;
  if (op == "allreduce" && ratio < 2) n = 2 / (2 - ratio);
  else if ((op == "allgather" || op == "reduce_scatter" || op == "alltoall") && ratio < 1) n = 1 / (1 - ratio);
  // Bandwidths are printed with two decimals: accept a quarter rank of rounding error.
  if (!(n >= 1.75) || std::abs(n - std::round(n)) > 0.25) return 0;
  return static_cast<int>(std::round(n));
}

namespace {

/// Where a GPU model written at `pos` ends: \b(GB200|...|MI250X|RTX ?\d{4}(?: ?Ti)?)\b with the
/// \b before `pos` checked by the caller; npos when none is.
std::size_t gpu_model_end(const std::string& line, std::size_t pos) {
  static const std::vector<std::string_view> models = {"GB200", "GB300", "B200", "B300", "B100", "H200", "H100", "H800",
                                                       "A100",  "A800",  "V100", "P100", "L40S", "MI300X", "MI250X"};
  // Their first letters (and RTX's): most positions of a line start none of them.
  if (pos >= line.size() || std::string_view("GBHAVPLMR").find(line[pos]) == std::string_view::npos)
    return std::string::npos;
  for (std::string_view model : models)
    if (has_at(line, pos, model) && word_boundary(line, pos + model.size())) return pos + model.size();
  if (!has_at(line, pos, "RTX")) return std::string::npos;
  const std::size_t digits = has_at(line, pos + 3, " ") ? pos + 4 : pos + 3;  // "RTX 2080", "RTX2080"
  if (skip_digits(line, digits) < digits + 4) return std::string::npos;
  const std::size_t end = digits + 4;
  for (std::string_view ti : {" Ti", "Ti"})
    if (has_at(line, end, ti) && word_boundary(line, end + ti.size())) return end + ti.size();
  return word_boundary(line, end) ? end : std::string::npos;
}

/// `lower` (lower-case) is written at `pos` of `text` in any case, as std::regex::icase compares.
bool has_at_any_case(const std::string& text, std::size_t pos, std::string_view lower) {
  if (pos > text.size() || text.size() - pos < lower.size()) return false;
  for (std::size_t i = 0; i < lower.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(text[pos + i])) != lower[i]) return false;
  return true;
}

/// The AWS instance written at `pos`, in any case: (p4de|p4d|p5en|p5e|p5|p6-b200|p6e-gb200)\b,
/// tried in that order; "" when none is.
std::string instance_at(const std::string& line, std::size_t pos) {
  static const std::vector<std::string_view> instances = {"p4de", "p4d", "p5en", "p5e", "p5", "p6-b200", "p6e-gb200"};
  if (pos >= line.size() || (line[pos] != 'p' && line[pos] != 'P')) return "";
  for (std::string_view instance : instances)
    if (has_at_any_case(line, pos, instance) && word_boundary(line, pos + instance.size()))
      return std::string(instance);
  return "";
}

}  // namespace

std::string system_token(const std::string& line) {
  // The leftmost GPU model, else the leftmost instance, each with a word boundary before it.
  for (std::size_t pos = 0; pos < line.size(); ++pos)
    if (word_boundary(line, pos))
      if (const std::size_t end = gpu_model_end(line, pos); end != std::string::npos)
        return line.substr(pos, end - pos);
  for (std::size_t pos = 0; pos < line.size(); ++pos)
    if (word_boundary(line, pos))
      if (std::string instance = instance_at(line, pos); !instance.empty()) return instance;
  return "";
}

std::string tool_token(const std::string& line) {
  if (line.find("all_reduce_bench") != std::string::npos || line.find("torch.distributed") != std::string::npos)
    return "torch.distributed";
  if (line.find("nccl-tests") != std::string::npos || line.find("_perf") != std::string::npos) return "nccl-tests";
  return "";
}

std::string slug(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c)) out += static_cast<char>(std::tolower(c));
    else if (!out.empty() && out.back() != '-') out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

int per_node_gpus(const std::string& prose) {
  // (\d+)x\s+\S+\s+per node: each run of spaces or non-spaces is followed by the other kind,
  // so each takes all it can.
  const std::size_t start = first_digit_run(prose, [&](std::size_t digits) {
    const std::size_t x = skip_digits(prose, digits);
    if (!has_at(prose, x, "x")) return false;
    const std::size_t gpu = skip_spaces(prose, x + 1), gpu_end = skip_non_spaces(prose, gpu);
    const std::size_t per = skip_spaces(prose, gpu_end);
    return gpu > x + 1 && gpu_end > gpu && per > gpu_end && has_at(prose, per, "per node");
  });
  const int count = start == std::string::npos ? -1 : bounded_count(digits_from(prose, start));
  return count > 0 ? count : 8;
}

std::optional<double> prose_payload(const std::string& prose) {
  // (\d+(?:\.\d+)?)\s?(KiB|MiB|GiB|TiB): "8GiB", "1.5 MiB". The power of 1024 of the unit
  // after the number at `start`, 0 when none is.
  auto unit_power = [&](std::size_t start) {
    static const std::vector<std::string_view> units = {"KiB", "MiB", "GiB", "TiB"};
    const std::size_t end = decimal_end(prose, start);
    const std::size_t unit = end < prose.size() && is_space(prose[end]) ? end + 1 : end;
    for (std::size_t i = 0; i < units.size(); ++i)
      if (has_at(prose, unit, units[i])) return static_cast<int>(i) + 1;
    return 0;
  };
  const std::size_t start = first_digit_run(prose, [&](std::size_t digits) { return unit_power(digits) > 0; });
  if (start == std::string::npos) return std::nullopt;
  const std::optional<double> value = parse_plain_number(prose.substr(start, decimal_end(prose, start) - start));
  if (!value) return std::nullopt;
  return *value * std::pow(1024.0, unit_power(start));
}

std::optional<int> prose_gpus(const std::string& prose) {
  const std::size_t start =  // (\d+) GPUs
      first_digit_run(prose, [&](std::size_t digits) { return has_at(prose, skip_digits(prose, digits), " GPUs"); });
  const int count = start == std::string::npos ? -1 : bounded_count(digits_from(prose, start));
  if (count < 0) return std::nullopt;
  return count;
}

namespace {

/// How one program's version is written: (?:KEY|KEY)v?(\d+\.\d+(?:\.\d+)?) and, for torch, a
/// local build after it (?:\+\w+)? ("2.4.0+cu121").
struct VersionPattern {
  std::string software;
  std::vector<std::string_view> keys;
  bool v_prefix = false;
  bool local_build = false;
};

/// The version of the leftmost key followed by one, "" when none is.
std::string find_version(const std::string& line, const VersionPattern& pattern) {
  for (std::size_t pos = 0; pos < line.size(); ++pos)
    for (std::string_view key : pattern.keys) {
      if (line[pos] != key.front() || !has_at(line, pos, key)) continue;
      std::size_t start = pos + key.size();
      if (pattern.v_prefix && has_at(line, start, "v")) ++start;
      std::size_t end = version_end(line, start, 2);
      if (end == std::string::npos) continue;
      if (pattern.local_build && has_at(line, end, "+")) {
        const std::size_t local = skip_run(line, end + 1, is_word_char);
        if (local > end + 1) end = local;
      }
      return line.substr(start, end - start);
    }
  return "";
}

/// Where a version X.Y.Z starting at `pos` ends, npos when none starts there.
std::size_t three_part_version_end(const std::string& text, std::size_t pos) { return version_end(text, pos, 3); }

}  // namespace

void read_versions(const std::string& line, std::map<std::string, std::string>& software) {
  static const std::vector<VersionPattern> patterns = {{"nccl", {"NCCL ", "nccl="}, true, false},
                                                       {"cuda", {"CUDA ", "cuda="}, true, false},
                                                       {"torch", {"torch="}, false, true},
                                                       {"driver", {"driver "}, false, false}};
  for (const VersionPattern& pattern : patterns)
    if (std::string version = find_version(line, pattern); !version.empty()) software[pattern.software] = version;
}

void read_log_versions(const std::string& line, std::map<std::string, std::string>& software) {
  if (const std::string library = capture_after(line, "nccl-library=", skip_digits); bounded_count(library) > 0) {
    // NCCL_VERSION_CODE: major*10000 + minor*100 + patch since 2.9, major*1000 + minor*100 + patch before.
    const int code = bounded_count(library);
    const int major = code >= 10000 ? code / 10000 : code / 1000;
    const int minor = code >= 10000 ? code % 10000 / 100 : code % 1000 / 100;
    software["nccl"] = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
  } else if (const std::string info = capture_after(line, "NCCL version ", three_part_version_end); !info.empty()) {
    software["nccl"] = info;
  }
}

}  // namespace stepsim::validation::nccl_tests_text
