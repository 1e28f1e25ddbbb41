// `kind: trace`: a hand-written trace, every op explicit (format and semantics: docs/trace.md).
// The same reader serves JSON traces (workload.cpp converts their ops one at a time).
#include "workloads/generators/trace_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <unordered_map>

#include "models/compression/compressed_schedules.hpp"
#include "platforms/config_error.hpp"
#include "workloads/trace_builder.hpp"

namespace stepsim::workloads {
namespace {

using platforms::join;
using platforms::YamlReader;

const std::vector<std::string> kTopKeys = {"version", "kind",   "description", "ranks",
                                           "launch",  "params", "groups",      "programs"};
const std::vector<std::string> kOpKinds = {"kernel", "gpu", "collective", "send", "recv",
                                           "memcpy", "cpu", "record",     "wait", "sync"};
const std::vector<std::string> kKernelKeys = {"kernel", "stream", "name", "dtype", "histogram"};

/// "0-3, 6" for error messages.
std::string format_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") +
           (j == i ? std::to_string(ranks[i]) : std::to_string(ranks[i]) + "-" + std::to_string(ranks[j]));
    i = j + 1;
  }
  return out;
}

/// One op being read: its node, its path and its entries, listed once (yaml-cpp finds a key by
/// converting every key of the map, which dominated the time to read big traces).
struct OpNode {
  const YAML::Node& node;
  std::string path;
  std::vector<std::pair<std::string, YAML::Node>> entries;
};

/// A value to read: the node and the path errors name. A `$NAME` reference resolves to the
/// `params.NAME` entry, so a bad value (or a `-p workload.params.NAME=...`) is reported there.
struct Value {
  YAML::Node node;
  std::string path;
};

// The ranks of one program entry, precomputed for checks that would otherwise cost
// ranks x ops (a 16k-rank entry with 10^4 ops).
struct Entry {
  int index = 0;
  std::vector<int> ranks;
  std::vector<bool> runs;  ///< per job rank: runs this entry
  struct GroupUse {
    int outsider = -1;  ///< a rank of the entry outside the group, or -1
    int smallest = 0;   ///< smallest subgroup size among the entry's ranks
  };
  std::unordered_map<int, GroupUse> groups;  ///< group index -> how the entry's ranks sit in it
};

class TraceParser {
 public:
  TraceParser(const YAML::Node& doc, const YamlReader& reader, const JobContext& job, const OpSource& ops)
      : doc_(doc), reader_(reader), job_(job), ops_(ops), params_(doc["params"]), trace_(reader.origin(), job.ranks(), job.max_program_ops) {}

  Trace parse() {
    reader_.check_keys(doc_, "", kTopKeys);
    if (const YAML::Node description = doc_["description"]) reader_.get_string(description, "description");
    read_ranks();
    read_launch();
    read_params();
    read_groups();
    read_programs();
    return trace_.finish();
  }

 private:
  // --- top level ---------------------------------------------------------------------------

  std::string job_text() const {
    return fmt::format("the job has {} GPU{} of {}", job_.ranks(), job_.ranks() == 1 ? "" : "s", job_.platform.name());
  }

  void read_ranks() {
    const YAML::Node node = doc_["ranks"];
    if (!node) return;
    const int ranks = reader_.get_int(node, "ranks", 1);
    if (ranks != job_.ranks())
      reader_.fail("ranks", node, fmt::format("the trace is written for {} ranks but {}", ranks, job_text()),
                   fmt::format("run it on {} GPUs (--gpus picks them, e.g. --gpus 0-{}; --nodes adds servers), or "
                               "change `ranks:` and the programs to {}",
                               ranks, ranks - 1, job_.ranks()));
  }

  void read_launch() {
    const YAML::Node launch = doc_["launch"];
    if (!launch) return;
    reader_.check_keys(launch, "launch", {"cpu_launch", "kernel_gap"});
    if (const YAML::Node n = launch["cpu_launch"])
      trace_.launch().cpu_launch = reader_.get_duration(n, "launch.cpu_launch");
    if (const YAML::Node n = launch["kernel_gap"])
      trace_.launch().kernel_gap = reader_.get_duration(n, "launch.kernel_gap");
  }

