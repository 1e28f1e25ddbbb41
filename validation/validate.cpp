#include "validation/validate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <numeric>
#include <variant>

#include "models/compression/codec.hpp"
#include "models/compute/kernel.hpp"
#include "platforms/config_error.hpp"
#include "platforms/units.hpp"
#include "sim/collective_prediction.hpp"
#include "sim/replay.hpp"
#include "sim/replay_core.hpp"
#include "workloads/workload.hpp"

namespace stepsim::validation {
namespace {

constexpr std::size_t kWorstCases = 10;

/// A case no model predicts: `key` groups it in not_modelled, `reason` says why.
struct Unmodelled {
  std::string key;
  std::string reason;
};
using Outcome = std::variant<CaseResult, Unmodelled>;

std::string where_of(const MeasurementFile& file, std::size_t index, const Measurement& m) {
  std::string where = fmt::format("{}: measurements[{}]", file.path.empty() ? "<memory>" : file.path, index);
  if (m.line > 0) where += fmt::format(" (line {})", m.line);
  return where;
}

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

/// Fills the error figures of a case whose times are set.
CaseResult with_errors(CaseResult c) {
  c.error = c.predicted_s / c.measured_s - 1;
  c.log_error = std::abs(std::log(c.predicted_s / c.measured_s));
  return c;
}

/// Predicts the measurements of one file; platforms are loaded once per node count.
class FileValidator {
 public:
  FileValidator(const MeasurementFile& file, const ValidateOptions& options, sim::Engine& engine)
      : file_(file), options_(options), engine_(engine) {
    overrides_ = file.system.params;
    overrides_.insert(overrides_.end(), options.platform_options.overrides.begin(),
                      options.platform_options.overrides.end());
  }

  const std::string& label() const { return label_; }

  /// Loads the platform the file's cases run on by default (a bad platform is then reported
  /// as itself rather than as the first case's error) and names the file's groups after it.
  void load_default_platform() {
    label_ = platform(file_.system.nodes).name();
    if (!file_.system.params.empty()) label_ += " [" + join(file_.system.params, ", ") + "]";
  }

  /// True when the platform's calibration was fitted on case `index` of this file.
  bool was_fitted(std::size_t index) {
    return platform(file_.system.nodes).calibration.was_fitted(file_.path, static_cast<int>(index));
  }

  Outcome predict(const Measurement& m, const std::string& where) {
    if (m.kind == "collective") return collective(m, where);
    if (m.kind == "gemm") return gemm(m, where);
    if (m.kind == "copy") return copy(m, where);
    if (m.kind == "embedding") return embedding(m, where);
    if (m.kind == "iteration") return iteration(m, where);
    if (m.kind == "compression") return compression(m, where);
    if (m.kind == "kernel")
      return Unmodelled{"kernel", "a kernel is known by its name only, which names no kernel model"};
    return Unmodelled{m.kind, "no model for this kind"};
  }

  /// Facts this file states that the user should see beside the figures.
  std::vector<std::string> notes() const {
    std::vector<std::string> out;
    const std::string name = file_.path.empty() ? "<memory>" : file_.path;
    const bool collectives = std::any_of(file_.measurements.begin(), file_.measurements.end(),
                                         [](const Measurement& m) { return m.kind == "collective"; });
    if (collectives && !nccl_version().empty()) {
      const auto forced = std::find_if(options_.algo_params.begin(), options_.algo_params.end(),
                                       [](const std::string& kv) { return kv.rfind("version=", 0) == 0; });
      out.push_back(forced == options_.algo_params.end()
                        ? fmt::format("{}: NCCL {} (system.software.nccl) selects that release's tuning", name,
                                      nccl_version())
                        : fmt::format("{}: NCCL {} (system.software.nccl), but --algo-param {} selects the tuning",
                                      name, nccl_version(), *forced));
    }
    if (!platforms_.empty()) {
      const platforms::GpuModel& gpu = platforms_.begin()->second->gpu();
      if (!file_.system.gpu_model.empty() && file_.system.gpu_model != gpu.name)
        out.push_back(fmt::format("{}: measured on {} but the platform's GPU is {} (add -p gpu.model={})", name,
                                  file_.system.gpu_model, gpu.name, file_.system.gpu_model));
    }
    return out;
  }

