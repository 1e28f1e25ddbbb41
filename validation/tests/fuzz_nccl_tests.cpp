// libFuzzer target: `stepsim import nccl-tests` on one log: the import, every group written and
// read back (as the command checks its output), the merge into one file and the output names.
// Any exception but ConfigError is a finding.
#include "platforms/tests/fuzz_entry.hpp"
#include "validation/importers/nccl_tests.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace stepsim::validation;
  const std::string text = stepsim::fuzz::input_text(data, size);
  stepsim::fuzz::expect_config_error_only([&] {
    const NcclTestsImport imported = import_nccl_tests(text, "nccl-tests.log");
    for (const NcclTestsGroup& group : imported.groups) {
      parse_measurements(format_measurements(group.file), "group.yaml");
      nccl_tests_output_name("nccl-tests.log", group, imported.groups.size() > 1);
    }
    parse_measurements(format_measurements(merge_nccl_tests_groups(imported.groups, "-o measured.yaml")), "measured.yaml");
  });
  return 0;
}
