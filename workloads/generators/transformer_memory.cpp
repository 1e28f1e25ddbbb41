#include "workloads/generators/transformer_memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "workloads/generators/transformer_ops.hpp"
#include "workloads/pipeline_schedule.hpp"

namespace stepsim::workloads::transformer {
namespace {

using models::MemoryTerm;
using models::MemoryTerms;

// One tensor a block's forward leaves for its backward: kept without checkpointing, and kept
// under torchtitan's op-level selective policy (parallelize_llama.py _save_list at 9dec370: the
// outputs of SDPA, of every odd-numbered aten.mm and of reduce_scatter_tensor).
struct Saved {
  Bytes bytes;
  bool kept;
  bool kept_selective;
};

// One micro-batch's tensor widths on one rank.
struct Shape {
  double tokens;       ///< the rank's tokens (sequence split over cp)
  double norm_tokens;  ///< tokens of the norms and residuals (split over tp under SP)
  double h, q, kv, f, heads;
  double a;     ///< bytes of an activation element
  bool repeat;  ///< grouped-query attention: K and V copied to every query head (torchtitan)
};

Shape shape_of(const IterationLayout& L) {
  const ModelConfig& m = L.model;
  const double tp = L.tp.tp;
  const double tokens = L.training.tokens() / L.cp.cp;
  const double hd = m.head_dim();
  return {tokens,
          L.tp.tp > 1 && L.tp.sequence_parallel ? tokens / tp : tokens,
          double(m.hidden),
          m.heads * hd / tp,
          m.kv_heads * hd / tp,
          double(m.ffn_hidden) / tp,
          m.heads / tp,
          models::bytes_of(L.training.param_dtype),
          m.kv_heads < m.heads};
}

// A norm's saved tensors: eager RMSNorm (x.float(), rsqrt, type_as; norms.py) keeps the fp32
// input, the rsqrt and the normalised bf16 values; LayerNorm (one fused kernel), compiled RMSNorm
// and Transformer Engine's keep the input and the statistics.
void norm_tensors(const IterationLayout& L, const Shape& s, bool eager, std::vector<Saved>& out) {
  const double n = s.norm_tokens;
  const bool rms = L.model.norm == Norm::rmsnorm;
  if (eager && rms) {
    out.push_back({4 * n * s.h, true, false});
    out.push_back({4 * n, true, false});
    out.push_back({s.a * n * s.h, true, false});
  } else {
    out.push_back({s.a * n * s.h, true, false});
    out.push_back({(rms ? 4.0 : 8.0) * n, true, false});
  }
}

// torchtitan's block (models/llama/model.py): what autograd saves, tensor by tensor; the
// compiled block keeps only what Inductor's partitioner must (mm inputs, SDPA's tensors, the
// MLP's GEMM outputs), its elementwise chains recomputed in the backward kernels.
std::vector<Saved> torchtitan_tensors(const IterationLayout& L, const Shape& s) {
  const bool eager = !L.training.compile;
  const bool sp = L.tp.tp > 1 && L.tp.sequence_parallel;
  // A linear's saved input: Float8Linear keeps it cast to fp8 (torchao float8_linear.py).
  const double linear_in = L.training.float8 != Float8::none ? 1 : s.a;
  const double T = s.tokens;
  std::vector<Saved> out;
  if (!eager) out.push_back({s.a * s.norm_tokens * s.h, true, false});  // the block input, for the norm's backward
  norm_tensors(L, s, eager, out);
  out.push_back({linear_in * T * s.h, true, false});              // attention_norm output (gathered under SP)
  out.push_back({s.a * T * s.q, false, true});                    // wq output (mm 1)
  out.push_back({s.a * T * s.kv, !s.repeat, true});               // wv output (mm 3): SDPA's V unless repeated
  if (eager) out.push_back({4 * T * (s.q + s.kv), true, false});  // RoPE's fp32 complex inputs
  const double kv_width = s.repeat ? s.q : s.kv;
  out.push_back({s.a * T * (s.q + kv_width + (s.repeat ? kv_width : 0)), true, false});  // SDPA's q, k (and repeated v)
  out.push_back({s.a * T * s.q, true, true});                                            // SDPA output
  out.push_back({4 * T * s.heads, true, true});                                          // its logsumexp
  if (L.training.float8 != Float8::none) out.push_back({T * s.q, true, false});          // wo's fp8 input
  if (sp) out.push_back({s.a * s.norm_tokens * s.h, false, true});                       // wo's reduce-scatter output
  if (!eager) out.push_back({s.a * s.norm_tokens * s.h, true, false});  // the residual, for ffn_norm's backward
  norm_tensors(L, s, eager, out);
  out.push_back({linear_in * T * s.h, true, false});  // ffn_norm output
  if (L.model.moe.enabled()) {
    const MoeConfig& moe = L.model.moe;
    const double routed = T * moe.top_k * moe.routing_skew;
    out.push_back({4 * T * moe.experts, true, false});     // router probabilities (fp32)
    out.push_back({s.a * routed * s.h, true, false});      // dispatched tokens
    out.push_back({4 * s.a * routed * s.f, true, false});  // each expert's w1, w3, silu, product
    out.push_back({s.a * routed * s.h, true, false});      // expert outputs, scaled by their weights
    if (moe.shared_experts > 0) out.push_back({4 * s.a * T * s.f * moe.shared_experts, true, false});
    return out;
  }
  if (L.model.activation == Activation::swiglu) {
    out.push_back({s.a * T * s.f, true, true});              // w1 output (mm 5)
    out.push_back({s.a * T * s.f, true, false});             // w3 output (mm 6)
    if (eager) out.push_back({s.a * T * s.f, true, false});  // silu output
    out.push_back({linear_in * T * s.f, true, false});       // product, w2's input
    out.push_back({s.a * T * s.h, false, true});             // w2 output (mm 7)
  } else {
    out.push_back({s.a * T * s.f, true, true});         // fc1 output (mm 5)
    out.push_back({linear_in * T * s.f, true, false});  // gelu output, fc2's input
  }
  if (sp) out.push_back({s.a * s.norm_tokens * s.h, false, true});  // w2's reduce-scatter output
  return out;
}

// Transformer Engine's layers as Megatron-LM builds them (megatron_block.cpp): LayerNormLinear
// keeps the norm's input, statistics and output, fused RoPE nothing, flash attention q, k, v
// (native GQA), its output and logsumexp, LayerNormMLP the fc1 output and the activation.
// Megatron's selective recompute reruns core attention, whose flash kernel keeps nothing more.
std::vector<Saved> megatron_tensors(const IterationLayout& L, const Shape& s) {
  const double T = s.tokens;
  std::vector<Saved> out;
  for (int norm = 0; norm < 2; ++norm) {
    norm_tensors(L, s, false, out);
    out.push_back({s.a * s.norm_tokens * s.h, true, true});  // the norm's output (re-gathered under SP)
    if (norm == 1) break;
    out.push_back({s.a * T * (s.q + 2 * s.kv), true, true});
    out.push_back({s.a * T * s.q, true, true});
    out.push_back({4 * T * s.heads, true, true});
  }
  const bool swiglu = L.model.activation == Activation::swiglu;
  out.push_back({s.a * T * s.f * (swiglu ? 2 : 1), true, true});
  out.push_back({s.a * T * s.f, true, true});
  for (Saved& t : out) t.kept_selective = t.kept;
  return out;
}

// The loss over a micro-batch's logits (T x V on a rank; V split over tp by torchtitan's
// loss_parallel and Megatron's vocab-parallel cross entropy).
struct LossMemory {
  Bytes saved = 0;           ///< kept from the loss's forward to its backward
  Bytes forward_extra = 0;   ///< momentary at the forward's peak
  Bytes backward_extra = 0;  ///< momentary at the backward's peak
  Bytes retained = 0;        ///< kept until the step (the pipeline's outputs)
};

LossMemory loss_memory(const IterationLayout& L, const Shape& s) {
  const double logits = s.tokens * vocab_share(L.model, L.tp);
  LossMemory loss;
  if (L.megatron) {
    // _VocabParallelCrossEntropy: an fp32 copy, exponentiated and normalised in place, saved;
    // the backward turns it into the gradient in place and casts it back to bf16.
    loss.saved = 4 * logits;
    loss.forward_extra = s.a * logits;
    loss.backward_extra = s.a * logits;
    return loss;
  }
  // cross_entropy(pred.float()): the bf16 logits, their fp32 copy and log_softmax's output (saved);
  // backward: nll_loss's gradient and log_softmax's input gradient beside the saved output.
  // Under tensor parallelism torchtitan's loss_parallel runs DTensor's own log-softmax
  // (torch/distributed/tensor/_ops/_math_ops.py at torch 2.6: x - max, exp(x - max) summed;
  // backward grad - exp(output) * sum(grad)): one more fp32 temporary each way.
  // torchtitan deletes the logits before backward; torch.distributed.pipelining keeps every
  // micro-batch's output on the last stage (output_chunks, merged when step() returns).
  const double parallel = L.tp.tp > 1 ? 4 : 0;
  loss.saved = 4 * logits;
  loss.forward_extra = (4 + parallel) * logits + (L.pp > 1 ? 0 : s.a * logits);
  loss.backward_extra = (8 + parallel) * logits;
  loss.retained = L.pp > 1 ? s.a * logits : 0;
  return loss;
}

// What the final norm and the output projection keep (the head is eager in torchtitan).
Bytes head_saved(const IterationLayout& L, const Shape& s) {
  std::vector<Saved> norm;
  norm_tensors(L, s, !L.megatron, norm);
  Bytes total = s.a * s.tokens * s.h;  // the output projection's input (gathered under SP)
  for (const Saved& t : norm) total += t.bytes;
  return total;
}

double optimizer_bytes(const TrainingConfig& t) { return t.optimizer == Optimizer::adamw ? 8 : 4; }

}  // namespace

BlockMemory block_memory(const IterationLayout& L) {
  const Shape s = shape_of(L);
  const std::vector<Saved> tensors = L.megatron ? megatron_tensors(L, s) : torchtitan_tensors(L, s);
  Bytes kept = 0, kept_selective = 0, both = 0;
  for (const Saved& t : tensors) {
    kept += t.kept ? t.bytes : 0;
    kept_selective += t.kept_selective ? t.bytes : 0;
    both += t.kept && t.kept_selective ? t.bytes : 0;
  }
  BlockMemory b;
  b.input = s.a * s.norm_tokens * s.h;
  switch (L.checkpointing) {
    case Checkpointing::none:
      b.saved = kept;
      break;
    case Checkpointing::selective:
      b.saved = b.input + kept_selective;
      b.recompute = kept - both;
      break;
    case Checkpointing::full:
      b.saved = b.input;
      b.recompute = kept;
      break;
  }
  // The forward's largest temporary: eager RMSNorm's fp32 square; the backward's: the MLP's
  // input gradients (three T x f tensors and the gathered and local residual gradients) or
  // flash attention's (dq, dk, dv, an fp32 dq accumulator and dout), whichever is larger.
  const double T = s.tokens;
  b.forward_workspace = 4 * s.norm_tokens * s.h;
  const double kv_width = s.repeat && !L.megatron ? s.q : s.kv;
  const double mlp_width = L.model.moe.enabled() ? s.f * L.model.moe.top_k * L.model.moe.routing_skew : s.f;
  b.backward_workspace = std::max(3 * s.a * T * mlp_width, s.a * T * (2 * s.q + 2 * kv_width) + 4 * T * s.q) +
                         s.a * (T + s.norm_tokens) * s.h;
  if (L.cp.cp > 1 && !L.megatron) {
    // Ring attention (torch's context_parallel, rotate allgather): every rank's K and V at
    // once; the backward adds fp32 accumulators of their gradients.
    const Bytes ring = 2 * (L.cp.cp - 1) * s.a * T * kv_width;
    b.forward_workspace += ring;
    b.backward_workspace += ring + 2 * 4 * T * kv_width;
  }
  return b;
}

namespace {

// Parameters of one chunk on one rank, before data-parallel sharding.
struct ChunkParams {
  double dense = 0;    ///< every parameter but the experts (tp-local)
  double experts = 0;  ///< the rank's experts (1/ep of them)
  double block_dense = 0, block_experts = 0, block_fp8 = 0, root = 0;
  int layers = 0;
};

ChunkParams chunk_params(const IterationLayout& L, int chunk, int chunks) {
  const ModelConfig& m = L.model;
  ChunkParams p;
  p.layers = L.chunk_first.at(chunk + 1) - L.chunk_first.at(chunk);
  p.block_experts = expert_params(m) / L.ep;
  p.block_dense = layer_params(m, L.tp) - expert_params(m);
  p.block_fp8 = L.training.float8_all_gather ? linear_weights(m, L.tp) : 0;
  const double tied_copy = m.tied_embeddings && L.pp > 1 ? vocab_share(m, L.tp) * m.hidden : 0;
  p.root = (chunk == 0 ? embedding_params(m, L.training, L.tp) : 0) +
           (chunk + 1 == chunks ? head_params(m, L.tp) + tied_copy : 0);
  p.dense = p.root + p.layers * p.block_dense;
  p.experts = p.layers * p.block_experts;
  return p;
}

// What every stage's walk of one layout shares: computed once per layout, not per stage.
struct LayoutMemory {
  explicit LayoutMemory(const IterationLayout& L)
      : chunks(L.pp * L.pipeline.virtual_stages),
        shape(shape_of(L)),
        block(block_memory(L)),
        loss(loss_memory(L, shape)),
        head(head_saved(L, shape)) {
    for (int c = 0; c < chunks; ++c) params.push_back(chunk_params(L, c, chunks));
  }
  const int chunks;
  const Shape shape;
  const BlockMemory block;
  const LossMemory loss;
  const Bytes head;   ///< what the final norm and the output projection keep
  std::vector<ChunkParams> params;
};

class StageWalk {
 public:
  StageWalk(const IterationLayout& L, const LayoutMemory& shared, int stage)
      : L_(L),
        stage_(stage),
        chunks_(shared.chunks),
        block_(shared.block),
        loss_(shared.loss),
        head_(shared.head),
        params_(shared.params),
        a_(shared.shape.a) {}