 private:
  /// NCCL's version from the file, when the nccl model will be the one predicting.
  std::string nccl_version() const {
    const auto it = file_.system.software.find("nccl");
    return options_.algo == "nccl" && it != file_.system.software.end() ? it->second : "";
  }

  const platforms::Platform& platform(int nodes) {
    const int wanted = options_.platform_options.nodes > 0 ? options_.platform_options.nodes : (nodes > 1 ? nodes : 0);
    auto& slot = platforms_[wanted];
    if (!slot) {
      platforms::PlatformOptions po = options_.platform_options;
      po.nodes = wanted;
      po.overrides = overrides_;
      slot = std::make_unique<platforms::Platform>(platforms::load_platform(options_.platform, po));
    }
    return *slot;
  }

  /// The job's GPUs: --gpus, else the file's gpu_list, else `ranks` GPUs spread evenly over the
  /// first `nodes` nodes (all GPUs when ranks is 0).
  platforms::Allocation allocation(const platforms::Platform& p, int ranks, int nodes, const std::string& where) {
    const std::string& text = !options_.gpus.empty() ? options_.gpus : file_.system.gpu_list;
    if (!text.empty()) {
      platforms::Allocation a = platforms::parse_allocation(text, p);
      if (ranks > 0 && a.ranks() != ranks)
        throw ConfigError(where, fmt::format("the case ran on {} ranks but the allocation '{}' ({}) has {}", ranks, text,
                                             options_.gpus.empty() ? "system.gpu_list" : "--gpus", a.ranks()),
                          "give an allocation of as many GPUs, or validate files of one rank count at a time");
      return a;
    }
    if (ranks <= 0) return platforms::parse_allocation("", p);
    nodes = std::max(nodes, 1);
    if (ranks % nodes != 0 || ranks / nodes > p.gpus_per_node() || nodes > p.nodes())
      throw ConfigError(where,
                        fmt::format("{} ranks on {} node(s) do not fit {} ({} node(s) of {} GPUs)", ranks, nodes,
                                    p.name(), p.nodes(), p.gpus_per_node()),
                        "choose a platform that fits the run, or pass --nodes N or --gpus LIST");
    platforms::Allocation a;
    for (int node = 0; node < nodes; ++node)
      for (int g = 0; g < ranks / nodes; ++g) a.gpus.push_back(node * p.gpus_per_node() + g);
    return a;
  }

  Outcome collective(const Measurement& m, const std::string& where) {
    const int ranks = static_cast<int>(m.number("ranks"));
    const int nodes = static_cast<int>(m.number_or("nodes", file_.system.nodes));
    const std::string op = m.text("op");
    if (ranks < 2)
      return Unmodelled{"collective on 1 rank", "stepsim's collectives need at least 2 ranks"};
    const platforms::Platform& p = platform(nodes);
    const platforms::Allocation a = allocation(p, ranks, nodes, where);
    models::CollectiveSpec spec;
    spec.op = models::parse_op(op);
    spec.ranks = ranks;
    spec.bytes = m.number("size_bytes");
    models::AlgorithmOptions algo_options;
    const std::string forced = m.text_or("algo", "nccl");
    if (options_.algo == "nccl") {
      // The run's own choices, so the model prices what actually ran (NCCL_ALGO, NCCL_PROTO).
      const bool collectives = std::any_of(file_.measurements.begin(), file_.measurements.end(),
                                         [](const Measurement& m) { return m.kind == "collective"; });
    if (collectives && !nccl_version().empty()) algo_options.extra["version"] = nccl_version();
      if (forced != "nccl") algo_options.extra["algo"] = forced;
      if (m.texts.count("protocol")) algo_options.extra["proto"] = m.text("protocol");
      sim::add_algo_params(m.params, algo_options);  // the run's NCCL settings (nvls=off, gpus_per_thread=G)
      algo_options.channels = static_cast<int>(m.number_or("channels", 0));
    }
    sim::add_algo_params(options_.algo_params, algo_options);
    const models::CollectiveContext ctx{p, a, algo_options};
    if (auto why = sim::collective_unsupported(options_.algo, spec, ctx))
      return Unmodelled{fmt::format("collective {} ({})", op, options_.algo), *why};
    const sim::CollectivePrediction pred = sim::predict_collective(options_.algo, spec, ctx, engine_);

    CaseResult c;
    c.kind = "collective";
    c.key = fmt::format("{}, {} ranks", models::to_string(spec.op), ranks);
    if (a.nodes(p) > 1) c.key += fmt::format(", {} nodes", a.nodes(p));
    if (forced != "nccl") c.key += ", algo " + forced;
    if (m.text_or("in_place", "false") == "true") c.key += ", in-place";
    c.label = format_size(spec.bytes);
    c.x = spec.bytes;
    c.measured_s = m.time_s;
    c.predicted_s = pred.result.time;
    c.measured_rate = spec.bytes / m.time_s / kGB * models::busbw_factor(spec.op, ranks);
    c.predicted_rate = pred.busbw_GBps();
    c.headline = spec.bytes >= options_.min_size;
    c.model = fmt::format("{} ({}, {} ch)", pred.schedule.algorithm, pred.schedule.protocol.name,
                          pred.schedule.channels);
    return c;
  }

