#include "tools/sweep/sweep_ranking.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "platforms/yaml_reader.hpp"

namespace stepsim::sweep {
namespace {

using Row = std::vector<std::string>;

double value_of(const Row& row, int column) {
  try {
    return row[column].empty() ? NAN : std::stod(row[column]);
  } catch (const std::exception&) {
    return NAN;
  }
}

/// Left-aligned columns, two spaces apart.
std::string table_text(const std::vector<std::vector<std::string>>& lines) {
  std::vector<std::size_t> width;
  for (const auto& line : lines)
    for (std::size_t i = 0; i < line.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], line[i].size());
    }
  std::string out;
  for (const auto& line : lines) {
    std::string text = " ";
    for (std::size_t i = 0; i < line.size(); ++i) text += " " + line[i] + std::string(width[i] - line[i].size() + 1, ' ');
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text + "\n";
  }
  return out;
}

std::string number(double v) { return fmt::format("{:.4g}", v); }

std::string failures(const ResultTable& table) {
  const int error = table.column("error");
  std::map<std::string, int> count;
  int failed = 0;
  for (const Row& row : table.rows)
    if (!row[error].empty()) {
      ++failed;
      ++count[row[error]];
    }
  if (failed == 0) return "";
  std::vector<std::pair<int, std::string>> by_count;
  for (const auto& [text, n] : count) by_count.emplace_back(-n, text);
  std::sort(by_count.begin(), by_count.end());
  std::string out = fmt::format("{} point{} failed (`error` column); most frequent:\n", failed, failed == 1 ? "" : "s");
  for (std::size_t i = 0; i < by_count.size() && i < 3; ++i)
    out += fmt::format("  {} x {}\n", -by_count[i].first, by_count[i].second);
  return out;
}

// Points whose peak memory exceeds gpu.memory: listed, not ranked.
std::string infeasible(const ResultTable& table) {
  const int fits = table.column("memory.fits"), index = table.column("index");
  if (fits < 0) return "";
  std::vector<std::string> indices;
  for (const Row& row : table.rows)
    if (row[fits] == "false") indices.push_back(row[index]);
  if (indices.empty()) return "";
  const std::size_t shown = std::min<std::size_t>(indices.size(), 10);
  return fmt::format("{} point{} do not fit gpu.memory (memory.fits false) and are not ranked: index {}{}\n",
                     indices.size(), indices.size() == 1 ? "" : "s",
                     platforms::join(std::vector<std::string>(indices.begin(), indices.begin() + shown)),
                     indices.size() > shown ? ", ..." : "");
}

}  // namespace

std::vector<std::vector<const Row*>> ranked_groups(const Sweep& sweep, const ResultTable& table,
                                                   const std::string& metric, const std::vector<std::string>& group_by) {
  const int m = table.column(metric), index = table.column("index"), error = table.column("error");
  const int fits = table.column("memory.fits");
  std::vector<int> keys;
  for (const std::string& g : group_by) keys.push_back(table.column(g));
  std::map<std::vector<std::string>, std::size_t> group_of;
  std::vector<std::vector<const Row*>> groups;
  std::vector<long> first_index;
  for (const Row& row : table.rows) {
    if (!row[error].empty() || std::isnan(value_of(row, m))) continue;
    if (fits >= 0 && row[fits] == "false") continue;   // timed, but it cannot run: never ranked
    std::vector<std::string> key;
    for (int k : keys) key.push_back(row[k]);
    const auto [it, fresh] = group_of.emplace(key, groups.size());
    if (fresh) {
      groups.emplace_back();
      first_index.push_back(std::stol(row[index]));
    }
    groups[it->second].push_back(&row);
    first_index[it->second] = std::min(first_index[it->second], std::stol(row[index]));
  }
  const auto better = [&](const Row* a, const Row* b) {
    const double va = value_of(*a, m), vb = value_of(*b, m);
    if (va != vb) return sweep.maximize ? va > vb : va < vb;
    return std::stol((*a)[index]) < std::stol((*b)[index]);
  };
  for (auto& g : groups) std::sort(g.begin(), g.end(), better);
  std::vector<std::size_t> order(groups.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return first_index[a] < first_index[b]; });
  std::vector<std::vector<const Row*>> sorted;
  for (std::size_t i : order) sorted.push_back(std::move(groups[i]));
  return sorted;
}

std::string ranked_summary(const Sweep& sweep, const ResultTable& table, int top) {
  const int m = table.column(sweep.metric);
  const std::string direction = sweep.maximize ? "max" : "min";
  std::vector<std::string> others;   // axes that vary inside a group
  for (const SweepAxis& a : sweep.axes)
    if (std::find(sweep.group_by.begin(), sweep.group_by.end(), a.param) == sweep.group_by.end())
      others.push_back(a.param);
  const auto values_of = [&](const Row& row, const std::vector<std::string>& params) {
    std::vector<std::string> v;
    for (const std::string& p : params) v.push_back(row[table.column(p)]);
    return v;
  };
  std::string out;
  const auto groups = ranked_groups(sweep, table, sweep.metric, sweep.group_by);
  if (sweep.group_by.empty()) {
    const std::size_t ranked = groups.empty() ? 0 : groups[0].size();
    out += fmt::format("ranked by {} ({}): best {} of {} point{}\n", sweep.metric, direction,
                       std::min<std::size_t>(ranked, static_cast<std::size_t>(top)), ranked, ranked == 1 ? "" : "s");
    std::vector<std::vector<std::string>> lines;
    std::vector<std::string> header = {"rank"};
    header.insert(header.end(), others.begin(), others.end());
    header.push_back(sweep.metric);
    lines.push_back(header);
    for (std::size_t i = 0; !groups.empty() && i < groups[0].size() && i < static_cast<std::size_t>(top); ++i) {
      std::vector<std::string> line = {std::to_string(i + 1)};
      for (std::string& v : values_of(*groups[0][i], others)) line.push_back(std::move(v));
      line.push_back(number(value_of(*groups[0][i], m)));
      lines.push_back(std::move(line));
    }
    out += table_text(lines);
  } else {
    out += fmt::format("best {} ({}) per {}\n", sweep.metric, direction, platforms::join(sweep.group_by));
    std::vector<std::vector<std::string>> lines;
    std::vector<std::string> header = sweep.group_by;
    header.insert(header.end(), others.begin(), others.end());
    header.push_back(sweep.metric);
    if (!others.empty()) header.insert(header.end(), {"runner-up", "gap"});
    lines.push_back(header);
    for (const auto& group : groups) {
      std::vector<std::string> line = values_of(*group[0], sweep.group_by);
      for (std::string& v : values_of(*group[0], others)) line.push_back(std::move(v));
      const double best = value_of(*group[0], m);
      line.push_back(number(best));
      if (!others.empty() && group.size() > 1) {
        std::string runner;
        for (const std::string& v : values_of(*group[1], others)) runner += (runner.empty() ? "" : " ") + v;
        line.push_back(runner);
        line.push_back(fmt::format("{:.1f} %", 100 * std::abs(value_of(*group[1], m) - best) / std::abs(best)));
      }
      lines.push_back(std::move(line));
    }
    out += table_text(lines);
  }
  return out + failures(table) + infeasible(table);
}

}  // namespace stepsim::sweep