  models::MemoryWalk run() {
    hold_states();
    std::vector<PipelineAction> actions;
    if (L_.pp > 1) {
      actions = pipeline_actions(L_.pipeline.schedule, L_.pp, L_.pipeline.virtual_stages,
                                 L_.training.gradient_accumulation, stage_, L_.pipeline.runtime);
    } else {
      for (int m = 0; m < L_.training.gradient_accumulation; ++m)
        actions.insert(actions.end(), {{true, 0, m}, {false, 0, m}});
    }
    for (const PipelineAction& a : actions) {
      walk_.open_window();
      a.forward ? forward(a) : backward(a);
      action_peak.push_back(walk_.window_peak());
      action_after.push_back(walk_.live().total());
    }
    finish_step();
    return walk_;
  }
  std::vector<Bytes> action_peak, action_after;  ///< per action: its peak, the bytes after it

 private:
  bool fsdp() const { return L_.sharding == StateSharding::fsdp || L_.sharding == StateSharding::fsdp_unsharded; }
  const ChunkParams& params(int chunk) const { return params_[static_cast<std::size_t>(chunk)]; }
  double sharded(const ChunkParams& p) const { return p.dense / L_.shard + p.experts / L_.expert_shard; }
  // An FSDP unit's all-gathered parameters: bf16, fp8 for Float8 weights gathered in fp8.
  Bytes block_unit(const ChunkParams& p) const {
    return a_ * (p.block_dense - p.block_fp8 + p.block_experts) + p.block_fp8;
  }
  // Units kept unsharded from a chunk's forward to its backward: all of them with PP (torchtitan
  // turns resharding off) and under SHARD_GRAD_OP; else the root and the model's last block.
  Bytes kept_units(int chunk) const {
    const ChunkParams& p = params(chunk);
    if (L_.pp > 1 || L_.sharding == StateSharding::fsdp_unsharded || !L_.reshard_after_forward)
      return a_ * p.root + p.layers * block_unit(p);
    return a_ * p.root + (p.layers > 0 ? block_unit(p) : 0);
  }
  // Units gathered for one block and prefetched for the next, freed after it.
  Bytes gathered_in_flight(int chunk) const {
    const ChunkParams& p = params(chunk);
    const bool resharding = L_.pp == 1 && L_.sharding == StateSharding::fsdp && L_.reshard_after_forward;
    return resharding && p.layers > 1 ? 2 * block_unit(p) : 0;
  }

