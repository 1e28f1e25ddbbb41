// libFuzzer target: platform YAML (the text `stepsim simulate PLATFORM.yaml` and every other
// command read; presets and tests/*.yaml seed it). Any exception but ConfigError is a finding.
#include "platforms/loader.hpp"
#include "platforms/tests/fuzz_entry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = stepsim::fuzz::input_text(data, size);
  stepsim::fuzz::expect_config_error_only([&] { stepsim::platforms::parse_platform(text, "platform.yaml"); });
  return 0;
}
