#pragma once
/// @file Compute kernels: what a GPU kernel computes (KernelSpec) and how long it takes on a
/// given GPU (KernelModel), one self-registering model per kernel kind.
///
/// Contract: a KernelModel is pure. It declares the parameters its kind takes (name,
/// description, default or required), so loaders can reject unknown or missing ones with the
/// list of allowed names, and prices a spec on a GpuModel as a KernelCost whose `time` is
/// the kernel's device time (no CPU launch cost: the replay adds that). Every constant a
/// model uses is either a hardware figure of the GpuModel (cited in platforms/presets/gpus.yaml)
/// or an efficiency figure cited in the model's file. Adding a kernel kind is one file under
/// models/compute/ ending with `STEPSIM_REGISTER_KERNEL_MODEL(Class, "kind", "description")`.
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "platforms/platform.hpp"

namespace stepsim::models {

enum class Dtype : std::uint8_t { fp32, tf32, fp16, bf16, fp8, int8, int32, int64 };
const char* to_string(Dtype dtype);
/// @brief Parses fp32/float32/float, tf32, fp16/float16/half, bf16/bfloat16, fp8, int8,
/// int32, int64; throws ConfigError naming `where` otherwise.
Dtype parse_dtype(const std::string& text, const std::string& where);
Bytes bytes_of(Dtype dtype);
/// @brief Dense FLOP/s of `gpu` for math in `dtype` (tensor cores where the dtype has them): the
/// datasheet's figure times power_clock_scale.
double peak_flops(const platforms::GpuModel& gpu, Dtype dtype);
/// @brief Why `gpu` cannot run training math in `dtype` at that dtype's rate (bf16 without bf16
/// tensor cores, tf32 before Ampere, fp8 without FP8 units), or "" where it can. peak_flops
/// falls back to a slower rate there; generators refuse such a dtype instead of pricing it
/// silently.
std::string unsupported_dtype(const platforms::GpuModel& gpu, Dtype dtype);

/// @brief The SM clock a power limit below the TDP leaves, relative to running at the TDP (1 when
/// no lower limit is set). First-order DVFS: the dynamic power above the idle draw at full clock
/// goes as C V^2 f with the voltage rising in step with the clock, so as f^3; a compute-heavy
/// training step draws gpu.training_power_watts at the TDP, hence
///     scale = min(1, cbrt((limit - idle) / (training - idle))).
/// Inputs measured on an H100 SXM at its 700 W TDP (validation/measurements/h100-sxm/power/: an
/// FSDP2 iteration drew 673 W, already capped, SM clock 1653 MHz mean; idle at full clock
/// ~120 W). The cube is the model's assumption: where the voltage stops rising the exponent
/// falls toward 1 (a square root instead gives a 5 points larger slowdown at 500 W). Only
/// compute roofs scale: HBM has its own clock.
double power_clock_scale(const platforms::GpuModel& gpu);

/// @brief Fraction of peak_flops a wave-aligned large GEMM in `dtype` reaches on `gpu`: the
/// platform's calibrated value when it has one, else the architecture's cited ceiling.
double gemm_efficiency(const platforms::GpuModel& gpu, Dtype dtype);

/// @brief One kernel: its kind (a registered KernelModel) and that kind's parameters.
struct KernelSpec {
  std::string kind;                         ///< e.g. "gemm", "attention", "elementwise"
  Dtype dtype = Dtype::bf16;
  std::map<std::string, double> params;     ///< e.g. m, n, k, batch for gemm
  std::vector<double> histogram;            ///< kind-specific list (embedding index reuse)

  double param(const std::string& name) const;   ///< throws std::logic_error when absent
  bool operator==(const KernelSpec&) const = default;
};

struct KernelCost {
  Seconds time = 0;        ///< device time of the kernel
  double flops = 0;        ///< math done (for MFU and roofline reports)
  Bytes bytes = 0;         ///< DRAM traffic assumed
  std::string bound;       ///< "compute", "memory", "l2", "latency": what limits it
};

struct KernelParam {
  std::string name;
  std::string description;
  std::optional<double> default_value;     ///< none = required
  double minimum = 0;                      ///< smallest accepted value (e.g. 1 for a dimension)
};

class KernelModel {
 public:
  virtual ~KernelModel() = default;
  virtual std::vector<KernelParam> params() const = 0;
  /// @brief Whether `histogram` is used (and then what it holds), empty when it is not.
  virtual std::string histogram_meaning() const { return {}; }
  /// @brief Entries a given `histogram` must have; 0 when the kind takes none.
  virtual std::size_t histogram_bins() const { return 0; }
  /// @brief Prices a spec whose params were completed by complete_kernel().
  virtual KernelCost cost(const KernelSpec& spec, const platforms::GpuModel& gpu) const = 0;
};

struct KernelModelInfo {
  std::string kind;
  std::string description;
  std::function<std::unique_ptr<KernelModel>()> make;
};

/// @brief Kind-ordered registry (function-local static; filled by static registrars).
class KernelModelRegistry {
 public:
  static KernelModelRegistry& instance();
  void add(KernelModelInfo info);
  /// @brief Throws ConfigError naming `where` and listing known kinds when absent.
  const KernelModel& get(const std::string& kind, const std::string& where) const;
  std::vector<const KernelModelInfo*> all() const;

 private:
  struct Entry {
    KernelModelInfo info;
    std::unique_ptr<KernelModel> model;
  };
  std::map<std::string, Entry> by_kind_;
};

struct KernelModelRegistrar {
  KernelModelRegistrar(const char* kind, const char* description,
                       std::function<std::unique_ptr<KernelModel>()> make) {
    KernelModelRegistry::instance().add({kind, description, std::move(make)});
  }
};

/// @brief Checks `spec` against its model (known kind, no unknown parameter, every required
/// one present, values finite and >= the parameter's minimum, histogram of the declared length
/// with finite entries >= 0) and fills defaults; throws ConfigError naming `where`
/// (e.g. "trace.yaml: kernels[3] (line 12)") and the allowed parameters.
void complete_kernel(KernelSpec& spec, const std::string& where);

/// @brief The cost of a completed spec on `gpu`.
KernelCost kernel_cost(const KernelSpec& spec, const platforms::GpuModel& gpu);

}  // namespace stepsim::models

#define STEPSIM_REGISTER_KERNEL_MODEL(Class, kind, description)                  \
  namespace {                                                                    \
  const ::stepsim::models::KernelModelRegistrar kernel_registrar_##Class{        \
      kind, description, [] { return std::make_unique<Class>(); }};              \
  }
