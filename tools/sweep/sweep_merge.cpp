#include "tools/sweep/sweep_merge.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

#include "platforms/config_error.hpp"

namespace stepsim::sweep {

MergeResult merge_results(const std::vector<std::string>& paths) {
  MergeResult merged;
  std::map<std::string, std::pair<std::vector<std::string>, std::string>> by_id;   // id -> (row, file)
  for (const std::string& path : paths) {
    ReadResults read = read_results(path, merged.table.columns);
    if (read.table.columns.empty()) continue;   // an empty shard
    if (merged.table.columns.empty()) merged.table.columns = read.table.columns;
    if (read.partial_line) merged.partial_files.push_back(path);
    const int id = merged.table.column("point");
    if (id < 0 || merged.table.column("index") < 0)
      throw ConfigError(path, "no `point` and `index` columns", "merge the result files of `stepsim sweep`");
    const int index = merged.table.column("index");
    for (auto& row : read.table.rows) {
      if (row[index].empty() || row[index].find_first_not_of("0123456789") != std::string::npos)
        throw ConfigError(path, fmt::format("point {} has index '{}', not a whole number", row[id], row[index]),
                          "merge the result files of `stepsim sweep` as it wrote them");
      const auto [it, fresh] = by_id.emplace(row[id], std::make_pair(row, path));
      if (fresh) continue;
      if (it->second.first != row)
        throw ConfigError(path, fmt::format("point {} has a different row in {}", row[id], it->second.second),
                          "these files are not from the same sweep (or a platform changed between runs); "
                          "rerun one of them");
      ++merged.duplicates;
    }
  }
  const int index = merged.table.column("index");
  for (auto& [id, entry] : by_id) merged.table.rows.push_back(std::move(entry.first));
  std::sort(merged.table.rows.begin(), merged.table.rows.end(), [&](const auto& a, const auto& b) {
    const long ia = std::stol(a[index]), ib = std::stol(b[index]);
    return ia != ib ? ia < ib : a[0] < b[0];
  });
  return merged;
}

void write_results(const std::string& path, const ResultTable& table) {
  const ResultFormat format = result_format(path, "-o");
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw ConfigError("-o " + path, "cannot write " + temporary, "name a writable path");
    out << header_line(table.columns, format);
    for (const auto& row : table.rows) out << row_line(table.columns, row, format);
    if (!out.flush()) throw ConfigError("-o " + path, "cannot write " + temporary, "free disk space");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0)
    throw ConfigError("-o " + path, "cannot replace the file", "name a writable path");
}

}  // namespace stepsim::sweep
