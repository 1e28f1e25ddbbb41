/// @file `framework: megatron`: one training iteration as Megatron-LM runs it (megatron/core at
/// d98e8a6, Aug 2026): Transformer Engine blocks (megatron_block.hpp), Megatron's tensor, sequence
/// and pipeline parallelism, and its data parallelism: gradients accumulate in contiguous fp32
/// buckets and are reduced once, on the last micro-batch (DistributedDataParallel,
/// param_and_grad_buffer.py); with the distributed optimizer (ZeRO-1) they are reduce-scattered
/// and the updated bf16 parameters all-gathered bucket by bucket, without copy kernels (the
/// buffers are the parameters). docs/parallelism.md has the schema and the protocol.
#include "workloads/generators/megatron.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "workloads/generators/megatron_block.hpp"
#include "workloads/generators/transformer_emitter.hpp"
#include "workloads/generators/transformer_ops.hpp"
#include "workloads/mesh.hpp"

namespace stepsim::workloads::transformer {
namespace {

using models::CollectiveOp;
using platforms::YamlReader;

/// @brief The `megatron:` section; keys mirror Megatron-LM's flags, defaults its arguments.py's.
struct MegatronConfig {
  bool distributed_optimizer = false;   ///< --use-distributed-optimizer
  bool overlap_grad_reduce = false;     ///< --overlap-grad-reduce
  bool overlap_param_gather = false;    ///< --overlap-param-gather (needs the distributed optimizer)
  double bucket_size = 0;               ///< --ddp-bucket-size, parameters; 0: max(4e7, 1e6 x dp)
  Checkpointing recompute = Checkpointing::none;   ///< --recompute-granularity
  int vocab_divisible_by = 128;         ///< --make-vocab-size-divisible-by (x tp)
};

MegatronConfig read_megatron(const YAML::Node& doc, const YamlReader& reader) {
  MegatronConfig c;
  const YAML::Node section = doc["megatron"];
  if (!section) return c;
  if (!section.IsMap())
    reader.fail("megatron", section, "expected a section", "write e.g. megatron: {distributed_optimizer: true}");
  reader.check_keys(section, "megatron",
                    {"distributed_optimizer", "overlap_grad_reduce", "overlap_param_gather", "bucket_size", "recompute",
                     "make_vocab_size_divisible_by"});
  if (const YAML::Node n = section["distributed_optimizer"])
    c.distributed_optimizer = reader.get_bool(n, "megatron.distributed_optimizer");
  if (const YAML::Node n = section["overlap_grad_reduce"])
    c.overlap_grad_reduce = reader.get_bool(n, "megatron.overlap_grad_reduce");
  if (const YAML::Node n = section["overlap_param_gather"]) {
    c.overlap_param_gather = reader.get_bool(n, "megatron.overlap_param_gather");
    if (c.overlap_param_gather && !c.distributed_optimizer)
      reader.fail("megatron.overlap_param_gather", n, "only the distributed optimizer gathers parameters",
                  "set megatron.distributed_optimizer: true, or drop overlap_param_gather");
  }
  if (const YAML::Node n = section["bucket_size"]) c.bucket_size = reader.get_int(n, "megatron.bucket_size", 1);
  if (const YAML::Node n = section["recompute"]) c.recompute = read_checkpointing(n, "megatron.recompute", reader);
  if (const YAML::Node n = section["make_vocab_size_divisible_by"])
    c.vocab_divisible_by = reader.get_int(n, "megatron.make_vocab_size_divisible_by", 1);
  return c;
}

/// @brief Gradients of consecutive modules reduced together: complete once the backward of
/// `lowest` (a block, or -1 for the embedding) is done, and gathered before its forward.
struct Bucket {
  double params = 0;
  int lowest = -1;
};

class MegatronEmitter : public TransformerEmitter {
 public:
  MegatronEmitter(const ModelConfig& model, const TrainingConfig& training, const MegatronConfig& config,
                  const JobContext& job, const YamlReader& reader, const YAML::Node& doc)
      : TransformerEmitter(model, training, job, reader), c_(config) {
    par_ = read_parallelism(doc, reader, job.ranks());
    const YAML::Node section = doc["parallelism"];
    check_modelled(reader, doc);
    tp_ = read_tensor_parallel(doc, reader, par_.tp, m_, section ? section["tp"] : YAML::Node());
    tp_.vocab_multiple = c_.vocab_divisible_by;
    check_layer_passes(doc, reader, par_.pp, m_, t_);
    pipe_ = par_.pp > 1 ? read_pipeline(doc, reader, par_.pp, m_, t_) : PipelineConfig{};
    pipe_.runtime = PipelineRuntime::megatron;
    check_pipeline(reader, doc);
    const DeviceMesh mesh = dense_mesh(par_);
    // Gradients are reduced (and the distributed optimizer shards) over dp x cp: Megatron's
    // data-parallel group with context parallelism.
    dp_group_ = b_.group(mesh.group("dp", {"dp_shard", "cp"}));
    dp_size_ = par_.dp_shard * par_.cp;
    make_model_parallel_groups(mesh);
    // Megatron-core's default bucket (distributed_data_parallel.py): large enough for NCCL's ring
    // chunks to stay bandwidth-bound at large dp.
    bucket_size_ = c_.bucket_size > 0 ? c_.bucket_size : std::max(4e7, 1e6 * par_.dp_shard);
  }

