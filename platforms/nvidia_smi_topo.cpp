#include "platforms/nvidia_smi_topo.hpp"

#include <map>
#include <numeric>
#include <regex>
#include <sstream>
#include <vector>

#include "platforms/catalogue.hpp"
#include "platforms/config_error.hpp"

namespace stepsim::platforms {
namespace {

struct Device {
  std::string column;       ///< as in the matrix: GPU3, NIC0, mlx5_2
  bool gpu = false;
  std::string affinity;     ///< CPU Affinity of GPU rows ("" when absent)
  std::vector<std::string> cells;
  int line = 0;
};

struct UnionFind {
  std::vector<int> parent;
  explicit UnionFind(int n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int x) { return parent[x] == x ? x : parent[x] = find(parent[x]); }
  void join(int a, int b) { parent[find(a)] = find(b); }
};

std::vector<std::string> tokens(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

// nvidia-smi colours its header when writing to a terminal; pasted text may keep the escapes.
std::string strip_ansi(const std::string& text) {
  static const std::regex escape("\x1b\\[[0-9;]*m");
  return std::regex_replace(text, escape, "");
}

std::vector<Device> parse_matrix(const std::string& text, const std::string& origin) {
  static const std::regex device_name("GPU[0-9]+|NIC[0-9]+|mlx[0-9]+_[0-9]+");
  static const std::regex cell("X|SYS|SOC|NODE|PHB|PXB|PIX|NV[0-9]+");
  std::istringstream in(strip_ansi(text));
  std::vector<Device> devices;
  std::map<std::string, int> index;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    std::vector<std::string> t = tokens(line);
    if (t.empty()) {
      if (!devices.empty() && devices.back().line > 0) break;  // the matrix ends at the first blank line
      continue;
    }
    if (devices.empty() && t[0] == "GPU0") {
      for (const std::string& name : t) {
        if (!std::regex_match(name, device_name)) break;
        index[name] = static_cast<int>(devices.size());
        devices.push_back({name, name.rfind("GPU", 0) == 0, "", {}, 0});
      }
      continue;
    }
    if (devices.empty() || !index.count(t[0])) continue;
    Device& d = devices[index[t[0]]];
    const std::string where = origin + " (line " + std::to_string(line_no) + ")";
    if (t.size() < devices.size() + 1)
      throw ConfigError(where, "row " + t[0] + " has " + std::to_string(t.size() - 1) + " cells, the header " +
                                   std::to_string(devices.size()) + " devices",
                        "paste the whole matrix as printed by nvidia-smi topo -m");
    for (std::size_t c = 0; c < devices.size(); ++c) {
      const std::string& v = t[c + 1];
      if (!std::regex_match(v, cell))
        throw ConfigError(where, "unknown connection '" + v + "' in row " + t[0],
                          "cells must be X, NV#, PIX, PXB, PHB, NODE or SYS");
      d.cells.push_back(v);
    }
    if (d.gpu && t.size() > devices.size() + 1) d.affinity = t[devices.size() + 1];
    d.line = line_no;
  }
  if (devices.empty())
    throw ConfigError(origin, "no matrix header starting with GPU0 found",
                      "paste the output of `nvidia-smi topo -m`, header line included");
  for (const Device& d : devices)
    if (d.cells.empty())
      throw ConfigError(origin, "the matrix has no row for " + d.column, "paste every row of the matrix");
  return devices;
}

int nv_lanes(const std::string& cell) { return cell.rfind("NV", 0) == 0 ? std::stoi(cell.substr(2)) : 0; }

// The matrix does not give the PCIe generation: assume the one the GPU generation shipped with.
std::pair<std::string, std::string> pcie_rate(GpuArch arch) {
  switch (arch) {
    case GpuArch::pascal:
    case GpuArch::volta:
    case GpuArch::turing: return {"15.75GBps", "Gen3 x16"};
    case GpuArch::ampere: return {"31.5GBps", "Gen4 x16"};
    case GpuArch::hopper:
    case GpuArch::blackwell: return {"63GBps", "Gen5 x16"};
  }
  return {};
}

}  // namespace

std::string import_nvidia_smi_topo(const std::string& text, const std::string& origin, const std::string& gpu_model) {
  YamlReader reader(origin);
  const GpuModel gpu = catalogue_gpu(gpu_model, reader, YAML::Node(), "gpu.model");
  std::vector<Device> devices = parse_matrix(text, origin);
  const int n = static_cast<int>(devices.size());

  // Sockets: devices related over PCIe without crossing the inter-socket link (PIX, PXB, PHB,
  // NODE), plus GPUs with the same CPU affinity. NV# hides the PCIe relation, so it is ignored.
  UnionFind socket_of(n), switch_of(n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      const std::string& c = devices[i].cells[j];
      if (c == "PIX" || c == "PXB" || c == "PHB" || c == "NODE") socket_of.join(i, j);
      if (c == "PIX" || c == "PXB") switch_of.join(i, j);
      if (devices[i].gpu && devices[j].gpu && !devices[i].affinity.empty() && devices[i].affinity == devices[j].affinity)
        socket_of.join(i, j);
    }
  std::map<int, int> socket_ids;  // union-find root -> socket number, by first device
  for (int i = 0; i < n; ++i) socket_ids.emplace(socket_of.find(i), static_cast<int>(socket_ids.size()));
  std::map<int, std::vector<int>> switches;  // root -> members
  for (int i = 0; i < n; ++i) switches[switch_of.find(i)].push_back(i);

  // A GPU with more NV# lanes than it has NVLinks reaches its peers through an NVSwitch.
  bool nvswitch = false;
  for (int i = 0; i < n; ++i) {
    int lanes = 0;
    for (int j = 0; j < n; ++j) lanes += devices[j].gpu ? nv_lanes(devices[i].cells[j]) : 0;
    nvswitch |= devices[i].gpu && lanes > gpu.nvlinks;
  }

  auto vertex = [&](int i) {
    std::string name = devices[i].column;
    for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return name;
  };
  std::ostringstream y;
  y << "# Imported from `nvidia-smi topo -m` (" << origin << ") by stepsim.\n"
    << "# Figures the matrix does not give are marked `assumed`: check them against the machine.\n"
    << "version: 1\nname: imported\n"
    << "description: Imported from nvidia-smi topo -m (" << origin << ")\n"
    << "gpu: {model: " << gpu.name << "}\nnode:\n  vertices:\n";
  for (int i = 0; i < n; ++i)
    y << "    - {name: " << vertex(i) << ", kind: " << (devices[i].gpu ? "gpu" : "nic")
      << ", socket: " << socket_ids[socket_of.find(i)] << "}\n";
  std::map<int, std::string> switch_name;
  for (const auto& [root, members] : switches)
    if (members.size() > 1) {
      switch_name[root] = "pcie_sw" + std::to_string(switch_name.size());
      y << "    - {name: " << switch_name[root] << ", kind: pcie_switch, socket: " << socket_ids[socket_of.find(root)]
        << "}   # devices joined by PIX/PXB\n";
    }
  for (std::size_t s = 0; s < socket_ids.size(); ++s)
    y << "    - {name: cpu" << s << ", kind: cpu, socket: " << s << "}\n";
  if (nvswitch)
    y << "  # Every GPU pair shows more NVLinks than one GPU has: they meet in an NVSwitch. Latency assumed\n"
      << "  # (half of NCCL's NVLink LL hop latency 0.6 us per side, papers.md §4).\n"
      << "  nvswitch: {latency: 0.3us, nvls: " << (gpu.arch >= GpuArch::hopper ? "true" : "false")
      << "}   # NVLink SHARP from NVSwitch gen3 (Hopper) on\n";
  y << "  links:\n";
  if (!nvswitch)
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j)
        if (devices[i].gpu && devices[j].gpu && nv_lanes(devices[i].cells[j]) > 0)
          y << "    - {between: [" << vertex(i) << ", " << vertex(j) << "], type: nvlink, lanes: "
            << nv_lanes(devices[i].cells[j]) << ", latency: 0.6us}   # " << devices[i].cells[j]
            << "; latency assumed (NCCL NVLink LL hop, papers.md §4)\n";
  const auto [rate, generation] = pcie_rate(gpu.arch);
  y << "    # PCIe: assumed " << generation << " per direction (papers.md §6); latency assumed, 0.5 us per link\n"
    << "    # (NCCL's PCIe LL hop latency 1.0 us per GPU-switch-GPU path, papers.md §4).\n";
  for (int i = 0; i < n; ++i) {
    auto sw = switch_name.find(switch_of.find(i));
    const std::string up = sw != switch_name.end() ? sw->second : "cpu" + std::to_string(socket_ids[socket_of.find(i)]);
    y << "    - {between: [" << vertex(i) << ", " << up << "], type: pcie, latency: 0.5us, bandwidth: " << rate << "}\n";
  }
  for (const auto& [root, name] : switch_name)
    y << "    - {between: [" << name << ", cpu" << socket_ids[socket_of.find(root)]
      << "], type: pcie, latency: 0.5us, bandwidth: " << rate << "}\n";
  for (std::size_t s = 1; s < socket_ids.size(); ++s)
    y << "    - {between: [cpu" << s - 1 << ", cpu" << s << "], type: inter_socket, latency: 0.5us, bandwidth: 10GBps}"
      << "   # assumed: NCCL's Skylake figure (papers.md §4); set your CPU's\n";
  return y.str();
}

}  // namespace stepsim::platforms
