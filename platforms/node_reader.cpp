#include "platforms/node_reader.hpp"

#include <algorithm>
#include <map>

namespace stepsim::platforms {
namespace {

const std::vector<std::string> kVertexKinds = {"gpu", "nvswitch", "pcie_switch", "cpu", "nic"};
const std::vector<std::string> kLinkTypes = {"nvlink", "pcie", "inter_socket", "network"};

// Expands a name pattern `gpu[0-7]` into gpu0..gpu7 (one bracketed inclusive range at most);
// a plain name stands for itself.
std::vector<std::string> expand(const YamlReader& reader, const YAML::Node& at, const std::string& path) {
  const std::string text = reader.get_string(at, path);
  std::size_t open = text.find('['), close = text.find(']');
  if (open == std::string::npos && close == std::string::npos) {
    if (text.empty()) reader.fail(path, at, "empty name", "write a name such as gpu0");
    return {text};
  }
  const std::string fix = "write a range such as gpu[0-7], meaning gpu0 to gpu7";
  if (open == std::string::npos || close == std::string::npos || close < open)
    reader.fail(path, at, "unbalanced brackets in '" + text + "'", fix);
  const std::string range = text.substr(open + 1, close - open - 1);
  std::size_t dash = range.find('-');
  int first = -1, last = -1;
  try {
    if (dash == std::string::npos) throw std::invalid_argument(range);
    std::size_t used_first = 0, used_last = 0;
    first = std::stoi(range.substr(0, dash), &used_first);
    last = std::stoi(range.substr(dash + 1), &used_last);
    if (used_first != dash || used_last != range.size() - dash - 1) throw std::invalid_argument(range);
  } catch (const std::exception&) {
    reader.fail(path, at, "bad range '[" + range + "]' in '" + text + "'", fix);
  }
  if (first < 0 || last < first) reader.fail(path, at, "range '" + text + "' is empty or negative", fix);
  if (last - first >= kMaxNodeVertices)
    reader.fail(path, at, "'" + text + "' names " + std::to_string(static_cast<long long>(last) - first + 1) +
                              " vertices; a node holds at most " + std::to_string(kMaxNodeVertices),
                "describe one server in node: (nodes: N replicates it)");
  std::vector<std::string> names;
  for (int i = first; i <= last; ++i)
    names.push_back(text.substr(0, open) + std::to_string(i) + text.substr(close + 1));
  return names;
}

// The share of a link's rated figures that transfers achieve (a measured copy rate over the
// datasheet's, cited where it is written); the engines use rating x fraction, NCCL's view the rating.
double read_achieved_fraction(const YamlReader& reader, const YAML::Node& at, const std::string& path) {
  const double fraction = reader.get_number(at, path);
  if (!(fraction > 0 && fraction <= 1))
    reader.fail(path, at, "an achieved fraction must be in (0, 1], got " + at.Scalar(),
                "write the share of the rated bandwidth that transfers achieve, e.g. 0.9, or drop the key "
                "(default 1: the rated figure)");
  return fraction;
}

class NodeBuilder {
 public:
  NodeBuilder(const YamlReader& reader, const GpuModel& gpu) : reader_(reader), gpu_(gpu) {}

  void add_vertices(const YAML::Node& list) {
    if (!list.IsSequence())
      reader_.fail("node.vertices", list, "expected a list of vertices",
                   "write `- {name: gpu[0-7], kind: gpu, socket: 0}` entries");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const YAML::Node entry = list[i];
      const std::string path = "node.vertices[" + std::to_string(i) + "]";
      reader_.check_keys(entry, path, {"name", "kind", "socket", "reduces_in_network", "pageable_copy_bandwidth"});
      Vertex proto;
      const std::string kind = reader_.get_choice(reader_.require(entry, path, "kind"), path + ".kind", kVertexKinds);
      proto.kind = static_cast<VertexKind>(std::find(kVertexKinds.begin(), kVertexKinds.end(), kind) -
                                           kVertexKinds.begin());
      if (entry["socket"]) proto.socket = reader_.get_int(entry["socket"], path + ".socket", 0);
      if (entry["reduces_in_network"])
        proto.reduces_in_network = reader_.get_bool(entry["reduces_in_network"], path + ".reduces_in_network");
      if (const YAML::Node rate = entry["pageable_copy_bandwidth"]) {
        const std::string key = path + ".pageable_copy_bandwidth";
        if (proto.kind != VertexKind::cpu)
          reader_.fail(key, rate, "only a CPU (kind: cpu) copies pageable host memory",
                       "move pageable_copy_bandwidth to the vertex of kind cpu");
        proto.pageable_copy_bandwidth = reader_.get_bandwidth(rate, key);
      }
      for (const std::string& name : expand(reader_, reader_.require(entry, path, "name"), path + ".name")) {
        Vertex v = proto;
        v.name = name;
        add_vertex(v, path + ".name", entry["name"]);
      }
    }
  }