  void hold_states() {
    double whole = 0, shards = 0;
    for (int c = stage_; c < chunks_; c += L_.pp) {
      const ChunkParams& p = params(c);
      whole += p.dense + p.experts;
      shards += sharded(p);
    }
    whole_ = whole;
    shards_ = shards;
    const double opt = optimizer_bytes(L_.training);
    switch (L_.sharding) {
      case StateSharding::fsdp:
      case StateSharding::fsdp_unsharded:
        walk_.allocate(MemoryTerm::parameters, 4 * shards);
        walk_.allocate(MemoryTerm::optimizer, opt * shards);
        break;
      case StateSharding::replicated:
        walk_.allocate(MemoryTerm::parameters, 4 * whole);
        walk_.allocate(MemoryTerm::optimizer, opt * whole);
        if (L_.ddp_bucket_copy) walk_.allocate(MemoryTerm::buffers, 4 * whole);
        break;
      case StateSharding::megatron:
      case StateSharding::megatron_distributed: {
        // Megatron-LM's distributed optimizer guide: bf16 parameters and fp32 main gradients
        // whole, fp32 main parameters and Adam's two states over d ranks: 6 + 12 / d bytes.
        const double d = L_.sharding == StateSharding::megatron_distributed ? L_.shard : 1;
        walk_.allocate(MemoryTerm::parameters, a_ * whole);
        walk_.allocate(MemoryTerm::gradients, 4 * whole);
        walk_.allocate(MemoryTerm::optimizer, (4 + opt) * whole / d);
        break;
      }
    }
  }

