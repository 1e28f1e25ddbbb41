#include "platforms/nvidia_smi_topo.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <set>
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

// nvidia-smi colours its header when writing to a terminal; pasted text may keep the escapes
// (ESC [ digits-and-semicolons m). A linear scan: the text is unbounded.
std::string strip_ansi(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
      std::size_t j = i + 2;
      while (j < text.size() && (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == ';')) ++j;
      if (j < text.size() && text[j] == 'm') {
        i = j;
        continue;
      }
    }
    out += text[i];
  }
  return out;
}

// `prefix` followed by one or more digits, nothing else ("GPU12" for "GPU"); -1 when not, or
// when the number passes 9999 (no server has that many devices).
int numbered(const std::string& token, const std::string& prefix) {
  if (token.size() <= prefix.size() || token.size() > prefix.size() + 4 || token.compare(0, prefix.size(), prefix) != 0)
    return -1;
  int value = 0;
  for (std::size_t i = prefix.size(); i < token.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(token[i]))) return -1;
    value = value * 10 + (token[i] - '0');
  }
  return value;
}

// A column of the matrix: GPU#, NIC# or mlx#_# (a Mellanox device).
bool is_device_name(const std::string& token) {
  if (numbered(token, "GPU") >= 0 || numbered(token, "NIC") >= 0) return true;
  const std::size_t underscore = token.find('_');
  return underscore != std::string::npos && numbered(token.substr(0, underscore), "mlx") >= 0 &&
         numbered("x" + token.substr(underscore + 1), "x") >= 0;
}

// The catalogue model of the GPUs a `nvidia-smi -L` ("GPU 0: Tesla V100-SXM2-32GB (UUID: ...)")
// or `nvidia-smi -q` ("Product Name : NVIDIA H100 80GB HBM3") line in the text names; "" when
// the text holds none. Driver names the catalogue does not hold, and GPUs of two kinds, are
// errors: the model decides every figure of the platform.
std::string gpu_model_in_text(const std::string& text, const std::string& origin) {
  static const std::vector<std::pair<std::string, std::string>> models = {
      {"V100-SXM2", "V100-SXM2"},           {"V100-SXM3", "V100-SXM3"},           {"P100-SXM2", "P100-SXM2"},
      {"RTX 2080 Ti", "RTX-2080Ti"},        {"A100-SXM4-40GB", "A100-SXM4-40GB"}, {"A100-SXM4-80GB", "A100-SXM4-80GB"},
      {"A100-PCIE-40GB", "A100-PCIe-40GB"}, {"H100 80GB HBM3", "H100-SXM5-80GB"}, {"H200", "H200-SXM5-141GB"},
      {"GB200", "GB200"},                   {"B200", "B200"}};
  const std::string fix = "pass --gpu-model with the catalogue's name (platforms/presets/gpus.yaml)";
  std::istringstream in(text);
  std::string found, found_name;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    std::string name;
    if (line.rfind("GPU ", 0) == 0 && line.find(": ") != std::string::npos && line.find("(UUID:") != std::string::npos) {
      const std::size_t start = line.find(": ") + 2;
      name = line.substr(start, line.find("(UUID:") - start);
    } else if (const std::size_t key = line.find("Product Name"); key != std::string::npos && line.find(':') != std::string::npos) {
      name = line.substr(line.find(':') + 1);
    } else {
      continue;
    }
    const std::string where = origin + " (line " + std::to_string(line_no) + ")";
    std::string model;
    for (const auto& [driver_name, catalogue_name] : models)
      if (name.find(driver_name) != std::string::npos) {
        model = catalogue_name;
        break;
      }
    if (model.empty()) throw ConfigError(where, "the GPU '" + name + "' is not in stepsim's catalogue", fix);
    if (!found.empty() && model != found)
      throw ConfigError(where, "GPUs of two models: " + found_name + " and " + name, fix + " for the GPUs of the matrix");
    found = model;
    found_name = name;
  }
  return found;
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
    const int r = t.empty() ? -1 : numbered(t[0], "GPU");
    if (r < 0) break;
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
  static const std::set<std::string> kCells = {"X", "SYS", "SOC", "NODE", "PHB", "PXB", "PIX"};
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
        if (!is_device_name(name)) break;
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
      if (!kCells.count(v) && numbered(v, "NV") < 0)
        throw ConfigError(where, "unknown connection '" + v + "' in row " + t[0],
                          "cells must be X, NV#, PIX, PXB, PHB, NODE or SYS");
      if ((v == "X") != (c == static_cast<std::size_t>(index[t[0]])))
        throw ConfigError(where, "'" + v + "' where row " + t[0] + " meets column " + devices[c].column +
                                     (v == "X" ? " (X marks a device's own cell)" : " (its own cell, which nvidia-smi prints as X)"),
                          "paste the matrix as printed by nvidia-smi topo -m");
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
  for (std::size_t i = 0; i < devices.size(); ++i)
    for (std::size_t j = i + 1; j < devices.size(); ++j)
      if (devices[i].cells[j] != devices[j].cells[i])
        throw ConfigError(origin + " (line " + std::to_string(devices[j].line) + ")",
                          devices[j].column + " to " + devices[i].column + " is " + devices[j].cells[i] + ", but " +
                              devices[i].column + " to " + devices[j].column + " is " + devices[i].cells[j],
                          "nvidia-smi prints a symmetric matrix: paste it unedited");
  return {devices, line_no};
}

int nv_lanes(const std::string& cell) { return std::max(0, numbered(cell, "NV")); }

// Every NV# cell of a GPU pair names 1 to `nvlinks` links: NV0 is no link, and no pair holds
// more links than one GPU has (NV18 on an NVSwitch H100 is all of them).
void check_nvlink_cells(const std::vector<Device>& devices, const GpuModel& gpu, const std::string& origin) {
  for (const Device& d : devices)
    for (const std::string& cell : d.cells) {
      if (cell.rfind("NV", 0) != 0) continue;
      const int lanes = nv_lanes(cell);
      if (lanes >= 1 && lanes <= gpu.nvlinks) continue;
      throw ConfigError(origin + " (line " + std::to_string(d.line) + ")",
                        "'" + cell + "' in row " + d.column + ": a " + gpu.name + " has " + std::to_string(gpu.nvlinks) +
                            " NVLinks, so a pair of GPUs shares 1 to " + std::to_string(gpu.nvlinks),
                        "check --gpu-model, or paste the matrix unedited");
    }
}

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
  const std::string model = gpu_model.empty() ? gpu_model_in_text(text, origin) : gpu_model;
  if (model.empty())
    throw ConfigError(origin, "the matrix does not say which GPU the server holds",
                      "pass --gpu-model (platforms/presets/gpus.yaml names them), or append the output of "
                      "`nvidia-smi -L` to the file");
  const GpuModel gpu =
      catalogue_gpu(model, YamlReader(origin), YAML::Node(), gpu_model.empty() ? "nvidia-smi -L" : "--gpu-model");
  const TopoMatrix topo = parse_matrix(text, origin);
  check_nvlink_cells(topo.devices, gpu, origin);
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
