#include "platforms/loader.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "platforms/catalogue.hpp"
#include "platforms/config_error.hpp"
#include "platforms/node_reader.hpp"
#include "platforms/yaml_reader.hpp"

namespace stepsim::platforms {
namespace {

const std::vector<std::string> kTopKeys = {"version", "name", "description", "gpu", "cpu_vendor",
                                           "nodes",   "node", "fabric", "calibration"};

GpuModel read_gpu(const YamlReader& reader, const YAML::Node& section) {
  std::vector<std::string> allowed = {"model"};
  allowed.insert(allowed.end(), gpu_figure_keys().begin(), gpu_figure_keys().end());
  reader.check_keys(section, "gpu", allowed);
  const YAML::Node model = reader.require(section, "gpu", "model");
  GpuModel gpu = catalogue_gpu(reader.get_string(model, "gpu.model"), reader, model, "gpu.model");
  // Figures written next to the model override the catalogue's (e.g. a 16 GB V100).
  read_gpu_figures(reader, section, "gpu", gpu, false);
  // A power limit below the TDP slows the clock by a model that needs the GPU's measured draws.
  if (const YAML::Node limit = section["power_limit_watts"]) {
    if (!(gpu.tdp_watts > 0))
      reader.fail("gpu.power_limit_watts", limit, "GPU model " + gpu.name + " has no tdp_watts to compare the limit with",
                  "add gpu.tdp_watts (the datasheet's maximum power), or drop the limit");
    if (gpu.power_limit_watts > gpu.tdp_watts)
      reader.fail("gpu.power_limit_watts", limit,
                  fmt::format("{:g} W is above the TDP of {:g} W", gpu.power_limit_watts, gpu.tdp_watts),
                  "use a limit <= tdp_watts");
    if (gpu.power_limit_watts < gpu.tdp_watts &&
        !(gpu.training_power_watts > gpu.idle_power_watts && gpu.idle_power_watts > 0 &&
          gpu.power_limit_watts > gpu.idle_power_watts))
      reader.fail("gpu.power_limit_watts", limit,
                  "a limit below the TDP needs the GPU's measured training_power_watts and idle_power_watts "
                  "(and a limit above the idle draw)",
                  "measure them with validation/harness/power-trace and set gpu.training_power_watts and "
                  "gpu.idle_power_watts, or drop the limit");
  }
  return gpu;
}

// A leaf with one uplink among 64 ports (the port count of an NDR leaf, NVIDIA Quantum-2 QM9700
// datasheet: 64 ports of 400 Gb/s) is tapered 63:1; a ratio above 64 is taken for a slip (a
// percentage, a bandwidth) rather than a fabric.
constexpr double kMaxOversubscription = 64;

// A leaf's down-port bandwidth over its uplink bandwidth, written `2` or `2:1`.
double read_oversubscription(const YamlReader& reader, const YAML::Node& node, const std::string& path) {
  const std::string text = reader.get_string(node, path);
  const std::string fix = "write the leaves' down:up bandwidth ratio, e.g. 2 or 2:1 (1 = non-blocking)";
  double ratio = 0;
  try {
    const std::size_t colon = text.find(':');
    std::size_t used = 0;
    const std::string down = text.substr(0, colon);
    ratio = std::stod(down, &used);
    if (used != down.size()) throw std::invalid_argument(text);
    if (colon != std::string::npos) {
      const std::string up = text.substr(colon + 1);
      ratio /= std::stod(up, &used);
      if (used != up.size()) throw std::invalid_argument(text);
    }
  } catch (const std::exception&) {
    reader.fail(path, node, "'" + text + "' is not a ratio", fix);
  }
  if (!(ratio >= 1))
    reader.fail(path, node, "'" + text + "' is below 1: a leaf never sends up more than its down ports bring in", fix);
  if (!(ratio <= kMaxOversubscription))
    reader.fail(path, node, fmt::format("'{}' is above {:g}:1, more than a 64-port leaf with one uplink", text, kMaxOversubscription),
                fix);
  return ratio;
}

// Leaves and spine: the taper, the nodes per leaf, and NCCL's PXN. A tapered fat tree needs
// leaves to taper: with every node under one leaf nothing would cross the spine.
void read_fabric_tiers(const YamlReader& reader, const YAML::Node& fields, int nodes, Fabric& fabric) {
  const std::string path = "fabric";
  const YAML::Node ratio = fields["oversubscription"];
  const YAML::Node per_leaf = fields["nodes_per_leaf"];
  if (ratio) fabric.oversubscription = read_oversubscription(reader, ratio, path + ".oversubscription");
  if (per_leaf) fabric.nodes_per_leaf = reader.get_int(per_leaf, path + ".nodes_per_leaf", 1);
  if (const YAML::Node pxn = fields["pxn"]) fabric.pxn = reader.get_bool(pxn, path + ".pxn");
  if (nodes > 1 && fabric.kind == FabricKind::fat_tree && fabric.oversubscription > 1 && !per_leaf)
    reader.fail(path + ".oversubscription", ratio,
                fmt::format("a {:g}:1 taper applies to uplinks from leaf switches to the spine, but without "
                            "fabric.nodes_per_leaf all {} nodes of the fat tree share one leaf and nothing crosses "
                            "the spine", fabric.oversubscription, nodes),
                "set fabric.nodes_per_leaf to the nodes one leaf switch holds (e.g. 4: a 64-port leaf with 32 "
                "ports down serves 4 nodes of 8 NICs), or use fabric.kind: rail-optimized, whose rails always "
                "meet at the spine");
}

// A fabric joins nodes; a single node needs none unless the file asks for one.
Fabric read_fabric(const YamlReader& reader, const YAML::Node& section, int nodes, const GpuModel& gpu) {
  Fabric fabric;
  if (!section && nodes == 1) return fabric;
  const std::string path = "fabric";
  if (section) reader.check_keys(section, path, {"kind", "nic", "nic_bandwidth", "nic_latency", "switch_latency", "sharp",
                                                      "nccl_protocols", "oversubscription", "nodes_per_leaf", "pxn"});
  // An absent section reads as an empty one (a default YAML::Node is Null, which tests true).
  const YAML::Node fields = section ? section : YAML::Node(YAML::NodeType::Map);
  auto get = [&](const char* key) { return fields[key]; };
  fabric.kind = FabricKind::fat_tree;
  if (YAML::Node kind = get("kind"))
    fabric.kind = reader.get_choice(kind, path + ".kind", {"fat-tree", "rail-optimized"}) == "fat-tree"
                      ? FabricKind::fat_tree
                      : FabricKind::rail_optimized;
  const YAML::Node nic_key = get("nic");
  const NicModel nic = catalogue_nic(nic_key ? reader.get_string(nic_key, path + ".nic") : default_nic(gpu.arch),
                                     reader, nic_key, path + ".nic");
  fabric.nic_name = nic.name;
  fabric.nic_bandwidth = nic.bandwidth;
  fabric.nic_latency = nic.latency;
  fabric.switch_latency = nic.switch_latency;
  fabric.nccl_protocols = nic.nccl_protocols;
  if (YAML::Node n = get("nic_bandwidth")) fabric.nic_bandwidth = reader.get_bandwidth(n, path + ".nic_bandwidth");
  if (YAML::Node n = get("nic_latency")) fabric.nic_latency = reader.get_duration(n, path + ".nic_latency");
  if (YAML::Node n = get("switch_latency")) fabric.switch_latency = reader.get_duration(n, path + ".switch_latency");
  if (YAML::Node n = get("sharp")) fabric.sharp = reader.get_bool(n, path + ".sharp");
  if (YAML::Node n = get("nccl_protocols")) fabric.nccl_protocols = read_nccl_protocols(reader, n, path + ".nccl_protocols");
  read_fabric_tiers(reader, fields, nodes, fabric);
  return fabric;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& [stem, text] : embedded_presets())
    if (!is_catalogue(stem)) names.push_back(stem);
  return names;
}

}  // namespace