  /// Prices a kernel spec on the platform's GPU.
  models::KernelCost kernel(models::KernelSpec spec, const std::string& where) {
    models::complete_kernel(spec, where);
    return models::kernel_cost(spec, platform(file_.system.nodes).gpu());
  }

  Outcome gemm(const Measurement& m, const std::string& where) {
    models::KernelSpec spec;
    spec.kind = "gemm";
    spec.dtype = models::parse_dtype(m.text("dtype"), where + ".dtype");
    for (const char* key : {"m", "n", "k"}) spec.params[key] = m.number(key);
    spec.params["batch"] = m.number_or("batch", 1);
    const std::string layout = m.text_or("layout", "NN");
    spec.params["transpose_a"] = layout[0] == 'T' ? 1 : 0;
    spec.params["transpose_b"] = layout[1] == 'T' ? 1 : 0;
    const models::KernelCost cost = kernel(spec, where);
    CaseResult c;
    c.kind = "gemm";
    c.key = models::to_string(spec.dtype);
    c.label = fmt::format("{}x{}x{}", spec.params["m"], spec.params["n"], spec.params["k"]);
    if (spec.params["batch"] != 1) c.label += fmt::format(" x{}", spec.params["batch"]);
    c.x = cost.flops;
    c.measured_s = m.time_s;
    c.predicted_s = cost.time;
    c.measured_rate = cost.flops / m.time_s / 1e12;
    c.predicted_rate = cost.flops / cost.time / 1e12;
    c.model = cost.bound + "-bound";
    return c;
  }

  Outcome copy(const Measurement& m, const std::string& where) {
    const std::string direction = m.text("direction");
    if (direction == "h2d" || direction == "d2h") return host_copy(m, where, direction);
    if (direction != "d2d")
      return Unmodelled{"copy " + direction, "copies between GPUs are timed as collectives (sendrecv), not as copies"};
    // A d2d copy reads and writes every byte once: the elementwise model's HBM roof with one
    // byte read and one written per element and no math.
    models::KernelSpec spec;
    spec.kind = "elementwise";
    spec.params = {{"elements", m.number("size_bytes")}, {"bytes_read", 1}, {"bytes_written", 1}, {"flops", 0}};
    const models::KernelCost cost = kernel(spec, where);
    CaseResult c;
    c.kind = "copy";
    c.key = direction;
    c.label = format_size(m.number("size_bytes"));
    c.x = m.number("size_bytes");
    c.measured_s = m.time_s;
    c.predicted_s = cost.time;
    c.measured_rate = cost.bytes / m.time_s / kGB;
    c.predicted_rate = cost.bytes / cost.time / kGB;
    c.model = cost.bound + "-bound";
    return c;
  }

  /// A copy between the host and one GPU, priced as the replay prices a trace's memcpy op: the
  /// route to the GPU's CPU, and for pageable memory at most that CPU's staging rate.
  Outcome host_copy(const Measurement& m, const std::string& where, const std::string& direction) {
    const bool to_device = direction == "h2d";
    const std::string memory = m.text_or("host_memory", "pinned");
    const platforms::Platform& p = platform(1);
    const platforms::Allocation gpu =
        platforms::parse_allocation(std::to_string(static_cast<int>(m.number_or(to_device ? "dst" : "src", 0))), p);
    workloads::Trace trace;
    trace.origin = where;
    trace.ranks = 1;
    trace.program_of_rank = {0};
    workloads::Op op{.kind = workloads::OpKind::memcpy, .stream = 0, .bytes = m.number("size_bytes")};
    op.memcpy = to_device ? workloads::MemcpyKind::host_to_device : workloads::MemcpyKind::device_to_host;
    op.host_memory = memory == "pageable" ? workloads::HostMemory::pageable : workloads::HostMemory::pinned;
    trace.programs.push_back(workloads::Program{.streams = {"copy"}, .events = {}, .ops = {op}});
    const sim::ReplayPlan plan(trace, sim::Placement{p, gpu});
    CaseResult c;
    c.kind = "copy";
    c.key = direction + " " + memory;
    c.label = format_size(m.number("size_bytes"));
    c.x = m.number("size_bytes");
    c.measured_s = m.time_s;
    c.predicted_s = plan.duration(0, op);
    c.measured_rate = c.x / m.time_s / kGB;
    c.predicted_rate = c.x / c.predicted_s / kGB;
    c.model = memory == "pageable" ? "host staging" : "PCIe route";
    return c;
  }

