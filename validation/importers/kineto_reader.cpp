#include "validation/importers/kineto_reader.hpp"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cctype>
#include <map>
#include <memory>

#include "platforms/config_error.hpp"

namespace stepsim::validation {
namespace {

using json = nlohmann::json;

/// The most ranks a process group may have (2^20): more than any machine holds GPUs, and rank
/// arithmetic stays far from int's range.
constexpr int kMaxGroupSize = 1 << 20;

/// The file's bytes; gzread passes uncompressed files through unchanged.
std::string read_maybe_gzip(const std::string& path) {
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  if (!file) throw ConfigError(path, "cannot read the file", "check the path and its permissions");
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    int got = gzread(file.get(), buffer, sizeof buffer);
    if (got < 0) throw ConfigError(path, "cannot decompress the file", "pass the .json trace or an intact .json.gz");
    if (got == 0) break;
    text.append(buffer, static_cast<std::size_t>(got));
  }
  return text;
}

bool kept_category(const std::string& cat) {
  return cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset" || cat == "cuda_runtime" ||
         cat == "cuda_driver";
}

bool is_step(const json& event) {
  auto name = event.find("name");
  return name != event.end() && name->is_string() && name->get_ref<const std::string&>().rfind("ProfilerStep#", 0) == 0;
}

const char* const kMatmulOps[] = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"};

bool is_matmul_name(const std::string& name) {
  return std::find(std::begin(kMatmulOps), std::end(kMatmulOps), name) != std::end(kMatmulOps);
}

bool is_matmul(const json& event) {
  auto name = event.find("name");
  return name != event.end() && name->is_string() && is_matmul_name(name->get_ref<const std::string&>());
}

/// torch's `record_param_comms` CPU op: the collective metadata of the NCCL call made inside it.
bool is_comm_record(const json& event) {
  auto name = event.find("name");
  return name != event.end() && name->is_string() && name->get_ref<const std::string&>() == "record_param_comms";
}

/// Drops trace events the importers never read while the parser builds the document.
bool keep(int depth, json::parse_event_t what, json& parsed) {
  if (depth != 2 || what != json::parse_event_t::object_end || !parsed.contains("ph")) return true;
  auto cat = parsed.find("cat");
  if (cat == parsed.end() || !cat->is_string()) return false;
  return kept_category(cat->get_ref<const std::string&>()) || is_step(parsed) || is_comm_record(parsed) ||
         is_matmul(parsed);
}

// A string member, "" when absent or not a string (json::value would throw on another type).
std::string text_or(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

double number_or(const json& object, const char* key, double fallback) {
  auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : fallback;
}

// A JSON number as an int when it is a whole number an int holds, else `fallback`: a cast of
// 1e300 or -1e300 would be undefined.
int int_or(const json& object, const char* key, int fallback) {
  const double value = number_or(object, key, fallback);
  return value >= INT_MIN && value <= INT_MAX && value == std::floor(value) ? static_cast<int>(value) : fallback;
}

std::int64_t id_of(const json& value) {
  if (value.is_number_integer()) return value.get<std::int64_t>();
  if (value.is_number()) {
    const double v = value.get<double>();
    return std::abs(v) < 9e18 ? static_cast<std::int64_t>(v) : -1;
  }
  // Kineto writes some pids and tids as strings ("Spans", "stream 7 "): keep the digits.
  if (value.is_string()) {
    std::string digits;
    for (char c : value.get<std::string>())
      if (c >= '0' && c <= '9') digits += c;
    // More than 18 digits is no id Kineto writes (and would overflow).
    return digits.empty() || digits.size() > 18 ? -1 : std::stoll(digits);
  }
  return -1;
}

// A JSON list of ranks; entries that are not whole numbers from 0 to 2^20 make it no rank list.
std::vector<int> rank_list(const json& list) {
  std::vector<int> ranks;
  for (const json& item : list) {
    if (!item.is_number_integer() || item.get<std::int64_t>() < 0 || item.get<std::int64_t>() > kMaxGroupSize) return {};
    ranks.push_back(item.get<int>());
  }
  return ranks;
}

void read_metadata(const json& doc, KinetoProfile& profile, std::int64_t device) {
  if (auto devices = doc.find("deviceProperties"); devices != doc.end() && devices->is_array()) {
    for (const json& d : *devices)
      if (d.contains("name") && d["name"].is_string() && (profile.gpu.empty() || id_of(d.value("id", json(-1))) == device))
        profile.gpu = d["name"].get<std::string>();
  }
  if (auto info = doc.find("distributedInfo"); info != doc.end() && info->is_object()) {
    profile.rank = int_or(*info, "rank", -1);
    profile.world_size = int_or(*info, "world_size", 0);
    if (info->contains("nccl_version") && (*info)["nccl_version"].is_string())
      profile.nccl_version = (*info)["nccl_version"].get<std::string>();
    if (auto groups = info->find("pg_config"); groups != info->end() && groups->is_array())
      for (const json& pg : *groups)
        if (pg.contains("pg_name") && pg.contains("ranks") && pg["ranks"].is_array())
          profile.group_ranks[pg["pg_name"].is_string() ? pg["pg_name"].get<std::string>() : pg["pg_name"].dump()] =
              rank_list(pg["ranks"]);
  }
  // CUDA encodes versions as 1000 * major + 10 * minor.
  const int code = int_or(doc, "cuda_runtime_version", 0);
  if (code > 0) {
    profile.cuda_version = std::to_string(code / 1000) + "." + std::to_string(code % 1000 / 10);
  }
}

/// Traces where the NCCL kernel's args lack torch's collective metadata still hold it on the
/// `record_param_comms` op around the launch: copy it onto the kernel (same CPU thread, the
/// launch inside the op's interval, the innermost such op).
void attach_comm_metadata(KinetoProfile& profile, const std::vector<KinetoEvent>& records) {
  if (records.empty()) return;
  std::map<std::int64_t, const KinetoEvent*> launch_of;
  for (const KinetoEvent& call : profile.api_calls)
    if (call.correlation >= 0) launch_of[call.correlation] = &call;
  for (KinetoEvent& kernel : profile.gpu_events) {
    if (!is_nccl_kernel(kernel) || (kernel.args.is_object() && kernel.args.contains("Collective name"))) continue;
    auto launch = launch_of.find(kernel.correlation);
    if (launch == launch_of.end()) continue;
    const KinetoEvent& call = *launch->second;
    const KinetoEvent* around = nullptr;
    for (const KinetoEvent& r : records)
      if (r.pid == call.pid && r.tid == call.tid && r.ts <= call.ts && call.ts <= r.end() && (!around || r.ts > around->ts))
        around = &r;
    if (!around) continue;
    if (!kernel.args.is_object()) kernel.args = json::object();
    for (auto it = around->args.begin(); it != around->args.end(); ++it)
      if (!kernel.args.contains(it.key())) kernel.args[it.key()] = it.value();
  }
}

std::size_t line_of(const std::string& text, std::size_t byte) {
  return 1 + static_cast<std::size_t>(std::count(text.begin(), text.begin() + std::min(byte, text.size()), '\n'));
}

/// "[0, 1, 2, ...]" -> ranks; torch truncates long lists with "...", which the stride of the
/// first two ranks and the group size complete.
std::vector<int> parse_ranks(const json& value, int group_size) {
  if (value.is_array()) return rank_list(value);
  if (!value.is_string()) return {};
  std::vector<int> ranks;
  bool truncated = false;
  std::string number;
  for (char c : value.get<std::string>() + ",") {
    if (c >= '0' && c <= '9') number += c;
    else if (c == '.') truncated = true;
    else if (!number.empty()) {
      if (number.size() > 6) return {};   // no group has a millionth rank: not a rank list
      ranks.push_back(std::stoi(number));
      number.clear();
    }
  }
  if (truncated && ranks.size() >= 2 && group_size <= kMaxGroupSize)
    while (static_cast<int>(ranks.size()) < group_size) {
      const long long next = static_cast<long long>(ranks.back()) + ranks[1] - ranks[0];
      if (next < 0 || next > kMaxGroupSize) return {};   // the stride leaves every rank a group can have
      ranks.push_back(static_cast<int>(next));
    }
  return ranks;
}

// torch's ScalarType names (c10/core/ScalarType.h) -> stepsim dtype and bytes per element.
const std::map<std::string, std::pair<std::string, int>>& torch_dtypes() {
  static const std::map<std::string, std::pair<std::string, int>> table = {
      {"Float", {"float32", 4}},  {"BFloat16", {"bfloat16", 2}}, {"Half", {"float16", 2}},
      {"Double", {"float64", 8}}, {"Int", {"int32", 4}},         {"Long", {"int64", 8}},
      {"Short", {"int16", 2}},    {"Char", {"int8", 1}},         {"Byte", {"uint8", 1}},
      {"Bool", {"bool", 1}},      {"Float8_e4m3fn", {"fp8", 1}}, {"Float8_e5m2", {"fp8", 1}}};
  return table;
}

std::string stepsim_op(const std::string& collective) {
  std::string name;
  for (char c : collective) name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // Longest names first: "reduce_scatter" holds "reduce", "allreduce" holds "reduce".
  if (name.find("reduce_scatter") != std::string::npos || name.find("reducescatter") != std::string::npos)
    return "reduce_scatter";
  if (name.find("allreduce") != std::string::npos || name.find("all_reduce") != std::string::npos) return "allreduce";
  if (name == "barrier") return "allreduce";  // torch implements barrier as a 1-element allreduce
  if (name.find("allgather") != std::string::npos || name.find("all_gather") != std::string::npos) return "allgather";
  if (name.find("all_to_all") != std::string::npos || name.find("alltoall") != std::string::npos) return "alltoall";
  if (name.find("broadcast") != std::string::npos) return "broadcast";
  if (name == "reduce" || name == "_reduce_oop") return "reduce";
  return "";
}

}  // namespace

std::optional<NcclCall> nccl_call(const KinetoEvent& kernel) {
  const json& args = kernel.args;
  if (!args.is_object() || !args.contains("Collective name") || !args["Collective name"].is_string()) return std::nullopt;
  NcclCall call;
  call.collective = args["Collective name"].get<std::string>();
  call.op = stepsim_op(call.collective);
  call.group_size = int_or(args, "Group size", 0);
  const std::string torch_dtype = text_or(args, "dtype");
  auto dtype = torch_dtypes().find(torch_dtype);
  call.dtype = dtype == torch_dtypes().end() ? torch_dtype : dtype->second.first;
  const double elements = std::max(number_or(args, "In msg nelems", 0), number_or(args, "Out msg nelems", 0));
  call.size_bytes = dtype == torch_dtypes().end() ? 0 : elements * dtype->second.second;
  if (args.contains("Process Group Name"))
    call.group = args["Process Group Name"].is_string() ? args["Process Group Name"].get<std::string>()
                                                         : args["Process Group Name"].dump();
  if (args.contains("Process Group Ranks")) call.ranks = parse_ranks(args["Process Group Ranks"], call.group_size);
  return call;
}

bool is_nccl_kernel(const KinetoEvent& event) {
  return event.cat == "kernel" && (event.name.rfind("ncclDevKernel", 0) == 0 || event.name.rfind("ncclKernel", 0) == 0);
}

namespace {

std::string format_us(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

// An event's ts or dur: Kineto writes both on every complete ("X") event, in microseconds.
double required_number(const json& event, const char* key, const std::string& origin, const std::string& name) {
  auto it = event.find(key);
  if (it == event.end() || !it->is_number())
    throw ConfigError(origin, "event '" + name + "' has " +
                                  (it == event.end() ? std::string("no `") + key + "`" : "`" + std::string(key) + "` " + it->dump()) +
                                  ", where Kineto writes a number of microseconds",
                      "pass the trace as the profiler wrote it");
  return it->get<double>();
}

// NCCL kernels' collective metadata (torch's): element counts are whole numbers >= 0, a group
// size a whole number of ranks.
void check_collective_args(const json& args, const std::string& origin, const KinetoEvent& event) {
  if (!args.is_object()) return;
  for (const char* key : {"In msg nelems", "Out msg nelems"}) {
    auto it = args.find(key);
    if (it == args.end()) continue;
    if (!it->is_number() || it->get<double>() < 0 || it->get<double>() > 1e15)
      throw ConfigError(origin, "event '" + event.name + "' at ts " + format_us(event.ts) + " has `" + key + "` " +
                                    it->dump() + ", not an element count",
                        "pass the trace as the profiler wrote it (counts are whole numbers >= 0)");
  }
  if (auto it = args.find("Group size"); it != args.end()) {
    const double ranks = it->is_number() ? it->get<double>() : 0;
    if (!(ranks >= 1 && ranks <= kMaxGroupSize && ranks == std::floor(ranks)))
      throw ConfigError(origin, "event '" + event.name + "' at ts " + format_us(event.ts) + " has `Group size` " +
                                    it->dump() + ", not a rank count",
                        "pass the trace as the profiler wrote it (a whole number of ranks, 1 to " +
                            std::to_string(kMaxGroupSize) + ")");
  }
}

}  // namespace

KinetoProfile parse_kineto(const std::string& json_text, const std::string& origin) {
  json doc;
  try {
    // Kineto nests 4 levels (document, traceEvents, an event, its args' shapes); deeper is no trace,
    // and the workload import walks the args recursively.
    doc = json::parse(json_text, [&origin](int depth, json::parse_event_t what, json& parsed) {
      if ((what == json::parse_event_t::object_start || what == json::parse_event_t::array_start) && depth >= 64)
        throw ConfigError(origin, "JSON nested deeper than 64 levels, which no profiler trace is",
                          "pass the trace the PyTorch profiler wrote (export_chrome_trace / tensorboard_trace_handler)");
      return keep(depth, what, parsed);
    });
  } catch (const json::out_of_range& e) {
    throw ConfigError(origin, std::string("a JSON number is out of range: ") + e.what(),
                      "pass the trace the PyTorch profiler wrote (export_chrome_trace / tensorboard_trace_handler)");
  } catch (const json::parse_error& e) {
    throw ConfigError(origin + " (line " + std::to_string(line_of(json_text, e.byte)) + ")",
                      std::string("malformed JSON: ") + e.what(),
                      "pass the trace the PyTorch profiler wrote (export_chrome_trace / tensorboard_trace_handler)");
  }
  auto events = doc.is_object() ? doc.find("traceEvents") : doc.end();
  if (!doc.is_object() || events == doc.end() || !events->is_array())
    throw ConfigError(origin, "no `traceEvents` list: not a Chrome-trace JSON",
                      "pass the trace the PyTorch profiler wrote (export_chrome_trace / tensorboard_trace_handler)");

  KinetoProfile profile;
  profile.origin = origin;
  std::int64_t device = -1;
  std::vector<KinetoEvent> comm_records;
  for (json& e : *events) {
    if (!e.is_object() || text_or(e, "ph") != "X") continue;
    KinetoEvent event;
    event.cat = text_or(e, "cat");
    event.name = text_or(e, "name");
    event.ts = required_number(e, "ts", origin, event.name);
    event.dur = required_number(e, "dur", origin, event.name);
    if (event.dur < 0)
      throw ConfigError(origin, "event '" + event.name + "' at ts " + format_us(event.ts) + " has dur " +
                                    format_us(event.dur) + ": a duration is never negative",
                        "pass the trace as the profiler wrote it");
    event.pid = id_of(e.value("pid", json(-1)));
    event.tid = id_of(e.value("tid", json(-1)));
    if (auto args = e.find("args"); args != e.end() && args->is_object()) {
      if (args->contains("correlation")) event.correlation = id_of((*args)["correlation"]);
      if (event.cat == "kernel" || event.cat == "gpu_memcpy" || event.cat == "gpu_memset") event.args = std::move(*args);
      check_collective_args(event.args, origin, event);
    }
    if (event.cat == "kernel" || event.cat == "gpu_memcpy" || event.cat == "gpu_memset") {
      if (device < 0) device = event.pid;
      profile.gpu_events.push_back(std::move(event));
    } else if (event.cat == "cuda_runtime" || event.cat == "cuda_driver") {
      profile.api_calls.push_back(std::move(event));
    } else if (event.name == "record_param_comms") {
      if (auto args = e.find("args"); args != e.end() && args->is_object()) event.args = std::move(*args);
      comm_records.push_back(std::move(event));
    } else if (is_matmul_name(event.name) && event.cat == "cpu_op") {
      if (auto args = e.find("args"); args != e.end() && args->is_object()) event.args = std::move(*args);
      profile.matmuls.push_back(std::move(event));
    } else if (event.name.rfind("ProfilerStep#", 0) == 0 && event.cat != "gpu_user_annotation") {
      profile.steps.push_back(std::move(event));
    }
  }
  read_metadata(doc, profile, device);
  attach_comm_metadata(profile, comm_records);
  auto by_ts = [](const KinetoEvent& a, const KinetoEvent& b) { return a.ts < b.ts; };
  std::stable_sort(profile.gpu_events.begin(), profile.gpu_events.end(), by_ts);
  std::stable_sort(profile.api_calls.begin(), profile.api_calls.end(), by_ts);
  std::stable_sort(profile.steps.begin(), profile.steps.end(), by_ts);
  std::stable_sort(profile.matmuls.begin(), profile.matmuls.end(), by_ts);
  return profile;
}

std::optional<MatmulShape> matmul_shape(const KinetoEvent& op) {
  const json& args = op.args;
  if (!args.is_object() || !args.contains("Input Dims") || !args["Input Dims"].is_array()) return std::nullopt;
  const json& dims = args["Input Dims"];
  const auto shape = [&](std::size_t i) {
    std::vector<double> out;
    if (i < dims.size() && dims[i].is_array())
      for (const json& d : dims[i])
        if (d.is_number()) out.push_back(d.get<double>());
    return out;
  };
  // Operands: mm (A, B); addmm (bias, A, B, ...); bmm (A, B); baddbmm (C, A, B, ...).
  const bool with_input = op.name == "aten::addmm" || op.name == "aten::baddbmm";
  const std::size_t a_index = with_input ? 1 : 0;
  const std::vector<double> a = shape(a_index), b = shape(a_index + 1);
  const bool batched = op.name == "aten::bmm" || op.name == "aten::baddbmm";
  const std::size_t rank = batched ? 3 : 2;
  if (a.size() != rank || b.size() != rank || a[rank - 1] != b[rank - 2]) return std::nullopt;
  MatmulShape out;
  out.batch = batched ? a[0] : 1;
  out.m = a[rank - 2];
  out.k = a[rank - 1];
  out.n = b[rank - 1];
  // torch's names: "float" (fp32; TF32 only when allow_tf32, which a trace does not say), "c10::Half",
  // "c10::BFloat16".
  std::string type;
  if (args.contains("Input type") && args["Input type"].is_array() && a_index < args["Input type"].size() &&
      args["Input type"][a_index].is_string())
    type = args["Input type"][a_index].get<std::string>();
  if (type == "float") out.dtype = "fp32";
  else if (type == "c10::Half") out.dtype = "fp16";
  else if (type == "c10::BFloat16") out.dtype = "bf16";
  else return std::nullopt;
  if (!(out.m > 0 && out.n > 0 && out.k > 0 && out.batch > 0)) return std::nullopt;
  // An operand whose last dimension is not the contiguous one is a transposed view.
  if (args.contains("Input Strides") && args["Input Strides"].is_array()) {
    const json& strides = args["Input Strides"];
    const auto transposed = [&](std::size_t i, const std::vector<double>& dims) -> std::optional<bool> {
      if (i >= strides.size() || !strides[i].is_array() || strides[i].size() != dims.size()) return std::nullopt;
      const json& last = strides[i][dims.size() - 1];
      if (!last.is_number()) return std::nullopt;
      return last.get<double>() != 1 && dims[dims.size() - 1] != 1;
    };
    const std::optional<bool> ta = transposed(a_index, a), tb = transposed(a_index + 1, b);
    if (ta && tb) out.layout = std::string(*ta ? "T" : "N") + (*tb ? "T" : "N");
  }
  return out;
}

KinetoProfile read_kineto(const std::string& path) { return parse_kineto(read_maybe_gzip(path), path); }

}  // namespace stepsim::validation