Platform parse_platform(const std::string& yaml_text, const std::string& origin, const PlatformOptions& options) {
  YAML::Node root = load_yaml(yaml_text, origin);
  YamlReader reader(origin);
  if (!root.IsMap())
    reader.fail("(document)", root, "expected a platform description (a map of keys)",
                "start from a preset: allowed top-level keys are " + join(kTopKeys));
  // Command-line options are overrides of the document, so they are validated exactly like it.
  if (options.nodes != 0) reader.apply_override(root, "nodes=" + std::to_string(options.nodes),
                                                "--nodes " + std::to_string(options.nodes));
  if (!options.fabric.empty()) reader.apply_override(root, "fabric.kind=" + options.fabric, "--fabric " + options.fabric);
  for (const std::string& assignment : options.overrides) reader.apply_override(root, assignment, "-p " + assignment);

  const YAML::Node& doc = root;  // const from here: a non-const operator[] would insert keys
  reader.check_keys(doc, "", kTopKeys);
  const YAML::Node version = reader.require(doc, "", "version");
  if (reader.get_int(version, "version", 0) != 1)
    reader.fail("version", version, "unsupported version " + version.Scalar(), "write version: 1");
  const std::string name = reader.get_string(reader.require(doc, "", "name"), "name");
  if (doc["description"]) reader.get_string(doc["description"], "description");
  const GpuModel gpu = read_gpu(reader, reader.require(doc, "", "gpu"));
  const std::string cpu_vendor =
      doc["cpu_vendor"] ? reader.get_choice(doc["cpu_vendor"], "cpu_vendor", {"intel", "amd", "arm"}) : "intel";
  const int nodes = doc["nodes"] ? reader.get_int(doc["nodes"], "nodes", 1, kMaxNodes) : 1;
  const YAML::Node node_section = reader.require(doc, "", "node");
  NodeTemplate node = read_node(reader, node_section, gpu);
  if (nodes > 1 && node.nics.empty())
    reader.fail("node.vertices", node_section["vertices"], std::to_string(nodes) + " nodes need NICs to join them",
                "add vertices of kind nic linked to the GPUs' PCIe switches, or use nodes: 1");
  Fabric fabric = read_fabric(reader, doc["fabric"], nodes, gpu);
  Calibration calibration;
  if (doc["calibration"]) calibration = read_calibration(reader, doc["calibration"], "calibration");
  apply_link_calibration(calibration, node, fabric);
  GpuModel calibrated_gpu = gpu;
  calibrated_gpu.gemm_efficiency = calibration.gemm_efficiency;
  calibrated_gpu.codec_throughput_scale = calibration.codec_throughput_scale;
  try {
    Platform platform(name, calibrated_gpu, std::move(node), nodes, std::move(fabric));
    platform.cpu_vendor = cpu_vendor;
    platform.calibration = std::move(calibration);
    platform.source = origin;
    return platform;
  } catch (const ConfigError& e) {
    // The platform checks connectivity; point the user at the links that fail to provide it.
    std::string what = e.what();
    what = what.substr(std::min(what.size(), e.where().size() + 2));
    throw ConfigError(reader.where("node.links", node_section["links"]), what, "");
  }
}

PlatformText platform_text(const std::string& name_or_path) {
  const auto& presets = embedded_presets();
  auto it = presets.find(name_or_path);
  if (it != presets.end() && !is_catalogue(name_or_path)) return {it->second, name_or_path + ".yaml (preset)"};
  if (std::filesystem::is_regular_file(name_or_path)) return {read_text_file(name_or_path), name_or_path};
  throw ConfigError(name_or_path, "neither a preset nor a readable file",
                    "use a platform file path or a preset (`stepsim presets` describes them): " + join(preset_names()));
}

Platform load_platform(const std::string& name_or_path, const PlatformOptions& options) {
  const PlatformText source = platform_text(name_or_path);
  return parse_platform(source.text, source.origin, options);
}

std::vector<PresetInfo> list_presets() {
  std::vector<PresetInfo> infos;
  for (const std::string& stem : preset_names()) {
    YAML::Node root = YAML::Load(embedded_presets().at(stem));
    infos.push_back({stem, root["description"] ? root["description"].as<std::string>() : ""});
  }
  return infos;
}

}  // namespace stepsim::platforms
