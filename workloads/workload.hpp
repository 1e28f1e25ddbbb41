#pragma once
/// @file Workloads: a YAML description (a hand-written trace, or a generator's parameters)
/// turned into a Trace for a given job.
///
/// Contract: a workload file has `version: 1` and `kind:` naming a registered generator
/// ("trace", "fsdp", "ddp", "dlrm", ...). The generator reads the rest of the document with
/// the YamlReader discipline (unknown keys rejected with the allowed list; file, YAML path,
/// line and fix in every error) and returns a Trace that passes workloads::validate. Adding a
/// generator is one file under workloads/generators/ ending with
/// `STEPSIM_REGISTER_GENERATOR(Class, "kind", "description")`.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "platforms/platform.hpp"
#include "platforms/yaml_reader.hpp"
#include "workloads/trace.hpp"

namespace stepsim::workloads {

/// @brief The job a workload is generated for.
struct JobContext {
  const platforms::Platform& platform;
  const platforms::Allocation& allocation;
  /// Ops one rank's program may hold (kMaxProgramOps); tests and fuzzing lower it.
  std::size_t max_program_ops = kMaxProgramOps;
  int ranks() const { return allocation.ranks(); }
  int node_of(int rank) const { return platform.node_of_gpu(allocation.gpus.at(rank)); }
};

class Generator {
 public:
  virtual ~Generator() = default;
  /// @brief Builds the trace from `doc` (the whole workload document; `kind` and `version`
  /// already checked) for `job`. Errors name reader.origin() and the YAML path.
  virtual Trace generate(const YAML::Node& doc, const platforms::YamlReader& reader,
                         const JobContext& job) const = 0;
};

struct GeneratorInfo {
  std::string kind;
  std::string description;
  std::function<std::unique_ptr<Generator>()> make;
};

class GeneratorRegistry {
 public:
  static GeneratorRegistry& instance();
  void add(GeneratorInfo info);
  /// @brief Throws ConfigError naming `where` and listing known kinds when absent.
  const GeneratorInfo& get(const std::string& kind, const std::string& where) const;
  std::vector<const GeneratorInfo*> all() const;

 private:
  std::map<std::string, GeneratorInfo> by_kind_;
};

struct GeneratorRegistrar {
  GeneratorRegistrar(const char* kind, const char* description, std::function<std::unique_ptr<Generator>()> make) {
    GeneratorRegistry::instance().add({kind, description, std::move(make)});
  }
};

/// @brief Loads `name_or_path` (a workload preset name, a .yaml/.yml file, or a .json trace
/// file) for `job`. `overrides` are `key.path=value` assignments applied to the YAML document
/// first (the CLI passes `-p workload.KEY=VALUE` here without the `workload.` prefix).
Trace load_workload(const std::string& name_or_path, const JobContext& job,
                    const std::vector<std::string>& overrides = {});

/// @brief Parses workload YAML text; `origin` names it in errors.
Trace parse_workload(const std::string& yaml_text, const std::string& origin, const JobContext& job,
                     const std::vector<std::string>& overrides = {});

/// @brief A workload's YAML document (a preset or a .yaml file) with `overrides` applied and its
/// version checked, with the reader that applied them (its errors name the file and say which
/// values `-p` set); what `stepsim plan` reads a model from.
struct WorkloadDocument {
  YAML::Node doc;
  platforms::YamlReader reader;
  std::string kind;
};
WorkloadDocument load_workload_document(const std::string& name_or_path, const std::vector<std::string>& overrides = {});

struct WorkloadPresetInfo {
  std::string name;
  std::string description;
};
/// @brief Shipped workload presets (workloads/presets/*.yaml), sorted by name.
std::vector<WorkloadPresetInfo> list_workload_presets();

}  // namespace stepsim::workloads

#define STEPSIM_REGISTER_GENERATOR(Class, kind, description)                    \
  namespace {                                                                    \
  const ::stepsim::workloads::GeneratorRegistrar generator_registrar_##Class{   \
      kind, description, [] { return std::make_unique<Class>(); }};              \
  }
