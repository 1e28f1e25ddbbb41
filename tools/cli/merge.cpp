// `stepsim merge`: join the result files of a sweep's shards into one (docs/sweep.md).
#include <fmt/format.h>

#include <iostream>

#include "tools/cli/commands.hpp"
#include "tools/sweep/sweep_merge.hpp"

namespace stepsim::cli {

Action add_merge_command(CLI::App& command) {
  auto inputs = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  command.add_option("files", *inputs, "Result files of `stepsim sweep --out` (.csv or .jsonl)")->required();
  command.add_option("-o,--out", *out, "Merged file (.csv or .jsonl), rows sorted by index")->required();
  return [inputs, out] {
    const sweep::MergeResult merged = sweep::merge_results(*inputs);
    for (const std::string& file : merged.partial_files)
      std::cerr << "note: left out the half-written last line of " << file << "\n";
    sweep::write_results(*out, merged.table);
    std::cout << fmt::format("{} points from {} files into {} ({} identical duplicates dropped)\n",
                             merged.table.rows.size(), inputs->size(), *out, merged.duplicates);
    return 0;
  };
}

}  // namespace stepsim::cli