  void forward(const PipelineAction& a) {
    const ChunkParams& p = params(a.chunk);
    if (fsdp() && !gathered_.count(a.chunk)) {
      walk_.allocate(MemoryTerm::buffers, kept_units(a.chunk));
      gathered_.insert(a.chunk);
    }
    walk_.allocate(MemoryTerm::activations, p.layers * block_.saved);
    if (L_.pp > 1 && !L_.megatron && a.chunk + 1 < chunks_) walk_.allocate(MemoryTerm::activations, block_.input);
    MemoryTerms momentary;
    momentary[MemoryTerm::activations] = block_.forward_workspace;
    momentary[MemoryTerm::buffers] = gathered_in_flight(a.chunk);
    walk_.peak_at({"forward", a.chunk, a.microbatch}, momentary);
    if (a.chunk + 1 == chunks_) {
      walk_.allocate(MemoryTerm::activations, head_);
      MemoryTerms loss;
      loss[MemoryTerm::activations] = loss_.forward_extra;
      walk_.peak_at({"loss forward,", -1, a.microbatch}, loss);
      walk_.allocate(MemoryTerm::activations, loss_.saved + loss_.retained);
      retained_ += loss_.retained;
    }
  }

  void backward(const PipelineAction& a) {
    const ChunkParams& p = params(a.chunk);
    if (a.chunk + 1 == chunks_) {
      MemoryTerms loss;
      loss[MemoryTerm::activations] = loss_.backward_extra;
      walk_.peak_at({"loss backward,", -1, a.microbatch}, loss);
      walk_.release(MemoryTerm::activations, loss_.saved);
      walk_.release(MemoryTerm::activations, head_);
    }
    const bool first_backward = !grads_.count(a.chunk);
    grads_.insert(a.chunk);
    if (first_backward && L_.pp > 1 && fsdp())  // unsharded gradients accumulated in fp32 until the last micro-batch
      walk_.allocate(MemoryTerm::gradients, 4 * (p.dense + p.experts));
    // Each block's backward frees its saved tensors and (the first time) adds its gradients:
    // the live bytes change by the same step from block to block, so the chunk's peak is at its
    // first block's backward or its last's.
    MemoryTerms momentary;
    momentary[MemoryTerm::activations] = block_.recompute + block_.backward_workspace;
    momentary[MemoryTerm::buffers] = gathered_in_flight(a.chunk) + block_gradient_buffers(p);
    const auto backward_blocks = [&](int blocks) {
      walk_.release(MemoryTerm::activations, blocks * block_.saved);
      if (first_backward) allocate_block_gradients(p, blocks);
    };
    if (p.layers > 0) {
      walk_.peak_at({"backward", a.chunk, a.microbatch}, momentary);
      backward_blocks(p.layers - 1);
      if (p.layers > 1) walk_.peak_at({"backward", a.chunk, a.microbatch}, momentary);
      backward_blocks(1);
    }
    if (L_.pp > 1 && !L_.megatron && a.chunk + 1 < chunks_) walk_.release(MemoryTerm::activations, block_.input);
    if (first_backward && (L_.pp == 1 || !fsdp())) allocate_root_gradients(p);
    if (fsdp() && L_.pp == 1) {  // FSDP2 reshards every unit after backward
      walk_.release(MemoryTerm::buffers, kept_units(a.chunk));
      gathered_.erase(a.chunk);
    }
  }

