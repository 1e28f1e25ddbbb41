#include "validation/importers/nccl_tests_text.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <sstream>

namespace stepsim::validation::nccl_tests_text {

std::string trim(const std::string& text) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

std::string strip_prefix(const std::string& line) {
  static const std::regex prefix(R"(^(\d+:\s?|\[\d+,\d+\]<stdout>:))");
  return std::regex_replace(line, prefix, "", std::regex_constants::format_first_only);
}

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
  static const std::regex number(R"(^[0-9]+(\.[0-9]+)?)");
  std::smatch m;
  if (!std::regex_search(text, m, number)) return std::nullopt;
  return parse_plain_number(m[0]);
}

std::optional<double> parse_size_label(const std::string& label) {
  std::string text = trim(label);
  text.erase(std::remove_if(text.begin(), text.end(), [](char c) { return c == '_' || c == ','; }), text.end());
  static const std::regex size(R"(([0-9.]+)\s*([KMGkmg]?)(i?[Bb]?))");
  std::smatch m;
  if (!std::regex_match(text, m, size)) return std::nullopt;
  const std::optional<double> parsed = parse_plain_number(m[1]);
  if (!parsed) return std::nullopt;
  const double value = *parsed;
  const std::string unit = lowercase(m[2]);
  if (unit.empty()) return value;
  const int power = unit == "k" ? 1 : unit == "m" ? 2 : 3;
  if (!m[3].str().empty() && (m[3].str()[0] == 'i' || m[3].str()[0] == 'I')) return value * std::pow(1024.0, power);
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
  static const std::regex perf(R"((all_reduce|all_gather|reduce_scatter|broadcast|reduce|alltoall|sendrecv)_perf)");
  std::smatch m;
  if (!std::regex_search(text, m, perf)) return "";
  return op_from_words(m[1]);
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

std::string system_token(const std::string& line) {
  static const std::regex gpu(
      R"(\b(GB200|GB300|B200|B300|B100|H200|H100|H800|A100|A800|V100|P100|L40S|MI300X|MI250X|RTX ?\d{4}(?: ?Ti)?)\b)");
  static const std::regex instance(R"(\b(p4de|p4d|p5en|p5e|p5|p6-b200|p6e-gb200)\b)", std::regex::icase);
  std::smatch m;
  if (std::regex_search(line, m, gpu)) return m[1];
  if (std::regex_search(line, m, instance)) return lowercase(m[1]);
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
  static const std::regex per_node(R"((\d+)x\s+\S+\s+per node)");
  std::smatch m;
  const int count = std::regex_search(prose, m, per_node) ? bounded_count(m[1]) : -1;
  return count > 0 ? count : 8;
}

std::optional<double> prose_payload(const std::string& prose) {
  static const std::regex size(R"((\d+(?:\.\d+)?)\s?(KiB|MiB|GiB|TiB))");
  std::smatch m;
  if (!std::regex_search(prose, m, size)) return std::nullopt;
  const std::string unit = m[2];
  const int power = unit == "KiB" ? 1 : unit == "MiB" ? 2 : unit == "GiB" ? 3 : 4;
  const std::optional<double> value = parse_plain_number(m[1]);
  if (!value) return std::nullopt;
  return *value * std::pow(1024.0, power);
}

std::optional<int> prose_gpus(const std::string& prose) {
  static const std::regex gpus(R"((\d+) GPUs)");
  std::smatch m;
  if (!std::regex_search(prose, m, gpus)) return std::nullopt;
  const int count = bounded_count(m[1]);
  if (count < 0) return std::nullopt;
  return count;
}

void read_versions(const std::string& line, std::map<std::string, std::string>& software) {
  static const std::vector<std::pair<std::string, std::regex>> patterns = {
      {"nccl", std::regex(R"((?:NCCL |nccl=)v?(\d+\.\d+(?:\.\d+)?))")},
      {"cuda", std::regex(R"((?:CUDA |cuda=)v?(\d+\.\d+(?:\.\d+)?))")},
      {"torch", std::regex(R"(torch=(\d+\.\d+(?:\.\d+)?(?:\+\w+)?))")},
      {"driver", std::regex(R"(driver (\d+\.\d+(?:\.\d+)?))")}};
  std::smatch m;
  for (const auto& [name, pattern] : patterns)
    if (std::regex_search(line, m, pattern)) software[name] = m[1];
}

void read_log_versions(const std::string& line, std::map<std::string, std::string>& software) {
  static const std::regex library(R"(nccl-library=(\d+))");
  static const std::regex info(R"(NCCL version (\d+\.\d+\.\d+))");
  std::smatch m;
  if (std::regex_search(line, m, library) && bounded_count(m[1]) > 0) {
    // NCCL_VERSION_CODE: major*10000 + minor*100 + patch since 2.9, major*1000 + minor*100 + patch before.
    const int code = bounded_count(m[1]);
    const int major = code >= 10000 ? code / 10000 : code / 1000;
    const int minor = code >= 10000 ? code % 10000 / 100 : code % 1000 / 100;
    software["nccl"] = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
  } else if (std::regex_search(line, m, info)) {
    software["nccl"] = m[1];
  }
}

}  // namespace stepsim::validation::nccl_tests_text
