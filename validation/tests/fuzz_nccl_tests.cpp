// libFuzzer target: `stepsim import nccl-tests` on one log: the import, every group written (as
// the command writes it), the merge into one file and the output names. Any exception but
// ConfigError is a finding. Reading the written files back is fuzz_measurement's work (it fuzzes
// parse_measurements on any text, written files included): here it took two thirds of the time.
#include "platforms/tests/fuzz_entry.hpp"
#include "validation/importers/nccl_tests.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace stepsim::validation;
  const std::string text = stepsim::fuzz::input_text(data, size);
  stepsim::fuzz::expect_config_error_only([&] {
    const NcclTestsImport imported = import_nccl_tests(text, "nccl-tests.log");
    for (const NcclTestsGroup& group : imported.groups) {
      format_measurements(group.file);
      nccl_tests_output_name("nccl-tests.log", group, imported.groups.size() > 1);
    }
    format_measurements(merge_nccl_tests_groups(imported.groups, "-o measured.yaml"));
  });
  return 0;
}
