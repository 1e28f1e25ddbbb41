// Kineto trace -> measurements. Times in the trace are microseconds; measurements are seconds.
#include "validation/importers/kineto.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <tuple>

#include "platforms/config_error.hpp"

namespace stepsim::validation {
namespace {

/// Microseconds to seconds through the decimal text: a trace's 1283.243 us becomes exactly
/// the double nearest 1.283243e-3 s, where 1283.243 / 1e6 could land one ulp beside it.
double seconds(double us) {
  char buffer[64];
  auto end = std::to_chars(buffer, buffer + sizeof buffer, us).ptr;
  return std::strtod((std::string(buffer, end) + "e-6").c_str(), nullptr);
}

/// Mean and spread of repeated durations (microseconds in, seconds out).
struct Samples {
  std::vector<double> us;
  double mean_s() const {
    double sum = 0;
    for (double u : us) sum += u;
    return seconds(sum / static_cast<double>(us.size()));
  }
  std::optional<Spread> spread() const {
    if (us.size() < 2) return std::nullopt;
    Spread s;
    s.repetitions = static_cast<int>(us.size());
    s.min_s = seconds(*std::min_element(us.begin(), us.end()));
    s.max_s = seconds(*std::max_element(us.begin(), us.end()));
    const double mean = mean_s();
    double squares = 0;
    for (double u : us) squares += (u / 1e6 - mean) * (u / 1e6 - mean);
    s.stdev_s = std::sqrt(squares / static_cast<double>(us.size() - 1));
    return s;
  }
};

std::string copy_direction(const std::string& name) {
  if (name.find("HtoD") != std::string::npos) return "h2d";
  if (name.find("DtoH") != std::string::npos) return "d2h";
  if (name.find("DtoD") != std::string::npos) return "d2d";
  if (name.find("PtoP") != std::string::npos) return "p2p";
  return "";
}

/// GPU time of every aten matrix-product op: the summed durations of the GPU activity its CUDA
/// launches started (a GEMM and its split-K reduction or memset), each launch counted for the
/// innermost product op around it on the same CPU thread. Ops that launched nothing are left out.
std::vector<std::pair<const KinetoEvent*, double>> matmul_gpu_times(const KinetoProfile& profile) {
  std::map<std::int64_t, double> gpu_us;  // correlation -> GPU duration
  for (const KinetoEvent& e : profile.gpu_events)
    if (e.correlation >= 0) gpu_us[e.correlation] += e.dur;
  std::map<const KinetoEvent*, double> total;
  for (const KinetoEvent& call : profile.api_calls) {
    auto gpu = gpu_us.find(call.correlation);
    if (gpu == gpu_us.end()) continue;
    // The innermost op around the call: the latest-starting one that still contains it.
    auto it = std::upper_bound(profile.matmuls.begin(), profile.matmuls.end(), call.ts,
                               [](double ts, const KinetoEvent& op) { return ts < op.ts; });
    while (it != profile.matmuls.begin()) {
      --it;
      if (it->pid == call.pid && it->tid == call.tid && call.ts <= it->end()) {
        total[&*it] += gpu->second;
        break;
      }
    }
  }
  std::vector<std::pair<const KinetoEvent*, double>> out(total.begin(), total.end());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first->ts < b.first->ts; });
  return out;
}

}  // namespace