  void add_links(const YAML::Node& list) {
    if (!list.IsSequence())
      reader_.fail("node.links", list, "expected a list of links",
                   "write `- {between: [gpu0, gpu1], type: nvlink, latency: 0.6us}` entries");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const YAML::Node entry = list[i];
      const std::string path = "node.links[" + std::to_string(i) + "]";
      reader_.check_keys(entry, path,
                         {"between", "type", "bandwidth", "achieved_fraction", "latency", "lanes", "name", "duplex",
                          "two_way_bandwidth"});
      Link proto;
      const std::string type = reader_.get_choice(reader_.require(entry, path, "type"), path + ".type", kLinkTypes);
      proto.type = static_cast<LinkType>(std::find(kLinkTypes.begin(), kLinkTypes.end(), type) - kLinkTypes.begin());
      if (entry["duplex"])
        proto.half_duplex = reader_.get_choice(entry["duplex"], path + ".duplex", {"full", "half"}) == "half";
      if (entry["lanes"]) proto.lanes = reader_.get_int(entry["lanes"], path + ".lanes", 1, kMaxLinkLanes);
      proto.latency = reader_.get_duration(reader_.require(entry, path, "latency"), path + ".latency");
      if (entry["bandwidth"]) {
        proto.datasheet_bandwidth = reader_.get_bandwidth(entry["bandwidth"], path + ".bandwidth");
      } else if (proto.type == LinkType::nvlink) {
        // An NVLink bundle runs at the GPU model's per-link rate times its lanes, so swapping
        // the GPU (-p gpu.model=...) rescales it.
        proto.datasheet_bandwidth = proto.lanes * gpu_.nvlink_bandwidth_per_link;
      } else {
        reader_.require(entry, path, "bandwidth");
      }
      if (entry["achieved_fraction"])
        proto.achieved_fraction = read_achieved_fraction(reader_, entry["achieved_fraction"], path + ".achieved_fraction");
      if (entry["two_way_bandwidth"]) {
        const std::string key = path + ".two_way_bandwidth";
        proto.datasheet_two_way_bandwidth = reader_.get_bandwidth(entry["two_way_bandwidth"], key);
        if (!proto.half_duplex)
          reader_.fail(key, entry["two_way_bandwidth"], "only a half-duplex link has a two-way total",
                       "add `duplex: half`, or drop two_way_bandwidth (a full-duplex link carries `bandwidth` each way)");
        if (proto.datasheet_two_way_bandwidth > proto.datasheet_bandwidth)
          reader_.fail(key, entry["two_way_bandwidth"], "exceeds the link's bandwidth, which a half-duplex link shares "
                       "between its directions", "give the measured total of both directions, at most `bandwidth`");
      }
      const YAML::Node between = reader_.require(entry, path, "between");
      if (!between.IsSequence() || between.size() != 2)
        reader_.fail(path + ".between", between, "expected two vertex names",
                     "write `between: [gpu0, pcie_sw0]` (ranges such as gpu[0-7] allowed)");
      std::vector<int> a = lookup(between[0], path + ".between[0]");
      std::vector<int> b = lookup(between[1], path + ".between[1]");
      if (a.size() != b.size() && a.size() != 1 && b.size() != 1)
        reader_.fail(path + ".between", between,
                     "the two ends expand to " + std::to_string(a.size()) + " and " + std::to_string(b.size()) +
                         " vertices",
                     "use ranges of equal length (paired in order) or a single vertex on one end");
      const std::size_t count = std::max(a.size(), b.size());
      for (std::size_t k = 0; k < count; ++k) {
        Link link = proto;
        link.a = a[a.size() == 1 ? 0 : k];
        link.b = b[b.size() == 1 ? 0 : k];
        if (link.a == link.b)
          reader_.fail(path + ".between", between, "link from " + node_.vertices[link.a].name + " to itself",
                       "join two different vertices");
        link.name = entry["name"] ? reader_.get_string(entry["name"], path + ".name") +
                                        (count > 1 ? std::to_string(k) : "")
                                  : node_.vertices[link.a].name + "-" + node_.vertices[link.b].name;
        node_.links.push_back(link);
      }
    }
  }