  Outcome embedding(const Measurement& m, const std::string& where) {
    const std::string distribution = m.text("distribution");
    if (distribution != "uniform")
      return Unmodelled{"embedding " + distribution,
                        "the embedding model takes uniform indices or a measured index-reuse histogram, which a " +
                            distribution + " distribution's parameters do not give"};
    const std::string pass = m.text_or("pass", "forward");
    const bool torch = m.text_or("kernel", "fused") == "torch";
    if (torch && pass != "forward")
      return Unmodelled{"embedding torch " + pass, "PyTorch's EmbeddingBag kernel is modelled forward only"};
    models::KernelSpec spec;
    spec.kind = torch ? "torch_embedding_bag" : "embedding_" + pass;
    spec.dtype = models::parse_dtype(m.text("dtype"), where + ".dtype");
    for (const char* key : {"tables", "rows", "dim", "pooling", "batch"}) spec.params[key] = m.number(key);
    if (torch) spec.params.erase("tables");  // one launch per table
    models::KernelCost cost = kernel(spec, where);
    if (torch) cost.time *= m.number("tables");  // one launch per table
    CaseResult c;
    c.kind = "embedding";
    c.key = (torch ? "torch " : "") + pass + ", " + models::to_string(spec.dtype);
    c.label = fmt::format("T{} E{} D{} L{} B{}", spec.params["tables"], spec.params["rows"], spec.params["dim"],
                          spec.params["pooling"], spec.params["batch"]);
    c.measured_s = m.time_s;
    c.predicted_s = cost.time;
    c.model = cost.bound + "-bound";
    return c;
  }

  Outcome compression(const Measurement& m, const std::string& where) {
    const std::string name = m.text("codec");
    const auto codecs = models::CodecRegistry::instance().all();
    const auto info = std::find_if(codecs.begin(), codecs.end(), [&](const auto* c) { return c->name == name; });
    if (info == codecs.end()) return Unmodelled{"compression " + name, "no codec model of this name"};
    // The case's keys that the codec takes become its parameters; a data-dependent codec's
    // ratio is the measured one.
    std::string text = name;
    for (const models::CodecParam& param : (*info)->params) {
      std::string value;
      if (m.texts.count(param.name)) value = m.text(param.name);
      if (m.numbers.count(param.name)) value = fmt::format("{:g}", m.number(param.name));
      if (param.name == "ratio" && m.numbers.count("compressed_bytes"))
        value = fmt::format("{:.17g}", m.number("size_bytes") / m.number("compressed_bytes"));
      if (!value.empty()) text += fmt::format("{}{}={}", text == name ? ":" : ",", param.name, value);
    }
    const std::unique_ptr<models::Codec> codec = models::parse_codec(text, where);
    const std::string direction = m.text("direction");
    const Bytes raw = m.number("size_bytes");
    const platforms::GpuModel& gpu = platform(file_.system.nodes).gpu();
    CaseResult c;
    c.kind = "compression";
    c.key = codec->spec() + ", " + direction;
    c.label = format_size(raw);
    c.x = raw;
    c.measured_s = m.time_s;
    c.predicted_s = direction == "compress" ? codec->compress_time(raw, gpu) : codec->decompress_time(raw, gpu);
    c.measured_rate = raw / m.time_s / kGB;
    c.predicted_rate = raw / c.predicted_s / kGB;
    c.model = fmt::format("ratio {:.3g}", codec->ratio(raw));
    return c;
  }