  // A block's gradient on its way to the reduction: FSDP2's unsharded bf16 gradient and the
  // fp32 reduce-scatter inputs of this unit and of the one still in flight (foreach_reduce).
  Bytes block_gradient_buffers(const ChunkParams& p) const {
    const double unit = p.block_dense + p.block_experts;
    if (fsdp()) return a_ * unit + (L_.pp > 1 ? 0 : 2 * 4 * unit);
    if (L_.sharding == StateSharding::replicated) return a_ * unit;  // autocast's bf16 gradient before the fp32 one
    return 0;  // Megatron accumulates wgrad straight into the fp32 main gradients
  }
  void allocate_block_gradients(const ChunkParams& p, int blocks) {
    const double unit = p.block_dense + p.block_experts;
    if (L_.pp == 1 && fsdp())
      walk_.allocate(MemoryTerm::gradients,
                     blocks * 4 * (p.block_dense / L_.shard + p.block_experts / L_.expert_shard));
    if (L_.sharding == StateSharding::replicated) walk_.allocate(MemoryTerm::gradients, blocks * 4 * unit);
  }
  void allocate_root_gradients(const ChunkParams& p) {
    if (fsdp()) walk_.allocate(MemoryTerm::gradients, 4 * p.root / L_.shard);
    if (L_.sharding == StateSharding::replicated) walk_.allocate(MemoryTerm::gradients, 4 * p.root);
  }

