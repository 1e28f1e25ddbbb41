#include "workloads/generators/transformer_emitter.hpp"

#include <fmt/format.h>

namespace stepsim::workloads::transformer {

using models::CollectiveOp;

TransformerEmitter::TransformerEmitter(const ModelConfig& model, const TrainingConfig& training, const JobContext& job,
                                       const platforms::YamlReader& reader)
    : m_(model), t_(training), gpu_(job.platform.gpu()), b_(reader.origin(), job.ranks(), training.cpu_op_gap, job.max_program_ops),
      a_(models::bytes_of(training.param_dtype)), r_(models::bytes_of(training.reduce_dtype)) {}

void TransformerEmitter::make_model_parallel_groups(const DeviceMesh& mesh) {
  if (par_.tp > 1) tp_group_ = b_.group(mesh.group("tp", {"tp"}));
  if (par_.pp > 1) pp_group_ = b_.group(mesh.group("pp", {"pp"}));
  if (par_.cp > 1) cp_group_ = b_.group(mesh.group("cp", {"cp"}));
  if (m_.moe.enabled()) {
    ExpertGroups experts = expert_groups(par_);
    efsdp_size_ = static_cast<int>(experts.efsdp.subgroups.front().size());
    efsdp_group_ = b_.group(std::move(experts.efsdp));
    if (par_.ep > 1) ep_group_ = b_.group(std::move(experts.ep));
  }
  if (m_.tied_embeddings && par_.pp > 1) {
    // Megatron-LM's embedding group: the first and last stage of each pipeline.
    ProcessGroup g = mesh.group("embedding", {"pp"});
    for (std::vector<int>& ranks : g.subgroups) {
      for (std::size_t k = 1; k + 1 < ranks.size(); ++k) g.subgroup_of_rank[static_cast<std::size_t>(ranks[k])] = -1;
      ranks = {ranks.front(), ranks.back()};
    }
    embedding_group_ = b_.group(std::move(g));
  }
}

models::AlgorithmOptions TransformerEmitter::options(CollectiveOp, Bytes, int) { return {}; }
const std::string& TransformerEmitter::algorithm() const { return kNccl; }

// FSDP2's reduce-scatter writes a new shard tensor (out of place; on one GPU, NCCL's local
// copy); all-gather inputs are views of their outputs and all-reduces are in place.
int TransformerEmitter::issue(int stream, const std::string& name, CollectiveOp op, Bytes bytes, int group) {
  const std::string& prefix = b_.group_at(group).name;
  const int nccl = b_.stream(prefix + ".nccl");
  const int in = b_.event(prefix + ".nccl.in");
  b_.record(stream, in);
  b_.wait(nccl, in);
  b_.collective(nccl, name, op, bytes, group, algorithm(), options(op, bytes, group), op != CollectiveOp::reduce_scatter);
  return nccl;
}

void TransformerEmitter::collective(int stream, const std::string& name, CollectiveOp op, Bytes bytes, int group) {
  const int nccl = issue(stream, name, op, bytes, group);
  const int out = b_.event(b_.group_at(group).name + ".nccl.out");
  b_.record(nccl, out);
  b_.wait(stream, out);
}

void TransformerEmitter::async_collective(const std::string& name, CollectiveOp op, Bytes bytes, int group,
                                          const std::string& done) {
  b_.record(issue(compute_, name, op, bytes, group), b_.event(done));
}

void TransformerEmitter::run(const std::string& prefix, const Kernels& kernels) {
  for (const Kernel& k : kernels) {
    if (k.after >= 0) b_.wait(compute_, b_.event(fmt::format("async_tp.{}", k.after)));
    if (k.comm) {
      const int group = k.comm->group == Comm::Group::cp   ? cp_group_
                        : k.comm->group == Comm::Group::ep ? ep_group_
                                                           : tp_group_;
      if (k.comm->tag >= 0)
        async_collective(prefix + k.name, k.comm->op, k.comm->bytes, group, fmt::format("async_tp.{}", k.comm->tag));
      else
        collective(compute_, prefix + k.name, k.comm->op, k.comm->bytes, group);
    } else if (!k.is_wait()) {
      b_.kernel(compute_, prefix, k);
    }
  }
}

void TransformerEmitter::open_pipeline_streams() {
  send_next_ = b_.stream("pp.send_next");
  recv_prev_ = b_.stream("pp.recv_prev");
  send_prev_ = b_.stream("pp.send_prev");
  recv_next_ = b_.stream("pp.recv_next");
}

Bytes TransformerEmitter::activation_bytes() const {
  return t_.tokens() / par_.cp * m_.hidden * a_ / (tp_.sequence_parallel ? tp_.tp : 1);
}

// `stream` receives from pp rank `peer`; the compute stream waits for it.
void TransformerEmitter::receive(int stream, const std::string& name, int peer) {
  b_.recv(stream, name, peer, activation_bytes(), pp_group_);
  const int got = b_.event(name + ".received");
  b_.record(stream, got);
  b_.wait(compute_, got);
}

// `stream` sends to pp rank `peer` what the compute stream has produced so far.
void TransformerEmitter::pass_on(int stream, const std::string& name, int peer) {
  const int ready = b_.event(name + ".ready");
  b_.record(compute_, ready);
  b_.wait(stream, ready);
  b_.send(stream, name, peer, activation_bytes(), pp_group_);
}

std::string TransformerEmitter::layer_prefix(int layer) { return fmt::format("layers.{}.", layer); }

void TransformerEmitter::forward_chunk(const PipelineAction& a, const std::vector<int>& first, const Blocks& blocks) {
  const int chunks = static_cast<int>(first.size()) - 1;
  const int next = (a.chunk + 1) % par_.pp, prev = (a.chunk + par_.pp - 1) % par_.pp;
  if (a.chunk > 0) receive(recv_prev_, fmt::format("chunks.{}.activation", a.chunk), prev);
  enter_chunk_forward(a);
  if (a.chunk == 0) run("", blocks.embedding.forward);
  for (int i = first[static_cast<std::size_t>(a.chunk)]; i < first[static_cast<std::size_t>(a.chunk) + 1]; ++i) {
    enter_layer_forward(a, i);
    run(layer_prefix(i), blocks.layer.forward);
  }
  if (a.chunk + 1 == chunks)
    run("", blocks.head.forward);
  else
    pass_on(send_next_, fmt::format("chunks.{}.activation", a.chunk + 1), next);
}

void TransformerEmitter::backward_chunk(const PipelineAction& a, const std::vector<int>& first, const Blocks& blocks) {
  const int chunks = static_cast<int>(first.size()) - 1;
  const int next = (a.chunk + 1) % par_.pp, prev = (a.chunk + par_.pp - 1) % par_.pp;
  if (a.chunk + 1 < chunks)
    receive(recv_next_, fmt::format("chunks.{}.gradient", a.chunk + 1), next);
  else
    run("", blocks.head.backward);
  for (int i = first[static_cast<std::size_t>(a.chunk) + 1]; i-- > first[static_cast<std::size_t>(a.chunk)];) {
    run(layer_prefix(i), blocks.layer.recompute);
    run(layer_prefix(i), blocks.layer.backward);
    leave_layer_backward(a, i);
  }
  if (a.chunk == 0)
    run("", blocks.embedding.backward);
  else
    pass_on(send_prev_, fmt::format("chunks.{}.gradient", a.chunk), prev);
  leave_chunk_backward(a);
}

void TransformerEmitter::run_stage(int stage, const std::vector<int>& first, const Blocks& blocks) {
  for (const PipelineAction& a :
       pipeline_actions(pipe_.schedule, par_.pp, pipe_.virtual_stages, t_.gradient_accumulation, stage, pipe_.runtime)) {
    if (a.forward)
      forward_chunk(a, first, blocks);
    else
      backward_chunk(a, first, blocks);
    end_action(stage);
  }
}

void TransformerEmitter::hand_to_stage(int stage) {
  std::vector<int> ranks;
  for (const std::vector<int>& replica : b_.group_at(pp_group_).subgroups)
    ranks.push_back(replica[static_cast<std::size_t>(stage)]);
  b_.next_program(ranks);
}

void TransformerEmitter::clip_norm_all_reduces(int dp_group) {
  if (t_.max_norm <= 0) return;
  if (dp_group >= 0) collective(compute_, "clip_grad_norm.all_reduce", CollectiveOp::allreduce, 4, dp_group);
  if (tp_group_ >= 0) collective(compute_, "clip_grad_norm.tp.all_reduce", CollectiveOp::allreduce, 4, tp_group_);
  // The stages' norms are summed over the pp group (torchtitan's clip_grad_norm_, Megatron's
  // model-parallel group).
  if (pp_group_ >= 0) collective(compute_, "clip_grad_norm.pp.all_reduce", CollectiveOp::allreduce, 4, pp_group_);
}

void TransformerEmitter::add_tp_note(const Block& layer) {
  const auto forward = layer.forward.size() - kernel_count(layer.forward);
  const auto backward = layer.backward.size() - kernel_count(layer.backward);
  b_.note(fmt::format("tensor parallelism over {} ranks ({}): {} collectives per block forward, {} backward, each of "
                      "micro_batch x sequence x hidden activations; {:.4g} of the block's {:.4g} parameters per "
                      "rank; vocabulary-parallel embedding, output and loss",
                      tp_.tp, tp_.sequence_parallel ? "with sequence parallelism" : "without sequence parallelism",
                      forward, backward, layer_params(m_, tp_), layer_params(m_)));
}


IterationLayout TransformerEmitter::iteration_layout(const std::vector<int>& chunk_first) const {
  IterationLayout layout;
  layout.model = m_;
  layout.training = t_;
  layout.tp = tp_;
  layout.ep = par_.ep;
  layout.pp = par_.pp;
  layout.pipeline = pipe_;
  layout.chunk_first = chunk_first;
  return layout;
}

namespace {

// The NCCL communicators a rank joins: one per process group whose subgroup holds it with
// another rank (torch.distributed creates one per group; a one-rank group needs none).
int communicators_of(const Trace& trace, int rank) {
  int count = 0;
  for (const ProcessGroup& g : trace.groups) {
    const int sub = g.subgroup_of_rank.at(static_cast<std::size_t>(rank));
    if (sub >= 0 && g.subgroups.at(static_cast<std::size_t>(sub)).size() > 1) ++count;
  }
  return count;
}

}  // namespace

Trace TransformerEmitter::with_memory(Trace trace, const IterationLayout& layout) const {
  std::vector<int> stage_of_rank(static_cast<std::size_t>(trace.ranks), 0);
  if (par_.pp > 1) {
    const DeviceMesh mesh = dense_mesh(par_);
    for (int r = 0; r < trace.ranks; ++r) stage_of_rank[static_cast<std::size_t>(r)] = mesh.coord(r, "pp");
  }
  int communicators = 0;
  for (int r = 0; r < trace.ranks; ++r) communicators = std::max(communicators, communicators_of(trace, r));
  trace.memory = transformer_memory(layout, stage_of_rank, gpu_, communicators);
  for (models::RankMemory& group : trace.memory->groups) {
    const int stage = stage_of_rank.at(static_cast<std::size_t>(group.ranks.front()));
    if (auto it = action_last_op_.find(stage); it != action_last_op_.end()) group.action_last_op = it->second;
  }
  return trace;
}

void TransformerEmitter::end_action(int stage) { action_last_op_[stage].push_back(b_.ops_written() - 1); }

}  // namespace stepsim::workloads::transformer
