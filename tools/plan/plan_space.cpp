#include "tools/plan/plan_space.hpp"

#include <fmt/format.h>

namespace stepsim::plan {

using workloads::PipelineSchedule;
using workloads::transformer::Checkpointing;

const char* to_string(Precision p) {
  switch (p) {
    case Precision::eager:
      return "eager";
    case Precision::compile:
      return "compile";
    case Precision::float8:
      return "float8";
  }
  return "?";
}

namespace {

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

bool tp_divides(const workloads::transformer::ModelConfig& m, int tp) {
  return m.heads % tp == 0 && m.kv_heads % tp == 0 && m.ffn_hidden % tp == 0 && m.vocab % tp == 0;
}

const char* strategy(const Layout& l) {
  return l.shard_grad_op ? "SHARD_GRAD_OP" : l.dp_replicate > 1 ? "HYBRID_SHARD" : "FULL_SHARD";
}

}  // namespace

std::vector<std::string> Layout::overrides(int sequence) const {
  std::vector<std::string> o = {
      fmt::format("parallelism.dp_replicate={}", dp_replicate),
      fmt::format("parallelism.dp_shard={}", dp_shard),
      fmt::format("parallelism.cp={}", cp),
      fmt::format("parallelism.tp={}", tp),
      fmt::format("parallelism.pp={}", pp),
      fmt::format("training.micro_batch={}", micro_batch),
      fmt::format("training.gradient_accumulation={}", microbatches),
      fmt::format("training.sequence={}", sequence),
      fmt::format("fsdp.strategy={}", strategy(*this)),
      fmt::format("fsdp.activation_checkpointing={}", workloads::transformer::to_string(checkpointing)),
      fmt::format("training.compile={}", precision != Precision::eager),
      fmt::format("training.float8={}", precision == Precision::float8 ? "tensorwise" : "none"),
      fmt::format("training.float8_all_gather={}", precision == Precision::float8 && dp_shard * cp > 1)};
  if (tp > 1) o.push_back(fmt::format("tensor_parallel.async={}", precision != Precision::eager));
  if (pp > 1) o.push_back(fmt::format("pipeline.schedule={}", workloads::to_string(schedule)));
  return o;
}

std::string Layout::label() const {
  std::string mesh;
  const auto add = [&](const char* name, int degree) {
    if (degree > 1) mesh += fmt::format("{}{} {}", mesh.empty() ? "" : " x ", name, degree);
  };
  add("dp_replicate", dp_replicate);
  add("dp_shard", dp_shard);
  add("cp", cp);
  add("tp", tp);
  add("pp", pp);
  if (mesh.empty()) mesh = "1 GPU";
  return fmt::format("{}, mb {} x {}, {} AC, {}{}, {}", mesh, micro_batch, microbatches,
                     workloads::transformer::to_string(checkpointing), strategy(*this),
                     pp > 1 ? fmt::format(", {}", workloads::to_string(schedule)) : "", to_string(precision));
}

std::vector<Layout> enumerate_layouts(const Space& s) {
  std::vector<Layout> out;
  std::vector<Precision> precisions = {Precision::eager, Precision::compile};
  if (s.fp8) precisions.push_back(Precision::float8);
  for (int tp : divisors(std::min(s.gpus, s.gpus_per_node))) {
    if (s.gpus % tp != 0 || !tp_divides(s.model, tp)) continue;
    for (int pp : divisors(s.gpus / tp)) {
      if (s.model.layers + 2 < pp) continue;  // torchtitan's split: a block per chunk at least
      for (int cp : divisors(s.gpus / tp / pp)) {
        if ((cp > 1 && s.sequence % (2 * cp) != 0) || cp > 8) continue;  // the load balancer's 2 cp chunks
        const int dp = s.gpus / tp / pp / cp;
        if (s.global_batch % dp != 0) continue;
        const int local = s.global_batch / dp;
        // FULL_SHARD over every data-parallel rank, or HSDP shards within a node's ranks.
        std::vector<std::pair<int, int>> dps = {{1, dp}};
        const int in_node = std::max(1, s.gpus_per_node / (tp * cp));
        if (dp > in_node && dp % in_node == 0 && pp == 1) dps.push_back({dp / in_node, in_node});
        for (const auto& [replicate, shard] : dps)
          for (int mb : divisors(local)) {
            const int microbatches = local / mb;
            if (pp > 1 && microbatches < pp) continue;
            for (Checkpointing ac : {Checkpointing::none, Checkpointing::selective, Checkpointing::full})
              for (Precision precision : precisions) {
                std::vector<std::pair<PipelineSchedule, bool>> schedules;
                if (pp == 1) {
                  schedules = {{PipelineSchedule::one_f_one_b, false}};
                  if (replicate == 1 && shard > 1) schedules.push_back({PipelineSchedule::one_f_one_b, true});
                } else {
                  schedules = {{PipelineSchedule::one_f_one_b, false}};
                  if (microbatches % pp == 0 && s.model.layers + 2 >= 2 * pp)
                    schedules.push_back({PipelineSchedule::interleaved_1f1b, false});
                }
                for (const auto& [schedule, grad_op] : schedules)
                  out.push_back({replicate, shard, cp, tp, pp, mb, microbatches, ac, schedule, grad_op, precision});
              }
          }
      }
    }
  }
  return out;
}

workloads::transformer::IterationLayout iteration_layout(const Space& s, const Layout& l) {
  using namespace workloads::transformer;
  IterationLayout it;
  it.model = s.model;
  it.training = s.training;
  it.training.micro_batch = l.micro_batch;
  it.training.gradient_accumulation = l.microbatches;
  it.training.sequence = s.sequence;
  it.training.compile = l.precision != Precision::eager;
  it.training.float8 = l.precision == Precision::float8 ? Float8::tensorwise : Float8::none;
  it.training.float8_all_gather = l.precision == Precision::float8 && l.dp_shard * l.cp > 1;
  it.tp.tp = l.tp;
  it.tp.async = l.tp > 1 && l.precision != Precision::eager;
  it.cp.cp = l.cp;
  it.checkpointing = l.checkpointing;
  it.sharding = l.shard_grad_op ? StateSharding::fsdp_unsharded : StateSharding::fsdp;
  it.shard = l.dp_shard * l.cp;
  it.replicate = l.dp_replicate;
  it.expert_shard = it.shard;
  it.reshard_after_forward = !l.shard_grad_op;
  it.pp = l.pp;
  it.pipeline.schedule = l.schedule;
  it.pipeline.virtual_stages = l.schedule == PipelineSchedule::interleaved_1f1b ? 2 : 1;
  it.chunk_first = l.pp > 1 ? chunk_first_layers(s.model.layers, l.pp * it.pipeline.virtual_stages)
                            : std::vector<int>{0, s.model.layers};
  return it;
}

}  // namespace stepsim::plan
