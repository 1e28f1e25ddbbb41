#pragma once
/// @file A platform's `calibration:` section: the factors `stepsim calibrate` fitted from
/// measurement files, applied on top of the preset's cited figures.
///
/// Contract: every factor is a positive multiplier of a figure the model already has (a
/// link's achieved fraction or latency, an NCCL protocol's wire efficiency or latency estimate) or a
/// GEMM efficiency replacing the architecture's table value, so an absent section leaves the
/// model exactly as the preset states it. `fitted` lists the measurement cases the factors
/// were fitted on, so `stepsim validate` can keep them out of its error figures.
#include <map>
#include <string>
#include <vector>

namespace YAML { class Node; }

namespace stepsim::platforms {

class YamlReader;
struct NodeTemplate;
struct Fabric;

struct LinkCalibration {
  /// Multiplies the achieved fraction of every link of the type (Link::achieved_fraction), never
  /// its datasheet figure, which NCCL's graph search reads as the library detects link counts and
  /// port rates (nccl_topology.cpp).
  double bandwidth_scale = 1;
  double latency_scale = 1;
};

struct ProtocolCalibration {
  double efficiency_scale = 1;  ///< multiplies the protocol's wire efficiency
  double latency_scale = 1;     ///< multiplies NCCL's latency estimate (baseLat + hops x hwLat)
};

/// @brief The measurement cases of one file that a calibration was fitted on.
struct FittedCases {
  std::string file;
  std::vector<int> cases;  ///< indices into the file's `measurements` list
};

struct Calibration {
  std::map<std::string, LinkCalibration> links;
  /// NCCL algorithm (ring tree nvls nvls_tree collnet_direct collnet_chain p2p) -> multiplier of
  /// its achieved bandwidth, on top of the protocol's: NCCL's own tuning tables are per
  /// (algorithm, protocol), and one algorithm's implementation can fall short where another's does not.
  std::map<std::string, double> algorithms;           ///< link type name (nvlink pcie inter_socket network)
  std::map<std::string, ProtocolCalibration> protocols;  ///< LL, LL128, Simple
  std::map<std::string, double> gemm_efficiency;         ///< dtype (fp32 tf32 fp16 bf16 fp8) -> fraction of peak
  std::map<std::string, double> codec_throughput_scale;  ///< codec name (zfp, mpc, cast, quant) -> multiplier
  std::vector<FittedCases> fitted;

  const ProtocolCalibration& protocol(const std::string& name) const;
  double algorithm_efficiency_scale(const std::string& algo) const;
  /// @brief True when `file`'s case `index` was used to fit this calibration.
  bool was_fitted(const std::string& file, int index) const;
};

/// @brief Reads the `calibration` section at `path` (ConfigError on unknown keys, factors <= 0).
Calibration read_calibration(const YamlReader& reader, const YAML::Node& section, const std::string& path);

/// @brief Multiplies the achieved fraction and the latency of every link of a calibrated type,
/// and the fabric's NIC fraction and latencies for `network`; datasheet figures stay as rated.
void apply_link_calibration(const Calibration& calibration, NodeTemplate& node, Fabric& fabric);

/// @brief Protocol names accepted under `calibration.protocols`.
const std::vector<std::string>& calibrated_protocol_names();
/// @brief Codec names accepted under `calibration.codecs`.
const std::vector<std::string>& calibrated_codec_names();
/// @brief Algorithm names accepted under `calibration.algorithms`.
const std::vector<std::string>& calibrated_algorithm_names();

}  // namespace stepsim::platforms
