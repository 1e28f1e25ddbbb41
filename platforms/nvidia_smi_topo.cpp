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

// The cells of `nvidia-smi topo -p2p r|w` other than X (self), as its legend explains them. NCCL
// uses P2P only where the driver's read and write status are both OK (nvmlwrap.cc queries
// NVML_P2P_CAPS_INDEX_READ and _WRITE, paths.cc ncclTopoCheckP2p requires NVML_P2P_STATUS_OK).
const std::map<std::string, std::string> kP2pStatus = {
    {"OK", "Status Ok"},          {"CNS", "Chipset not supported"}, {"GNS", "GPU not supported"},
    {"TNS", "Topology not supported"}, {"NS", "Not supported"},     {"DR", "Disabled by regkey"},
    {"U", "Unknown"}};

/// One `nvidia-smi topo -p2p` matrix: status[from * gpus + to] ("X" on the diagonal).
struct P2pMatrix {
  int gpus = 0;                       ///< 0: no matrix found
  std::vector<std::string> status;
  std::vector<int> line;              ///< per row, its line in the text
};

// Checks one row of a P2P matrix (tokens `t`, line `line_no`) into `m`.
void read_p2p_row(const std::vector<std::string>& t, int row, int line_no, const std::string& origin, P2pMatrix& m) {
  const std::string where = origin + " (line " + std::to_string(line_no) + ")";
  const std::string fix = "cells of `nvidia-smi topo -p2p r` are X (the GPU itself), OK, CNS, GNS, TNS, NS, DR or U";
  if (static_cast<int>(t.size()) != m.gpus + 1)
    throw ConfigError(where, "row " + t[0] + " has " + std::to_string(t.size() - 1) + " cells, the header " +
                                 std::to_string(m.gpus) + " GPUs",
                      "paste the whole matrix as printed by nvidia-smi topo -p2p r");
  if (m.line[row] != 0) throw ConfigError(where, "a second row " + t[0], "paste one matrix per capability");
  for (int c = 0; c < m.gpus; ++c) {
    const std::string& v = t[c + 1];
    if (c == row && v != "X")
      throw ConfigError(where, "'" + v + "' where row " + t[0] + " meets its own column (nvidia-smi prints X)", fix);
    if (c != row && !kP2pStatus.count(v))
      throw ConfigError(where, "unknown P2P status '" + v + "' in row " + t[0] + ", column GPU" + std::to_string(c),
                        fix);
    m.status[static_cast<std::size_t>(row * m.gpus + c)] = v;
  }
  m.line[row] = line_no;
}

// The first `nvidia-smi topo -p2p` matrix at or after line `first_line`: a header GPU0 GPU1 ...,
// then one row per GPU, up to the first line that is no row (the blank line before its legend).
P2pMatrix parse_p2p_matrix(const std::string& text, const std::string& origin, int first_line) {
  static const std::regex gpu_name("GPU([0-9]+)");
  std::istringstream in(strip_ansi(text));
  P2pMatrix m;
  int line_no = 0, header_line = 0;
  for (std::string line; std::getline(in, line);) {
    if (++line_no < first_line) continue;
    const std::vector<std::string> t = tokens(line);
    const std::string where = origin + " (line " + std::to_string(line_no) + ")";
    if (m.gpus == 0) {
      if (t.empty() || t[0] != "GPU0") continue;
      for (std::size_t c = 0; c < t.size(); ++c)
        if (t[c] != "GPU" + std::to_string(c))
          throw ConfigError(where, "header cell '" + t[c] + "' where GPU" + std::to_string(c) + " belongs",
                            "paste the header as printed by nvidia-smi topo -p2p r (GPU0 GPU1 ...)");
      m.gpus = static_cast<int>(t.size());
      m.status.assign(t.size() * t.size(), "");
      m.line.assign(t.size(), 0);
      header_line = line_no;
      continue;
    }
    std::smatch row;
    if (t.empty() || !std::regex_match(t[0], row, gpu_name)) break;
    const int r = std::stoi(row[1]);
    if (r >= m.gpus) throw ConfigError(where, "row " + t[0] + " is not in the header", "paste the whole matrix");
    read_p2p_row(t, r, line_no, origin, m);
  }
  for (int r = 0; r < m.gpus; ++r)
    if (m.line[r] == 0)
      throw ConfigError(origin + " (line " + std::to_string(header_line) + ")",
                        "the P2P matrix has no row for GPU" + std::to_string(r), "paste every row of the matrix");
  return m;
}

struct TopoMatrix {
  std::vector<Device> devices;
  int end_line = 0;   ///< the line the matrix ended on (a blank line, or the last line)
};

TopoMatrix parse_matrix(const std::string& text, const std::string& origin) {
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
      if (kP2pStatus.count(v))
        throw ConfigError(where, "P2P status '" + v + "' in row " + t[0] + " before any `nvidia-smi topo -m` matrix",
                          "put the output of `nvidia-smi topo -m` first, or pass the -p2p output with --p2p");
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
  return {devices, line_no};
}

int nv_lanes(const std::string& cell) { return cell.rfind("NV", 0) == 0 ? std::stoi(cell.substr(2)) : 0; }