MeasurementFile kineto_measurements(const KinetoProfile& profile, const KinetoOptions& options) {
  MeasurementFile file;
  file.source.tool = "kineto (PyTorch profiler)";
  file.source.file = profile.origin;
  file.system.platform = options.platform;
  file.system.gpu = profile.gpu;
  if (profile.world_size > 0) file.system.gpus = profile.world_size;
  if (!profile.nccl_version.empty()) file.system.software["nccl"] = profile.nccl_version;
  if (!profile.cuda_version.empty()) file.system.software["cuda"] = profile.cuda_version;

  std::map<std::pair<std::string, std::int64_t>, Samples> kernels;          // (name, stream)
  std::map<std::tuple<std::string, double, std::string, int>, Samples> collectives;  // op, size, dtype, ranks
  std::map<std::pair<std::string, double>, Samples> copies;                 // direction, bytes
  int unknown_collectives = 0;
  for (const KinetoEvent& e : profile.gpu_events) {
    if (e.cat == "kernel") {
      kernels[{e.name, e.tid}].us.push_back(e.dur);
      if (!is_nccl_kernel(e)) continue;
      std::optional<NcclCall> call = nccl_call(e);
      if (call && !call->op.empty() && call->size_bytes > 0 && call->group_size >= 1 && e.dur > 0)
        collectives[{call->op, call->size_bytes, call->dtype, call->group_size}].us.push_back(e.dur);
      else
        ++unknown_collectives;
    } else if (e.cat == "gpu_memcpy" && e.dur > 0) {
      const std::string direction = copy_direction(e.name);
      const double bytes = e.args.is_object() && e.args.contains("bytes") && e.args["bytes"].is_number()
                               ? e.args["bytes"].get<double>() : 0;
      if (!direction.empty() && bytes > 0) copies[{direction, bytes}].us.push_back(e.dur);
    }
  }

  for (const auto& [key, samples] : kernels) {
    Measurement m;
    m.kind = "kernel";
    m.texts["name"] = key.first;
    double total = 0;
    for (double u : samples.us) total += u;
    m.time_s = seconds(total);
    if (!(m.time_s > 0)) continue;  // zero-length records carry no time to compare with
    m.numbers["count"] = static_cast<double>(samples.us.size());
    if (key.second >= 0) m.numbers["stream"] = static_cast<double>(key.second);
    file.measurements.push_back(m);
  }
  for (const auto& [key, samples] : collectives) {
    const auto& [op, size, dtype, ranks] = key;
    Measurement m;
    m.kind = "collective";
    m.texts["op"] = op;
    if (!dtype.empty()) m.texts["dtype"] = dtype;
    m.numbers["size_bytes"] = size;
    m.numbers["ranks"] = ranks;
    m.time_s = samples.mean_s();
    m.spread = samples.spread();
    file.measurements.push_back(m);
  }
  for (const auto& [key, samples] : copies) {
    Measurement m;
    m.kind = "copy";
    m.texts["direction"] = key.first;
    m.numbers["size_bytes"] = key.second;
    m.time_s = samples.mean_s();
    m.spread = samples.spread();
    file.measurements.push_back(m);
  }
  // In-situ GEMMs: every product op with recorded shapes, grouped by shape and dtype.
  std::map<std::tuple<double, double, double, double, std::string, std::string>, Samples> gemms;  // m n k batch dtype layout
  int shapeless = 0;
  for (const auto& [op, us] : matmul_gpu_times(profile)) {
    const std::optional<MatmulShape> shape = matmul_shape(*op);
    if (!shape) {
      ++shapeless;
      continue;
    }
    gemms[{shape->m, shape->n, shape->k, shape->batch, shape->dtype, shape->layout}].us.push_back(us);
  }
  for (const auto& [key, samples] : gemms) {
    const auto& [m_, n_, k_, batch, dtype, layout] = key;
    Measurement m;
    m.kind = "gemm";
    m.numbers["m"] = m_;
    m.numbers["n"] = n_;
    m.numbers["k"] = k_;
    if (batch > 1) m.numbers["batch"] = batch;
    m.texts["dtype"] = dtype;
    if (!layout.empty()) m.texts["layout"] = layout;
    m.time_s = samples.mean_s();
    m.spread = samples.spread();
    if (m.time_s > 0) file.measurements.push_back(m);
  }
  for (const KinetoEvent& step : profile.steps) {
    if (!(step.dur > 0)) continue;
    Measurement m;
    m.kind = "iteration";
    m.texts["workload"] = options.workload.empty() ? profile.origin : options.workload;
    m.time_s = seconds(step.dur);
    file.measurements.push_back(m);
  }
  if (file.measurements.empty())
    throw ConfigError(profile.origin, "the trace holds no GPU kernels, copies or ProfilerStep annotations",
                      "profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] and call prof.step() per iteration");
  std::vector<std::string> notes = {"stepsim import kineto"};
  if (unknown_collectives > 0)
    notes.push_back(std::to_string(unknown_collectives) +
                    " NCCL kernel(s) without torch collective metadata (send/recv, or torch < 2.1) kept as kernels only");
  if (!gemms.empty())
    notes.push_back("gemm entries: the GPU time of aten matrix-product ops (their GEMM kernels and split-K "
                    "reductions), grouped by shape; fp32 products are named fp32 (a trace does not say allow_tf32)");
  if (shapeless > 0)
    notes.push_back(std::to_string(shapeless) +
                    " matrix-product op(s) without recorded shapes (profile with record_shapes=True) or of another type");
  std::string joined;
  for (const std::string& note : notes) joined += (joined.empty() ? "" : "; ") + note;
  file.source.notes = joined;
  return file;
}

}  // namespace stepsim::validation
