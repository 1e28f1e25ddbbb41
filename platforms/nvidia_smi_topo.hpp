#pragma once
/// @file Import of `nvidia-smi topo -m` output into platform YAML.
#include <string>
#include <vector>

namespace stepsim::platforms {

/// @brief Pasted `nvidia-smi topo -p2p r` (or `w`) output and the name errors give it.
struct P2pText {
  std::string text;
  std::string origin;
};

/// @brief Turns a pasted `nvidia-smi topo -m` matrix into platform YAML that load_platform accepts.
///
/// Contract: NV# cells become NVLink bundles of # lanes, or one NVSwitch when a GPU's NV# cells
/// add up to more NVLinks than `gpu_model` has (all-pairs NV18 on 8 H100s); devices joined by
/// PIX or PXB share a PCIe switch; the non-SYS relation groups devices into CPU sockets (SYS =
/// across the inter-socket link). NIC columns (NIC#, mlx5_#) become NIC vertices. What the
/// matrix cannot say (PCIe generation, link latencies, inter-socket rate) is written with
/// "assumed" comments in the YAML for the user to edit.
///
/// Peer-to-peer: an `nvidia-smi topo -p2p` matrix after the topology in `text`, and the one in
/// each of `p2p` (`-p2p r` and `-p2p w`: NCCL needs both OK), give the driver's status per GPU
/// pair; a pair with any cell other than OK in either direction is written to
/// `node.p2p.disabled`, so its traffic goes through host memory as NCCL's does. Without such a
/// matrix P2P is assumed on, and the YAML says so.
///
/// Throws ConfigError naming the text's origin and line for text that is not such a matrix, a
/// P2P cell outside X, OK, CNS, GNS, TNS, NS, DR and U, a P2P matrix of another GPU count, or a
/// pair joined by NVLink whose P2P is off (NCCL refuses to run there).
/// The GPU model is `gpu_model`, else the one `nvidia-smi -L` or `nvidia-smi -q` lines in `text`
/// name (a ConfigError when neither says: a guessed model would set every figure wrong). A
/// matrix whose diagonal is not X, that is not symmetric, or whose NV# cells lie outside 1 to
/// the GPU's NVLink count is a ConfigError naming the line.
std::string import_nvidia_smi_topo(const std::string& text, const std::string& origin, const std::string& gpu_model,
                                   const std::vector<P2pText>& p2p = {});

}  // namespace stepsim::platforms
