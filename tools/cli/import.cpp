// `stepsim import nvidia-smi-topo FILE -o platform.yaml`: describe your own server by pasting
// the output of `nvidia-smi topo -m`.
#include <fstream>
#include <iostream>
#include <sstream>

#include "platforms/config_error.hpp"
#include "platforms/nvidia_smi_topo.hpp"
#include "tools/cli/commands.hpp"

namespace stepsim::cli {
namespace {

struct ImportArgs {
  std::string kind;
  std::string input;
  std::string output;
  std::string gpu_model = "H100-SXM5-80GB";
};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path, "cannot read the file", "check the path");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

int run(const ImportArgs& args) {
  const std::string text = read_file(args.input);
  const std::string yaml = platforms::import_nvidia_smi_topo(text, args.input, args.gpu_model);
  // Prove the result loads before writing it, so a user never gets a file stepsim rejects.
  platforms::parse_platform(yaml, args.output.empty() ? "<stdout>" : args.output);
  if (args.output.empty() || args.output == "-") {
    std::cout << yaml;
    return 0;
  }
  std::ofstream out(args.output);
  if (!out) throw ConfigError(args.output, "cannot write the file", "check the directory exists");
  out << yaml;
  std::cerr << "wrote " << args.output << "\n";
  return 0;
}

}  // namespace

Action add_import_command(CLI::App& command) {
  auto args = std::make_shared<ImportArgs>();
  command.add_option("kind", args->kind, "What to import")->required()->check(CLI::IsMember({"nvidia-smi-topo"}));
  command.add_option("file", args->input, "Input file (output of `nvidia-smi topo -m`)")->required();
  command.add_option("-o,--output", args->output, "Output platform YAML (default stdout)");
  command.add_option("--gpu-model", args->gpu_model, "GPU model of the server (see platforms/presets/gpus.yaml)");
  return [args] { return run(*args); };
}

}  // namespace stepsim::cli
