// libFuzzer target: `stepsim import kineto` on one PyTorch profiler trace (JSON text): as
// measurements, written and read back as the command checks them, and as a workload trace
// written as YAML. Any exception but ConfigError is a finding.
#include "platforms/tests/fuzz_entry.hpp"
#include "validation/importers/kineto.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace stepsim::validation;
  const std::string text = stepsim::fuzz::input_text(data, size);
  stepsim::fuzz::expect_config_error_only([&] {
    const KinetoProfile profile = parse_kineto(text, "trace.json");
    stepsim::fuzz::expect_config_error_only([&] {
      parse_measurements(format_measurements(kineto_measurements(profile, {})), "kernels.yaml");
    });
    std::vector<std::string> notes;
    format_workload(kineto_workload({profile}, {}, notes), "replay.yaml");
  });
  return 0;
}
