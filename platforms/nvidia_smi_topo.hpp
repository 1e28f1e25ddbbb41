#pragma once
/// @file Import of `nvidia-smi topo -m` output into platform YAML.
#include <string>

namespace stepsim::platforms {

/// @brief Turns a pasted `nvidia-smi topo -m` matrix into platform YAML that load_platform accepts.
///
/// Contract: NV# cells become NVLink bundles of # lanes, or one NVSwitch when a GPU's NV# cells
/// add up to more NVLinks than `gpu_model` has (all-pairs NV18 on 8 H100s); devices joined by
/// PIX or PXB share a PCIe switch; the non-SYS relation groups devices into CPU sockets (SYS =
/// across the inter-socket link). NIC columns (NIC#, mlx5_#) become NIC vertices. What the
/// matrix cannot say (PCIe generation, link latencies, inter-socket rate) is written with
/// "assumed" comments in the YAML for the user to edit. Throws ConfigError naming `origin` and
/// the line for text that is not such a matrix.
std::string import_nvidia_smi_topo(const std::string& text, const std::string& origin, const std::string& gpu_model);

}  // namespace stepsim::platforms
