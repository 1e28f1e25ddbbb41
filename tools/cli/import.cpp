// `stepsim import KIND ...`: external data as stepsim files.
//   nvidia-smi-topo FILE [--p2p FILE...] -o platform.yaml
//                                              describe your own server from `nvidia-smi topo -m`
//                                              (and `nvidia-smi topo -p2p r`/`w`)
//   nccl-tests LOG... -o FILE|DIR              nccl-tests logs as collective measurements
//   kineto TRACE... -o FILE [--as workload]    a PyTorch profiler trace as measurements or a workload
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "platforms/config_error.hpp"
#include "platforms/nvidia_smi_topo.hpp"
#include "platforms/yaml_reader.hpp"
#include "tools/cli/commands.hpp"
#include "validation/importers/kineto.hpp"
#include "validation/importers/nccl_tests.hpp"

namespace stepsim::cli {
namespace {

struct TopoArgs {
  std::string input;
  std::vector<std::string> p2p;
  std::string output;
  std::string gpu_model;   ///< "" = read from `nvidia-smi -L` lines in the file
};

struct NcclTestsArgs {
  std::vector<std::string> logs;
  std::string output;
  std::string platform;
  std::string op;  ///< collective of tables the log does not name
};

struct KinetoArgs {
  std::vector<std::string> traces;
  std::string output;
  std::string as = "measurements";
  std::string platform;
  std::string workload;
  int step = -1;
};

int run_topo(const TopoArgs& args) {
  const std::string text = platforms::read_text_file(args.input);
  std::vector<platforms::P2pText> p2p;
  for (const std::string& path : args.p2p) p2p.push_back({platforms::read_text_file(path), path});
  const std::string yaml = platforms::import_nvidia_smi_topo(text, args.input, args.gpu_model, p2p);
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

/// Writes a measurement file and reads it back, so a user never gets a file stepsim rejects.
void write_checked(const validation::MeasurementFile& file, const std::string& path) {
  validation::write_measurements(file, path);
  validation::load_measurements(path);
  std::cerr << "wrote " << path << " (" << file.measurements.size() << " measurements"
            << (file.system.gpu.empty() ? "" : ", " + file.system.gpu) << ")\n";
}

int run_nccl_tests(const NcclTestsArgs& args) {
  std::vector<std::pair<std::string, validation::NcclTestsImport>> imports;
  for (const std::string& log : args.logs) {
    imports.emplace_back(log, validation::import_nccl_tests(platforms::read_text_file(log), log, args.platform, args.op));
    for (const std::string& note : imports.back().second.notes) std::cerr << "note: " << note << "\n";
  }
  const bool to_folder = std::filesystem::is_directory(args.output) || args.output.back() == '/';
  if (!to_folder) {
    std::vector<validation::NcclTestsGroup> groups;
    for (const auto& [log, imported] : imports) groups.insert(groups.end(), imported.groups.begin(), imported.groups.end());
    write_checked(validation::merge_nccl_tests_groups(groups, "-o " + args.output), args.output);
    return 0;
  }
  std::filesystem::create_directories(args.output);
  std::set<std::string> written;
  for (const auto& [log, imported] : imports) {
    for (const validation::NcclTestsGroup& group : imported.groups) {
      const std::string path =
          (std::filesystem::path(args.output) / validation::nccl_tests_output_name(log, group, imported.groups.size() > 1))
              .string();
      if (!written.insert(path).second)
        throw ConfigError(log, "two logs would both be written to " + path, "give the logs different file names");
      write_checked(group.file, path);
    }
  }
  return 0;
}

int run_kineto(const KinetoArgs& args) {
  validation::KinetoOptions options;
  options.platform = args.platform;
  options.workload = args.workload;
  options.step = args.step;
  if (args.as == "measurements") {
    if (args.traces.size() != 1)
      throw ConfigError("stepsim import kineto", "measurements come from one trace, got " + std::to_string(args.traces.size()),
                        "import each trace into its own file, or use --as workload for one trace per rank");
    write_checked(validation::kineto_measurements(validation::read_kineto(args.traces[0]), options), args.output);
    return 0;
  }
  std::vector<validation::KinetoProfile> profiles;
  for (const std::string& trace : args.traces) profiles.push_back(validation::read_kineto(trace));
  std::vector<std::string> notes;
  const auto workload = validation::kineto_workload(profiles, options, notes);
  for (const std::string& note : notes) std::cerr << "note: " << note << "\n";
  std::ofstream out(args.output);
  if (!out) throw ConfigError(args.output, "cannot write the file", "check the directory exists");
  out << validation::format_workload(workload, args.output);
  std::cerr << "wrote " << args.output << ": replay it with `stepsim simulate PLATFORM " << args.output << " --gpus 0-"
            << workload["ranks"].get<int>() - 1 << "`\n";
  return 0;
}

}  // namespace

Action add_import_command(CLI::App& command) {
  command.require_subcommand(1);

  auto topo = std::make_shared<TopoArgs>();
  CLI::App* topo_cmd = command.add_subcommand("nvidia-smi-topo", "A platform YAML from the output of `nvidia-smi topo -m`");
  topo_cmd->add_option("file", topo->input,
                       "Input file (output of `nvidia-smi topo -m`, optionally followed by `nvidia-smi topo -p2p r`)")
      ->required();
  topo_cmd->add_option("--p2p", topo->p2p,
                       "Output of `nvidia-smi topo -p2p r` (repeat for -p2p w): GPU pairs not OK have no peer-to-peer")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  topo_cmd->add_option("-o,--output", topo->output, "Output platform YAML (default stdout)");
  topo_cmd->add_option("--gpu-model", topo->gpu_model,
                       "GPU model of the server (platforms/presets/gpus.yaml); default: the one `nvidia-smi -L` "
                       "lines appended to the file name");

  auto nccl = std::make_shared<NcclTestsArgs>();
  CLI::App* nccl_cmd = command.add_subcommand(
      "nccl-tests", "Collective measurements from nccl-tests logs or write-ups (docs/measurements.md)");
  nccl_cmd->add_option("logs", nccl->logs, "nccl-tests output, with or without mpirun prefixes; markdown tables")->required();
  nccl_cmd->add_option("-o,--output", nccl->output,
                       "Measurement file, or a folder (existing, or ending in /) for one file per log and system")
      ->required();
  nccl_cmd->add_option("--platform", nccl->platform, "stepsim preset the logs ran on (fills system.platform)");
  nccl_cmd->add_option("--op", nccl->op,
                       "Collective of tables the log does not name (no *_perf line, e.g. a slurm-*.out); default: "
                       "the file name's, else inferred from busbw/algbw where only allreduce fits")
      ->check(CLI::IsMember({"allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv"}));

  auto kineto = std::make_shared<KinetoArgs>();
  CLI::App* kineto_cmd = command.add_subcommand(
      "kineto", "A PyTorch profiler trace (.json or .json.gz) as measurements or as a replayable workload");
  kineto_cmd->add_option("traces", kineto->traces, "Trace file(s); for --as workload one per rank, or one for all ranks")
      ->required();
  kineto_cmd->add_option("-o,--output", kineto->output, "Output file (a workload ending in .json is written as JSON)")
      ->required();
  kineto_cmd->add_option("--as", kineto->as, "measurements (kernels, collectives, copies, iterations) or workload")
      ->check(CLI::IsMember({"measurements", "workload"}));
  kineto_cmd->add_option("--step", kineto->step, "ProfilerStep#N to turn into a workload (default: the last)")
      ->check(whole_number(0, 1 << 30));
  kineto_cmd->add_option("--platform", kineto->platform, "stepsim preset the trace ran on (fills system.platform)");
  kineto_cmd->add_option("--workload", kineto->workload, "Workload the iteration measurements refer to (default: the trace)");

  return [=] {
    if (topo_cmd->parsed()) return run_topo(*topo);
    if (nccl_cmd->parsed()) return run_nccl_tests(*nccl);
    return run_kineto(*kineto);
  };
}

}  // namespace stepsim::cli
