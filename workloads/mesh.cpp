#include "workloads/mesh.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>

namespace stepsim::workloads {
namespace {

const std::vector<std::string> kDenseAxes = {"pp", "dp_replicate", "dp_shard", "cp", "tp"};

int& degree_of(Parallelism& p, const std::string& axis) {
  if (axis == "dp_replicate") return p.dp_replicate;
  if (axis == "dp_shard") return p.dp_shard;
  if (axis == "cp") return p.cp;
  if (axis == "tp") return p.tp;
  if (axis == "pp") return p.pp;
  if (axis == "ep") return p.ep;
  throw std::logic_error("mesh: no axis " + axis);
}

std::string product_text(const Parallelism& p) {
  return fmt::format("dp_replicate {} x dp_shard {} x cp {} x tp {} x pp {}", p.dp_replicate, p.dp_shard, p.cp, p.tp,
                     p.pp);
}

}  // namespace

int Parallelism::degree(const std::string& axis) const { return degree_of(const_cast<Parallelism&>(*this), axis); }

Parallelism read_parallelism(const YAML::Node& doc, const platforms::YamlReader& reader, int ranks) {
  Parallelism p;
  p.dp_shard = ranks;
  const YAML::Node section = doc["parallelism"];
  if (!section) return p;
  if (!section.IsMap())
    reader.fail("parallelism", section, "expected a section",
                "write e.g. parallelism: {dp_shard: -1, tp: 8} (degrees whose product is the rank count)");
  reader.check_keys(section, "parallelism", {"dp_replicate", "dp_shard", "cp", "tp", "pp", "ep", "order"});
  p.dp_shard = 1;
  std::string rest;
  for (const std::string& axis : kDenseAxes) {
    const YAML::Node n = section[axis];
    if (!n) continue;
    const std::string path = "parallelism." + axis;
    const int value = reader.get_int(n, path, -1);
    if (value == 0)
      reader.fail(path, n, "a degree of 0", "use 1 (no parallelism along " + axis + ") or -1 (the ranks left over)");
    if (value == -1) {
      if (!rest.empty())
        reader.fail(path, n, "parallelism." + rest + " is -1 already", "give at most one degree as -1 (the rest)");
      rest = axis;
    }
    degree_of(p, axis) = value;
  }
  // As torchtitan's data_parallel_shard_degree, an unset dp_shard takes the ranks left over.
  if (rest.empty() && !section["dp_shard"]) rest = "dp_shard";
  if (const YAML::Node n = section["ep"]) p.ep = reader.get_int(n, "parallelism.ep", 1);
  int known = 1;
  for (const std::string& axis : kDenseAxes)
    if (axis != rest) known *= p.degree(axis);
  if (!rest.empty()) {
    if (ranks % known != 0)
      reader.fail(section[rest] ? "parallelism." + rest : std::string("parallelism"),
                  section[rest] ? section[rest] : section,
                  fmt::format("the other degrees multiply to {}, which does not divide the job's {} ranks", known, ranks),
                  "choose degrees whose product divides the rank count, or run on a multiple of " +
                      std::to_string(known) + " GPUs");
    degree_of(p, rest) = ranks / known;
  } else if (known != ranks) {
    reader.fail("parallelism", section,
                fmt::format("{} = {} ranks, but the job has {}", product_text(p), known, ranks),
                "make the product the rank count, or set one degree (e.g. dp_shard) to -1 for the rest");
  }
  const int region = p.dp_shard * p.cp * p.tp;
  if (region % p.ep != 0)
    reader.fail("parallelism.ep", section["ep"],
                fmt::format("ep ({}) must divide dp_shard x cp x tp ({}): experts spread over that region", p.ep, region),
                "use a divisor of " + std::to_string(region));
  if (const YAML::Node n = section["order"]) {
    if (!n.IsSequence())
      reader.fail("parallelism.order", n, "expected a list of axes, outermost first",
                  "write e.g. order: [pp, dp_replicate, dp_shard, cp, tp]");
    std::vector<std::string> order;
    for (std::size_t i = 0; i < n.size(); ++i)
      order.push_back(reader.get_choice(n[i], fmt::format("parallelism.order[{}]", i), kDenseAxes));
    std::vector<std::string> sorted = order, expected = kDenseAxes;
    std::sort(sorted.begin(), sorted.end());
    std::sort(expected.begin(), expected.end());
    if (sorted != expected)
      reader.fail("parallelism.order", n, "the order must name each of pp, dp_replicate, dp_shard, cp, tp once",
                  "write all five, outermost first, e.g. [pp, dp_replicate, dp_shard, cp, tp]");
    p.order = order;
  }
  return p;
}

DeviceMesh::DeviceMesh(std::vector<Axis> axes) : axes_(std::move(axes)), stride_(axes_.size()) {
  for (std::size_t i = axes_.size(); i-- > 0;) {
    stride_[i] = ranks_;
    ranks_ *= axes_[i].size;
  }
}

int DeviceMesh::index(const std::string& axis) const {
  for (std::size_t i = 0; i < axes_.size(); ++i)
    if (axes_[i].name == axis) return static_cast<int>(i);
  throw std::logic_error("mesh: no axis " + axis);
}

int DeviceMesh::size(const std::string& axis) const { return axes_[static_cast<std::size_t>(index(axis))].size; }

int DeviceMesh::coord(int rank, const std::string& axis) const {
  const auto i = static_cast<std::size_t>(index(axis));
  return rank / stride_[i] % axes_[i].size;
}

int DeviceMesh::with(int rank, const std::string& axis, int value) const {
  const auto i = static_cast<std::size_t>(index(axis));
  return rank + (value - coord(rank, axis)) * stride_[i];
}

ProcessGroup DeviceMesh::group(const std::string& name, const std::vector<std::string>& axes) const {
  std::vector<bool> inside(axes_.size(), false);
  for (const std::string& axis : axes) inside[static_cast<std::size_t>(index(axis))] = true;
  ProcessGroup g{name, {}, std::vector<int>(static_cast<std::size_t>(ranks_), -1)};
  std::map<std::vector<int>, int> by_outside;   // the coordinates off the group's axes -> subgroup
  for (int r = 0; r < ranks_; ++r) {
    std::vector<int> outside;
    for (std::size_t i = 0; i < axes_.size(); ++i)
      if (!inside[i]) outside.push_back(r / stride_[i] % axes_[i].size);
    auto [it, added] = by_outside.try_emplace(outside, static_cast<int>(g.subgroups.size()));
    if (added) g.subgroups.emplace_back();
    g.subgroups[static_cast<std::size_t>(it->second)].push_back(r);
    g.subgroup_of_rank[static_cast<std::size_t>(r)] = it->second;
  }
  return g;
}

DeviceMesh dense_mesh(const Parallelism& p) {
  std::vector<DeviceMesh::Axis> axes;
  for (const std::string& axis : p.order) axes.push_back({axis, p.degree(axis)});
  return DeviceMesh(std::move(axes));
}

ExpertGroups expert_groups(const Parallelism& p) {
  const DeviceMesh mesh = dense_mesh(p);
  // Each (pp, dp_replicate) slice is one expert region; its ranks in mesh order.
  const ProcessGroup regions = mesh.group("region", {"dp_shard", "cp", "tp"});
  ExpertGroups out{{"ep", {}, std::vector<int>(static_cast<std::size_t>(mesh.ranks()), -1)},
                   {"efsdp", {}, std::vector<int>(static_cast<std::size_t>(mesh.ranks()), -1)}};
  const int per_region = static_cast<int>(regions.subgroups.front().size());
  const int efsdp = per_region / p.ep;
  for (std::size_t g = 0; g < regions.subgroups.size(); ++g) {
    const std::vector<int>& ranks = regions.subgroups[g];
    for (int i = 0; i < per_region; ++i) {
      const int rank = ranks[static_cast<std::size_t>(i)];
      const int ep_group = static_cast<int>(g) * efsdp + i / p.ep;
      const int efsdp_group = static_cast<int>(g) * p.ep + i % p.ep;
      for (auto [group, index] : {std::pair{&out.ep, ep_group}, std::pair{&out.efsdp, efsdp_group}}) {
        if (static_cast<int>(group->subgroups.size()) <= index) group->subgroups.resize(static_cast<std::size_t>(index) + 1);
        group->subgroups[static_cast<std::size_t>(index)].push_back(rank);
        group->subgroup_of_rank[static_cast<std::size_t>(rank)] = index;
      }
    }
  }
  return out;
}

}  // namespace stepsim::workloads
