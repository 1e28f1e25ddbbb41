// libFuzzer target: `stepsim import nvidia-smi-topo`. The input is the `topo -m` text, and
// after each form feed one more `--p2p` file; the platform YAML it gives is loaded back, as the
// command does before writing it. Any exception but ConfigError is a finding.
#include "platforms/loader.hpp"
#include "platforms/nvidia_smi_topo.hpp"
#include "platforms/tests/fuzz_entry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input = stepsim::fuzz::input_text(data, size);
  const std::size_t first_break = input.find('\f');
  std::vector<stepsim::platforms::P2pText> p2p;
  for (std::size_t at = first_break; at != std::string::npos;) {
    const std::size_t next = input.find('\f', at + 1);
    p2p.push_back({input.substr(at + 1, next == std::string::npos ? next : next - at - 1), "p2p.txt"});
    at = next;
  }
  stepsim::fuzz::expect_config_error_only([&] {
    const std::string yaml =
        stepsim::platforms::import_nvidia_smi_topo(input.substr(0, first_break), "topo.txt", "H100-SXM5-80GB", p2p);
    stepsim::platforms::parse_platform(yaml, "<stdout>");
  });
  return 0;
}
