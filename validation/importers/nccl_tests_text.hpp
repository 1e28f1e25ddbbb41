#pragma once
/// @file Text helpers of the nccl-tests importer: cell and number parsing, op names, busbw
/// factors and the words of a log that name a system, a tool or a software version.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stepsim::validation::nccl_tests_text {

// Pieces of the hand-written matchers that read the log's lines. They replace std::regex, which
// takes about 10 ms per KiB under the sanitizers and recurses once per character; each keeps
// the character classes of std::regex (ECMAScript grammar, "C" locale) so that the matchers
// accept what the regular expressions did. Positions past the end of the text are no match.

/// @brief \s: space, tab, newline, vertical tab, form feed, carriage return.
bool is_space(char c);
/// @brief \d: an ASCII digit.
bool is_digit(char c);
/// @brief \w: an ASCII letter, digit or underscore.
bool is_word_char(char c);
/// @brief \b: a word character on exactly one side of `pos`.
bool word_boundary(const std::string& text, std::size_t pos);
/// @brief `literal` is written at `pos` of `text`.
bool has_at(const std::string& text, std::size_t pos, std::string_view literal);
/// @brief Where the run of \s (\d, \S) starting at `pos` ends; `pos` when there is none.
std::size_t skip_spaces(const std::string& text, std::size_t pos);
std::size_t skip_digits(const std::string& text, std::size_t pos);
std::size_t skip_non_spaces(const std::string& text, std::size_t pos);
/// @brief What `match_end` takes right after the first `key` where it takes anything, as a
/// search for key(...) captures it; "" when nowhere. `match_end(text, pos)` is where the match
/// from pos ends: pos or npos when there is none.
template <class MatchEnd>
std::string capture_after(const std::string& text, std::string_view key, MatchEnd match_end) {
  for (std::size_t pos = text.find(key); pos != std::string::npos; pos = text.find(key, pos + 1)) {
    const std::size_t start = pos + key.size(), end = match_end(text, start);
    if (end != std::string::npos && end > start) return text.substr(start, end - start);
  }
  return "";
}

std::string trim(const std::string& text);
std::string lowercase(std::string text);
/// @brief The line without an mpirun/srun tag ("0: ", "[1,0]<stdout>:").
std::string strip_prefix(const std::string& line);
std::vector<std::string> split_words(const std::string& text);
/// @brief Cells of a markdown row "| a | b |", trimmed.
std::vector<std::string> split_cells(const std::string& row);

/// @brief A whole token as a number ("1048_576" reads 1048576); nullopt for "N/A" and the like.
std::optional<double> parse_plain_number(const std::string& token);
/// @brief A count written in digits (a rank, a GPU count), -1 when it is not one or has more
/// than 6 digits (no log counts that far; std::stoi would throw).
int bounded_count(const std::string& digits);
/// @brief The number a cell starts with ("363.3GBps" -> 363.3).
std::optional<double> leading_number(const std::string& cell);
/// @brief "65K", "1G", "32KiB", "1048_576" -> bytes. Decimal K/M/G labels are rounded powers of
/// two in the write-ups ("65K" = 65536), so they snap to the nearest power of two.
std::optional<double> parse_size_label(const std::string& label);

/// @brief nccl-tests type column -> stepsim dtype name ("float" -> "float32").
std::string dtype_name(const std::string& type);
/// @brief stepsim op of an nccl-tests binary named in `text` ("all_reduce_perf" -> "allreduce").
std::string op_from_perf(const std::string& text);
/// @brief stepsim op named in prose ("all-gather", "reduce_scatter"), "" when none.
std::string op_from_words(const std::string& text);
/// @brief stepsim op named by a log's file name ("...-allreduce-..." -> "allreduce"), "" when none.
std::string op_from_file_name(const std::string& path);

/// @brief nccl-tests' busbw / algbw for `op` on `ranks` ranks (PERFORMANCE.md).
double busbw_factor(const std::string& op, int ranks);
/// @brief The rank count whose busbw factor is `ratio` (busbw / algbw), 0 when the op's factor
/// does not depend on it or the ratio matches no whole rank count.
int ranks_from_bandwidths(const std::string& op, double ratio);

/// @brief The GPU model ("H100", "RTX 2080 Ti") or, failing that, the AWS instance ("p4de")
/// a line names; "" when none.
std::string system_token(const std::string& line);
/// @brief "torch.distributed" or "nccl-tests" when the line names the benchmark, else "".
std::string tool_token(const std::string& line);
/// @brief Lower-case name with '-' for anything else than letters and digits.
std::string slug(const std::string& text);

/// @brief "8x B200 per node" -> 8 (8 when not stated, as the write-ups' nodes are 8-GPU).
int per_node_gpus(const std::string& prose);
/// @brief The first binary size in prose ("at an 8GiB payload" -> 8 GiB).
std::optional<double> prose_payload(const std::string& prose);
/// @brief "all with 8 GPUs engaged" -> 8.
std::optional<int> prose_gpus(const std::string& prose);

/// @brief NCCL / CUDA / torch / driver versions written in prose or a header
/// ("NCCL 2.18.5", "nccl=2.27.7", "cuda=13.0", "driver 550.90.07") into `software`.
void read_versions(const std::string& line, std::map<std::string, std::string>& software);
/// @brief NCCL version printed by nccl-tests ("nccl-library=22902") or NCCL ("NCCL version 2.18.5").
void read_log_versions(const std::string& line, std::map<std::string, std::string>& software);

}  // namespace stepsim::validation::nccl_tests_text