  void read_params() {
    if (!params_) return;
    if (!params_.IsMap())
      reader_.fail("params", params_, "expected a section of `name: value` entries",
                   "write e.g. params: {grad_size: 64MiB, hidden: 4096} and use $grad_size in ops");
    for (const auto& entry : params_) {
      const std::string name = entry.first.as<std::string>();
      if (!entry.second.IsScalar())
        reader_.fail("params." + name, entry.second, "a parameter is a single value", "write `" + name + ": VALUE`");
    }
  }

  Value resolve(const YAML::Node& node, const std::string& path) const {
    if (!node.IsScalar() || node.Scalar().empty() || node.Scalar().front() != '$') return {node, path};
    const std::string name = node.Scalar().substr(1);
    std::vector<std::string> defined;
    if (params_) {  // read_params has checked it is a map of single values
      if (const YAML::Node value = params_[name]) return {value, "params." + name};
      for (const auto& entry : params_) defined.push_back("$" + entry.first.as<std::string>());
    }
    reader_.fail(path, node, "unknown parameter '$" + name + "'",
                 defined.empty() ? "define it in a top-level `params:` section, e.g. params: {" + name + ": 64MiB}"
                                 : "define it under params: (defined: " + join(defined) + ")");
  }

  std::optional<Value> field(const OpNode& in, const std::string& key) const {
    for (const auto& [name, value] : in.entries)
      if (name == key) return resolve(value, in.path + "." + key);
    return std::nullopt;
  }
  Value required(const OpNode& in, const std::string& key) const {
    if (std::optional<Value> value = field(in, key)) return *value;
    reader_.fail(in.path + "." + key, in.node, "missing required key '" + key + "'", "add `" + key + ": ...`");
  }

  // --- rank sets and groups ----------------------------------------------------------------

  [[noreturn]] void fail_outside(const std::string& path, const YAML::Node& node, int rank) const {
    reader_.fail(path, node,
                 fmt::format("rank {} is outside the job: {} (ranks 0-{})", rank, job_text(), job_.ranks() - 1),
                 fmt::format("use ranks 0-{}, or give the job more GPUs (--gpus, --nodes)", job_.ranks() - 1));
  }

