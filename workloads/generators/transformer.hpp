#pragma once
/// @file The decoder-only transformer that the fsdp and ddp generators share: the `model:` and
/// `training:` sections of their YAML, parameter counts, the kernels eager PyTorch launches for
/// each pass of a layer, the embedding and the head, and a builder that appends ops to the one
/// Program every rank of a data-parallel job runs. Internal to workloads/generators/.
///
/// Contract: the passes follow torchtitan's Llama (pytorch/torchtitan, torchtitan/models/llama/
/// model.py, Dec 2024) in eager mode without torch.compile; docs/fsdp.md lists every kernel, its
/// shape and the bytes assumed for the memory-bound ones. GEMM FLOPs are exact: the forward of
/// a linear layer with P weights over T tokens is 2·P·T, its backward two GEMMs (dgrad, wgrad)
/// of 2·P·T each, so a pass without recomputation does 6·P·T in GEMMs.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "models/compute/kernel.hpp"
#include "platforms/yaml_reader.hpp"
#include "workloads/pipeline_schedule.hpp"
#include "workloads/trace.hpp"
#include "workloads/trace_builder.hpp"

namespace stepsim::workloads::transformer {

enum class Activation : std::uint8_t { swiglu, gelu };
enum class Norm : std::uint8_t { rmsnorm, layernorm };
enum class Positions : std::uint8_t { rope, learned };

/// @brief `model.moe`: a mixture-of-experts MLP in every block (Mixtral's layout): a router
/// picks top_k of `experts` SwiGLU experts (each ffn_hidden wide) per token.
struct MoeConfig {
  int experts = 0;                 ///< 0: the dense MLP
  int top_k = 2;
  /// 0: dropless (torchtitan's default); c > 0: an expert takes at most c times its even share
  /// of the routed tokens and drops the rest.
  double capacity_factor = 0;
  /// Routed tokens of the busiest expert-parallel rank over the mean (1: balanced routing).
  /// Every rank is priced at the busiest one's load: the all-to-alls wait for it.
  double routing_skew = 1;
  /// Experts every token runs besides its routed ones (torchtitan's num_shared_experts, as in
  /// DeepSeek-V3 and Llama 4): one dense SwiGLU MLP of shared_experts x ffn_hidden.
  int shared_experts = 0;
  bool enabled() const { return experts > 0; }
};

/// Limits on the counts a transformer workload may give, stated in the errors that enforce them:
/// the trace grows linearly in layers and micro-batches, so past these a run would take minutes
/// for a model no one trains (Llama 3 405B has 126 layers; MoE models up to 256 experts).
constexpr int kMaxLayers = 4096;
constexpr int kMaxGradientAccumulation = 1024;
constexpr int kMaxExperts = 4096;
constexpr int kMaxModelWidth = 1 << 24;  ///< hidden, heads, FFN width, vocabulary
/// The most layer passes one rank may run per iteration (its pipeline stage's layers times the
/// micro-batches): 128 layers x 128 micro-batches, ~300 ops each, so 5M ops and ~15 s to replay.
constexpr int kMaxLayerPasses = 1 << 14;

/// @brief The `model:` section: a pre-norm decoder-only transformer.
struct ModelConfig {
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;              ///< < heads: grouped-query attention
  int ffn_hidden = 0;
  int vocab = 0;
  Activation activation = Activation::swiglu;   ///< swiglu: w1, w3, w2 (Llama); gelu: fc1, fc2 (GPT)
  Norm norm = Norm::rmsnorm;
  Positions positions = Positions::rope;        ///< learned: a sequence x hidden table (GPT)
  bool bias = false;                            ///< linear layers carry biases (GPT)
  bool tied_embeddings = false;                 ///< the output projection reuses the token embedding
  MoeConfig moe;
  int head_dim() const { return hidden / heads; }
};

/// @brief Activation checkpointing of the transformer blocks (torchtitan's `activation_checkpoint`).
enum class Checkpointing : std::uint8_t { none, selective, full };
enum class Optimizer : std::uint8_t { adamw, sgd };

/// @brief Float8 training of the blocks' linears (torchao's Float8Linear, dynamic scaling):
/// one scale per tensor (tensorwise) or per row (rowwise).
enum class Float8 : std::uint8_t { none, tensorwise, rowwise };

/// @brief The `training:` section.
struct TrainingConfig {
  int micro_batch = 1;              ///< sequences per rank per micro-batch
  int sequence = 1;                 ///< tokens per sequence
  int gradient_accumulation = 1;    ///< micro-batches per optimizer step
  models::Dtype param_dtype = models::Dtype::bf16;    ///< dtype of the GEMMs and activations
  models::Dtype reduce_dtype = models::Dtype::fp32;   ///< dtype gradients are reduced in
  Optimizer optimizer = Optimizer::adamw;
  double max_norm = 1.0;            ///< gradient clipping (torchtitan training.max_norm); 0 = off
  Seconds cpu_op_gap = 21e-6;       ///< CPU time between two PyTorch ops (Lin et al. T1)
  bool compile = false;             ///< torch.compile of each block (torchtitan's training.compile)
  Float8 float8 = Float8::none;     ///< Float8 linears in the blocks (training.float8)
  bool float8_all_gather = false;   ///< FSDP all-gathers the Float8 linears' weights in fp8
  double tokens() const { return static_cast<double>(micro_batch) * sequence; }  ///< per micro-batch
};

/// @brief Reads `model:`; rejects unknown keys, heads not dividing hidden, kv_heads not
/// dividing heads. Errors name reader.origin(), the key path, the line and a fix.
ModelConfig read_model(const YAML::Node& doc, const platforms::YamlReader& reader);
/// @brief Reads `training:` (keys and defaults in docs/fsdp.md).
TrainingConfig read_training(const YAML::Node& doc, const platforms::YamlReader& reader);
/// @brief Refuses a param_dtype (or Float8) that `gpu` has no tensor cores for, naming the key
/// and a dtype it has (models::unsupported_dtype).
void check_dtypes(const TrainingConfig& training, const platforms::GpuModel& gpu, const YAML::Node& doc,
                  const platforms::YamlReader& reader);
/// @brief Reads an `activation_checkpointing:` value (none, selective, full) at `path`.
Checkpointing read_checkpointing(const YAML::Node& node, const std::string& path,
                                 const platforms::YamlReader& reader);
const char* to_string(Checkpointing checkpointing);

/// @brief Megatron-style tensor parallelism over `tp` ranks as torchtitan's apply_tp lays it out
/// (torchtitan/models/llama3/infra/parallelize.py): wq, wk, wv, w1, w3 (fc1) column-parallel,
/// wo, w2 (fc2) row-parallel, attention heads split over tp; with sequence parallelism the norms
/// and residuals run on 1/tp of the tokens, an all-gather feeds each column-parallel group and
/// a reduce-scatter leaves each row-parallel linear (backward: the reverse); without it the
/// row-parallel outputs are all-reduced in forward and the column-parallel inputs' gradients in
/// backward (Megatron's f and g). The token embedding is row-parallel over the vocabulary, the
/// output projection column-parallel with a vocabulary-parallel loss (torchtitan's loss_parallel).
struct TensorParallel {
  int tp = 1;
  bool sequence_parallel = true;
  /// torchtitan's async TP (the micro_pipeline_tp pass): each all-gather feeding GEMMs and each
  /// reduce-scatter fed by one is split into tp chunks that overlap the chunked GEMMs.
  bool async = false;
  /// The vocabulary is padded to a multiple of vocab_multiple x tp rows (Megatron-LM's
  /// make-vocab-size-divisible-by); 1: no padding beyond an even split (torchtitan).
  int vocab_multiple = 1;
};

/// @brief Expert parallelism over `ep` ranks (torchtitan's expert_parallel): each holds
/// experts / ep of every block's experts; tokens are dispatched to their experts' ranks and
/// combined back by all-to-alls over the ep group.
struct ExpertParallel {
  int ep = 1;
};

/// @brief Context parallelism over `cp` ranks as torchtitan applies it (torch's context_parallel
/// around SDPA with the head-tail load balancer; torch/distributed/tensor/experimental/
/// _attention.py): every rank holds sequence/cp tokens of each sequence (two chunks, one from
/// each end, so causal work is even) and runs SDPA as a ring of cp steps, its queries against
/// one rank's keys and values per step, merging the partial outputs by their logsumexp. The
/// keys and values reach it by one all-gather (rotate method allgather, torch's and
/// torchtitan's default) or rank to rank, one step ahead (alltoall); their gradients travel
/// rank to rank in fp32.
struct ContextParallel {
  int cp = 1;
  bool all_to_all = false;   ///< rotate_method alltoall: KV passed rank to rank under each step
};

/// @brief Reads `context_parallel:` (rotate_method: allgather | alltoall) for `cp` ranks; the
/// section needs cp > 1, and the sequence must split into 2 x cp equal chunks (check_context_split).
ContextParallel read_context_parallel(const YAML::Node& doc, const platforms::YamlReader& reader, int cp,
                                      const TrainingConfig& training);
/// @brief The head-tail load balancer (torch's and Megatron's) cuts each sequence into 2 x cp
/// equal chunks: training.sequence must be a multiple of 2 x cp (error naming the fix).
void check_context_split(const YAML::Node& doc, const platforms::YamlReader& reader, int cp,
                         const TrainingConfig& training);

/// @brief Reads `tensor_parallel:` (keys and defaults in docs/parallelism.md) for `tp` ranks:
/// heads and kv_heads must divide by tp, and so must ffn_hidden and vocab.
TensorParallel read_tensor_parallel(const YAML::Node& doc, const platforms::YamlReader& reader, int tp,
                                    const ModelConfig& model, const YAML::Node& tp_node);

/// @brief The `pipeline:` section (docs/parallelism.md): the schedule and the chunks per rank.
struct PipelineConfig {
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  int virtual_stages = 1;
  PipelineRuntime runtime = PipelineRuntime::torch;   ///< Megatron-LM's emitter sets its own
};

/// @brief Fails when a rank of a `pp`-stage pipeline would run more than kMaxLayerPasses layer
/// passes (model.layers / pp x training.gradient_accumulation): checked before any op is built.
void check_layer_passes(const YAML::Node& doc, const platforms::YamlReader& reader, int pp,
                        const ModelConfig& model, const TrainingConfig& training);

/// @brief Reads `pipeline:` for `pp` stages: an unknown schedule, virtual stages on a
/// single-stage schedule, interleaved 1F1B with micro-batches (training.gradient_accumulation)
/// not a multiple of pp, and more chunks than layers allow are errors naming the key.
PipelineConfig read_pipeline(const YAML::Node& doc, const platforms::YamlReader& reader, int pp,
                             const ModelConfig& model, const TrainingConfig& training);

/// @brief The first layer of each of `chunks` pipeline chunks, then the layer count: torchtitan's
/// split (pipeline_parallel.py _generate_llm_fqn_per_model_part), which counts the embedding and
/// the output as one layer each and gives the remainder to the first chunks.
std::vector<int> chunk_first_layers(int layers, int chunks);

/// @brief Weights of one transformer block (attention, MLP, both norms, biases) a rank holds
/// under `tp` (the whole block without it).
double layer_params(const ModelConfig& model, const TensorParallel& tp = {});
/// @brief A rank's rows of the vocabulary under `tp`: vocab / tp rounded up to a multiple of
/// tp.vocab_multiple (Megatron-LM pads the table to a multiple of that x tp).
double vocab_share(const ModelConfig& model, const TensorParallel& tp);

/// @brief The weights of one block's linears a rank holds under `tp` (biases left out): what
/// Float8 training casts to fp8.
double linear_weights(const ModelConfig& model, const TensorParallel& tp = {});

/// @brief Weights of one block's experts (all of them; an expert-parallel rank holds 1/ep).
double expert_params(const ModelConfig& model);

/// @brief Weights of the token embedding, plus the position table when positions are learned
/// (a rank's share of the vocabulary under `tp`).
double embedding_params(const ModelConfig& model, const TrainingConfig& training, const TensorParallel& tp = {});
/// @brief Weights of the final norm and the output projection (none when tied).
double head_params(const ModelConfig& model, const TensorParallel& tp = {});
double total_params(const ModelConfig& model, const TrainingConfig& training, const TensorParallel& tp = {});
/// @brief The N of torchtitan's MFU count: every parameter but the token embedding (a lookup),
/// with a tied output projection counted, as it still runs its GEMM.
double flop_params(const ModelConfig& model, const TrainingConfig& training);

/// @brief Model FLOPs of one rank's iteration as torchtitan counts them for MFU
/// (torchtitan/utils.py get_num_flop_per_token): per token 6 N + 12 L H d S, N the
/// parameters without the token embedding, attention counted without the causal half.
double model_flops_per_iteration(const ModelConfig& model, const TrainingConfig& training);

/// @brief A collective within a block, on the tp or the cp group; `bytes` in nccl-tests
/// convention (the whole gathered or reduced buffer).
struct Comm {
  enum class Group : std::uint8_t { tp, cp, ep };
  models::CollectiveOp op = models::CollectiveOp::allreduce;
  Bytes bytes = 0;
  Group group = Group::tp;
  /// >= 0: an async-TP chunk, issued without the compute stream waiting for it; kernels that
  /// name this tag in Kernel::after wait for it (its completion is tagged `tag`).
  int tag = -1;
};

/// @brief One kernel launch, or (with `comm`) one tensor- or context-parallel collective; `name` is relative
/// to its module (e.g. "attention.wq").
struct Kernel {
  Kernel(std::string name, models::KernelSpec spec) : name(std::move(name)), spec(std::move(spec)) {}
  Kernel(std::string name, Comm comm) : name(std::move(name)), comm(comm) {}
  std::string name;
  models::KernelSpec spec;
  std::optional<Comm> comm;
  int after = -1;   ///< >= 0: the compute stream first waits for the async comm of this tag
  bool compiled = false;   ///< launched by a compiled graph's wrapper: no eager per-op host gap
  /// Reads no activation (a Float8 weight cast): a pass may move it across the activations'
  /// collectives (micro_pipeline runs it before the gather it sits behind).
  bool off_path = false;
  /// @brief No launch: the compute stream waits for async comm `tag` (spec.kind empty).
  static Kernel wait_for(int tag) {
    Kernel k("async_tp.wait", models::KernelSpec{});
    k.after = tag;
    return k;
  }
  bool is_wait() const { return !comm && spec.kind.empty(); }
};
using Kernels = std::vector<Kernel>;
/// @brief The kernel launches among `kernels` (tensor-parallel collectives left out).
std::size_t kernel_count(const Kernels& kernels);

/// @brief A parameter tensor whose gradient is complete after backward kernel `ready_after`.
struct GradReady {
  std::string name;
  double params = 0;
  int ready_after = 0;   ///< index into Block::backward
};

/// @brief The kernels of one module's passes, in launch order.
struct Block {
  Kernels forward;
  Kernels recompute;          ///< what activation checkpointing re-runs before `backward`
  Kernels backward;
  std::vector<GradReady> grads;   ///< in module registration order (DDP buckets follow it)
};

/// @brief A transformer block. `cast_weights` adds autocast's per-forward cast of fp32
/// weights to param_dtype (DDP under torch.autocast; FSDP gathers weights already cast).
Block layer_block(const ModelConfig& model, const TrainingConfig& training, Checkpointing checkpointing,
                  bool cast_weights, const TensorParallel& tp = {}, const ContextParallel& cp = {},
                  const ExpertParallel& ep = {});
/// @brief torch's micro_pipeline_tp pass over a pass's kernels (async TP): an all-gather of
/// `activation` bytes followed by GEMMs over its `rows` becomes tp chunk transfers, each GEMM's
/// chunk waiting for its own; a GEMM over `rows` followed by a reduce-scatter becomes tp GEMM
/// chunks each followed by its chunk's transfer, the compute stream waiting for the last. An
/// all-gather of `gathered_fp8` bytes (Float8's fp8 all-gather, when > 0) is split alike.
Kernels micro_pipeline(const Kernels& kernels, int tp, double rows, Bytes activation, Bytes gathered_fp8 = 0);

/// @brief Token embedding lookup (+ learned positions); with `cast_weights` (autocast) the
/// lookup runs in fp32, as autocast leaves embeddings alone.
Block embedding_block(const ModelConfig& model, const TrainingConfig& training, bool cast_weights,
                      const TensorParallel& tp = {}, const ContextParallel& cp = {});
/// @brief Final norm, output projection and the fp32 cross-entropy loss (torchtitan's loss_fn).
Block head_block(const ModelConfig& model, const TrainingConfig& training, bool cast_weights,
                 const TensorParallel& tp = {}, const ContextParallel& cp = {});

/// @brief An elementwise (memory-bound) kernel over `elements`, with bytes and FLOPs per element.
models::KernelSpec elementwise(models::Dtype dtype, double elements, double bytes_read, double bytes_written,
                               double flops);
/// @brief The kernels of gradient clipping's norm over `params` local fp32 gradients (before the
/// norm's all-reduce) and of the scaling after it; empty when max_norm is 0.
Kernels clip_norm_kernels(const TrainingConfig& training, double params);
Kernels clip_scale_kernels(const TrainingConfig& training, double params);
/// @brief The optimizer step over `params` local fp32 parameters.
Kernels optimizer_kernels(const TrainingConfig& training, double params);

/// @brief Appends ops to the Program every rank of a data-parallel job shares, or to one
/// program per pipeline stage (next_program), through the shared TraceBuilder / ProgramWriter
/// (workloads/trace_builder.hpp).
class ProgramBuilder {
 public:
  ProgramBuilder(std::string origin, int ranks, Seconds cpu_op_gap, std::size_t max_program_ops);