  // Compact form: one non-blocking NVSwitch that every GPU joins with all of its NVLinks.
  void add_nvswitch(const YAML::Node& entry) {
    const std::string path = "node.nvswitch";
    reader_.check_keys(entry, path, {"name", "latency", "nvls", "achieved_fraction"});
    Vertex sw;
    sw.kind = VertexKind::nvswitch;
    sw.name = entry["name"] ? reader_.get_string(entry["name"], path + ".name") : "nvswitch";
    if (entry["nvls"]) sw.reduces_in_network = reader_.get_bool(entry["nvls"], path + ".nvls");
    const Seconds latency = reader_.get_duration(reader_.require(entry, path, "latency"), path + ".latency");
    const double fraction =
        entry["achieved_fraction"] ? read_achieved_fraction(reader_, entry["achieved_fraction"], path + ".achieved_fraction") : 1;
    if (gpu_.nvlinks < 1 || !(gpu_.nvlink_bandwidth_per_link > 0))
      reader_.fail(path, entry, "GPU model " + gpu_.name + " has no NVLinks to join an NVSwitch",
                   "choose a GPU model with NVLink or remove node.nvswitch");
    if (node_.gpus.empty())
      reader_.fail(path, entry, "no GPU vertices to attach", "declare GPUs in node.vertices first");
    const int id = add_vertex(sw, path + ".name", entry);
    for (int g : node_.gpus) {
      Link link;
      link.name = node_.vertices[g].name + "-" + sw.name;
      link.type = LinkType::nvlink;
      link.a = g;
      link.b = id;
      link.lanes = gpu_.nvlinks;
      link.datasheet_bandwidth = gpu_.nvlinks * gpu_.nvlink_bandwidth_per_link;
      link.achieved_fraction = fraction;
      link.latency = latency;
      node_.links.push_back(link);
    }
  }

  // Peer-to-peer per GPU pair, as `nvidia-smi topo -p2p r` reports it: `disabled: all`, or a
  // list of [A, B] entries turning it off between every GPU of A and every other GPU of B.
  void add_p2p(const YAML::Node& section) {
    const std::string path = "node.p2p.disabled";
    reader_.check_keys(section, "node.p2p", {"disabled"});
    const YAML::Node disabled = reader_.require(section, "node.p2p", "disabled");
    const std::string fix = "write `disabled: all` or GPU pairs, e.g. `disabled: [[gpu0, gpu1], [\"gpu[0-3]\", "
                            "\"gpu[4-7]\"]]` (names and ranges of GPU vertices)";
    if (disabled.IsScalar() && disabled.Scalar() == "all") {
      disable(node_.gpus, node_.gpus, path, disabled);
    } else if (disabled.IsSequence()) {
      for (std::size_t i = 0; i < disabled.size(); ++i) {
        const YAML::Node entry = disabled[i];
        const std::string at = path + "[" + std::to_string(i) + "]";
        if (!entry.IsSequence() || entry.size() != 2) reader_.fail(at, entry, "expected two GPU names", fix);
        disable(gpus(entry[0], at + "[0]"), gpus(entry[1], at + "[1]"), at, entry);
      }
    } else {
      reader_.fail(path, disabled, "expected `all` or a list of GPU pairs", fix);
    }
    const bool has_cpu = std::any_of(node_.vertices.begin(), node_.vertices.end(),
                                     [](const Vertex& v) { return v.kind == VertexKind::cpu; });
    if (!node_.p2p_disabled.empty() && !has_cpu)
      reader_.fail(path, disabled,
                   "GPUs without peer-to-peer exchange data through host memory, and the node has no CPU",
                   "add a vertex of kind cpu and link it to the GPUs' PCIe switches");
  }

  NodeTemplate take() { return std::move(node_); }

