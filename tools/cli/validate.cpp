// `stepsim validate PLATFORM MEASUREMENTS...`: every measured case beside stepsim's prediction
// of it, per-case errors and per-group geomean errors, as text, JSON or an HTML report.
#include <iostream>

#include "platforms/config_error.hpp"
#include "tools/cli/commands.hpp"
#include "validation/report.hpp"
#include "validation/validate.hpp"

namespace stepsim::cli {
namespace {

struct ValidateArgs {
  PlatformArgs platform;
  std::vector<std::string> files;
  std::string algo = "nccl";
  std::vector<std::string> algo_params;
  std::string engine = "analytical";
  std::string min_size = "1MiB";
  std::string report;
  std::string format = "text";
  std::vector<std::string> kinds;
};

int run(const ValidateArgs& args) {
  validation::ValidateOptions options;
  options.platform = args.platform.platform;
  options.platform_options = args.platform.options;
  options.gpus = args.platform.gpus;
  options.algo = args.algo;
  options.algo_params = args.algo_params;
  options.engine = args.engine;
  options.min_size = size_flag("--min-size", args.min_size);
  options.kinds = args.kinds;
  std::vector<validation::MeasurementFile> files;
  for (const std::string& path : args.files) files.push_back(validation::load_measurements(path));
  const validation::ValidationResult result = validation::validate(files, options);
  if (!args.report.empty()) validation::write_html_report(result, args.report);
  if (args.format == "json")
    std::cout << validation::validation_json(result).dump(2) << "\n";
  else
    std::cout << validation::format_validation_text(result);
  std::cout.flush();
  if (!args.report.empty()) std::cerr << "wrote " << args.report << "\n";
  return 0;
}

}  // namespace

Action add_validate_command(CLI::App& command) {
  auto args = std::make_shared<ValidateArgs>();
  add_platform_options(command, args->platform);
  command.add_option("measurements", args->files, "Measurement files (docs/measurements.md)")->required();
  command.add_option("--algo", args->algo, "Collective algorithm of the predictions (default nccl), or best");
  command.add_option("--algo-param", args->algo_params,
                     "Algorithm key=value for every collective, e.g. version=2.18 (wins over the file's NCCL version)");
  command.add_option("--engine", args->engine, "analytical (closed form) or event (SimGrid flows)")
      ->check(CLI::IsMember({"analytical", "event"}));
  command.add_option("--min-size", args->min_size, "Smallest collective size in the headline geomean (default 1MiB)");
  command.add_option("--report", args->report, "Write a self-contained HTML report with plots to FILE.html");
  command
      .add_option("--kind", args->kinds,
                  "Score only measurements of this kind (repeatable): collective, gemm, copy, embedding, compression, "
                  "iteration, kernel")
      ->take_all()
      ->check(CLI::IsMember({"collective", "gemm", "copy", "embedding", "compression", "iteration", "kernel"}));
  add_format_option(command, args->format);
  command.footer(
      "Predicts every case of the files on PLATFORM; a file's system.params, gpu_list and nodes apply, and\n"
      "--gpus, --nodes and -p override them. error = predicted / measured time - 1; geomean |error| =\n"
      "exp(mean |ln(pred/meas)|) - 1. Kinds with no model are counted as not modelled.");
  return [args] { return run(*args); };
}

}  // namespace stepsim::cli