  Trace emit() {
    const ContextParallel cp{par_.cp, true};
    const Blocks blocks{embedding_block(m_, t_, false, tp_, cp), megatron_layer_block(m_, t_, c_.recompute, tp_, cp),
                        head_block(m_, t_, false, tp_, cp)};
    const int chunks = par_.pp * pipe_.virtual_stages;
    std::vector<int> first;
    for (int c = 0; c <= chunks; ++c) first.push_back(c * m_.layers / chunks);
    for (int stage = 0; stage < par_.pp; ++stage) {
      begin_stage(stage, first);
      run_stage(stage, first, blocks);
      finalize_grads(stage);
      optimizer_step();
      if (par_.pp > 1) hand_to_stage(stage);
    }
    add_notes(blocks, first);
    IterationLayout layout = iteration_layout(first);
    layout.cp = cp;
    layout.checkpointing = c_.recompute;
    layout.megatron = true;
    layout.sharding = c_.distributed_optimizer ? StateSharding::megatron_distributed : StateSharding::megatron;
    layout.shard = dp_size_;
    return with_memory(b_.finish(), layout);
  }

 private:
  // What Megatron-LM offers that is not built here is refused, not approximated.
  void check_modelled(const YamlReader& reader, const YAML::Node& doc) const {
    const YAML::Node section = doc["parallelism"];
    auto refuse = [&](const char* key, const std::string& why, const std::string& fix) {
      reader.fail(std::string("parallelism.") + key, section[key], why, fix);
    };
    if (m_.moe.enabled())
      reader.fail_at(doc, "model.moe", "Megatron-LM's MoE layers (token dispatchers) are not modelled yet",
                     "use framework: torchtitan for a model with model.moe");
    if (t_.compile)
      reader.fail_at(doc, "training.compile",
                     "framework: megatron runs Transformer Engine's fused kernels, not torch.compile",
                     "drop training.compile (and training.float8: Transformer Engine's FP8 is not modelled yet)");
    if (doc["context_parallel"])
      reader.fail("context_parallel", doc["context_parallel"],
                  "Megatron-LM passes keys and values rank to rank (Transformer Engine's p2p ring): the section "
                  "configures torchtitan's rotation",
                  "drop the context_parallel section with framework: megatron");
    check_context_split(doc, reader, par_.cp, t_);
    if (par_.dp_replicate > 1)
      refuse("dp_replicate",
             "Megatron-LM shards its optimizer over the whole data-parallel group (one instance)",
             "fold dp_replicate into dp_shard (Megatron's data-parallel size)");
  }

