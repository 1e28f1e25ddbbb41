#include "platforms/catalogue.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "platforms/config_error.hpp"

namespace stepsim::platforms {
namespace {

// Catalogues are shipped with the binary, so a broken one is a build defect: they are still
// read through YamlReader, whose errors then name the catalogue file and line. Each is parsed
// once per thread (every platform load reads them; a sweep loads thousands): per thread because
// a yaml-cpp node's non-const lookups write to it.
YAML::Node load_catalogue(const std::string& stem) {
  thread_local std::map<std::string, YAML::Node> parsed;
  if (const auto cached = parsed.find(stem); cached != parsed.end()) return cached->second;
  const auto& presets = embedded_presets();
  auto it = presets.find(stem);
  if (it == presets.end()) throw std::logic_error("catalogue " + stem + ".yaml is not embedded");
  return parsed.emplace(stem, YAML::Load(it->second)).first->second;
}

const std::vector<std::string> kArchNames = {"pascal", "volta", "turing", "ampere", "hopper", "blackwell"};

}  // namespace

bool is_catalogue(const std::string& stem) { return stem == "gpus" || stem == "nics"; }

const std::vector<std::string>& gpu_figure_keys() {
  static const std::vector<std::string> keys = {
      "arch",       "sm_version", "sm_count",   "memory",    "hbm_bandwidth",    "hbm_efficiency", "l2_size", "l2_bandwidth",
      "fp32_flops", "tf32_flops", "fp16_flops", "bf16_flops", "fp8_flops", "nvlink_bandwidth", "nvlinks",
      "power_limit_watts", "tdp_watts", "training_power_watts", "idle_power_watts"};
  return keys;
}

void read_gpu_figures(const YamlReader& reader, const YAML::Node& map, const std::string& path, GpuModel& gpu,
                      bool all_required) {
  auto field = [&](const std::string& key) -> YAML::Node {
    if (all_required) return reader.require(map, path, key);
    return map[key];
  };
  auto at = [&](const std::string& key) { return path + "." + key; };
  if (YAML::Node n = field("arch"))
    gpu.arch = static_cast<GpuArch>(std::find(kArchNames.begin(), kArchNames.end(),
                                              reader.get_choice(n, at("arch"), kArchNames)) -
                                    kArchNames.begin());
  if (YAML::Node n = field("sm_version")) gpu.sm_version = reader.get_int(n, at("sm_version"), 10);
  if (YAML::Node n = field("sm_count")) gpu.sm_count = reader.get_int(n, at("sm_count"), 1);
  if (YAML::Node n = field("memory")) gpu.memory = reader.get_size(n, at("memory"));
  if (YAML::Node n = field("hbm_bandwidth")) gpu.hbm_bandwidth = reader.get_bandwidth(n, at("hbm_bandwidth"));
  // Optional even in the catalogue: only GPUs with a published stream measurement have it.
  if (YAML::Node n = map["hbm_efficiency"]) {
    gpu.hbm_efficiency = reader.get_number(n, at("hbm_efficiency"));
    if (!(gpu.hbm_efficiency > 0 && gpu.hbm_efficiency <= 1))
      reader.fail(at("hbm_efficiency"), n, "hbm_efficiency is the fraction of hbm_bandwidth streaming kernels reach",
                  "give a number in (0, 1], e.g. hbm_efficiency: 0.86");
  }
  if (YAML::Node n = field("l2_size")) gpu.l2_size = reader.get_size(n, at("l2_size"));
  if (YAML::Node n = field("l2_bandwidth")) gpu.l2_bandwidth = reader.get_bandwidth(n, at("l2_bandwidth"));
  if (YAML::Node n = field("fp32_flops")) gpu.fp32_flops = reader.get_number(n, at("fp32_flops"));
  if (YAML::Node n = field("tf32_flops")) gpu.tf32_flops = reader.get_number(n, at("tf32_flops"));
  if (YAML::Node n = field("fp16_flops")) gpu.fp16_flops = reader.get_number(n, at("fp16_flops"));
  if (YAML::Node n = field("bf16_flops")) gpu.bf16_flops = reader.get_number(n, at("bf16_flops"));
  if (YAML::Node n = field("fp8_flops")) gpu.fp8_flops = reader.get_number(n, at("fp8_flops"));
  if (YAML::Node n = field("nvlink_bandwidth"))
    gpu.nvlink_bandwidth_per_link = reader.get_bandwidth(n, at("nvlink_bandwidth"));
  if (YAML::Node n = field("nvlinks")) gpu.nvlinks = reader.get_int(n, at("nvlinks"), 0);
  // Power figures are optional even in the catalogue: only measured GPUs have the draws.
  const auto watts = [&](const char* key, double& value) {
    if (YAML::Node n = map[key]) {
      value = reader.get_number(n, at(key));
      if (!(value > 0)) reader.fail(at(key), n, "a power must be > 0 watts", "write e.g. " + std::string(key) + ": 500");
    }
  };
  watts("power_limit_watts", gpu.power_limit_watts);
  watts("tdp_watts", gpu.tdp_watts);
  watts("training_power_watts", gpu.training_power_watts);
  watts("idle_power_watts", gpu.idle_power_watts);
}

GpuModel catalogue_gpu(const std::string& name, const YamlReader& reader, const YAML::Node& at,
                       const std::string& path) {
  YAML::Node root = load_catalogue("gpus");
  YamlReader catalogue("gpus.yaml (built-in GPU catalogue)");
  YAML::Node gpus = root["gpus"];
  std::vector<std::string> known;
  for (const auto& entry : gpus) known.push_back(entry.first.as<std::string>());
  YAML::Node entry = gpus[name];
  if (!entry) reader.fail(path, at, "unknown GPU model '" + name + "'", "use one of: " + join(known));
  catalogue.check_keys(entry, "gpus." + name, gpu_figure_keys());
  GpuModel gpu;
  gpu.name = name;
  read_gpu_figures(catalogue, entry, "gpus." + name, gpu, true);
  return gpu;
}

NicModel catalogue_nic(const std::string& key, const YamlReader& reader, const YAML::Node& at,
                       const std::string& path) {
  YAML::Node nics = load_catalogue("nics")["nics"];
  YamlReader catalogue("nics.yaml (built-in NIC catalogue)");
  std::vector<std::string> known;
  for (const auto& entry : nics) known.push_back(entry.first.as<std::string>());
  YAML::Node entry = nics[key];
  if (!entry) reader.fail(path, at, "unknown NIC '" + key + "'", "use one of: " + join(known));
  const std::string p = "nics." + key;
  catalogue.check_keys(entry, p, {"name", "bandwidth", "latency", "switch_latency", "nccl_protocols"});
  NicModel nic;
  nic.name = catalogue.get_string(catalogue.require(entry, p, "name"), p + ".name");
  nic.bandwidth = catalogue.get_bandwidth(catalogue.require(entry, p, "bandwidth"), p + ".bandwidth");
  nic.latency = catalogue.get_duration(catalogue.require(entry, p, "latency"), p + ".latency");
  nic.switch_latency = catalogue.get_duration(catalogue.require(entry, p, "switch_latency"), p + ".switch_latency");
  if (YAML::Node protocols = entry["nccl_protocols"])
    nic.nccl_protocols = read_nccl_protocols(catalogue, protocols, p + ".nccl_protocols");
  return nic;
}

std::vector<std::string> read_nccl_protocols(const YamlReader& reader, const YAML::Node& node,
                                             const std::string& path) {
  if (!node.IsSequence() || node.size() == 0)
    reader.fail(path, node, "expected a non-empty list of NCCL protocols", "write e.g. [Simple] or [LL, LL128, Simple]");
  std::vector<std::string> protocols;
  for (std::size_t i = 0; i < node.size(); ++i) {
    const std::string at = path + "[" + std::to_string(i) + "]";
    const std::string proto = reader.get_choice(node[i], at, {"LL", "LL128", "Simple"});
    if (std::find(protocols.begin(), protocols.end(), proto) != protocols.end())
      reader.fail(at, node[i], "protocol '" + proto + "' listed twice", "list each protocol once");
    protocols.push_back(proto);
  }
  return protocols;
}

std::string default_nic(GpuArch arch) {
  YAML::Node defaults = load_catalogue("nics")["default_by_arch"];
  YAML::Node key = defaults[to_string(arch)];
  if (!key) throw std::logic_error(std::string("nics.yaml has no default NIC for ") + to_string(arch));
  return key.as<std::string>();
}

}  // namespace stepsim::platforms