  // PP with FSDP: each unit's accumulated gradient reduce-scattered to its shard; then the
  // step, fused AdamW as the time model prices it (one kernel per tensor group, no temporaries;
  // torch's foreach variant would add an fp32 copy of the rank's parameters).
  void finish_step() {
    if (L_.pp > 1 && fsdp()) {
      walk_.release(MemoryTerm::gradients, 4 * whole_);
      walk_.allocate(MemoryTerm::gradients, 4 * shards_);
      for (int c : gathered_) walk_.release(MemoryTerm::buffers, kept_units(c));
      gathered_.clear();
    }
    walk_.release(MemoryTerm::activations, retained_);
    walk_.peak_at({"optimizer step"});
  }

  const IterationLayout& L_;
  const int stage_, chunks_;
  const BlockMemory& block_;
  const LossMemory& loss_;
  const Bytes head_;
  const std::vector<ChunkParams>& params_;
  const double a_;
  double whole_ = 0, shards_ = 0;
  Bytes retained_ = 0;
  std::set<int> gathered_, grads_;
  models::MemoryWalk walk_;
};

}  // namespace

models::MemoryReport transformer_memory(const IterationLayout& layout, const std::vector<int>& stage_of_rank,
                                        const platforms::GpuModel& gpu, int communicators) {
  models::MemoryReport report;
  report.capacity = gpu.memory;
  const models::RuntimeMemory runtime = models::runtime_memory(gpu, communicators);
  const LayoutMemory shared(layout);
  // One walk per stage some rank is in, in stage order.
  std::map<int, std::vector<int>> ranks_of_stage;
  for (std::size_t r = 0; r < stage_of_rank.size(); ++r)
    ranks_of_stage[stage_of_rank[r]].push_back(static_cast<int>(r));
  std::map<int, int> group_of_stage;
  for (auto& [stage, ranks] : ranks_of_stage) {
    group_of_stage[stage] = static_cast<int>(report.groups.size());
    const std::string label = layout.pp > 1 ? fmt::format("stage {}", stage) : "every rank";
    StageWalk walk(layout, shared, stage);
    report.groups.push_back(models::finish(label, std::move(ranks), walk.run(), runtime));
    report.groups.back().action_peak = std::move(walk.action_peak);
    report.groups.back().action_after = std::move(walk.action_after);
  }
  for (int stage : stage_of_rank) report.group_of_rank.push_back(group_of_stage.at(stage));
  return report;
}

}  // namespace stepsim::workloads::transformer
