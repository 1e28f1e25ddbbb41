#pragma once
/// @file The device mesh: named parallel axes laid over the job's ranks, and the process groups
/// they give (torch.distributed DeviceMesh, Megatron-LM's RankGenerator).
///
/// Contract: ranks are numbered row-major over the axes in `order`, outermost first, so the last
/// axis varies fastest: with the default order [pp, dp_replicate, dp_shard, cp, tp] (torchtitan's
/// ParallelDims.build_mesh; Megatron-LM's default order tp-cp-ep-dp-pp read innermost first) a
/// tensor-parallel group is `tp` consecutive ranks, on one node when tp divides the GPUs per node
/// (the allocation numbers ranks node by node). The expert region is a second view of the same
/// ranks: [pp, dp_replicate, efsdp, ep] with efsdp = dp_shard x cp x tp / ep (torchtitan's
/// sparse mesh, torchtitan/distributed/parallel_dims.py at b5bcd76c), so an expert group is ep
/// consecutive ranks of the dp_shard x cp x tp region.
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "platforms/yaml_reader.hpp"
#include "workloads/trace.hpp"

namespace stepsim::workloads {

/// @brief The `parallelism:` section of a transformer workload (docs/parallelism.md).
struct Parallelism {
  int dp_replicate = 1;
  int dp_shard = 1;
  int cp = 1;
  int tp = 1;
  int pp = 1;
  int ep = 1;
  /// Dense axes, outermost first: a permutation of pp, dp_replicate, dp_shard, cp, tp.
  std::vector<std::string> order = {"pp", "dp_replicate", "dp_shard", "cp", "tp"};
  int degree(const std::string& axis) const;
};

/// @brief Reads `parallelism:` for a job of `ranks` ranks: unknown keys, degrees below 1 (one
/// of dp_replicate, dp_shard, cp, tp, pp may be -1, "the rest"; dp_shard is the rest when
/// unset and no other is, as torchtitan's default), a product other than `ranks`,
/// ep not dividing dp_shard x cp x tp, and an order that is not a permutation of the dense
/// axes are errors naming the key and a fix. Absent: every rank in dp_shard.
Parallelism read_parallelism(const YAML::Node& doc, const platforms::YamlReader& reader, int ranks);

class DeviceMesh {
 public:
  struct Axis {
    std::string name;
    int size = 1;
  };
  /// @param axes outermost first; their product is the rank count.
  explicit DeviceMesh(std::vector<Axis> axes);

  int ranks() const { return ranks_; }
  int size(const std::string& axis) const;
  /// @brief The rank's coordinate along `axis`.
  int coord(int rank, const std::string& axis) const;
  /// @brief The rank at `rank`'s coordinates with `axis` set to `value`.
  int with(int rank, const std::string& axis, int value) const;
  /// @brief Ranks that differ only along `axes` form one subgroup, each in mesh order (the
  /// flattened axes, outermost first); subgroups are numbered by the remaining coordinates.
  ProcessGroup group(const std::string& name, const std::vector<std::string>& axes) const;

 private:
  int index(const std::string& axis) const;
  std::vector<Axis> axes_;
  std::vector<int> stride_;
  int ranks_ = 1;
};

/// @brief The dense mesh (parallelism.order).
DeviceMesh dense_mesh(const Parallelism& p);

/// @brief The expert region's groups: within each (pp, dp_replicate) slice, the dp_shard x cp
/// x tp ranks in mesh order split into efsdp x ep, ep innermost.
struct ExpertGroups {
  ProcessGroup ep;      ///< ranks whose experts together form one full set
  ProcessGroup efsdp;   ///< ranks holding the same experts (their FSDP group)
};
ExpertGroups expert_groups(const Parallelism& p);

}  // namespace stepsim::workloads