  /// A workload file named relative to the measurement file (as a file written beside it is)
  /// when it is not found relative to the working directory; preset names pass through.
  std::string workload_path(const std::string& name) const {
    namespace fs = std::filesystem;
    if (file_.path.empty() || fs::path(name).is_absolute() || fs::exists(name)) return name;
    const fs::path beside = fs::path(file_.path).parent_path() / name;
    return fs::exists(beside) ? beside.string() : name;
  }

  Outcome iteration(const Measurement& m, const std::string& where) {
    // `stepsim import kineto` without --workload names the profiler trace itself.
    if (file_.source.tool.rfind("kineto", 0) == 0 && m.text("workload") == file_.source.file)
      return Unmodelled{"iteration of a profiler trace",
                        "its workload is the trace the importer read: import it with --workload NAME (the workload "
                        "the run trained), or replay the trace itself with `stepsim import kineto --as workload`"};
    const platforms::Platform& p = platform(file_.system.nodes);
    const platforms::Allocation a = allocation(p, file_.system.gpus, file_.system.nodes, where);
    // The case's params describe the workload; a `workload.` prefix (as on the CLI) is optional.
    std::vector<std::string> overrides;
    for (const std::string& o : m.params) overrides.push_back(o.rfind("workload.", 0) == 0 ? o.substr(9) : o);
    const workloads::Trace trace = workloads::load_workload(workload_path(m.text("workload")), {p, a}, overrides);
    sim::ReplayOptions replay_options;
    replay_options.engine = options_.engine;
    const sim::Prediction pred = sim::replay(trace, {p, a}, replay_options);
    CaseResult c;
    c.kind = "iteration";
    c.key = m.text("workload");
    c.label = m.params.empty() ? fmt::format("{} ranks", a.ranks()) : join(m.params, " ");
    c.measured_s = m.time_s;
    c.predicted_s = pred.iteration_time;
    c.model = fmt::format("{} ranks, {} engine", pred.ranks, pred.engine);
    return c;
  }

  const MeasurementFile& file_;
  const ValidateOptions& options_;
  sim::Engine& engine_;
  std::vector<std::string> overrides_;
  std::string label_;
  std::map<int, std::unique_ptr<platforms::Platform>> platforms_;

};

/// Collects the cases into groups of equal (platform, kind[, key]) in order of first
/// appearance; `by_key` = false gives one group per (platform, kind) with key "all".
std::vector<GroupSummary> collect(const std::vector<CaseResult>& cases, Bytes min_size, Seconds min_kernel_time,
                                  bool by_key) {
  std::vector<GroupSummary> groups;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const CaseResult& c = cases[i];
    const std::string key = by_key ? c.key : "all";
    auto it = std::find_if(groups.begin(), groups.end(), [&](const GroupSummary& g) {
      return g.platform == c.platform && g.kind == c.kind && g.key == key;
    });
    if (it == groups.end()) {
      GroupSummary g;
      g.platform = c.platform;
      g.kind = c.kind;
      g.key = key;
      const bool sized = c.kind == "collective" || c.kind == "copy" || c.kind == "compression";
      g.x_name = c.kind == "gemm" ? "FLOPs" : sized ? "size" : "";
      g.rate_name = c.kind == "collective"    ? "busbw (GB/s)"
                    : c.kind == "gemm"        ? "TFLOP/s"
                    : c.kind == "copy"        ? (key == "d2d"   ? "GB/s read + written"
                                                 : key == "all" ? "GB/s (d2d: read + written)"
                                                                : "GB/s copied")
                    : c.kind == "compression" ? "GB/s of raw data"
                                              : "";
      g.headline_rule = c.kind == "collective"                        ? "sizes >= " + format_size(min_size)
                        : (c.kind == "iteration" || c.kind == "kernel") ? "all cases"
                                                                          : fmt::format("measured >= {:g} us", min_kernel_time * 1e6);
      groups.push_back(g);
      it = groups.end() - 1;
    }
    it->cases.push_back(i);
  }
  return groups;
}

/// The figures of each group: cases by x, geomeans, worst cases.
std::vector<GroupSummary> summarise(const std::vector<CaseResult>& cases, std::vector<GroupSummary> groups) {
  for (GroupSummary& g : groups) {
    std::stable_sort(g.cases.begin(), g.cases.end(), [&](std::size_t a, std::size_t b) { return cases[a].x < cases[b].x; });
    std::vector<double> headline, all;
    for (std::size_t i : g.cases) {
      all.push_back(cases[i].log_error);
      if (cases[i].headline) headline.push_back(cases[i].log_error);
    }
    g.headline_count = headline.size();
    g.headline_geomean = geomean_error(headline);
    g.all_geomean = geomean_error(all);
    g.worst = g.cases;
    std::stable_sort(g.worst.begin(), g.worst.end(),
                     [&](std::size_t a, std::size_t b) { return cases[a].log_error > cases[b].log_error; });
    if (g.worst.size() > kWorstCases) g.worst.resize(kWorstCases);
  }
  return groups;
}

/// One case's prediction; errors name the case (a model's message names the CLI flag it
/// would have come from).
Outcome predict_case(FileValidator& validator, const Measurement& m, const std::string& where) {
  if (!(m.time_s > 0))
    throw ConfigError(where, fmt::format("time_s must be > 0, got {}", m.time_s), "write the measured time in seconds");
  try {
    return validator.predict(m, where);
  } catch (const ConfigError& e) {
    if (e.where().rfind(where, 0) == 0) throw;
    throw ConfigError(where, e.what(), "");
  }
}

}  // namespace

