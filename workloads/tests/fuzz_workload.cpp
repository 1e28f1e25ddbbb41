// libFuzzer target: workload files for one 8-GPU dgx-h100 job. Every input is read as workload
// YAML (parse_workload: presets, generators' parameters, hand-written traces); one that starts
// with '{' is also read as a JSON trace, which only load_workload takes (from a .json file).
// Any exception but ConfigError is a finding. Programs stop at 2^16 ops, not kMaxProgramOps: a
// valid workload near the limits takes seconds to build, and this target fuzzes the reading, not
// the size of what it builds (the limits' own checks run first and still are fuzzed).
#include <cctype>

#include "platforms/loader.hpp"
#include "platforms/tests/fuzz_entry.hpp"
#include "workloads/workload.hpp"

namespace {

const stepsim::workloads::JobContext& job() {
  static const stepsim::platforms::Platform platform = stepsim::platforms::load_platform("dgx-h100");
  static const stepsim::platforms::Allocation allocation = stepsim::platforms::parse_allocation("0-7", platform);
  static const stepsim::workloads::JobContext context{platform, allocation, std::size_t{1} << 16};
  return context;
}

bool looks_like_json(const std::string& text) {
  for (const char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) return c == '{';
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = stepsim::fuzz::input_text(data, size);
  stepsim::fuzz::expect_config_error_only([&] { stepsim::workloads::parse_workload(text, "workload.yaml", job()); });
  if (looks_like_json(text))
    stepsim::fuzz::expect_config_error_only(
        [&] { stepsim::workloads::load_workload(stepsim::fuzz::temp_file(text, ".json"), job()); });
  return 0;
}
