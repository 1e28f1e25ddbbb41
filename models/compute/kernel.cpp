/// @file Dtypes, the kernel-model registry, spec completion (the user-input checks) and pricing.
#include "models/compute/kernel.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "platforms/config_error.hpp"

namespace stepsim::models {
namespace {

struct DtypeName {
  const char* name;
  Dtype dtype;
};
const DtypeName kDtypeNames[] = {
    {"fp32", Dtype::fp32}, {"float32", Dtype::fp32}, {"float", Dtype::fp32},    {"tf32", Dtype::tf32},
    {"fp16", Dtype::fp16}, {"float16", Dtype::fp16}, {"half", Dtype::fp16},     {"bf16", Dtype::bf16},
    {"bfloat16", Dtype::bf16}, {"fp8", Dtype::fp8},  {"int8", Dtype::int8},     {"int32", Dtype::int32},
    {"int64", Dtype::int64}};

std::string number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// "m (required), n (required), k (required), batch (default 1)": what every error lists.
std::string describe_params(const std::vector<KernelParam>& params) {
  std::string text;
  for (const KernelParam& p : params) {
    if (!text.empty()) text += ", ";
    text += p.name + (p.default_value ? " (default " + number(*p.default_value) + ")" : " (required)");
  }
  return text;
}

}  // namespace

const char* to_string(Dtype dtype) {
  switch (dtype) {
    case Dtype::fp32: return "fp32";
    case Dtype::tf32: return "tf32";
    case Dtype::fp16: return "fp16";
    case Dtype::bf16: return "bf16";
    case Dtype::fp8: return "fp8";
    case Dtype::int8: return "int8";
    case Dtype::int32: return "int32";
    case Dtype::int64: return "int64";
  }
  throw std::logic_error("to_string: unknown dtype");
}

Dtype parse_dtype(const std::string& text, const std::string& where) {
  for (const DtypeName& entry : kDtypeNames)
    if (text == entry.name) return entry.dtype;
  throw ConfigError(where, "unknown dtype '" + text + "'",
                    "use one of: fp32 (float32, float), tf32, fp16 (float16, half), bf16 (bfloat16), fp8, int8, "
                    "int32, int64");
}

Bytes bytes_of(Dtype dtype) {
  switch (dtype) {
    case Dtype::fp32:
    case Dtype::tf32:  // stored as fp32; only the multiply rounds to 10 mantissa bits
    case Dtype::int32: return 4;
    case Dtype::fp16:
    case Dtype::bf16: return 2;
    case Dtype::fp8:
    case Dtype::int8: return 1;
    case Dtype::int64: return 8;
  }
  throw std::logic_error("bytes_of: unknown dtype");
}

// Fallbacks keep the rate positive on every catalogued GPU and say what a library does there:
// bf16 without bf16 tensor cores (Volta) runs at the fp16 rate, tf32 before Ampere is plain fp32
// (cuBLAS' TF32 mode needs sm80), fp8 without FP8 units runs at the 16-bit rate. int8 uses the
// FP8 rate where there is one (Hopper and Blackwell datasheets give equal INT8 and FP8 rates),
// else the 16-bit rate: conservative on Turing/Ampere, whose INT8 tensor rate is twice FP16.
// int32/int64 math (index arithmetic) runs on the CUDA cores, at the fp32 rate.
double power_clock_scale(const platforms::GpuModel& gpu) {
  if (!(gpu.power_limit_watts > 0) || !(gpu.power_limit_watts < gpu.tdp_watts)) return 1;
  const double dynamic = (gpu.power_limit_watts - gpu.idle_power_watts) /
                         (gpu.training_power_watts - gpu.idle_power_watts);
  return std::min(1.0, std::cbrt(dynamic));
}

namespace {

double datasheet_flops(const platforms::GpuModel& gpu, Dtype dtype) {
  switch (dtype) {
    case Dtype::fp32:
    case Dtype::int32:
    case Dtype::int64: return gpu.fp32_flops;
    case Dtype::tf32: return gpu.tf32_flops > 0 ? gpu.tf32_flops : gpu.fp32_flops;
    case Dtype::fp16: return gpu.fp16_flops > 0 ? gpu.fp16_flops : gpu.fp32_flops;
    case Dtype::bf16: return gpu.bf16_flops > 0 ? gpu.bf16_flops : datasheet_flops(gpu, Dtype::fp16);
    case Dtype::fp8:
    case Dtype::int8: return gpu.fp8_flops > 0 ? gpu.fp8_flops : datasheet_flops(gpu, Dtype::bf16);
  }
  throw std::logic_error("peak_flops: unknown dtype");
}

}  // namespace

std::string unsupported_dtype(const platforms::GpuModel& gpu, Dtype dtype) {
  const char* unit = dtype == Dtype::bf16   ? (gpu.bf16_flops > 0 ? nullptr : "bf16 tensor cores (Ampere or later)")
                     : dtype == Dtype::tf32 ? (gpu.tf32_flops > 0 ? nullptr : "TF32 tensor cores (Ampere or later)")
                     : dtype == Dtype::fp8  ? (gpu.fp8_flops > 0 ? nullptr : "FP8 tensor cores (Hopper or later)")
                                            : nullptr;
  return unit ? gpu.name + " has no " + unit : "";
}

double peak_flops(const platforms::GpuModel& gpu, Dtype dtype) {
  return datasheet_flops(gpu, dtype) * power_clock_scale(gpu);
}

double KernelSpec::param(const std::string& name) const {
  auto it = params.find(name);
  if (it == params.end())
    throw std::logic_error("kernel '" + kind + "' has no parameter '" + name + "' (spec not completed?)");
  return it->second;
}

KernelModelRegistry& KernelModelRegistry::instance() {
  static KernelModelRegistry registry;
  return registry;
}

void KernelModelRegistry::add(KernelModelInfo info) {
  if (by_kind_.count(info.kind)) throw std::logic_error("kernel model registered twice: " + info.kind);
  std::unique_ptr<KernelModel> model = info.make();
  std::string kind = info.kind;
  by_kind_.emplace(std::move(kind), Entry{std::move(info), std::move(model)});
}

const KernelModel& KernelModelRegistry::get(const std::string& kind, const std::string& where) const {
  auto it = by_kind_.find(kind);
  if (it != by_kind_.end()) return *it->second.model;
  std::string known;
  for (const auto& [k, _] : by_kind_) known += (known.empty() ? "" : ", ") + k;
  throw ConfigError(where, "unknown kernel kind '" + kind + "'", "use one of: " + known);
}

std::vector<const KernelModelInfo*> KernelModelRegistry::all() const {
  std::vector<const KernelModelInfo*> out;
  for (const auto& [_, entry] : by_kind_) out.push_back(&entry.info);
  return out;
}

void complete_kernel(KernelSpec& spec, const std::string& where) {
  const KernelModel& model = KernelModelRegistry::instance().get(spec.kind, where);
  const std::vector<KernelParam> params = model.params();
  const std::string kind = "kernel kind '" + spec.kind + "'";
  const std::string allowed = "parameters of " + kind + ": " + describe_params(params);
  for (const auto& [name, value] : spec.params) {
    auto declared = std::find_if(params.begin(), params.end(), [&](const KernelParam& p) { return p.name == name; });
    if (declared == params.end())
      throw ConfigError(where, "unknown parameter '" + name + "' for " + kind, "use one of the " + allowed);
    if (!std::isfinite(value) || value < declared->minimum)
      throw ConfigError(where,
                        "parameter '" + name + "' of " + kind + " must be a finite number >= " +
                            number(declared->minimum) + ", got " + number(value),
                        "write a value >= " + number(declared->minimum) + " (" + declared->name + ": " +
                            declared->description + ")");
  }
  for (const KernelParam& p : params) {
    if (spec.params.count(p.name)) continue;
    if (!p.default_value)
      throw ConfigError(where, "missing required parameter '" + p.name + "' of " + kind,
                        "add " + p.name + " (" + p.description + "); " + allowed);
    spec.params[p.name] = *p.default_value;
  }
  if (spec.histogram.empty()) return;
  const std::size_t bins = model.histogram_bins();
  if (bins == 0) throw ConfigError(where, kind + " takes no histogram", "remove the histogram");
  if (spec.histogram.size() != bins)
    throw ConfigError(where,
                      "the histogram of " + kind + " needs " + std::to_string(bins) + " entries, got " +
                          std::to_string(spec.histogram.size()),
                      "give " + model.histogram_meaning());
  for (double value : spec.histogram)
    if (!std::isfinite(value) || value < 0)
      throw ConfigError(where, "histogram entries of " + kind + " must be finite and >= 0, got " + number(value),
                        "give " + model.histogram_meaning());
}

KernelCost kernel_cost(const KernelSpec& spec, const platforms::GpuModel& gpu) {
  return KernelModelRegistry::instance().get(spec.kind, "kernel '" + spec.kind + "'").cost(spec, gpu);
}

}  // namespace stepsim::models
