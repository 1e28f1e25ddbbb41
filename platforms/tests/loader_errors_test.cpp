// Bad platform input: every case must be a ConfigError naming the file, the key path and the
// line (or the flag that set the value), never a crash or a silent default.
#include <gtest/gtest.h>

#include "platforms/config_error.hpp"
#include "platforms/loader.hpp"

namespace stepsim::platforms {
namespace {

// A valid two-GPU platform; cases replace one line of it.
const std::string kGood = R"(version: 1
name: tiny
gpu: {model: V100-SXM2}
node:
  vertices:
    - {name: "gpu[0-1]", kind: gpu}
    - {name: sw, kind: pcie_switch}
    - {name: nic0, kind: nic}
  links:
    - {between: [gpu0, gpu1], type: nvlink, lanes: 2, latency: 0.6us}
    - {between: ["gpu[0-1]", sw], type: pcie, bandwidth: 15.75GBps, latency: 0.5us}
    - {between: [nic0, sw], type: pcie, bandwidth: 15.75GBps, latency: 0.5us}
)";

std::string replace_line(int line, const std::string& text) {  // 1-based
  std::string out;
  std::size_t start = 0;
  for (int n = 1; start <= kGood.size(); ++n) {
    std::size_t end = kGood.find('\n', start);
    if (end == std::string::npos) break;
    out += (n == line ? text : kGood.substr(start, end - start)) + "\n";
    start = end + 1;
  }
  return out;
}

std::string substitute(std::string text, const std::string& from, const std::string& to) {
  std::size_t at = text.find(from);
  if (at == std::string::npos) throw std::logic_error("test fixture lacks '" + from + "'");
  return text.replace(at, from.size(), to);
}

struct Case {
  const char* label;
  std::string yaml;
  std::vector<std::string> overrides;
  std::vector<std::string> expected;  ///< substrings of the message
};

std::vector<Case> cases() {
  return {
      {"malformed YAML", replace_line(6, "    - {name: gpu0, kind: gpu"), {}, {"bad.yaml (line 8)", "malformed YAML", "fix the YAML syntax"}},
      {"unknown top-level key", replace_line(2, "nmae: tiny"), {}, {"bad.yaml: nmae (line 2)", "unknown key 'nmae'", "allowed keys here: version, name"}},
      {"unknown node key", replace_line(4, "node:\n  vertexes: []"), {}, {"bad.yaml: node.vertexes (line 5)", "allowed keys here: vertices, links, nvswitch"}},
      {"unknown link key", replace_line(10, "    - {between: [gpu0, gpu1], type: nvlink, speed: 2, latency: 0.6us}"), {},
       {"bad.yaml: node.links[0].speed (line 10)", "unknown key 'speed'", "between, type, bandwidth"}},
      {"unknown gpu key", replace_line(3, "gpu: {model: V100-SXM2, colour: green}"), {}, {"bad.yaml: gpu.colour (line 3)", "allowed keys"}},
      {"zero bandwidth", replace_line(11, "    - {between: [\"gpu[0-1]\", sw], type: pcie, bandwidth: 0GBps, latency: 0.5us}"), {},
       {"bad.yaml: node.links[1].bandwidth (line 11)", "must be > 0"}},
      {"negative bandwidth", replace_line(12, "    - {between: [nic0, sw], type: pcie, bandwidth: -5GBps, latency: 0.5us}"), {},
       {"bad.yaml: node.links[2].bandwidth (line 12)", "not a valid bandwidth"}},
      {"bad unit", replace_line(10, "    - {between: [gpu0, gpu1], type: nvlink, latency: 0.6 parsecs}"), {},
       {"bad.yaml: node.links[0].latency (line 10)", "not a valid duration", "0.7us"}},
      {"unknown link type", replace_line(10, "    - {between: [gpu0, gpu1], type: infiniband, latency: 0.6us}"), {},
       {"bad.yaml: node.links[0].type (line 10)", "unknown value 'infiniband'", "nvlink, pcie, inter_socket, network"}},
      {"missing bandwidth on pcie", replace_line(12, "    - {between: [nic0, sw], type: pcie, latency: 0.5us}"), {},
       {"bad.yaml: node.links[2].bandwidth (line 12)", "missing required key 'bandwidth'"}},
      {"unknown GPU model", replace_line(3, "gpu: {model: V100-SXM9}"), {}, {"bad.yaml: gpu.model (line 3)", "unknown GPU model 'V100-SXM9'", "H100-SXM5-80GB"}},
      {"link to unknown vertex", replace_line(12, "    - {between: [nic1, sw], type: pcie, bandwidth: 15.75GBps, latency: 0.5us}"), {},
       {"bad.yaml: node.links[2].between[0] (line 12)", "unknown vertex 'nic1'", "known: gpu0, gpu1, sw, nic0"}},
      {"disconnected topology", replace_line(11, "    - {between: [gpu0, sw], type: pcie, bandwidth: 15.75GBps, latency: 0.5us}") , {"nodes=2"},
       {"bad.yaml: node.links (line 10)", "no route from gpu1 to any NIC"}},
      {"disconnected GPUs", substitute(replace_line(11, "    - {between: [gpu0, sw], type: pcie, bandwidth: 15.75GBps, latency: 0.5us}"),
                                           "[gpu0, gpu1], type: nvlink", "[gpu0, sw], type: nvlink"), {},
       {"bad.yaml: node.links (line 10)", "no route from gpu0 to gpu1", "GPUs do not forward"}},
      {"missing version", replace_line(1, "# no version"), {}, {"bad.yaml: version (line 2)", "missing required key 'version'", "add `version: ...`"}},
      {"wrong version", replace_line(1, "version: 2"), {}, {"bad.yaml: version (line 1)", "unsupported version 2", "write version: 1"}},
      {"bad -p override syntax", kGood, {"gpu.model"}, {"-p gpu.model", "not a KEY=VALUE assignment"}},
      {"-p unknown key", kGood, {"gpu.colour=red"}, {"bad.yaml: gpu.colour (set by -p gpu.colour=red)", "allowed keys"}},
      {"-p unknown GPU", kGood, {"gpu.model=TPUv5"}, {"bad.yaml: gpu.model (set by -p gpu.model=TPUv5)", "unknown GPU model"}},
      {"nodes=0", kGood, {"nodes=0"}, {"bad.yaml: nodes (set by -p nodes=0)", "must be >= 1"}},
      {"power limit, no TDP", kGood, {"gpu.power_limit_watts=250"},
       {"bad.yaml: gpu.power_limit_watts (set by -p gpu.power_limit_watts=250)", "no tdp_watts", "add gpu.tdp_watts"}},
      {"power limit above the TDP", kGood, {"gpu.tdp_watts=300", "gpu.power_limit_watts=350"},
       {"bad.yaml: gpu.power_limit_watts", "350 W is above the TDP of 300 W"}},
      {"power limit, no measured draws", kGood, {"gpu.tdp_watts=300", "gpu.power_limit_watts=250"},
       {"bad.yaml: gpu.power_limit_watts", "measured training_power_watts and idle_power_watts", "power-trace"}},
      {"stream rate above the datasheet", kGood, {"gpu.hbm_efficiency=1.2"},
       {"bad.yaml: gpu.hbm_efficiency (set by -p gpu.hbm_efficiency=1.2)", "fraction of hbm_bandwidth", "(0, 1]"}},
      {"zero watts", kGood, {"gpu.tdp_watts=0"}, {"bad.yaml: gpu.tdp_watts (set by -p gpu.tdp_watts=0)", "> 0 watts"}},
      {"bad fabric kind", kGood, {"nodes=2", "fabric.kind=torus"}, {"bad.yaml: fabric.kind (set by -p fabric.kind=torus)", "fat-tree, rail-optimized"}},
      {"-p into a value", kGood, {"version.x=1"}, {"-p version.x=1", "not a section"}},
      {"oversubscription below 1", kGood, {"nodes=2", "fabric.nodes_per_leaf=1", "fabric.oversubscription=0.5"},
       {"bad.yaml: fabric.oversubscription (set by -p fabric.oversubscription=0.5)", "below 1", "e.g. 2 or 2:1"}},
      {"oversubscription 0", kGood, {"nodes=2", "fabric.kind=rail-optimized", "fabric.oversubscription=0"},
       {"bad.yaml: fabric.oversubscription", "'0' is below 1"}},
      {"oversubscription 1:2", kGood, {"nodes=2", "fabric.kind=rail-optimized", "fabric.oversubscription=1:2"},
       {"bad.yaml: fabric.oversubscription", "'1:2' is below 1"}},
      {"absurd oversubscription", kGood, {"nodes=2", "fabric.kind=rail-optimized", "fabric.oversubscription=400"},
       {"bad.yaml: fabric.oversubscription (set by -p fabric.oversubscription=400)", "above 64:1", "down:up"}},
      {"oversubscription not a ratio", kGood + "fabric: {kind: rail-optimized, oversubscription: 2:one}\n", {"nodes=2"},
       {"bad.yaml: fabric.oversubscription (line 13)", "'2:one' is not a ratio"}},
      {"taper of a one-leaf fat tree", kGood, {"nodes=2", "fabric.oversubscription=2"},
       {"bad.yaml: fabric.oversubscription (set by -p fabric.oversubscription=2)", "all 2 nodes of the fat tree share one leaf",
        "set fabric.nodes_per_leaf"}},
      {"no nodes per leaf", kGood, {"nodes=2", "fabric.nodes_per_leaf=0"},
       {"bad.yaml: fabric.nodes_per_leaf (set by -p fabric.nodes_per_leaf=0)", "must be >= 1"}},
      {"PXN flag", kGood, {"nodes=2", "fabric.pxn=sometimes"}, {"bad.yaml: fabric.pxn (set by -p fabric.pxn=sometimes)", "true or false"}},
      {"unknown fabric key", kGood, {"nodes=2", "fabric.taper=2"},
       {"bad.yaml: fabric.taper (set by -p fabric.taper=2)", "oversubscription, nodes_per_leaf, pxn"}},
      {"duplicate vertex", replace_line(7, "    - {name: gpu1, kind: pcie_switch}"), {}, {"bad.yaml: node.vertices[1].name (line 7)", "duplicate vertex name 'gpu1'"}},
      {"bad range", replace_line(6, "    - {name: \"gpu[1-0]\", kind: gpu}"), {}, {"bad.yaml: node.vertices[0].name (line 6)", "empty or negative"}},
      {"not a map", "- just\n- a list\n", {}, {"bad.yaml: (document) (line 1)", "expected a platform description"}},
      {"two-way total on a full-duplex link",
       replace_line(12, "    - {between: [nic0, sw], type: pcie, bandwidth: 15.75GBps, two_way_bandwidth: 8GBps, latency: 0.5us}"), {},
       {"bad.yaml: node.links[2].two_way_bandwidth (line 12)", "only a half-duplex link", "add `duplex: half`"}},
      {"two-way total above the bandwidth",
       replace_line(12, "    - {between: [nic0, sw], type: pcie, bandwidth: 8GBps, two_way_bandwidth: 9GBps, duplex: half, latency: 0.5us}"),
       {}, {"bad.yaml: node.links[2].two_way_bandwidth (line 12)", "exceeds the link's bandwidth", "at most `bandwidth`"}},
      {"achieved fraction above 1",
       replace_line(11, "    - {between: [\"gpu[0-1]\", sw], type: pcie, bandwidth: 15.75GBps, achieved_fraction: 1.2, latency: 0.5us}"),
       {}, {"bad.yaml: node.links[1].achieved_fraction (line 11)", "must be in (0, 1], got 1.2", "e.g. 0.9"}},
      {"zero achieved fraction", replace_line(10, "    - {between: [gpu0, gpu1], type: nvlink, lanes: 2, achieved_fraction: 0, latency: 0.6us}"),
       {}, {"bad.yaml: node.links[0].achieved_fraction (line 10)", "must be in (0, 1], got 0"}},
      {"achieved fraction as a percentage",
       replace_line(12, "    - {between: [nic0, sw], type: pcie, bandwidth: 15.75GBps, achieved_fraction: 90%, latency: 0.5us}"),
       {}, {"bad.yaml: node.links[2].achieved_fraction (line 12)", "'90%' is not a number"}},
      {"achieved fraction of the NVSwitch", kGood + "  nvswitch: {latency: 0.3us, achieved_fraction: 1.5}\n", {},
       {"bad.yaml: node.nvswitch.achieved_fraction (line 13)", "must be in (0, 1], got 1.5"}},
      {"-p achieved fraction", kGood, {"node.nvswitch.latency=0.3us", "node.nvswitch.achieved_fraction=2"},
       {"bad.yaml: node.nvswitch.achieved_fraction (set by -p node.nvswitch.achieved_fraction=2)", "(0, 1]"}},
      {"pageable copy rate on a GPU", replace_line(6, "    - {name: \"gpu[0-1]\", kind: gpu, pageable_copy_bandwidth: 10GBps}"), {},
       {"bad.yaml: node.vertices[0].pageable_copy_bandwidth (line 6)", "only a CPU", "vertex of kind cpu"}},
      {"zero pageable copy rate", replace_line(8, "    - {name: cpu0, kind: cpu, pageable_copy_bandwidth: 0GBps}"), {},
       {"bad.yaml: node.vertices[2].pageable_copy_bandwidth (line 8)", "must be > 0"}},
      {"unknown NCCL protocol", kGood + "fabric: {nccl_protocols: [LL, Ultra]}\n", {"nodes=2"},
       {"bad.yaml: fabric.nccl_protocols[1] (line 13)", "unknown value 'Ultra'", "LL, LL128, Simple"}},
      {"NCCL protocol twice", kGood + "fabric: {nccl_protocols: [Simple, Simple]}\n", {"nodes=2"},
       {"bad.yaml: fabric.nccl_protocols[1] (line 13)", "listed twice"}},
      {"no NCCL protocol", kGood + "fabric: {nccl_protocols: []}\n", {"nodes=2"},
       {"bad.yaml: fabric.nccl_protocols (line 13)", "non-empty list"}},
      {"P2P off between NVLink peers", kGood + "  p2p: {disabled: [[gpu0, gpu1]]}\n", {},
       {"bad.yaml: node.p2p.disabled[0] (line 13)", "joined by NVLink", "list only pairs without NVLink"}},
      {"P2P off for all, NVLink peers among them", kGood, {"node.p2p.disabled=all"},
       {"bad.yaml: node.p2p.disabled (set by -p node.p2p.disabled=all)", "gpu0 and gpu1 are joined by NVLink"}},
      {"P2P of a switch", kGood + "  p2p: {disabled: [[gpu0, sw]]}\n", {},
       {"bad.yaml: node.p2p.disabled[0][1] (line 13)", "'sw' is a pcie_switch", "name GPU vertices"}},
      {"P2P of one GPU", kGood + "  p2p: {disabled: [[gpu0]]}\n", {},
       {"bad.yaml: node.p2p.disabled[0] (line 13)", "expected two GPU names"}},
      {"P2P of a GPU with itself", kGood + "  p2p: {disabled: [[gpu1, gpu1]]}\n", {},
       {"bad.yaml: node.p2p.disabled[0] (line 13)", "no pair of two different GPUs"}},
      {"P2P flag", kGood + "  p2p: {disabled: yes}\n", {},
       {"bad.yaml: node.p2p.disabled (line 13)", "expected `all` or a list of GPU pairs", "disabled: all"}},
      {"unknown P2P key", kGood + "  p2p: {enabled: false}\n", {},
       {"bad.yaml: node.p2p.enabled (line 13)", "allowed keys here: disabled"}},
      {"P2P off without a CPU", replace_line(10, "    # no NVLink") + "  p2p: {disabled: all}\n", {},
       {"bad.yaml: node.p2p.disabled (line 13)", "the node has no CPU", "add a vertex of kind cpu"}},
      {"P2P off, CPU unlinked",
       substitute(replace_line(10, "    # no NVLink"), "{name: nic0, kind: nic}",
                  "{name: nic0, kind: nic}\n    - {name: cpu0, kind: cpu}") + "  p2p: {disabled: all}\n",
       {}, {"bad.yaml: node.links", "no route from gpu0 to gpu1 through a CPU", "link a vertex of kind cpu"}},
      {"override list unclosed", kGood, {"nodes=2", "fabric.nccl_protocols=[LL, Simple"},
       {"-p fabric.nccl_protocols=[LL, Simple", "not a YAML list", "-p fabric.nccl_protocols=[LL,Simple]"}},
      {"override list of maps", kGood, {"nodes=2", "fabric.nccl_protocols=[{a: 1}]"},
       {"a list item is not a plain value"}},
      {"multi-node without NIC", substitute(replace_line(8, "    - {name: cpu0, kind: cpu}"), "[nic0, sw]", "[cpu0, sw]"), {"nodes=2"},
       {"bad.yaml: node.vertices (line 6)", "2 nodes need NICs"}},
  };
}

TEST(LoaderErrors, Catalogue) {
  int errors = 0;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.label);
    PlatformOptions options;
    options.overrides = c.overrides;
    try {
      parse_platform(c.yaml, "bad.yaml", options);
      ADD_FAILURE() << "no error";
    } catch (const ConfigError& e) {
      ++errors;
      for (const std::string& part : c.expected)
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << "'" << part << "' not in: " << e.what();
    }
  }
  EXPECT_GE(errors, 12);
}