  void check_pipeline(const YamlReader& reader, const YAML::Node& doc) const {
    if (pipe_.schedule == PipelineSchedule::gpipe || pipe_.schedule == PipelineSchedule::looped_bfs)
      reader.fail_at(doc, "pipeline.schedule",
                     fmt::format("Megatron-LM has no {} schedule", to_string(pipe_.schedule)),
                     "use 1F1B or Interleaved1F1B with framework: megatron");
    const int chunks = par_.pp * pipe_.virtual_stages;
    if (m_.layers % chunks != 0)
      reader.fail_at(doc, "parallelism.pp",
                     fmt::format("Megatron-LM splits the {} layers evenly over pp x virtual_stages = {} chunks", m_.layers,
                              chunks),
                     "choose pp and pipeline.virtual_stages whose product divides model.layers");
  }

  // The stage's buckets, chunk by chunk, and fresh per-program state.
  void begin_stage(int stage, const std::vector<int>& first) {
    buckets_.clear();
    stage_params_ = 0;
    grad_syncs_ = 0;
    compute_ = b_.stream("compute");
    if (par_.pp > 1) open_pipeline_streams();
    const int chunks = static_cast<int>(first.size()) - 1;
    bool first_chunk = true;
    for (int c = stage; c < chunks; c += par_.pp) {
      make_buckets(c, first, stage == 0 && first_chunk && c_.overlap_grad_reduce);
      first_chunk = false;
    }
  }

  // Megatron-core fills buckets in reverse order of the parameters (the order backward makes
  // their gradients), closing one at bucket_size; the last stages, a rank's later chunks and
  // runs without overlap_grad_reduce get one bucket each (distributed_data_parallel.py).
  // Buckets here close at block boundaries; a head alone closes with the last block.
  void make_buckets(int chunk, const std::vector<int>& first, bool bucketed) {
    const int chunks = static_cast<int>(first.size()) - 1;
    const int low = first[static_cast<std::size_t>(chunk)], high = first[static_cast<std::size_t>(chunk) + 1];
    std::vector<Bucket>& out = buckets_[chunk];
    Bucket open;
    if (chunk + 1 == chunks) open.params = head_params(m_, tp_) + (par_.pp > 1 ? tied_output_copy() : 0);
    for (int i = high; i-- > low;) {
      open.params += layer_params(m_, tp_);
      open.lowest = i;
      if (bucketed && open.params >= bucket_size_) {
        out.push_back(open);
        open = {};
      }
    }
    if (chunk == 0) {
      open.params += embedding_params(m_, t_, tp_);
      open.lowest = -1;
    }
    if (open.params > 0) out.push_back(open);
    for (const Bucket& bucket : out) stage_params_ += bucket.params;
  }

  // --- the distributed optimizer's parameter all-gathers (overlap_param_gather) -------------
  // The next forward's pre-hooks wait for a bucket's all-gather when they first meet it and
  // dispatch the next bucket's (finish_param_sync); the first is dispatched at the first hook.
  // In steady state these are the previous step's gathers, met in this iteration's forward.
  void enter_chunk_forward(const PipelineAction& a) override {
    if (!gathers_in_forward(a)) return;
    const std::vector<Bucket>& buckets = buckets_.at(a.chunk);
    start_param_gather(a.chunk, static_cast<int>(buckets.size()) - 1);
    if (buckets.back().lowest < 0) finish_param_gather(a.chunk, static_cast<int>(buckets.size()) - 1);
  }
  void enter_layer_forward(const PipelineAction& a, int layer) override {
    if (!gathers_in_forward(a)) return;
    const std::vector<Bucket>& buckets = buckets_.at(a.chunk);
    for (int k = static_cast<int>(buckets.size()); k-- > 0;)
      if (buckets[static_cast<std::size_t>(k)].lowest == layer) finish_param_gather(a.chunk, k);
  }
  bool gathers_in_forward(const PipelineAction& a) const {
    return c_.overlap_param_gather && a.microbatch == 0 && dp_size_ > 1;
  }
  std::string gather_event(int chunk, int k) const { return fmt::format("chunks.{}.bucket{}.param_gather", chunk, k); }
  void start_param_gather(int chunk, int k) {
    const Bucket& bucket = buckets_.at(chunk)[static_cast<std::size_t>(k)];
    async_collective(fmt::format("chunks.{}.bucket{}.param_all_gather", chunk, k), CollectiveOp::allgather,
                     bucket.params * a_, dp_group_, gather_event(chunk, k));
  }
  void finish_param_gather(int chunk, int k) {
    b_.wait(compute_, b_.event(gather_event(chunk, k)));
    if (k > 0) start_param_gather(chunk, k - 1);
  }

