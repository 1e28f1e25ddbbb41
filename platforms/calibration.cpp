#include "platforms/calibration.hpp"

#include <algorithm>

#include "platforms/platform.hpp"
#include "platforms/yaml_reader.hpp"

namespace stepsim::platforms {
namespace {

const std::vector<std::string> kLinkTypeNames = {"nvlink", "pcie", "inter_socket", "network"};
const std::vector<std::string> kGemmDtypes = {"fp32", "tf32", "fp16", "bf16", "fp8"};

double read_factor(const YamlReader& reader, const YAML::Node& node, const std::string& path) {
  const double value = reader.get_number(node, path);
  if (!(value > 0))
    reader.fail(path, node, "a calibration factor must be > 0", "write a positive multiplier (1 = the preset's figure)");
  return value;
}

// A map whose keys must come from `names`; `read` parses each entry.
template <typename Read>
void read_named(const YamlReader& reader, const YAML::Node& map, const std::string& path,
                const std::vector<std::string>& names, Read read) {
  if (!map.IsMap()) reader.fail(path, map, "expected a map", "write one entry per name: " + join(names));
  reader.check_keys(map, path, names);
  for (const auto& entry : map) {
    const std::string name = entry.first.as<std::string>();
    read(name, entry.second, path + "." + name);
  }
}

}  // namespace

const std::vector<std::string>& calibrated_protocol_names() {
  static const std::vector<std::string> names = {"LL", "LL128", "Simple"};
  return names;
}

const std::vector<std::string>& calibrated_algorithm_names() {
  static const std::vector<std::string> names = {"ring", "ring_chain", "tree", "nvls", "nvls_tree", "collnet_direct", "collnet_chain", "p2p"};
  return names;
}

const std::vector<std::string>& calibrated_codec_names() {
  // Every codec registered in models/compression (its codec_test checks this list covers them).
  static const std::vector<std::string> names = {"cast", "mpc", "quant", "zfp"};
  return names;
}

double Calibration::algorithm_efficiency_scale(const std::string& algo) const {
  auto it = algorithms.find(algo);
  return it == algorithms.end() ? 1.0 : it->second;
}

const ProtocolCalibration& Calibration::protocol(const std::string& name) const {
  static const ProtocolCalibration identity;
  auto it = protocols.find(name);
  return it == protocols.end() ? identity : it->second;
}

bool Calibration::was_fitted(const std::string& file, int index) const {
  for (const FittedCases& f : fitted)
    if (f.file == file && std::find(f.cases.begin(), f.cases.end(), index) != f.cases.end()) return true;
  return false;
}

Calibration read_calibration(const YamlReader& reader, const YAML::Node& section, const std::string& path) {
  Calibration c;
  if (!section.IsMap()) reader.fail(path, section, "expected a map", "write the section `stepsim calibrate` produces");
  // `report` is the fit's record for readers (method, residuals); models never read it.
  reader.check_keys(section, path, {"links", "algorithms", "protocols", "gemm_efficiency", "codecs", "fitted", "report"});
  if (YAML::Node links = section["links"])
    read_named(reader, links, path + ".links", kLinkTypeNames, [&](const std::string& name, const YAML::Node& n, const std::string& p) {
      reader.check_keys(n, p, {"bandwidth_scale", "latency_scale"});
      LinkCalibration& l = c.links[name];
      if (n["bandwidth_scale"]) l.bandwidth_scale = read_factor(reader, n["bandwidth_scale"], p + ".bandwidth_scale");
      if (n["latency_scale"]) l.latency_scale = read_factor(reader, n["latency_scale"], p + ".latency_scale");
    });
  if (YAML::Node protocols = section["protocols"])
    read_named(reader, protocols, path + ".protocols", calibrated_protocol_names(),
               [&](const std::string& name, const YAML::Node& n, const std::string& p) {
                 reader.check_keys(n, p, {"efficiency_scale", "latency_scale"});
                 ProtocolCalibration& pc = c.protocols[name];
                 if (n["efficiency_scale"]) pc.efficiency_scale = read_factor(reader, n["efficiency_scale"], p + ".efficiency_scale");
                 if (n["latency_scale"]) pc.latency_scale = read_factor(reader, n["latency_scale"], p + ".latency_scale");
               });
  if (YAML::Node algorithms = section["algorithms"])
    read_named(reader, algorithms, path + ".algorithms", calibrated_algorithm_names(),
               [&](const std::string& name, const YAML::Node& n, const std::string& p) {
                 reader.check_keys(n, p, {"efficiency_scale"});
                 c.algorithms[name] = read_factor(reader, reader.require(n, p, "efficiency_scale"), p + ".efficiency_scale");
               });
  if (YAML::Node gemm = section["gemm_efficiency"])
    read_named(reader, gemm, path + ".gemm_efficiency", kGemmDtypes,
               [&](const std::string& name, const YAML::Node& n, const std::string& p) {
                 const double e = read_factor(reader, n, p);
                 if (e > 1) reader.fail(p, n, "an efficiency is a fraction of peak, got " + n.Scalar(), "write a value in (0, 1]");
                 c.gemm_efficiency[name] = e;
               });
  if (YAML::Node codecs = section["codecs"])
    read_named(reader, codecs, path + ".codecs", calibrated_codec_names(),
               [&](const std::string& name, const YAML::Node& n, const std::string& p) {
                 reader.check_keys(n, p, {"throughput_scale"});
                 c.codec_throughput_scale[name] =
                     read_factor(reader, reader.require(n, p, "throughput_scale"), p + ".throughput_scale");
               });
  if (YAML::Node fitted = section["fitted"]) {
    const std::string p = path + ".fitted";
    if (!fitted.IsSequence()) reader.fail(p, fitted, "expected a list of {file, cases}", "write the list `stepsim calibrate` produces");
    for (std::size_t i = 0; i < fitted.size(); ++i) {
      const std::string pi = p + "[" + std::to_string(i) + "]";
      reader.check_keys(fitted[i], pi, {"file", "cases"});
      FittedCases f;
      f.file = reader.get_string(reader.require(fitted[i], pi, "file"), pi + ".file");
      const YAML::Node cases = reader.require(fitted[i], pi, "cases");
      if (!cases.IsSequence()) reader.fail(pi + ".cases", cases, "expected a list of case indices", "write e.g. [0, 2, 4]");
      for (std::size_t k = 0; k < cases.size(); ++k)
        f.cases.push_back(reader.get_int(cases[k], pi + ".cases[" + std::to_string(k) + "]", 0));
      c.fitted.push_back(std::move(f));
    }
  }
  if (YAML::Node report = section["report"])
    if (!report.IsMap()) reader.fail(path + ".report", report, "expected a map", "leave the report `stepsim calibrate` wrote");
  return c;
}

void apply_link_calibration(const Calibration& calibration, NodeTemplate& node, Fabric& fabric) {
  for (Link& link : node.links) {
    auto it = calibration.links.find(to_string(link.type));
    if (it == calibration.links.end()) continue;
    link.achieved_fraction *= it->second.bandwidth_scale;
    link.latency *= it->second.latency_scale;
  }
  // The fabric's links are built from the NIC figures: scaling those scales every network link.
  auto net = calibration.links.find("network");
  if (net != calibration.links.end()) {
    fabric.nic_achieved_fraction *= net->second.bandwidth_scale;
    fabric.nic_latency *= net->second.latency_scale;
    fabric.switch_latency *= net->second.latency_scale;
  }
}

}  // namespace stepsim::platforms
