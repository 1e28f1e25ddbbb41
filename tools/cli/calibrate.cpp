// `stepsim calibrate PLATFORM MEASUREMENTS... -o OUT.yaml`: fit the platform's calibration
// factors to measurement files and write the calibrated platform (validation/calibrate.hpp).
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "platforms/config_error.hpp"
#include "platforms/units.hpp"
#include "tools/cli/commands.hpp"
#include "validation/calibrate.hpp"

namespace stepsim::cli {
namespace {

struct CalibrateArgs {
  PlatformArgs platform;
  std::vector<std::string> files;
  std::string output;
  std::string holdout = "half";
  std::string fit_min_size = "0";
  std::string min_size = "1MiB";
  std::string algo = "nccl";
  std::vector<std::string> algo_params;
  std::string engine = "analytical";
  std::string format = "text";
};

nlohmann::json to_json(const validation::CalibrationOutcome& out, const std::string& output) {
  nlohmann::json params = nlohmann::json::array();
  for (const auto& p : out.parameters)
    params.push_back({{"key", p.key}, {"initial", p.initial}, {"value", p.value},
                      {"relative_error", p.relative_error}, {"determined", p.determined},
                      {"dropped_error", p.dropped_error}});
  auto set = [](const validation::CaseSetError& e) {
    return nlohmann::json{{"cases", e.cases}, {"headline_cases", e.headline_cases},
                          {"geomean_error_before", e.before}, {"geomean_error_after", e.after},
                          {"geomean_error_all_before", e.before_all}, {"geomean_error_all_after", e.after_all}};
  };
  return {{"output", output}, {"iterations", out.iterations}, {"parameters", params},
          {"fit", set(out.fit)}, {"holdout", set(out.holdout)}, {"notes", out.notes}};
}

int run(const CalibrateArgs& args) {
  std::vector<validation::MeasurementFile> files;
  for (const std::string& path : args.files) files.push_back(validation::load_measurements(path));
  validation::CalibrateOptions options;
  options.validate.platform = args.platform.platform;
  options.validate.platform_options = args.platform.options;
  options.validate.gpus = args.platform.gpus;
  options.validate.algo = args.algo;
  options.validate.algo_params = args.algo_params;
  options.validate.engine = args.engine;
  options.validate.min_size = size_flag("--min-size", args.min_size);
  options.holdout = args.holdout;
  options.fit_min_size = size_flag("--fit-min-size", args.fit_min_size);
  const validation::CalibrationOutcome out = validation::calibrate(files, options);
  std::ofstream file(args.output);
  if (!(file << out.platform_yaml))
    throw ConfigError("-o " + args.output, "cannot write the calibrated platform", "choose a writable path");
  if (args.format == "json") {
    std::cout << to_json(out, args.output).dump(2) << "\n";
  } else {
    std::cout << validation::format_calibration_text(out) << "calibrated platform written to " << args.output << "\n";
  }
  return 0;
}

}  // namespace

Action add_calibrate_command(CLI::App& command) {
  auto args = std::make_shared<CalibrateArgs>();
  add_platform_options(command, args->platform);
  command.add_option("measurements", args->files, "Measurement files (docs/measurements.md)")->required();
  command.add_option("-o,--output", args->output, "Calibrated platform YAML to write")->required();
  command.add_option("--holdout", args->holdout,
                     "half: fit every other size of each group and report the rest; none: fit every case")
      ->check(CLI::IsMember({"half", "none"}));
  command.add_option("--fit-min-size", args->fit_min_size, "Leave collectives smaller than this out of the fit");
  command.add_option("--min-size", args->min_size, "Smallest collective size in the headline error figures");
  command.add_option("--algo", args->algo, "Collective algorithm predicting the cases (default nccl)");
  command.add_option("--algo-param", args->algo_params, "Algorithm option key=value, as for `stepsim collective`");
  command.add_option("--engine", args->engine, "analytical or event")->check(CLI::IsMember({"analytical", "event"}));
  add_format_option(command, args->format);
  return [args] { return run(*args); };
}

}  // namespace stepsim::cli