  // --- gradient reduction, on the last micro-batch only (no_sync for the others) -------------
  void leave_layer_backward(const PipelineAction& a, int layer) override { reduce_buckets(a, layer); }
  void leave_chunk_backward(const PipelineAction& a) override { reduce_buckets(a, -1); }
  void reduce_buckets(const PipelineAction& a, int lowest) {
    if (a.microbatch + 1 != t_.gradient_accumulation || dp_size_ == 1) return;
    const std::vector<Bucket>& buckets = buckets_.at(a.chunk);
    for (std::size_t k = 0; k < buckets.size(); ++k)
      if (buckets[k].lowest == lowest) reduce_bucket(a.chunk, static_cast<int>(k));
  }
  // start_grad_sync: scale the fp32 gradients by 1/dp, then reduce-scatter (distributed
  // optimizer) or all-reduce them, async on the dp group.
  void reduce_bucket(int chunk, int k) {
    const Bucket& bucket = buckets_.at(chunk)[static_cast<std::size_t>(k)];
    const std::string name = fmt::format("chunks.{}.bucket{}.", chunk, k);
    b_.kernel(compute_, name, {"grad_scale", elementwise(models::Dtype::fp32, bucket.params, r_, r_, 1)});
    // A bucket here closes at a block boundary, so may hold what Megatron splits into several.
    const int pieces = c_.overlap_grad_reduce ? std::max(1, static_cast<int>(bucket.params / bucket_size_)) : 1;
    const CollectiveOp op = c_.distributed_optimizer ? CollectiveOp::reduce_scatter : CollectiveOp::allreduce;
    for (int p = 0; p < pieces; ++p)
      async_collective(name + (pieces > 1 ? fmt::format("grad_sync{}", p) : "grad_sync"), op,
                       bucket.params / pieces * r_, dp_group_, "dp.grad_sync");
    ++grad_syncs_;
  }

  // finalize_model_grads (megatron/core/distributed/finalize_model_grads.py): wait for the
  // buckets; all-reduce the sequence-parallel norms' gradients over tp; all-reduce the tied
  // embedding's two copies over the embedding group.
  void finalize_grads(int stage) {
    if (grad_syncs_ > 0) b_.wait(compute_, b_.event("dp.grad_sync"));
    if (tp_group_ >= 0 && tp_.sequence_parallel) {
      const double layers = double(m_.layers) / par_.pp;   // the stage's blocks
      const double norms = (2 * layers + (stage + 1 == par_.pp ? 1 : 0)) * norm_params(m_);
      collective(compute_, "layernorm_grads.tp.all_reduce", CollectiveOp::allreduce, norms * r_, tp_group_);
    }
    if (embedding_group_ >= 0 && (stage == 0 || stage + 1 == par_.pp))
      collective(compute_, "word_embeddings.tied.all_reduce", CollectiveOp::allreduce, tied_output_copy() * r_,
                 embedding_group_);
  }

