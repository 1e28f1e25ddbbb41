#include "models/schedule.hpp"

#include <algorithm>
#include <cctype>

#include "platforms/config_error.hpp"

namespace stepsim::models {

const char* to_string(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::allgather: return "allgather";
    case CollectiveOp::reduce_scatter: return "reduce_scatter";
    case CollectiveOp::allreduce: return "allreduce";
    case CollectiveOp::broadcast: return "broadcast";
    case CollectiveOp::reduce: return "reduce";
    case CollectiveOp::alltoall: return "alltoall";
    case CollectiveOp::sendrecv: return "sendrecv";
  }
  return "?";
}

const char* to_string(StepKind kind) {
  switch (kind) {
    case StepKind::transfer: return "transfer";
    case StepKind::compress: return "compress";
    case StepKind::decompress: return "decompress";
  }
  return "?";
}

const std::vector<CollectiveOp>& all_ops() {
  static const std::vector<CollectiveOp> ops = {
      CollectiveOp::allgather, CollectiveOp::reduce_scatter, CollectiveOp::allreduce,
      CollectiveOp::broadcast, CollectiveOp::reduce,         CollectiveOp::alltoall,
      CollectiveOp::sendrecv};
  return ops;
}

CollectiveOp parse_op(const std::string& text, const std::string& where) {
  std::string key;
  for (char c : text)
    if (c != '_' && c != '-') key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (key.size() > 4 && key.substr(key.size() - 4) == "perf") key.resize(key.size() - 4);
  for (CollectiveOp op : all_ops()) {
    std::string name;
    for (const char* p = to_string(op); *p; ++p)
      if (*p != '_') name += *p;
    if (key == name) return op;
  }
  throw ConfigError(where, "unknown collective '" + text + "'",
                    "use one of: allgather, reduce_scatter, allreduce, broadcast, reduce, alltoall, sendrecv");
}

double busbw_factor(CollectiveOp op, int ranks) {
  const double n = ranks;
  switch (op) {
    case CollectiveOp::allreduce: return 2.0 * (n - 1) / n;
    case CollectiveOp::allgather:
    case CollectiveOp::reduce_scatter:
    case CollectiveOp::alltoall: return (n - 1) / n;
    case CollectiveOp::broadcast:
    case CollectiveOp::reduce:
    case CollectiveOp::sendrecv: return 1.0;
  }
  return 1.0;
}

std::int64_t Schedule::expanded_step_count() const {
  std::int64_t count = 0;
  for (const Round& round : rounds) count += static_cast<std::int64_t>(round.repeat) * round.steps.size();
  return count;
}

Schedule single_transfer(Bytes bytes, std::string algorithm) {
  Schedule schedule;
  schedule.spec = {CollectiveOp::sendrecv, 2, bytes, 0};
  schedule.algorithm = std::move(algorithm);
  schedule.num_blocks = 2;
  schedule.block_bytes = bytes;
  Step step;
  step.src = 0;
  step.dst = 1;
  step.wire_bytes = bytes;
  schedule.rounds.push_back(Round{{step}, 1, 0});
  return schedule;
}

}  // namespace stepsim::models