  int stream(const std::string& name) { return writer_->stream(name); }
  int event(const std::string& name) { return writer_->event(name); }
  int group(ProcessGroup group) { return trace_.group(std::move(group)); }

  void kernel(int stream, const std::string& prefix, const Kernel& kernel) {
    writer_->kernel(stream, prefix + kernel.name, kernel.spec, !kernel.compiled);
  }
  /// @brief A send / recv to rank `peer` of the issuing rank's subgroup of `group`.
  void send(int stream, const std::string& name, int peer, Bytes bytes, int group) {
    writer_->send(stream, name, peer, bytes, group);
  }
  void recv(int stream, const std::string& name, int peer, Bytes bytes, int group) {
    writer_->recv(stream, name, peer, bytes, group);
  }
  /// @brief Kernels only: a tensor-parallel collective (Kernel::comm) is the emitter's to issue.
  void kernels(int stream, const std::string& prefix, const Kernels& kernels);
  /// @brief A collective on `group`; on one-rank subgroups only an out-of-place call is an op
  /// (NCCL's local copy), an in-place one moves nothing and is left out.
  void collective(int stream, const std::string& name, models::CollectiveOp op, Bytes bytes, int group,
                  const std::string& algorithm = "nccl", const models::AlgorithmOptions& options = {},
                  bool in_place = true);
  void record(int stream, int event) { writer_->record(stream, event); }
  void wait(int stream, int event) { writer_->wait(stream, event); }
  void sync_event(int event) { writer_->sync_event(event); }
  const ProcessGroup& group_at(int group) const { return trace_.group_at(group); }
  void note(std::string text) { trace_.note(std::move(text)); }
  /// @brief Tokens and model FLOPs (torchtitan's count) per rank per iteration, as Trace::work
  /// and as a note saying how they were counted; `sharers` ranks (a tensor-parallel group)
  /// process the same tokens together.
  void set_work_and_note(const ModelConfig& model, const TrainingConfig& training, int sharers = 1);

  /// @brief Ops in the program being written.
  int ops_written() const { return static_cast<int>(writer_->program().ops.size()); }
  /// @brief Gives the program written so far to `ranks` and starts an empty one.
  void next_program(const std::vector<int>& ranks);
  /// @brief The trace: the program written so far run by every rank, unless next_program
  /// handed out every rank's.
  Trace finish();

 private:
  TraceBuilder trace_;
  Seconds cpu_op_gap_;
  std::unique_ptr<ProgramWriter> writer_;
  bool split_ = false;   ///< next_program was called
};

}  // namespace stepsim::workloads::transformer