 private:
  // Turns P2P off between every GPU of `a` and every other GPU of `b`.
  void disable(const std::vector<int>& a, const std::vector<int>& b, const std::string& path, const YAML::Node& at) {
    bool any = false;
    for (int x : a)
      for (int y : b) {
        if (x == y) continue;
        any = true;
        if (nvlink_joined(x, y))
          reader_.fail(path, at, node_.vertices[x].name + " and " + node_.vertices[y].name +
                                     " are joined by NVLink, and NCCL stops when P2P is off between NVLink-connected "
                                     "GPUs (paths.cc ncclTopoCheckP2p: \"probably due to a hardware issue\")",
                       "check the GPUs' NVLinks (nvidia-smi nvlink --status); list only pairs without NVLink");
        const std::pair<int, int> pair = std::minmax(x, y);
        if (std::find(node_.p2p_disabled.begin(), node_.p2p_disabled.end(), pair) == node_.p2p_disabled.end())
          node_.p2p_disabled.push_back(pair);
      }
    if (!any) reader_.fail(path, at, "names no pair of two different GPUs", "name two GPUs, e.g. [gpu0, gpu1]");
  }

  std::vector<int> gpus(const YAML::Node& at, const std::string& path) const {
    std::vector<int> ids = lookup(at, path);
    for (int id : ids)
      if (node_.vertices[id].kind != VertexKind::gpu)
        reader_.fail(path, at, "'" + node_.vertices[id].name + "' is a " + to_string(node_.vertices[id].kind) +
                                   ", and peer-to-peer is a property of GPU pairs",
                     "name GPU vertices (a switch whose GPUs have no P2P: list its GPUs against each other)");
    return ids;
  }

  // A direct NVLink, or NVLinks from both GPUs into one NVSwitch.
  bool nvlink_joined(int a, int b) const {
    std::vector<int> reach_a, reach_b;
    for (const Link& link : node_.links) {
      if (link.type != LinkType::nvlink) continue;
      if (link.a == a || link.b == a) reach_a.push_back(link.a == a ? link.b : link.a);
      if (link.a == b || link.b == b) reach_b.push_back(link.a == b ? link.b : link.a);
    }
    if (std::find(reach_a.begin(), reach_a.end(), b) != reach_a.end()) return true;
    for (int v : reach_a)
      if (node_.vertices[v].kind == VertexKind::nvswitch &&
          std::find(reach_b.begin(), reach_b.end(), v) != reach_b.end())
        return true;
    return false;
  }

  int add_vertex(Vertex v, const std::string& path, const YAML::Node& at) {
    if (ids_.count(v.name)) reader_.fail(path, at, "duplicate vertex name '" + v.name + "'", "give every vertex a unique name");
    if (node_.vertices.size() >= static_cast<std::size_t>(kMaxNodeVertices))
      reader_.fail(path, at, "a node holds at most " + std::to_string(kMaxNodeVertices) + " vertices",
                   "describe one server in node: (nodes: N replicates it)");
    const int id = static_cast<int>(node_.vertices.size());
    if (v.kind == VertexKind::gpu) {
      v.local_gpu = static_cast<int>(node_.gpus.size());
      node_.gpus.push_back(id);
    }
    if (v.kind == VertexKind::nic) node_.nics.push_back(id);
    ids_[v.name] = id;
    node_.vertices.push_back(std::move(v));
    return id;
  }

  std::vector<int> lookup(const YAML::Node& at, const std::string& path) const {
    std::vector<int> ids;
    for (const std::string& name : expand(reader_, at, path)) {
      auto it = ids_.find(name);
      if (it == ids_.end()) {
        std::vector<std::string> known;
        for (const Vertex& v : node_.vertices) known.push_back(v.name);
        reader_.fail(path, at, "unknown vertex '" + name + "'", "declare it in node.vertices; known: " + join(known));
      }
      ids.push_back(it->second);
    }
    return ids;
  }

  const YamlReader& reader_;
  const GpuModel& gpu_;
  NodeTemplate node_;
  std::map<std::string, int> ids_;
};

}  // namespace

NodeTemplate read_node(const YamlReader& reader, const YAML::Node& node, const GpuModel& gpu) {
  reader.check_keys(node, "node", {"vertices", "links", "nvswitch", "p2p"});
  NodeBuilder builder(reader, gpu);
  builder.add_vertices(reader.require(node, "node", "vertices"));
  if (node["nvswitch"]) builder.add_nvswitch(node["nvswitch"]);
  if (node["links"]) builder.add_links(node["links"]);
  if (node["p2p"]) builder.add_p2p(node["p2p"]);
  NodeTemplate result = builder.take();
  if (result.gpus.empty())
    reader.fail("node.vertices", node["vertices"], "the node has no GPU", "add a vertex with kind: gpu");
  return result;
}

}  // namespace stepsim::platforms