/// A GPU pair (device indices, a < b) whose P2P status is not OK, and where that was read.
struct P2pOff {
  int a = 0, b = 0;
  std::string why;   ///< e.g. "NS: Not supported (p2p.txt line 3)"
};

using P2pMatrices = std::vector<std::pair<P2pMatrix, std::string>>;   ///< each with its origin

// The GPU pairs that any matrix marks other than OK, in either direction (NCCL's P2P connection
// from a to b checks the status from a to b; one stepsim pair stands for both directions).
std::vector<P2pOff> p2p_off(const std::vector<Device>& devices, const P2pMatrices& matrices) {
  std::vector<int> device_of_gpu;   // GPUk of the P2P matrix -> the topology's device index
  for (int i = 0; i < static_cast<int>(devices.size()); ++i)
    if (devices[i].gpu) device_of_gpu.push_back(i);
  std::map<std::pair<int, int>, std::string> why;
  for (const auto& [m, origin] : matrices) {
    if (m.gpus != static_cast<int>(device_of_gpu.size()))
      throw ConfigError(origin, "the P2P matrix has " + std::to_string(m.gpus) + " GPUs, the topology matrix " +
                                    std::to_string(device_of_gpu.size()),
                        "give `nvidia-smi topo -p2p r` output of the same machine");
    for (int r = 0; r < m.gpus; ++r)
      for (int c = 0; c < m.gpus; ++c) {
        const std::string& status = m.status[static_cast<std::size_t>(r * m.gpus + c)];
        if (r == c || status == "OK") continue;
        const std::string where = origin + " line " + std::to_string(m.line[r]);
        const Device& from = devices[device_of_gpu[r]];
        const std::string& link = from.cells[device_of_gpu[c]];
        if (nv_lanes(link) > 0)
          throw ConfigError(origin + " (line " + std::to_string(m.line[r]) + ")",
                            from.column + " and GPU" + std::to_string(c) + " are joined by " + link +
                                " but their P2P status is " + status +
                                ", and NCCL stops on such GPUs (paths.cc ncclTopoCheckP2p: \"probably due to a "
                                "hardware issue\")",
                            "check the NVLinks (nvidia-smi nvlink --status) and import again");
        why.emplace(std::minmax(device_of_gpu[r], device_of_gpu[c]),
                    status + ": " + kP2pStatus.at(status) + " (" + where + ")");
      }
  }
  std::vector<P2pOff> off;
  for (const auto& [pair, reason] : why) off.push_back({pair.first, pair.second, reason});
  return off;
}

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

// The platform's vertex name of a matrix column: GPU3 -> gpu3, mlx5_2 -> mlx5_2.
std::string vertex_name(const Device& device) {
  std::string name = device.column;
  for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return name;
}

// The node's P2P section: pairs without P2P go through host memory (docs/platforms.md).
void write_p2p(std::ostringstream& y, const std::vector<Device>& devices, const std::vector<P2pOff>& off,
               bool assumed) {
  if (assumed) {
    y << "  # Peer-to-peer assumed on between every GPU pair: add `nvidia-smi topo -p2p r` output (--p2p) to check.\n";
    return;
  }
  if (off.empty()) {
    y << "  # Peer-to-peer: every GPU pair OK in `nvidia-smi topo -p2p`.\n";
    return;
  }
  y << "  # GPU pairs whose `nvidia-smi topo -p2p` status is not OK: NCCL moves their data through host\n"
    << "  # memory (paths.cc ncclTopoCheckP2p), so they are routed through the CPU.\n"
    << "  p2p:\n    disabled:\n";
  for (const P2pOff& pair : off)
    y << "      - [" << vertex_name(devices[pair.a]) << ", " << vertex_name(devices[pair.b]) << "]   # " << pair.why
      << "\n";
}

}  // namespace

std::string import_nvidia_smi_topo(const std::string& text, const std::string& origin, const std::string& gpu_model,
                                   const std::vector<P2pText>& p2p) {
  YamlReader reader(origin);
  const GpuModel gpu = catalogue_gpu(gpu_model, reader, YAML::Node(), "gpu.model");
  const TopoMatrix topo = parse_matrix(text, origin);
  const std::vector<Device>& devices = topo.devices;
  const int n = static_cast<int>(devices.size());
  // P2P status: a matrix after the topology in the same text (`nvidia-smi topo -m; nvidia-smi
  // topo -p2p r`), and one in each extra text (-p2p r and -p2p w: NCCL needs both OK).
  P2pMatrices matrices;
  if (P2pMatrix m = parse_p2p_matrix(text, origin, topo.end_line + 1); m.gpus > 0) matrices.emplace_back(m, origin);
  for (const P2pText& extra : p2p) {
    P2pMatrix m = parse_p2p_matrix(extra.text, extra.origin, 1);
    if (m.gpus == 0)
      throw ConfigError(extra.origin, "no P2P matrix header starting with GPU0 found",
                        "give the output of `nvidia-smi topo -p2p r`, header line included");
    matrices.emplace_back(m, extra.origin);
  }
  const std::vector<P2pOff> off = p2p_off(devices, matrices);

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

  auto vertex = [&](int i) { return vertex_name(devices[i]); };
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
  write_p2p(y, devices, off, matrices.empty());
  return y.str();
}

}  // namespace stepsim::platforms
