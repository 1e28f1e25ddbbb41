// libFuzzer target: sweep result files, as `stepsim sweep --resume` and `stepsim merge` read
// them. An input that starts with '{' is JSON Lines, any other CSV (the format follows the file
// name, so each goes to a file of its own). Any exception but ConfigError is a finding.
#include "platforms/tests/fuzz_entry.hpp"
#include "tools/sweep/sweep_merge.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = stepsim::fuzz::input_text(data, size);
  const std::string path = stepsim::fuzz::temp_file(text, !text.empty() && text[0] == '{' ? ".jsonl" : ".csv");
  stepsim::fuzz::expect_config_error_only([&] { stepsim::sweep::read_results(path); });
  stepsim::fuzz::expect_config_error_only([&] { stepsim::sweep::merge_results({path}); });
  return 0;
}
