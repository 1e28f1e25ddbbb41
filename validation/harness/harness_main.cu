// stepsim-harness: measures GPUs and writes stepsim measurement files (docs/measurements.md).
// Exit codes: 0 success, 1 CUDA/NCCL/cuBLAS failure or wrong GPU result, 2 bad command line.
#include <cstdio>
#include <ctime>
#include <exception>
#include <string>
#include <vector>

#include "platforms/config_error.hpp"
#include "validation/harness/harness_options.hpp"
#include "validation/harness/run_info.hpp"
#include "validation/harness/subcommands.hpp"

namespace {

using namespace stepsim::harness;

// The notes every file carries: how time_s was taken, and the user's own.
void prepare_header(const CommonOptions& common, std::time_t started, FileHeader& header) {
  header.platform = common.platform;
  header.gpu_model = common.gpu_model;
  char method[256];
  std::snprintf(method, sizeof method,
                "time_s is the mean over repetitions; a repetition times back-to-back calls with CUDA events "
                "(enough to last %g ms, at most %d) and divides by their number; %d warm-up calls",
                common.target_ms, common.max_batch, common.warmup);
  add_note(header, method);
  add_note(header, "started " + utc_time(started) + (common.quick ? "; quick run" : ""));
  if (!common.notes.empty()) add_note(header, common.notes);
}

// Runs one subcommand and writes its file; what was measured before a failure goes to OUT.partial.
template <typename Options, typename Run>
int execute(const Options& options, Run run, std::time_t started, Recording& recording) {
  prepare_header(options.common, started, recording.header);
  const std::string& out = options.common.out;
  if (!out.empty() && !output_folder_writable(out))
    throw stepsim::ConfigError("--out " + out, "its folder does not exist or is not writable", "create the folder first (mkdir -p)");
  try {
    run(options, recording);
  } catch (const stepsim::ConfigError&) {
    throw;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s: error: %s\n", recording.header.tool.c_str(), error.what());
    if (!recording.records.empty()) {
      const std::string partial = (out.empty() ? std::string("stepsim-harness") : out) + ".partial";
      add_note(recording.header, "INCOMPLETE: stopped by an error after " + std::to_string(recording.records.size()) +
                                     " measurements: " + error.what());
      write_measurement_file(partial, recording.header, recording.records);
      std::fprintf(stderr, "%s: wrote the %zu measurements made before the error to %s\n", recording.header.tool.c_str(),
                   recording.records.size(), partial.c_str());
    }
    return 1;
  }
  if (out.empty()) {
    std::fputs(format_measurement_file(recording.header, recording.records).c_str(), stdout);
  } else {
    write_measurement_file(out, recording.header, recording.records);
    std::fprintf(stderr, "%s: wrote %zu measurements to %s\n", recording.header.tool.c_str(), recording.records.size(),
                 out.c_str());
  }
  return 0;
}

bool is_help(const std::string& word) { return word == "--help" || word == "-h" || word == "help"; }

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> words(argv, argv + argc);
  if (argc < 2 || is_help(words[1])) {
    std::fputs(main_help().c_str(), argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string name = words[1];
  bool known = false;
  for (const SubcommandInfo& info : subcommands()) known = known || info.name == name;
  if (!known) {
    std::fprintf(stderr, "stepsim-harness: unknown subcommand '%s'\n\n%s", name.c_str(), main_help().c_str());
    return 2;
  }
  const std::vector<std::string> args(words.begin() + 2, words.end());
  for (const std::string& word : args) {
    if (word == "--help" || word == "-h") {
      std::fputs(subcommand_help(name).c_str(), stdout);
      return 0;
    }
  }
  const std::time_t started = std::time(nullptr);
  Recording recording;
  recording.header.tool = "stepsim-harness " + name;
  recording.header.command = shell_join(words);
  recording.header.date = utc_date(started);
  try {
    if (name == "nccl") return execute(parse_nccl_options(args), run_nccl, started, recording);
    if (name == "copy") return execute(parse_copy_options(args), run_copy, started, recording);
    if (name == "gemm") return execute(parse_gemm_options(args), run_gemm, started, recording);
    if (name == "embedding") return execute(parse_embedding_options(args), run_embedding, started, recording);
    return execute(parse_compress_options(args), run_compress, started, recording);
  } catch (const stepsim::ConfigError& error) {
    std::fprintf(stderr, "%s: error: %s\n", recording.header.tool.c_str(), error.what());
    return 2;
  } catch (const std::exception& error) {
    // Writing the output file failed, or an error outside a runner.
    std::fprintf(stderr, "%s: error: %s\n", recording.header.tool.c_str(), error.what());
    return 1;
  }
}
