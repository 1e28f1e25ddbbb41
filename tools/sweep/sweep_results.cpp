#include "tools/sweep/sweep_results.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "platforms/config_error.hpp"
#include "platforms/yaml_reader.hpp"

namespace stepsim::sweep {
namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string csv_field(const std::string& value) {
  if (value.find_first_of(",\"") == std::string::npos) return value;
  std::string quoted = "\"";
  for (char c : value) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

/// RFC 4180 fields of one line; nullopt for an unterminated quote.
std::optional<std::vector<std::string>> csv_split(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  if (quoted) return std::nullopt;
  return fields;
}

/// Whether `text` is a JSON number literal (what fmt writes for finite doubles and integers).
bool json_number(const std::string& text) {
  std::size_t i = 0;
  const auto digits = [&] {
    const std::size_t start = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    return i > start;
  };
  if (i < text.size() && text[i] == '-') ++i;
  if (!digits()) return false;
  if (i < text.size() && text[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == text.size();
}

bool numeric(const std::string& column) { return column == "index" || is_numeric_column(column); }

std::string json_text(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_null()) return "";
  if (value.is_number_integer()) return fmt::format("{}", value.get<std::int64_t>());
  if (value.is_number_unsigned()) return fmt::format("{}", value.get<std::uint64_t>());
  if (value.is_number_float()) return fmt::format("{}", value.get<double>());
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  throw std::invalid_argument("a value must be a string, a number or null, got " + value.dump());
}

class Reader {
 public:
  Reader(std::string path, std::vector<std::string> expected) : path_(std::move(path)) {
    result_.table.columns = std::move(expected);
  }

  ReadResults read() {
    const ResultFormat format = result_format(path_, "--out");
    const std::string text = platforms::read_text_file(path_);
    // A result file is text: control bytes other than tabs and line ends mean another file
    // (a binary, a compressed copy), which no message should echo.
    const auto binary = std::find_if(text.begin(), text.end(), [](char c) {
      const auto byte = static_cast<unsigned char>(c);
      return byte < 0x20 && c != '\n' && c != '\r' && c != '\t';
    });
    if (binary != text.end())
      throw ConfigError(path_, fmt::format("not a sweep result file: a binary byte at offset {}", binary - text.begin()),
                        "--resume continues a .csv or .jsonl file this sweep wrote: write to a new --out file");
    std::size_t start = 0;
    for (int line_no = 1; start < text.size(); ++line_no) {
      const std::size_t end = text.find('\n', start);
      if (end == std::string::npos) {
        result_.partial_line = true;
        break;
      }
      const std::string line = text.substr(start, end - start);
      if (format == ResultFormat::csv)
        csv_line(line, line_no);
      else
        json_line(line, line_no);
      start = end + 1;
      result_.complete_bytes = start;
    }
    return std::move(result_);
  }

 private:
  [[noreturn]] void fail(int line_no, const std::string& what) const {
    throw ConfigError(fmt::format("{} (line {})", path_, line_no), what,
                      "the file is not the output of this sweep, or was edited: write to a new --out file");
  }

  void check_columns(const std::vector<std::string>& found, int line_no) {
    std::vector<std::string>& columns = result_.table.columns;
    if (columns.empty()) columns = found;
    if (found != columns)
      fail(line_no, fmt::format("its columns ({}) differ from this sweep's ({})", platforms::join(found),
                                platforms::join(columns)));
  }

  void csv_line(const std::string& line, int line_no) {
    const auto fields = csv_split(line);
    if (!fields) fail(line_no, "a quoted value is not closed");
    if (!header_seen_) {
      check_columns(*fields, line_no);
      header_seen_ = true;
      return;
    }
    if (fields->size() != result_.table.columns.size())
      fail(line_no, fmt::format("{} values under {} columns", fields->size(), result_.table.columns.size()));
    add_row(*fields, line_no);
  }

  // Every row's point index is a whole number a sweep can have written (ranking, merging and
  // --resume order rows by it).
  void add_row(std::vector<std::string> row, int line_no) {
    const int column = result_.table.column("index");
    if (column >= 0) {
      const std::string& text = row[static_cast<std::size_t>(column)];
      long long index = -1;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), index);
      if (ec != std::errc() || end != text.data() + text.size() || index < 0 || index > INT_MAX)
        fail(line_no, fmt::format("index {} is not a point's index (a whole number >= 0)", one_line(text).substr(0, 40)));
    }
    result_.table.rows.push_back(std::move(row));
  }

  void json_line(const std::string& line, int line_no) {
    nlohmann::ordered_json object;
    try {
      object = nlohmann::ordered_json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail(line_no, std::string("not a JSON object: ") + e.what());
    }
    if (!object.is_object()) fail(line_no, "not a JSON object");
    std::vector<std::string> keys, values;
    for (const auto& [key, value] : object.items()) {
      keys.push_back(key);
      try {
        values.push_back(json_text(value));
      } catch (const std::invalid_argument& e) {
        fail(line_no, e.what());
      }
    }
    check_columns(keys, line_no);
    add_row(std::move(values), line_no);
  }

  std::string path_;
  ReadResults result_;
  bool header_seen_ = false;
};

}  // namespace

ResultFormat result_format(const std::string& path, const std::string& flag) {
  if (ends_with(path, ".csv")) return ResultFormat::csv;
  if (ends_with(path, ".jsonl")) return ResultFormat::jsonl;
  throw ConfigError(flag + " " + path, "unknown result format",
                    "name a .csv file, or a .jsonl file (JSON Lines: one object per point, so a killed sweep "
                    "leaves a readable file)");
}

int ResultTable::column(const std::string& name) const {
  const auto it = std::find(columns.begin(), columns.end(), name);
  return it == columns.end() ? -1 : static_cast<int>(it - columns.begin());
}

std::vector<std::string> sweep_columns(const Sweep& sweep) {
  std::vector<std::string> columns = {"point", "index"};
  for (const SweepAxis& a : sweep.axes) columns.push_back(a.param);
  for (const std::string& c : result_columns(sweep.kind)) columns.push_back(c);
  columns.push_back("error");
  return columns;
}

std::string header_line(const std::vector<std::string>& columns, ResultFormat format) {
  return format == ResultFormat::csv ? row_line(columns, columns, format) : "";
}

std::string row_line(const std::vector<std::string>& columns, const std::vector<std::string>& row,
                     ResultFormat format) {
  std::string line;
  if (format == ResultFormat::csv) {
    for (std::size_t i = 0; i < row.size(); ++i) line.append(i ? "," : "").append(csv_field(one_line(row[i])));
    return line + "\n";
  }
  line = "{";
  for (std::size_t i = 0; i < row.size(); ++i) {
    line.append(i ? ", " : "").append(nlohmann::json(columns.at(i)).dump()).append(": ");
    const std::string value = one_line(row[i]);
    if (value.empty() && numeric(columns[i]))
      line.append("null");
    else if (numeric(columns[i]) && json_number(value))
      line.append(value);
    else
      line.append(nlohmann::json(value).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  return line + "}\n";
}

ReadResults read_results(const std::string& path, const std::vector<std::string>& expected) {
  return Reader(path, expected).read();
}

std::string one_line(std::string value) {
  std::replace_if(value.begin(), value.end(), [](char c) { return c == '\n' || c == '\r' || c == '\x1f'; }, ' ');
  return value;
}

}  // namespace stepsim::sweep