double geomean_error(const std::vector<double>& log_errors) {
  if (log_errors.empty()) return std::numeric_limits<double>::quiet_NaN();
  return std::exp(std::accumulate(log_errors.begin(), log_errors.end(), 0.0) / log_errors.size()) - 1;
}

std::vector<std::optional<Seconds>> predicted_times(const MeasurementFile& file, const ValidateOptions& options) {
  const auto engine = sim::make_engine(options.engine);
  FileValidator validator(file, options, *engine);
  std::vector<std::optional<Seconds>> out;
  for (std::size_t i = 0; i < file.measurements.size(); ++i) {
    Outcome outcome = predict_case(validator, file.measurements[i], where_of(file, i, file.measurements[i]));
    if (auto* c = std::get_if<CaseResult>(&outcome)) out.emplace_back(c->predicted_s);
    else out.emplace_back(std::nullopt);
  }
  return out;
}

ValidationResult validate(const std::vector<MeasurementFile>& files, const ValidateOptions& options) {
  ValidationResult result;
  result.platform = options.platform;
  result.min_size = options.min_size;
  const auto engine = sim::make_engine(options.engine);
  result.engine = engine->name();
  for (const MeasurementFile& file : files) {
    FileValidator validator(file, options, *engine);
    validator.load_default_platform();
    int fitted = 0, other_kinds = 0;
    for (std::size_t i = 0; i < file.measurements.size(); ++i) {
      const Measurement& m = file.measurements[i];
      const std::string where = where_of(file, i, m);
      if (!options.kinds.empty() && std::find(options.kinds.begin(), options.kinds.end(), m.kind) == options.kinds.end()) {
        ++other_kinds;
        continue;
      }
      // A case the calibration was fitted on would score the fit, not the prediction.
      if (validator.was_fitted(i)) {
        ++fitted;
        continue;
      }
      Outcome outcome = predict_case(validator, m, where);
      if (auto* skipped = std::get_if<Unmodelled>(&outcome)) {
        NotModelled& n = result.not_modelled[skipped->key];
        ++n.count;
        n.reason = skipped->reason;
        n.where.push_back(where);
        continue;
      }
      CaseResult c = std::get<CaseResult>(std::move(outcome));
      if (c.kind == "gemm" || c.kind == "copy" || c.kind == "embedding" || c.kind == "compression")
        c.headline = m.time_s >= options.min_kernel_time;
      c.where = where;
      c.platform = validator.label();
      result.cases.push_back(with_errors(std::move(c)));
    }
    for (std::string& note : validator.notes()) result.notes.push_back(std::move(note));
    if (fitted > 0)
      result.notes.push_back(fmt::format("{}: {} case(s) left out: the platform's calibration was fitted on them",
                                         file.path.empty() ? "<memory>" : file.path, fitted));
    if (other_kinds > 0)
      result.notes.push_back(fmt::format("{}: {} case(s) of other kinds left out (--kind)",
                                         file.path.empty() ? "<memory>" : file.path, other_kinds));
  }
  result.groups = summarise(result.cases, collect(result.cases, options.min_size, options.min_kernel_time, true));
  result.overall = summarise(result.cases, collect(result.cases, options.min_size, options.min_kernel_time, false));
  return result;
}

}  // namespace stepsim::validation