TEST(LoaderErrors, GoodBaseLoads) {
  Platform p = parse_platform(kGood, "good.yaml");
  EXPECT_EQ(p.gpu_count(), 2);
  EXPECT_EQ(p.source, "good.yaml");
  EXPECT_DOUBLE_EQ(p.route(p.gpu_vertex(0), p.gpu_vertex(1)).bandwidth, 50e9);
}

TEST(LoaderErrors, FabricTiersLoad) {
  PlatformOptions options;
  options.overrides = {"nodes=4", "fabric.oversubscription=3:2", "fabric.nodes_per_leaf=2", "fabric.pxn=false"};
  const Platform p = parse_platform(kGood, "good.yaml", options);
  EXPECT_DOUBLE_EQ(p.fabric().oversubscription, 1.5);
  EXPECT_EQ(p.fabric().nodes_per_leaf, 2);
  EXPECT_FALSE(p.fabric().pxn);
  // Two leaves of 2 nodes x 1 NIC: the last link is leaf 1's uplink, 2 NICs' rate over the taper.
  EXPECT_DOUBLE_EQ(p.link(p.link_count() - 1).bandwidth(), 2 * p.fabric().nic_bandwidth / 1.5);
  // Defaults: non-blocking, every node under one leaf, PXN on; a rail-optimized fabric may be
  // tapered without leaf groups (its rails meet at the spine), and one node ignores the fabric.
  options.overrides = {"nodes=2"};
  const Platform plain = parse_platform(kGood, "good.yaml", options);
  EXPECT_DOUBLE_EQ(plain.fabric().oversubscription, 1);
  EXPECT_EQ(plain.fabric().nodes_per_leaf, 0);
  EXPECT_TRUE(plain.fabric().pxn);
  options.overrides = {"nodes=2", "fabric.kind=rail-optimized", "fabric.oversubscription=2"};
  EXPECT_DOUBLE_EQ(parse_platform(kGood, "good.yaml", options).fabric().oversubscription, 2);
  options.overrides = {"fabric.oversubscription=2"};
  EXPECT_EQ(parse_platform(kGood, "good.yaml", options).nodes(), 1);
}

TEST(LoaderErrors, CliOptionsAreNamed) {
  PlatformOptions options;
  options.nodes = 2;
  options.fabric = "mesh";
  try {
    parse_platform(kGood, "bad.yaml", options);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("fabric.kind (set by --fabric mesh)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stepsim::platforms