  // "3", "0-3", "0-3,8,10-11" appended to `out`.
  void read_ranges(const std::string& text, const std::string& path, const YAML::Node& node,
                   std::vector<int>& out) const {
    const std::string forms = "write ranks as `all`, a list such as [0, 2, 4] or ranges such as \"0-3,8\"";
    std::size_t start = 0;
    while (start <= text.size()) {
      std::size_t comma = text.find(',', start);
      if (comma == std::string::npos) comma = text.size();
      std::string item = text.substr(start, comma - start);
      item.erase(std::remove(item.begin(), item.end(), ' '), item.end());
      const std::size_t dash = item.find('-', 1);
      const std::string first = item.substr(0, dash), last = dash == std::string::npos ? first : item.substr(dash + 1);
      auto number = [&](const std::string& digits) {
        if (digits.empty() || digits.size() > 9 ||
            !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); }))
          reader_.fail(path, node, "'" + item + "' is not a rank or a range of ranks", forms);
        return std::stoi(digits);
      };
      const int a = number(first), b = number(last);
      if (b < a) reader_.fail(path, node, "range '" + item + "' runs backwards", "write it low-high, e.g. 0-3");
      for (int rank = a; rank <= b; ++rank) {
        if (rank >= job_.ranks()) fail_outside(path, node, rank);
        out.push_back(rank);
      }
      start = comma + 1;
    }
  }

  // `all`, a list of ranks and range strings, or one range string; no rank twice.
  std::vector<int> read_rank_set(const YAML::Node& node, const std::string& path) const {
    std::vector<int> ranks;
    if (node.IsScalar() && node.Scalar() == "all") {
      for (int rank = 0; rank < job_.ranks(); ++rank) ranks.push_back(rank);
      return ranks;
    }
    if (node.IsScalar()) {
      read_ranges(node.Scalar(), path, node, ranks);
    } else if (node.IsSequence()) {
      for (std::size_t i = 0; i < node.size(); ++i) {
        const std::string item_path = fmt::format("{}[{}]", path, i);
        read_ranges(reader_.get_string(node[i], item_path), item_path, node[i], ranks);
      }
    } else {
      reader_.fail(path, node, "expected a set of ranks",
                   "write `all`, a list such as [0, 2, 4] or ranges such as \"0-3,8\"");
    }
    std::vector<int> sorted = ranks;
    std::sort(sorted.begin(), sorted.end());
    if (auto twice = std::adjacent_find(sorted.begin(), sorted.end()); twice != sorted.end())
      reader_.fail(path, node, fmt::format("rank {} is listed twice", *twice), "list each rank once");
    if (ranks.empty()) reader_.fail(path, node, "the set of ranks is empty", "list at least one rank");
    return ranks;
  }

  void read_groups() {
    const YAML::Node groups = doc_["groups"];
    if (!groups) return;
    if (!groups.IsMap())
      reader_.fail("groups", groups, "expected a section of `name: subgroups` entries",
                   "write e.g. groups: {world: all, tp: [[0, 1], [2, 3]], dp: {size: 2, stride: 2}}");
    for (const auto& entry : groups) {
      ProcessGroup group;
      group.name = entry.first.as<std::string>();
      const std::string path = "groups." + group.name;
      group.subgroups = read_subgroups(entry.second, path);
      group.subgroup_of_rank.assign(job_.ranks(), -1);
      for (std::size_t s = 0; s < group.subgroups.size(); ++s)
        for (int rank : group.subgroups[s]) {
          int& owner = group.subgroup_of_rank[rank];
          if (owner >= 0) {
            const YAML::Node at = entry.second.IsSequence() ? entry.second[s] : entry.second;
            reader_.fail(entry.second.IsSequence() ? fmt::format("{}[{}]", path, s) : path, at,
                         fmt::format("rank {} is in subgroups {} and {} of group '{}'", rank, owner, s, group.name),
                         "subgroups of one group must be disjoint: declare another group for an overlapping set");
          }
          owner = static_cast<int>(s);
        }
      const std::string name = group.name;
      group_index_[name] = trace_.group(std::move(group));
    }
  }

  std::vector<std::vector<int>> read_subgroups(const YAML::Node& node, const std::string& path) const {
    const std::string forms =
        "write `all`, a list of subgroups such as [[0, 1], [2, 3]] or [\"0-3\", \"4-7\"], or {size: K, stride: S}";
    if (node.IsScalar()) {
      if (node.Scalar() != "all") reader_.fail(path, node, "unknown group form '" + node.Scalar() + "'", forms);
      return {read_rank_set(node, path)};
    }
    if (node.IsMap()) return read_strided(node, path);
    if (!node.IsSequence() || node.size() == 0) reader_.fail(path, node, "expected subgroups", forms);
    std::vector<std::vector<int>> subgroups;
    for (std::size_t s = 0; s < node.size(); ++s) {
      const std::string item_path = fmt::format("{}[{}]", path, s);
      const YAML::Node item = node[s];
      // A bare rank could mean a one-rank subgroup or a member of one flat subgroup.
      if (item.IsScalar() && item.Scalar().find_first_not_of("0123456789") == std::string::npos)
        reader_.fail(item_path, item, "a bare rank is ambiguous here",
                     "write each subgroup as a list, e.g. [[" + item.Scalar() +
                         ", ...]] for one subgroup, or as a "
                         "range string such as \"0-3\"");
      subgroups.push_back(read_rank_set(item, item_path));
    }
    return subgroups;
  }

  // torch-style subgroups: blocks of size * stride consecutive ranks, each split into `stride`
  // subgroups of `size` ranks that are `stride` apart (stride 1: consecutive ranks).
  std::vector<std::vector<int>> read_strided(const YAML::Node& node, const std::string& path) const {
    reader_.check_keys(node, path, {"size", "stride"});
    const YAML::Node size_node = reader_.require(node, path, "size");
    const int size = reader_.get_int(size_node, path + ".size", 1);
    const int stride = node["stride"] ? reader_.get_int(node["stride"], path + ".stride", 1) : 1;
    const int block = size * stride;
    if (job_.ranks() % block != 0)
      reader_.fail(
          path + ".size", size_node,
          fmt::format("{} ranks do not split into subgroups of {} {} ({} does not divide {})", job_.ranks(), size,
                      stride == 1 ? "consecutive ranks" : fmt::format("ranks {} apart", stride), block, job_.ranks()),
          fmt::format("pick size x stride dividing the job's {} ranks", job_.ranks()));
    std::vector<std::vector<int>> subgroups;
    for (int base = 0; base < job_.ranks(); base += block)
      for (int offset = 0; offset < stride; ++offset) {
        std::vector<int>& members = subgroups.emplace_back();
        for (int j = 0; j < size; ++j) members.push_back(base + offset + j * stride);
      }
    return subgroups;
  }

  // `group:` of a collective: a declared group, or `world` (every rank) when none is declared.
  int group_index(const Value& value) {
    const std::string name = reader_.get_string(value.node, value.path);
    if (auto it = group_index_.find(name); it != group_index_.end()) return it->second;
    if (name == "world") {
      ProcessGroup world;
      world.name = "world";
      world.subgroups.emplace_back();
      for (int rank = 0; rank < job_.ranks(); ++rank) world.subgroups[0].push_back(rank);
      world.subgroup_of_rank.assign(job_.ranks(), 0);
      return group_index_[name] = trace_.group(std::move(world));
    }
    std::vector<std::string> names = {"world"};
    for (int g = 0; g < trace_.group_count(); ++g)
      if (trace_.group_at(g).name != "world") names.push_back(trace_.group_at(g).name);
    reader_.fail(value.path, value.node, "unknown group '" + name + "'",
                 "declare it under groups: (known: " + join(names) + ")");
  }

  // --- programs ----------------------------------------------------------------------------

  void read_programs() {
    const YAML::Node programs = reader_.require(doc_, "", "programs");
    if (!programs.IsSequence() || programs.size() == 0)
      reader_.fail("programs", programs, "expected a list of programs",
                   "write programs: [{ranks: all, streams: [compute], ops: [...]}]");
    entry_of_rank_.assign(job_.ranks(), -1);
    for (std::size_t p = 0; p < programs.size(); ++p) read_program(programs[p], static_cast<int>(p));
    std::vector<int> idle;
    for (int rank = 0; rank < job_.ranks(); ++rank)
      if (entry_of_rank_[rank] < 0) idle.push_back(rank);
    if (!idle.empty())
      reader_.fail("programs", programs,
                   fmt::format("rank{} {} of the job run{} no program ({})", idle.size() == 1 ? "" : "s",
                               format_ranks(idle), idle.size() == 1 ? "s" : "", job_text()),
                   "list them in a program's ranks (`ranks: all` covers every rank), or run the job on the GPUs the "
                   "trace is written for (--gpus, --nodes)");
  }

  void read_program(const YAML::Node& node, int p) {
    const std::string path = fmt::format("programs[{}]", p);
    reader_.check_keys(node, path, {"ranks", "streams", "ops"});
    Entry entry;
    entry.index = p;
    entry.ranks = read_rank_set(reader_.require(node, path, "ranks"), path + ".ranks");
    entry.runs.assign(job_.ranks(), false);
    for (int rank : entry.ranks) {
      int& program = entry_of_rank_[rank];
      if (program >= 0)
        reader_.fail(path + ".ranks", node["ranks"], fmt::format("rank {} already runs programs[{}]", rank, program),
                     "list each rank in exactly one program");
      program = p;
      entry.runs[rank] = true;
    }
    Program program;
    const YAML::Node streams = reader_.require(node, path, "streams");
    if (!streams.IsSequence())
      reader_.fail(path + ".streams", streams, "expected a list of stream names",
                   "write e.g. streams: [compute, comm]");
    for (std::size_t s = 0; s < streams.size(); ++s) {
      const std::string name = reader_.get_string(streams[s], fmt::format("{}.streams[{}]", path, s));
      if (std::find(program.streams.begin(), program.streams.end(), name) != program.streams.end())
        reader_.fail(fmt::format("{}.streams[{}]", path, s), streams[s], "stream '" + name + "' is declared twice",
                     "give every stream of a program its own name");
      program.streams.push_back(name);
    }
    const YAML::Node ops = reader_.require(node, path, "ops");
    if (!ops.IsSequence())
      reader_.fail(path + ".ops", ops, "expected a list of ops", "write ops: [{kernel: gemm, m: 4096, ...}, ...]");
    std::size_t index = 0;
    ops_(static_cast<std::size_t>(p), [&](const YAML::Node& op) {
      program.ops.push_back(read_op(op, fmt::format("{}.ops[{}]", path, index++), program, entry));
    });
    trace_.assign(entry.ranks, std::move(program));
  }

  // --- ops ---------------------------------------------------------------------------------

  Op read_op(const YAML::Node& node, const std::string& path, Program& program, Entry& entry) {
    if (!node.IsMap())
      reader_.fail(path, node, "expected an op (a map such as {kernel: gemm, ...})",
                   "start the op with one of: " + join(kOpKinds));
    OpNode in{node, path, {}};
    std::vector<std::string> kinds;
    for (const auto& item : node) {
      const std::string& key = in.entries.emplace_back(item.first.Scalar(), item.second).first;
      if (std::find(kOpKinds.begin(), kOpKinds.end(), key) != kOpKinds.end()) kinds.push_back(key);
    }
    if (kinds.empty()) reader_.fail(path, node, "the op has no kind", "start the op with one of: " + join(kOpKinds));
    if (kinds.size() > 1)
      reader_.fail(path, node, "the op has two kinds, '" + kinds[0] + "' and '" + kinds[1] + "'",
                   "write one op per kind, in the order they are issued");
    const std::string& kind = kinds.front();
    Op op;
    if (kind == "kernel")
      read_kernel(in, program, op);
    else if (kind == "gpu")
      read_fixed_kernel(in, program, op);
    else if (kind == "collective")
      read_collective(in, program, entry, op);
    else if (kind == "send" || kind == "recv")
      read_p2p(in, kind, program, entry, op);
    else if (kind == "memcpy")
      read_memcpy(in, program, op);
    else if (kind == "cpu")
      read_cpu(in, op);
    else if (kind == "record" || kind == "wait")
      read_event_op(in, kind, program, op);
    else
      read_sync(in, program, op);
    return op;
  }

  int read_name(const OpNode& in, const std::string& fallback) {
    const std::optional<Value> name = field(in, "name");
    return trace_.name(name ? reader_.get_string(name->node, name->path) : fallback);
  }

  // `stream:` of an op; a program with one stream lets ops leave it out.
  int read_stream(const OpNode& in, const Program& program) const {
    const std::optional<Value> value = field(in, "stream");
    if (!value) {
      if (program.streams.size() == 1) return 0;
      reader_.fail(in.path + ".stream", in.node, "the op needs a stream",
                   program.streams.empty()
                       ? std::string("declare the program's streams, e.g. streams: [compute]")
                       : "add `stream: NAME`, one of the program's streams: " + join(program.streams));
    }
    const std::string name = reader_.get_string(value->node, value->path);
    auto it = std::find(program.streams.begin(), program.streams.end(), name);
    if (it == program.streams.end())
      reader_.fail(value->path, value->node, "unknown stream '" + name + "'",
                   program.streams.empty()
                       ? std::string("declare it in the program's streams: [...]")
                       : "declare it in the program's streams: (declared: " + join(program.streams) + ")");
    return static_cast<int>(it - program.streams.begin());
  }

  Bytes read_positive_size(const Value& value) const {
    const Bytes bytes = reader_.get_size(value.node, value.path);
    if (!(bytes > 0))
      reader_.fail(value.path, value.node, "size must be > 0, got " + value.node.Scalar(),
                   "write a positive size such as 64MiB");
    return bytes;
  }

  void read_kernel(const OpNode& in, const Program& program, Op& op) {
    const Value kind = required(in, "kernel");
    models::KernelSpec spec;
    spec.kind = reader_.get_string(kind.node, kind.path);
    reader_.check_keys(in.node, in.path, kernel_keys(spec.kind, kind));
    op.kind = OpKind::kernel;
    op.stream = read_stream(in, program);
    op.name = read_name(in, spec.kind);
    if (const auto dtype = field(in, "dtype"))
      spec.dtype =
          models::parse_dtype(reader_.get_string(dtype->node, dtype->path), reader_.where(dtype->path, dtype->node));
    if (const auto histogram = field(in, "histogram")) {
      // complete_kernel checks whether the kind takes a histogram and how many entries.
      if (!histogram->node.IsSequence())
        reader_.fail(histogram->path, histogram->node, "expected a list of numbers",
                     "write e.g. histogram: [0.5, 0.3, 0.2]");
      for (std::size_t i = 0; i < histogram->node.size(); ++i) {
        const Value bin = resolve(histogram->node[i], fmt::format("{}[{}]", histogram->path, i));
        spec.histogram.push_back(reader_.get_number(bin.node, bin.path));
      }
    }
    for (const auto& [key, node] : in.entries) {
      if (std::find(kKernelKeys.begin(), kKernelKeys.end(), key) != kKernelKeys.end()) continue;
      const Value value = resolve(node, in.path + "." + key);
      spec.params[key] = reader_.get_number(value.node, value.path);
    }
    op.kernel = trace_.kernel(spec, reader_.where(in.path, in.node));
  }

  // The keys an op of kernel kind `name` takes, looked up once per kind.
  const std::vector<std::string>& kernel_keys(const std::string& name, const Value& at) {
    if (auto it = kernel_keys_.find(name); it != kernel_keys_.end()) return it->second;
    const models::KernelModel& model =
        models::KernelModelRegistry::instance().get(name, reader_.where(at.path, at.node));
    std::vector<std::string> keys = kKernelKeys;
    for (const models::KernelParam& param : model.params()) keys.push_back(param.name);
    return kernel_keys_.emplace(name, std::move(keys)).first->second;
  }

  void read_fixed_kernel(const OpNode& in, const Program& program, Op& op) {
    reader_.check_keys(in.node, in.path, {"gpu", "stream", "name"});
    const Value duration = required(in, "gpu");
    op.kind = OpKind::kernel;
    op.duration = reader_.get_duration(duration.node, duration.path);
    op.stream = read_stream(in, program);
    op.name = read_name(in, "kernel");
  }

  void read_collective(const OpNode& in, const Program& program, Entry& entry, Op& op) {
    reader_.check_keys(
        in.node, in.path,
        {"collective", "stream", "name", "group", "size", "root", "in_place", "algo", "channels", "chunk",
         "algo_params", "compression", "compression_mode", "compression_threshold"});
    CollectiveCall call;
    const Value name = required(in, "collective");
    const std::string op_text = reader_.get_string(name.node, name.path);
    try {
      call.op = models::parse_op(op_text);
    } catch (const ConfigError&) {
      std::vector<std::string> ops;
      for (models::CollectiveOp known : models::all_ops()) ops.push_back(models::to_string(known));
      reader_.fail(name.path, name.node, "unknown collective '" + op_text + "'", "use one of: " + join(ops));
    }
    const std::optional<Value> group = field(in, "group");
    const Value group_value = group ? *group : Value{in.node, in.path + ".group"};
    call.group = group ? group_index(*group) : group_index({YAML::Node("world"), in.path + ".group"});
    call.bytes = read_positive_size(required(in, "size"));
    if (const auto root = field(in, "root")) call.root = reader_.get_int(root->node, root->path, 0);
    if (const auto in_place = field(in, "in_place")) call.in_place = reader_.get_bool(in_place->node, in_place->path);
    if (const auto algo = field(in, "algo")) {
      call.algorithm = reader_.get_string(algo->node, algo->path);
      std::vector<std::string> names;
      for (const models::AlgorithmInfo* info : models::AlgorithmRegistry::instance().all()) names.push_back(info->name);
      if (std::find(names.begin(), names.end(), call.algorithm) == names.end())
        reader_.fail(algo->path, algo->node, "unknown algorithm '" + call.algorithm + "'",
                     "use one of: " + join(names));
    }
    if (const auto channels = field(in, "channels"))
      call.options.channels = reader_.get_int(channels->node, channels->path, 1);
    if (const auto chunk = field(in, "chunk")) call.options.chunk_bytes = read_positive_size(*chunk);
    if (const auto params = field(in, "algo_params")) {
      if (!params->node.IsMap())
        reader_.fail(params->path, params->node, "expected a section of `key: value` algorithm options",
                     "write e.g. algo_params: {proto: LL128}");
      for (const auto& item : params->node) {
        const std::string key = item.first.as<std::string>();
        const Value value = resolve(item.second, params->path + "." + key);
        call.options.extra[key] = reader_.get_string(value.node, value.path);
      }
    }
    read_compression(in, call);
    check_membership(entry, call, group_value);
    op.kind = OpKind::collective;
    op.stream = read_stream(in, program);
    op.name = read_name(in, models::to_string(call.op));
    op.collective = trace_.collective(call);
  }

  // `compression: CODEC[:k=v]` with `compression_mode` and `compression_threshold`, as the
  // collective command's --compression flags (docs/compression.md); checked here, where the
  // line is known, rather than when the replay lowers the call.
  void read_compression(const OpNode& in, CollectiveCall& call) const {
    models::CompressionOptions& compression = call.options.compression;
    const auto codec = field(in, "compression");
    const auto mode = field(in, "compression_mode");
    const auto threshold = field(in, "compression_threshold");
    if (!codec) {
      if (const auto stray = mode ? mode : threshold)
        reader_.fail(stray->path, stray->node, "no codec to apply: the collective has no `compression`",
                     "add e.g. compression: \"zfp:rate=8\", or drop this key");
      return;
    }
    compression.codec = reader_.get_string(codec->node, codec->path);
    models::parse_codec(compression.codec, reader_.where(codec->path, codec->node));
    if (mode)
      compression.mode = reader_.get_choice(mode->node, mode->path, {"collective", "p2p"}) == "p2p"
                             ? models::CompressionMode::p2p
                             : models::CompressionMode::collective;
    if (threshold) {
      if (compression.mode != models::CompressionMode::p2p)
        reader_.fail(threshold->path, threshold->node,
                     "compression_threshold applies to point-to-point compression only (messages below it stay raw)",
                     "add compression_mode: p2p, or drop compression_threshold");
      compression.threshold = reader_.get_size(threshold->node, threshold->path);
    }
    const std::string why = models::compression_unsupported(compression, call.algorithm, call.op);
    if (!why.empty()) {
      const Value& at = mode ? *mode : *codec;
      reader_.fail(at.path, at.node, why, "set algo: ring, or compression_mode: p2p to compress any algorithm's large messages");
    }
  }

  // Every rank of the entry must be in the group, and `root` within its subgroup.
  void check_membership(Entry& entry, const CollectiveCall& call, const Value& group_value) const {
    auto [it, added] = entry.groups.try_emplace(call.group);
    Entry::GroupUse& use = it->second;
    const ProcessGroup& group = trace_.group_at(call.group);
    if (added) {
      use.smallest = job_.ranks();
      for (int rank : entry.ranks) {
        const int s = group.subgroup_of_rank[rank];
        if (s < 0) {
          use.outsider = rank;
          break;
        }
        use.smallest = std::min(use.smallest, static_cast<int>(group.subgroups[s].size()));
      }
    }
    if (use.outsider >= 0)
      reader_.fail(group_value.path, group_value.node,
                   fmt::format("rank {} runs programs[{}] but is not a member of group '{}'", use.outsider, entry.index,
                               group.name),
                   fmt::format("add rank {} to a subgroup of '{}', or issue the collective on a group that holds it",
                               use.outsider, group.name));
    if (call.root >= use.smallest)
      reader_.fail(
          group_value.path, group_value.node,
          fmt::format("root {} is outside a subgroup of '{}' with {} ranks", call.root, group.name, use.smallest),
          fmt::format("root is a rank within the subgroup: 0-{}", use.smallest - 1));
  }



  void read_p2p(const OpNode& in, const std::string& kind, const Program& program, const Entry& entry, Op& op) {
    reader_.check_keys(in.node, in.path, {kind, "stream", "name", "size"});
    const Value peer = required(in, kind);
    op.kind = kind == "send" ? OpKind::send : OpKind::recv;
    op.peer = reader_.get_int(peer.node, peer.path, 0);
    if (op.peer >= job_.ranks()) fail_outside(peer.path, peer.node, op.peer);
    if (entry.runs[op.peer])
      reader_.fail(peer.path, peer.node,
                   fmt::format("rank {} runs this program, so it would {} to itself", op.peer, kind),
                   "name another rank as the peer, or move this op to a program that rank " + std::to_string(op.peer) +
                       " does not run (a rank's own data needs a memcpy)");
    op.bytes = read_positive_size(required(in, "size"));
    op.stream = read_stream(in, program);
    op.name = read_name(in, kind);
  }

  void read_memcpy(const OpNode& in, const Program& program, Op& op) {
    reader_.check_keys(in.node, in.path, {"memcpy", "stream", "name", "size", "host_memory"});
    const Value direction = required(in, "memcpy");
    const std::string text = reader_.get_choice(direction.node, direction.path, {"h2d", "d2h", "d2d"});
    op.kind = OpKind::memcpy;
    op.memcpy = text == "h2d"   ? MemcpyKind::host_to_device
                : text == "d2h" ? MemcpyKind::device_to_host
                                : MemcpyKind::device_to_device;
    if (const std::optional<Value> memory = field(in, "host_memory"))
      op.host_memory = reader_.get_choice(memory->node, memory->path, {"pinned", "pageable"}) == "pageable"
                           ? HostMemory::pageable
                           : HostMemory::pinned;
    op.bytes = read_positive_size(required(in, "size"));
    op.stream = read_stream(in, program);
    op.name = read_name(in, "memcpy " + text);
  }

  void read_cpu(const OpNode& in, Op& op) {
    reader_.check_keys(in.node, in.path, {"cpu", "name"});
    const Value duration = required(in, "cpu");
    op.kind = OpKind::cpu;
    op.duration = reader_.get_duration(duration.node, duration.path);
    op.name = read_name(in, "cpu");
  }

  // A wait (or sync) names an event recorded earlier in CPU order: anything else never fires.
  int recorded_event(const Value& value, const Program& program, const char* verb) const {
    const std::string name = reader_.get_string(value.node, value.path);
    auto it = std::find(program.events.begin(), program.events.end(), name);
    if (it == program.events.end())
      reader_.fail(value.path, value.node, std::string(verb) + " on event '" + name + "' before any record of it",
                   "add {record: " + name + ", stream: ...} earlier in this program's ops: a " + verb +
                       " on an event never recorded before it would block forever");
    return static_cast<int>(it - program.events.begin());
  }

  void read_event_op(const OpNode& in, const std::string& kind, Program& program, Op& op) {
    reader_.check_keys(in.node, in.path, {kind, "stream", "name"});
    const Value event = required(in, kind);
    op.kind = kind == "record" ? OpKind::record : OpKind::wait;
    if (op.kind == OpKind::record) {
      const std::string name = reader_.get_string(event.node, event.path);
      auto it = std::find(program.events.begin(), program.events.end(), name);
      op.event = static_cast<int>(it - program.events.begin());
      if (it == program.events.end()) program.events.push_back(name);
    } else {
      op.event = recorded_event(event, program, "wait");
    }
    op.stream = read_stream(in, program);
    op.name = read_name(in, kind + " " + program.events[op.event]);
  }

  void read_sync(const OpNode& in, const Program& program, Op& op) {
    const Value what = required(in, "sync");
    const std::string target = reader_.get_choice(what.node, what.path, {"device", "stream", "event"});
    op.kind = OpKind::sync;
    if (target == "device") {
      reader_.check_keys(in.node, in.path, {"sync", "name"});
      op.name = read_name(in, "sync device");
    } else if (target == "stream") {
      reader_.check_keys(in.node, in.path, {"sync", "stream", "name"});
      op.stream = read_stream(in, program);
      op.name = read_name(in, "sync " + program.streams[op.stream]);
    } else {
      reader_.check_keys(in.node, in.path, {"sync", "event", "name"});
      op.event = recorded_event(required(in, "event"), program, "sync");
      op.name = read_name(in, "sync " + program.events[op.event]);
    }
  }

  const YAML::Node& doc_;
  const YamlReader& reader_;
  const JobContext& job_;
  const OpSource& ops_;
  const YAML::Node params_;
  TraceBuilder trace_;
  std::unordered_map<std::string, int> group_index_;
  std::vector<int> entry_of_rank_;   ///< per rank: the programs[] entry it runs, or -1
  std::unordered_map<std::string, std::vector<std::string>> kernel_keys_;
};

class TraceFileGenerator : public Generator {
 public:
  Trace generate(const YAML::Node& doc, const YamlReader& reader, const JobContext& job) const override {
    return read_trace(doc, reader, job, [&doc](std::size_t entry, const OpVisitor& visit) {
      for (const YAML::Node& op : doc["programs"][entry]["ops"]) visit(op);
    });
  }
};

}  // namespace

Trace read_trace(const YAML::Node& doc, const YamlReader& reader, const JobContext& job, const OpSource& ops) {
  return TraceParser(doc, reader, job, ops).parse();
}

STEPSIM_REGISTER_GENERATOR(TraceFileGenerator, "trace",
                           "a hand-written trace: per-rank ops on named streams, every op explicit (docs/trace.md)")

}  // namespace stepsim::workloads