  // The optimizer over the rank's fp32 main parameters (its 1/dp shard with the distributed
  // optimizer): clip, step, copy back to the bf16 parameters; then, without
  // overlap_param_gather, the distributed optimizer all-gathers every bucket at once.
  void optimizer_step() {
    const double local = c_.distributed_optimizer ? stage_params_ / dp_size_ : stage_params_;
    b_.kernels(compute_, "", clip_norm_kernels(t_, local));
    clip_norm_all_reduces(c_.distributed_optimizer ? dp_group_ : -1);
    b_.kernels(compute_, "", clip_scale_kernels(t_, local));
    b_.kernels(compute_, "", optimizer_kernels(t_, local));
    b_.kernel(compute_, "", {"optimizer.copy_main_to_model_params", elementwise(t_.param_dtype, local, 4, a_, 0)});
    if (!c_.distributed_optimizer || c_.overlap_param_gather || dp_size_ == 1) return;
    for (const auto& [chunk, buckets] : buckets_)
      for (std::size_t k = buckets.size(); k-- > 0;)
        collective(compute_, fmt::format("chunks.{}.bucket{}.param_all_gather", chunk, k), CollectiveOp::allgather,
                   buckets[k].params * a_, dp_group_);
  }

  void add_notes(const Blocks& blocks, const std::vector<int>& first) {
    b_.set_work_and_note(m_, t_, tp_.tp * par_.pp * par_.cp);
    if (tp_.tp > 1) add_tp_note(blocks.layer);
    std::size_t buckets = 0;
    for (const auto& [chunk, list] : buckets_) buckets += list.size();
    b_.note(fmt::format(
        "Megatron-LM data parallelism over {} rank(s): {}, gradients in {} fp32 buckets (last stage's count) of "
        "at least {:.3g} parameters, reduced once on the last micro-batch{}{}",
        dp_size_,
        c_.distributed_optimizer ? "distributed optimizer (ZeRO-1: gradients reduce-scattered, bf16 parameters "
                                   "all-gathered, optimizer states sharded)"
                                 : "DDP (gradients all-reduced, optimizer states replicated)",
        buckets, bucket_size_, c_.overlap_grad_reduce ? ", overlapped with backward" : ", after backward",
        c_.distributed_optimizer ? (c_.overlap_param_gather ? "; parameters gathered bucket by bucket under the "
                                                              "next forward"
                                                            : "; parameters gathered after the step")
                                 : ""));
    b_.note(fmt::format("Transformer Engine kernels: {} per block forward, {} backward; recompute {}{}",
                        kernel_count(blocks.layer.forward), kernel_count(blocks.layer.backward),
                        transformer::to_string(c_.recompute),
                        c_.recompute == Checkpointing::selective ? " (the core attention reruns)" : ""));
    if (par_.pp > 1)
      b_.note(fmt::format("pipeline: {} stages x {} chunk(s) per rank, schedule {}, {} micro-batches; {} blocks per "
                          "chunk (Megatron's even split; the embedding on the first stage, the output on the last)",
                          par_.pp, pipe_.virtual_stages, to_string(pipe_.schedule), t_.gradient_accumulation,
                          first[1] - first[0]));
  }

  const MegatronConfig& c_;
  int dp_group_ = -1;
  int dp_size_ = 1;   ///< dp_shard x cp
  double bucket_size_ = 0;
  std::map<int, std::vector<Bucket>> buckets_;   ///< per chunk of the stage, in reduction order
  double stage_params_ = 0;
  int grad_syncs_ = 0;
};

}  // namespace

Trace megatron_iteration(const YAML::Node& doc, const YamlReader& reader, const JobContext& job,
                         const ModelConfig& model, const TrainingConfig& training) {
  const MegatronConfig config = read_megatron(doc, reader);
  return MegatronEmitter(model, training, config, job, reader, doc).emit();
}

}  // namespace stepsim::workloads::transformer
