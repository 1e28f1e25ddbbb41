#include "workloads/generators/transformer.hpp"
#include "workloads/generators/transformer_ops.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "models/compute/elementwise.hpp"


namespace stepsim::workloads::transformer {

using platforms::find_node;
using platforms::YamlReader;

namespace {

std::string child(const std::string& path, const std::string& key) { return path + "." + key; }

}  // namespace

ModelConfig read_model(const YAML::Node& doc, const YamlReader& reader) {
  const YAML::Node section = reader.require(doc, "", "model");
  reader.check_keys(section, "model",
                    {"layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "activation", "norm",
                     "positions", "bias", "tied_embeddings", "moe"});
  ModelConfig m;
  auto count = [&](const std::string& key, int limit = kMaxModelWidth) {
    return reader.get_int(reader.require(section, "model", key), child("model", key), 1, limit);
  };
  m.layers = count("layers", kMaxLayers);
  m.hidden = count("hidden");
  m.heads = count("heads");
  const YAML::Node heads = section["heads"];
  if (m.hidden % m.heads != 0)
    reader.fail("model.heads", heads,
                fmt::format("heads ({}) must divide hidden ({}) so every head has hidden/heads dimensions", m.heads,
                            m.hidden),
                "use a divisor of hidden, e.g. heads: " + std::to_string(m.hidden / 128 > 0 ? m.hidden / 128 : 1) +
                    " for 128-dimensional heads");
  const YAML::Node kv = section["kv_heads"];
  m.kv_heads = kv ? reader.get_int(kv, "model.kv_heads", 1) : m.heads;
  if (m.heads % m.kv_heads != 0)
    reader.fail("model.kv_heads", kv,
                fmt::format("kv_heads ({}) must divide heads ({}): each key/value head serves heads/kv_heads query heads",
                            m.kv_heads, m.heads),
                "use a divisor of heads (kv_heads = heads is plain multi-head attention)");
  m.ffn_hidden = count("ffn_hidden");
  m.vocab = count("vocab");
  if (const YAML::Node n = section["activation"])
    m.activation = reader.get_choice(n, "model.activation", {"swiglu", "gelu"}) == "gelu" ? Activation::gelu
                                                                                        : Activation::swiglu;
  if (const YAML::Node n = section["norm"])
    m.norm = reader.get_choice(n, "model.norm", {"rmsnorm", "layernorm"}) == "layernorm" ? Norm::layernorm
                                                                                        : Norm::rmsnorm;
  if (const YAML::Node n = section["positions"])
    m.positions = reader.get_choice(n, "model.positions", {"rope", "learned"}) == "learned" ? Positions::learned
                                                                                          : Positions::rope;
  if (const YAML::Node n = section["bias"]) m.bias = reader.get_bool(n, "model.bias");
  if (const YAML::Node n = section["tied_embeddings"]) m.tied_embeddings = reader.get_bool(n, "model.tied_embeddings");
  if (const YAML::Node moe = section["moe"]) {
    if (!moe.IsMap())
      reader.fail("model.moe", moe, "expected a section", "write e.g. moe: {experts: 8, top_k: 2}");
    reader.check_keys(moe, "model.moe", {"experts", "top_k", "capacity_factor", "routing_skew", "shared_experts"});
    if (const YAML::Node n = moe["shared_experts"]) m.moe.shared_experts = reader.get_int(n, "model.moe.shared_experts", 0);
    m.moe.experts = reader.get_int(reader.require(moe, "model.moe", "experts"), "model.moe.experts", 2, kMaxExperts);
    if (const YAML::Node n = moe["top_k"]) m.moe.top_k = reader.get_int(n, "model.moe.top_k", 1);
    if (m.moe.top_k > m.moe.experts)
      reader.fail("model.moe.top_k", moe["top_k"],
                  fmt::format("top_k ({}) exceeds the {} experts", m.moe.top_k, m.moe.experts),
                  "route each token to at most `experts` experts");
    if (const YAML::Node n = moe["capacity_factor"])
      m.moe.capacity_factor = reader.get_number(n, "model.moe.capacity_factor");
    if (const YAML::Node n = moe["routing_skew"]) {
      m.moe.routing_skew = reader.get_number(n, "model.moe.routing_skew");
      if (m.moe.routing_skew < 1)
        reader.fail("model.moe.routing_skew", n, "the busiest rank's load over the mean is at least 1",
                    "use 1 for balanced routing, e.g. 1.3 for a rank 30 % over the mean");
    }
    if (m.activation != Activation::swiglu)
      reader.fail("model.moe", moe, "experts are SwiGLU MLPs (Mixtral, torchtitan's MoE)", "set model.activation: swiglu");
  }
  return m;
}

TrainingConfig read_training(const YAML::Node& doc, const YamlReader& reader) {
  const YAML::Node section = reader.require(doc, "", "training");
  reader.check_keys(section, "training",
                    {"micro_batch", "sequence", "gradient_accumulation", "param_dtype", "reduce_dtype", "optimizer",
                     "max_norm", "cpu_op_gap", "compile", "float8", "float8_all_gather"});
  TrainingConfig t;
  t.micro_batch = reader.get_int(reader.require(section, "training", "micro_batch"), "training.micro_batch", 1);
  t.sequence = reader.get_int(reader.require(section, "training", "sequence"), "training.sequence", 1);
  if (const YAML::Node n = section["gradient_accumulation"])
    t.gradient_accumulation = reader.get_int(n, "training.gradient_accumulation", 1, kMaxGradientAccumulation);
  auto dtype = [&](const std::string& key, models::Dtype fallback) {
    const YAML::Node n = section[key];
    if (!n) return fallback;
    const std::string path = child("training", key);
    const std::string text = reader.get_choice(n, path, {"bf16", "bfloat16", "fp16", "float16", "fp32", "float32"});
    return models::parse_dtype(text, reader.where(path, n));
  };
  t.param_dtype = dtype("param_dtype", t.param_dtype);
  t.reduce_dtype = dtype("reduce_dtype", t.reduce_dtype);
  if (const YAML::Node n = section["optimizer"])
    t.optimizer = reader.get_choice(n, "training.optimizer", {"adamw", "sgd"}) == "sgd" ? Optimizer::sgd
                                                                                     : Optimizer::adamw;
  if (const YAML::Node n = section["max_norm"]) t.max_norm = reader.get_number(n, "training.max_norm");
  if (const YAML::Node n = section["cpu_op_gap"]) t.cpu_op_gap = reader.get_duration(n, "training.cpu_op_gap");
  if (const YAML::Node n = section["compile"]) t.compile = reader.get_bool(n, "training.compile");
  if (const YAML::Node n = section["float8"]) {
    const std::string recipe = reader.get_choice(n, "training.float8", {"none", "tensorwise", "rowwise"});
    t.float8 = recipe == "tensorwise" ? Float8::tensorwise : recipe == "rowwise" ? Float8::rowwise : Float8::none;
    if (t.float8 != Float8::none && !t.compile)
      reader.fail("training.float8", n, "Float8 linears are modelled as torchtitan runs them, under torch.compile",
                  "set training.compile: true with training.float8");
    if (t.float8 != Float8::none && t.param_dtype != models::Dtype::bf16)
      reader.fail("training.float8", n, "Float8 linears take bf16 activations (torchao casts from them)",
                  "set training.param_dtype: bf16 with training.float8");
  }
  if (const YAML::Node n = section["float8_all_gather"]) {
    t.float8_all_gather = reader.get_bool(n, "training.float8_all_gather");
    if (t.float8_all_gather && t.float8 != Float8::tensorwise)
      reader.fail("training.float8_all_gather", n,
                  "torchao all-gathers fp8 weights for tensorwise scaling only (enable_fsdp_float8_all_gather)",
                  "set training.float8: tensorwise, or float8_all_gather: false");
  }
  return t;
}

void check_dtypes(const TrainingConfig& t, const platforms::GpuModel& gpu, const YAML::Node& doc,
                  const YamlReader& reader) {
  const YAML::Node section = doc["training"];
  const YAML::Node dtype = section["param_dtype"];
  if (const std::string why = models::unsupported_dtype(gpu, t.param_dtype); !why.empty())
    reader.fail("training.param_dtype", dtype ? dtype : section,
                fmt::format("{} training needs what the GPU lacks: {}", models::to_string(t.param_dtype), why),
                "set training.param_dtype: fp16 (or fp32) on this GPU");
  if (t.float8 == Float8::none) return;
  if (const std::string why = models::unsupported_dtype(gpu, models::Dtype::fp8); !why.empty())
    reader.fail("training.float8", section["float8"], "Float8 linears need FP8 tensor cores: " + why,
                "set training.float8: none, or use an H100, H200 or B200 platform");
}

void check_context_split(const YAML::Node& doc, const YamlReader& reader, int cp, const TrainingConfig& t) {
  if (cp == 1 || t.sequence % (2 * cp) == 0) return;
  const YAML::Node sequence = find_node(doc, "training.sequence");
  reader.fail("training.sequence", sequence ? sequence : doc["training"],
              fmt::format("context parallelism over {} ranks cuts each sequence into {} equal chunks (one from each "
                          "end per rank), but {} tokens do not divide by {}",
                          cp, 2 * cp, t.sequence, 2 * cp),
              fmt::format("use a sequence length that is a multiple of {}", 2 * cp));
}

ContextParallel read_context_parallel(const YAML::Node& doc, const YamlReader& reader, int cp,
                                      const TrainingConfig& training) {
  check_context_split(doc, reader, cp, training);
  ContextParallel out{cp, false};
  const YAML::Node section = doc["context_parallel"];
  if (!section) return out;
  if (!section.IsMap())
    reader.fail("context_parallel", section, "expected a section", "write e.g. context_parallel: {rotate_method: alltoall}");
  reader.check_keys(section, "context_parallel", {"rotate_method"});
  if (cp == 1)
    reader.fail("context_parallel", section, "context_parallel configures parallelism.cp, which is 1",
                "set parallelism.cp > 1, or drop the context_parallel section");
  if (const YAML::Node n = section["rotate_method"])
    out.all_to_all = reader.get_choice(n, "context_parallel.rotate_method", {"allgather", "alltoall"}) == "alltoall";
  return out;
}

TensorParallel read_tensor_parallel(const YAML::Node& doc, const YamlReader& reader, int tp, const ModelConfig& m,
                                    const YAML::Node& tp_node) {
  TensorParallel out;
  out.tp = tp;
  if (const YAML::Node section = doc["tensor_parallel"]) {
    if (!section.IsMap())
      reader.fail("tensor_parallel", section, "expected a section", "write e.g. tensor_parallel: {sequence_parallel: true}");
    reader.check_keys(section, "tensor_parallel", {"sequence_parallel", "async"});
    if (const YAML::Node n = section["sequence_parallel"])
      out.sequence_parallel = reader.get_bool(n, "tensor_parallel.sequence_parallel");
    if (const YAML::Node n = section["async"]) {
      out.async = reader.get_bool(n, "tensor_parallel.async");
      if (out.async && !out.sequence_parallel)
        reader.fail("tensor_parallel.async", n,
                    "async TP pipelines sequence parallelism's all-gathers and reduce-scatters, which are off",
                    "set tensor_parallel.sequence_parallel: true, or async: false");
    }
  }
  if (tp == 1) return out;
  // Column-parallel wq / wk / wv split whole heads (torchtitan asserts n_kv_heads % tp == 0),
  // w1 / w3 split evenly; the vocabulary is padded to a multiple of tp (vocab_share).
  const std::vector<std::pair<const char*, int>> splits = {
      {"heads", m.heads}, {"kv_heads", m.kv_heads}, {"ffn_hidden", m.ffn_hidden}};
  for (const auto& [key, value] : splits)
    if (value % tp != 0)
      reader.fail("parallelism.tp", tp_node,
                  fmt::format("tp ({}) must divide model.{} ({}): tensor parallelism splits it evenly", tp, key, value),
                  fmt::format("use a tp that divides {} (and heads {}, kv_heads {}, ffn_hidden {})", key, m.heads,
                              m.kv_heads, m.ffn_hidden));
  return out;
}

std::vector<int> chunk_first_layers(int layers, int chunks) {
  std::vector<int> first;
  const int effective = layers + 2;   // the embedding and the output weigh one layer each
  int layer = 0;
  for (int c = 0; c < chunks; ++c) {
    first.push_back(layer);
    int share = effective / chunks + (c < effective % chunks ? 1 : 0);
    if (c == 0) --share;
    if (c + 1 == chunks) --share;
    layer = std::min(layers, layer + std::max(0, share));
  }
  first.push_back(layers);
  return first;
}

void check_layer_passes(const YAML::Node& doc, const YamlReader& reader, int pp, const ModelConfig& m,
                        const TrainingConfig& t) {
  const long long layers_per_stage = (m.layers + pp - 1) / pp;
  const long long passes = layers_per_stage * t.gradient_accumulation;
  if (passes > kMaxLayerPasses)
    reader.fail_at(doc, "training.gradient_accumulation",
                   fmt::format("{} micro-batches of {} layers per rank are {} layer passes, past the limit of {}",
                               t.gradient_accumulation, layers_per_stage, passes, kMaxLayerPasses),
                   fmt::format("simulate at most {} micro-batches (an iteration's time grows linearly in them once "
                               "the pipeline is full), or split the layers over more pipeline stages",
                               std::max<long long>(1, kMaxLayerPasses / layers_per_stage)));
}

PipelineConfig read_pipeline(const YAML::Node& doc, const YamlReader& reader, int pp, const ModelConfig& m,
                             const TrainingConfig& t) {
  PipelineConfig out;
  const YAML::Node section = doc["pipeline"];
  bool virtual_given = false;
  if (section) {
    if (!section.IsMap())
      reader.fail("pipeline", section, "expected a section", "write e.g. pipeline: {schedule: 1F1B}");
    reader.check_keys(section, "pipeline", {"schedule", "virtual_stages"});
    if (const YAML::Node n = section["schedule"]) {
      const std::string name =
          reader.get_choice(n, "pipeline.schedule", {"GPipe", "1F1B", "Interleaved1F1B", "LoopedBFS"});
      out.schedule = name == "GPipe"             ? PipelineSchedule::gpipe
                     : name == "Interleaved1F1B" ? PipelineSchedule::interleaved_1f1b
                     : name == "LoopedBFS"       ? PipelineSchedule::looped_bfs
                                                 : PipelineSchedule::one_f_one_b;
    }
    if (const YAML::Node n = section["virtual_stages"]) {
      out.virtual_stages = reader.get_int(n, "pipeline.virtual_stages", 1, kMaxLayers);
      virtual_given = true;
      if (!multi_stage(out.schedule) && out.virtual_stages > 1)
        reader.fail("pipeline.virtual_stages", n,
                    fmt::format("{} runs one chunk per rank", to_string(out.schedule)),
                    "use schedule: Interleaved1F1B or LoopedBFS for virtual stages, or drop virtual_stages");
    }
  }
  if (pp == 1) {
    // torchtitan applies no pipeline to a single stage: the schedule has nothing to order.
    if (virtual_given && out.virtual_stages > 1)
      reader.fail("pipeline.virtual_stages", section["virtual_stages"],
                  "virtual stages split a pipeline stage, but parallelism.pp is 1 (no pipeline)",
                  "set parallelism.pp > 1, or drop pipeline.virtual_stages");
    out.virtual_stages = 1;
    return out;
  }
  // torchtitan: two chunks per rank by default for multi-stage schedules.
  if (!virtual_given && multi_stage(out.schedule)) out.virtual_stages = 2;
  const YAML::Node at = section ? section : doc["parallelism"];
  const std::string where = section ? "pipeline" : "parallelism";
  if (out.schedule == PipelineSchedule::interleaved_1f1b && t.gradient_accumulation % pp != 0)
    reader.fail(where, at,
                fmt::format("Interleaved1F1B needs the micro-batches (training.gradient_accumulation = {}) to be a "
                            "multiple of pp ({})",
                            t.gradient_accumulation, pp),
                "set training.gradient_accumulation to a multiple of " + std::to_string(pp));
  const int chunks = pp * out.virtual_stages;
  if ((m.layers + 2) / chunks < 1)
    reader.fail(where, at,
                fmt::format("{} chunks (pp {} x virtual_stages {}) for {} layers plus the embedding and the output",
                            chunks, pp, out.virtual_stages, m.layers),
                "use fewer stages or virtual stages");
  return out;
}

Checkpointing read_checkpointing(const YAML::Node& node, const std::string& path, const YamlReader& reader) {
  const std::string text = reader.get_choice(node, path, {"none", "selective", "full"});
  return text == "full" ? Checkpointing::full : text == "selective" ? Checkpointing::selective : Checkpointing::none;
}

const char* to_string(Checkpointing checkpointing) {
  switch (checkpointing) {
    case Checkpointing::none: return "none";
    case Checkpointing::selective: return "selective";
    case Checkpointing::full: return "full";
  }
  return "?";
}


// wo and w2 (fc2) are row-parallel: their inputs are split over tp, their biases replicated.
bool row_parallel(const std::string& name) {
  return name == "attention.wo" || name == "feed_forward.w2" || name == "feed_forward.fc2";
}

double vocab_share(const ModelConfig& m, const TensorParallel& tp) {
  const double multiple = tp.vocab_multiple;
  return std::ceil(double(m.vocab) / tp.tp / multiple) * multiple;
}

double linear_weights(const ModelConfig& m, const TensorParallel& tp) {
  double total = 0;
  for (const auto& [name, in, out] : block_linears(m)) total += in * out / tp.tp;
  return total;
}

double expert_params(const ModelConfig& m) {
  return m.moe.enabled() ? m.moe.experts * 3.0 * m.hidden * m.ffn_hidden : 0;
}

double layer_params(const ModelConfig& m, const TensorParallel& tp) {
  double total = 2 * norm_params(m) + expert_params(m);
  for (const auto& [name, in, out] : block_linears(m)) {
    if (row_parallel(name))
      total += linear_params(m, in / tp.tp, out);
    else
      total += linear_params(m, in, out / tp.tp);
  }
  return total;
}

double embedding_params(const ModelConfig& m, const TrainingConfig& t, const TensorParallel& tp) {
  return vocab_share(m, tp) * m.hidden + (m.positions == Positions::learned ? double(t.sequence) * m.hidden : 0);
}

double head_params(const ModelConfig& m, const TensorParallel& tp) {
  return norm_params(m) + (m.tied_embeddings ? 0 : linear_params(m, m.hidden, vocab_share(m, tp)));
}

double total_params(const ModelConfig& m, const TrainingConfig& t, const TensorParallel& tp) {
  return embedding_params(m, t, tp) + m.layers * layer_params(m, tp) + head_params(m, tp);
}

double flop_params(const ModelConfig& m, const TrainingConfig& t) {
  const double table = double(m.vocab) * m.hidden;
  // A token runs top_k of the experts (torchtitan counts the active parameters of MoE models).
  const double idle_experts =
      m.moe.enabled() ? m.layers * expert_params(m) * (1 - double(m.moe.top_k) / m.moe.experts) : 0;
  return total_params(m, t) - table + (m.tied_embeddings ? table : 0) - idle_experts;
}

double model_flops_per_iteration(const ModelConfig& m, const TrainingConfig& t) {
  const double per_token = 6 * flop_params(m, t) + 12.0 * m.layers * m.heads * m.head_dim() * t.sequence;
  return per_token * t.tokens() * t.gradient_accumulation;
}

std::size_t kernel_count(const Kernels& kernels) {
  return static_cast<std::size_t>(std::count_if(kernels.begin(), kernels.end(), [](const Kernel& k) { return !k.comm; }));
}

models::KernelSpec elementwise(models::Dtype dtype, double elements, double bytes_read, double bytes_written,
                               double flops) {
  models::KernelSpec spec;
  spec.kind = "elementwise";
  spec.dtype = dtype;
  spec.params = {{"elements", elements}, {"bytes_read", bytes_read}, {"bytes_written", bytes_written}, {"flops", flops}};
  return spec;
}


namespace {

// The MoE MLP as torchtitan's MoE runs it (torchtitan/models/moe): router GEMM, softmax and
// top-k; the routed tokens permuted into expert order; with ep > 1 an all-to-all dispatching
// them to their experts' ranks and one combining the outputs back; the rank's experts as
// grouped GEMMs (a batched GEMM over its experts, each with an even share of the rows it
// receives); the outputs un-permuted and summed with the router's weights.
void moe_mlp(const OpFactory& f, const ModelConfig& m, double tokens, const ExpertParallel& ep,
             std::vector<ModuleOp>& ops) {
  const MoeConfig& moe = m.moe;
  const double a = f.act(), h = m.hidden, ffn = m.ffn_hidden, k = moe.top_k, experts = moe.experts;
  const double routed = tokens * k;
  // The busiest rank's rows: skewed routing, cut at the experts' capacity when there is one.
  const double load = moe.capacity_factor > 0 ? std::min(moe.routing_skew, moe.capacity_factor) : moe.routing_skew;
  const double rows = routed * load;
  const double local = experts / ep.ep;
  ops.push_back(f.linear("moe.router", tokens, h, experts));
  ops.push_back(f.pointwise({f.ew("moe.router.softmax", tokens * experts, a, 4, 4),
                             f.ew("moe.router.topk", tokens * experts, 4, 8 * k / experts, 2)}));
  ModuleOp permute;
  permute.forward = {f.ew("moe.permute", routed * h, a, a, 0)};
  permute.backward = {f.ew("moe.permute.backward", routed * h, 2 * a, a)};   // scatter-add back per token
  ops.push_back(permute);
  auto all_to_all = [&](const std::string& name) {
    ModuleOp exchange;
    const Bytes bytes = rows * h * a;
    exchange.forward = {OpFactory::comm(name, models::CollectiveOp::alltoall, bytes, Comm::Group::ep)};
    exchange.backward = {OpFactory::comm(name + ".backward", models::CollectiveOp::alltoall, bytes, Comm::Group::ep)};
    // _c10d_functional.all_to_all_single is on torchtitan's selective-AC save list
    // (torchtitan/distributed/activation_checkpoint.py).
    exchange.saved_by_selective = true;
    ops.push_back(exchange);
  };
  if (ep.ep > 1) all_to_all("moe.dispatch");
  {
    ModuleOp grouped;
    grouped.matmul = true;
    const double per = rows / local;   // rows per local expert
    auto gemm = [&](const std::string& name, double mm, double n, double kk) {
      Kernel g = {name, f.gemm(mm, n, kk)};
      g.spec.params["batch"] = local;
      return g;
    };
    grouped.forward = {gemm("moe.experts.w1", per, ffn, h), gemm("moe.experts.w3", per, ffn, h),
                       f.ew("moe.experts.silu", rows * ffn, a, a, 4), f.ew("moe.experts.mul", rows * ffn, 2 * a, a),
                       gemm("moe.experts.w2", per, h, ffn)};
    grouped.backward = {gemm("moe.experts.w2.dgrad", per, ffn, h), gemm("moe.experts.w2.wgrad", h, ffn, per),
                        f.ew("moe.experts.mul.backward_a", rows * ffn, 2 * a, a),
                        f.ew("moe.experts.mul.backward_b", rows * ffn, 2 * a, a),
                        f.ew("moe.experts.silu.backward", rows * ffn, 2 * a, a, 4),
                        gemm("moe.experts.w3.dgrad", per, h, ffn), gemm("moe.experts.w3.wgrad", ffn, h, per),
                        gemm("moe.experts.w1.dgrad", per, h, ffn), gemm("moe.experts.w1.wgrad", ffn, h, per),
                        f.ew("moe.experts.dgrad_sum", rows * h, 2 * a, a)};
    grouped.weight = "moe.experts";
    grouped.weight_params = local * 3 * h * ffn;
    ops.push_back(grouped);
  }
  if (ep.ep > 1) all_to_all("moe.combine");
  if (moe.shared_experts > 0) {
    // The shared experts' SwiGLU over every token, and the sum with the routed output.
    const double width = moe.shared_experts * ffn;
    ops.push_back(f.linear("moe.shared_experts.w1", tokens, h, width));
    ops.push_back(f.pointwise({f.ew("moe.shared_experts.silu", tokens * width, a, a, 4)}));
    ops.push_back(f.linear("moe.shared_experts.w3", tokens, h, width));
    ModuleOp mul;
    mul.forward = {f.ew("moe.shared_experts.mul", tokens * width, 2 * a, a)};
    mul.backward = {f.ew("moe.shared_experts.mul.backward_a", tokens * width, 2 * a, a),
                    f.ew("moe.shared_experts.mul.backward_b", tokens * width, 2 * a, a)};
    ops.push_back(mul);
    ops.push_back(f.linear("moe.shared_experts.w2", tokens, width, h));
    ModuleOp add;
    add.forward = {f.ew("moe.shared_experts.add", tokens * h, 2 * a, a)};
    add.backward = {f.ew("moe.shared_experts.add.backward", tokens * h, a, a, 0)};
    ops.push_back(add);
  }
  ModuleOp unpermute;
  // out[t] = sum over its k experts of score x output: read the routed rows, write the tokens.
  unpermute.forward = {f.ew("moe.unpermute", routed * h, a, a / k, 2)};
  unpermute.backward = {f.ew("moe.unpermute.backward", routed * h, 2 * a, a, 2)};
  ops.push_back(unpermute);
}

}  // namespace

namespace {

ModuleOp sdpa(models::KernelSpec spec) {
  ModuleOp op;
  op.attention = true;
  op.forward = {{"attention.sdpa", spec}};
  spec.params["backward"] = 1;
  op.backward = {{"attention.sdpa.backward", spec}};
  return op;
}

}  // namespace

// torch's ring attention (_templated_ring_attention and its backward, torch/distributed/tensor/
// experimental/_attention.py) over a rank's `tokens` queries of `q_width` (heads x head_dim)
// and keys and values of `kv_width` each. Step 0 attends the local chunks causally; step i > 0
// attends them to the keys and values of rank r - i: with the head-tail balancer either all
// queries to half the keys or half the queries to all of them, the same work, without the
// causal mask. torch: each step first concatenates K and V into the buffer it passes on
// (all-gathered once at step 0, or sent to the next rank with alltoall) and merges its output
// into an fp32 running one by the logsumexp (out - sigmoid(lse_b - lse) (out - out_b),
// lse - logsigmoid(lse - lse_b)); backward rotates K and V again and the fp32 K/V gradients
// rank to rank at every step (always alltoall), accumulating each step's gradients in fp32.
// Transformer Engine (AttnFuncWithCPAndKVP2P, Megatron's cp_comm_type p2p): K and V live in one
// buffer passed rank to rank (no concatenation, grouped-query K/V not expanded), each step's
// output corrected by two fused kernels (the logsumexp's and the output's), backward passing
// K/V and their gradients in the activation dtype and adding each step's gradients.
ModuleOp ring_attention(const OpFactory& f, const models::KernelSpec& local, double tokens, double q_width,
                        double kv_width, const ContextParallel& cp, RingFlavour flavour) {
  constexpr int kTags = 2000;   // clear of async TP's and Megatron's tags
  const bool torch = flavour == RingFlavour::torch;
  const double a = f.act(), e = tokens * q_width, kv_elements = 2 * tokens * kv_width;
  const double lse = tokens * local.param("heads");
  const double g = torch ? 4 : a;   // bytes of a K/V gradient element on the ring
  const Bytes kv = kv_elements * a, grad_kv = kv_elements * g;
  auto comm = [&](const std::string& name, models::CollectiveOp op, Bytes bytes, int tag) {
    Kernel k = OpFactory::comm(name, op, bytes, Comm::Group::cp);
    k.comm->tag = kTags + tag;
    return k;
  };
  auto step_spec = [&](int step, bool backward) {
    models::KernelSpec s = local;
    if (step > 0) {
      s.params["seq_kv"] /= 2;
      s.params["causal"] = 0;
    }
    s.params["backward"] = backward ? 1 : 0;
    return s;
  };
  const bool ring = cp.all_to_all || !torch;   // K/V passed rank to rank under each step
  // The key/value exchange that step i issues, and the wait step i + 1 does for it.
  auto rotate = [&](Kernels& out, const std::string& pass, int step) {
    if (torch) out.push_back(f.ew(fmt::format("attention.cp.{}step{}.cat_kv", pass, step), kv_elements, a, a, 0));
    if (ring)
      out.push_back(comm(fmt::format("attention.cp.{}step{}.send_kv", pass, step), models::CollectiveOp::sendrecv, kv,
                         step));
    else if (step == 0)
      out.push_back(comm(fmt::format("attention.cp.{}all_gather_kv", pass), models::CollectiveOp::allgather,
                         kv * cp.cp, 0));
  };
  auto wait_kv = [&](Kernels& out, int step) {
    if (ring || step == 1) out.push_back(Kernel::wait_for(kTags + (ring ? step - 1 : 0)));
  };
  ModuleOp op;
  op.attention = true;
  for (int i = 0; i < cp.cp; ++i) {
    const std::string at = fmt::format("attention.cp.step{}.", i);
    if (i > 0) wait_kv(op.forward, i);
    if (i + 1 < cp.cp) rotate(op.forward, "", i);
    op.forward.push_back({at + "sdpa", step_spec(i, false)});
    if (!torch) {
      if (i > 0)
        op.forward.insert(op.forward.end(), {f.ew(at + "lse_correction", lse, 8, 4, 4),
                                             f.ew(at + "out_correction", e, 4 + a, 4, 4)});
      continue;
    }
    op.forward.push_back(f.ew(at + "merge.float", e, a, 4, 0));
    if (i == 0) continue;
    op.forward.insert(op.forward.end(),
                      {f.ew(at + "merge.lse_diff", lse, 8, 4), f.ew(at + "merge.sigmoid", lse, 4, 4, 4),
                       f.ew(at + "merge.out_diff", e, 8, 4), OpFactory::strided(f.ew(at + "merge.scale", e, 8, 4)),
                       f.ew(at + "merge.out", e, 8, 4), f.ew(at + "merge.lse_logsigmoid", lse, 8, 4, 4),
                       f.ew(at + "merge.lse", lse, 8, 4)});
  }
  op.forward.push_back(f.ew("attention.cp.out.to", e, 4, a, 0));
  const int grad_tags = cp.cp;   // the kv exchanges use 0 .. cp - 1, the gradients' cp .. 2 cp - 1
  Kernels& b = op.backward;
  if (torch)
    b = {f.ew("attention.cp.backward.zeros_q", e, 0, 4, 0), f.ew("attention.cp.backward.zeros_kv", kv_elements, 0, 4, 0)};
  for (int i = 0; i < cp.cp; ++i) {
    const std::string at = fmt::format("attention.cp.backward.step{}.", i);
    if (i > 0) wait_kv(b, i);
    if (i + 1 < cp.cp) rotate(b, "backward.", i);
    b.push_back({at + "sdpa", step_spec(i, true)});
    if (i > 0) b.push_back(Kernel::wait_for(kTags + grad_tags + i - 1));
    b.push_back(f.ew(at + "accumulate_kv", kv_elements, g + a, g));
    if (torch) b.push_back(f.ew(at + "cat_grad_kv", kv_elements, 4, 4, 0));
    b.push_back(comm(at + "send_grad_kv", models::CollectiveOp::sendrecv, grad_kv, grad_tags + i));
    b.push_back(f.ew(at + "accumulate_q", e, g + a, g));
  }
  if (torch) b.push_back(f.ew("attention.cp.backward.grad_q.to", e, 4, a, 0));
  b.push_back(Kernel::wait_for(kTags + grad_tags + cp.cp - 1));
  if (torch) b.push_back(f.ew("attention.cp.backward.grad_kv.to", kv_elements, 4, a, 0));
  return op;
}

namespace {

// --- torch.compile of a block (torchtitan's apply_compile: each TransformerBlock on its own,
// fullgraph) --------------------------------------------------------------------------------
// Inductor fuses every chain of pointwise and reduction ops between two extern kernels (GEMMs,
// SDPA, collectives) into one generated kernel reading the chain's inputs once and writing its
// outputs once; AOTAutograd's backward graph is fused the same way. What that gives per module
// is below; GEMMs, SDPA, the transpose copy feeding wo and collectives stay as in eager.

// RMSNorm or LayerNorm as one kernel: reads the `inputs` tensors it sums first (the block input,
// or with the residual fused in, the residual and the attention output) and writes as many (the
// normalized output, and the residual sum it passes on). Backward: one row-reduction kernel for
// the input gradient, reading the saved input and the `gradients` flowing in (each consumer
// GEMM's data gradient, and the residual branch's: the fork's sum is fused here), and one
// column reduction over tokens for the weight gradient.
ModuleOp compiled_norm(const OpFactory& f, const ModelConfig& m, const std::string& name, double tokens, double inputs,
                       double gradients) {
  const double e = tokens * m.hidden, a = f.act();
  ModuleOp op;
  op.forward = {f.ew(name, e, inputs * a, inputs * a, 8)};
  op.backward = {f.ew(name + ".backward_input", e, (1 + gradients) * a, a, 8),
                 f.ew(name + ".backward_weight", e, 2 * a, 0, 2)};
  op.weight = name;
  op.weight_params = norm_params(m);
  return op;
}

// A linear as torchao's Float8Linear runs it under torch.compile (dynamic scaling; torchtitan's
// Float8 recipe, which converts every block linear): the input, weight and output gradient are
// cast to fp8 before each GEMM, which runs on the fp8 tensor cores and writes bf16. Tensorwise:
// one scale per tensor, so an amax reduction over the tensor, then the scaled cast (the output
// gradient's writing both layouts its two GEMMs read); rowwise: a scale per row, found and
// applied in one kernel per layout. Backward casts the saved high-precision input and weight
// again, along the layout its GEMM needs. Linears fed by the same input (wq / wk / wv, w1 / w3)
// share its casts (`cast_input` on the first only); weights all-gathered in fp8 arrive cast,
// and backward only transposes them.
ModuleOp float8_linear(const OpFactory& f, const TrainingConfig& t, const std::string& name, double tokens, double in,
                       double out, bool cast_input) {
  ModuleOp op = f.linear(name, tokens, in, out);
  const double a = f.act(), x = tokens * in, w = in * out, g = tokens * out;
  const bool rowwise = t.float8 == Float8::rowwise;
  // The casts of `elements` values read at `from` bytes each, written in `layouts` fp8 layouts.
  auto cast = [&](Kernels& into, const std::string& what, double elements, double from, double layouts) {
    const std::size_t first = into.size();
    if (rowwise) {
      for (int l = 0; l < layouts; ++l)
        into.push_back(f.ew(fmt::format("{}.{}_to_float8{}", name, what, l ? "_t" : ""), elements, from, 1, 3));
    } else {
      into.push_back(f.ew(name + "." + what + "_amax", elements, from, 0, 1));
      into.push_back(f.ew(name + "." + what + "_to_float8", elements, from, layouts, 2));
    }
    if (what.rfind("weight", 0) == 0)
      for (std::size_t k = first; k < into.size(); ++k) into[k].off_path = true;
  };
  auto fp8 = [](Kernel k) {
    k.spec.dtype = models::Dtype::fp8;
    return k;
  };
  Kernels forward, backward;
  if (cast_input) cast(forward, "input", x, a, 1);
  if (t.float8_all_gather)
    backward.push_back(f.ew(name + ".weight_t", w, 1, 1, 0));
  else
    cast(forward, "weight", w, a, 1);
  forward.push_back(fp8(op.forward.front()));
  cast(backward, "grad_output", g, a, 2);
  if (!t.float8_all_gather) cast(backward, "weight_t", w, a, 1);
  if (cast_input) cast(backward, "input_t", x, a, 1);
  backward.push_back(fp8(op.backward[0]));   // dgrad
  backward.push_back(fp8(op.backward[1]));   // wgrad
  backward.insert(backward.end(), op.backward.begin() + 2, op.backward.end());   // a bias's gradient
  op.forward = std::move(forward);
  op.backward = std::move(backward);
  return op;
}

// RoPE on q, and on k fused with repeat_kv's expansion (and v's expansion alone), each written
// in the layout SDPA reads: one kernel per tensor each way; repeat_kv's backward sums the
// expanded gradient back in the same kernel.
ModuleOp compiled_rope(const OpFactory& f, const ModelConfig& m, double tokens, double q, double kv) {
  const double a = f.act(), expand = q / kv;
  ModuleOp op;
  const bool rope = m.positions == Positions::rope;
  if (rope) {
    op.forward.push_back(f.ew("attention.rope_q", tokens * q, a, a, 3));
    op.backward.push_back(f.ew("attention.rope_q.backward", tokens * q, a, a, 3));
  }
  if (rope || expand > 1) {
    op.forward.push_back(f.ew("attention.rope_k", tokens * kv, a, a * expand, rope ? 3 : 0));
    op.backward.push_back(f.ew("attention.rope_k.backward", tokens * kv, a * expand, a, rope ? 3 + expand : expand));
  }
  if (expand > 1) {
    op.forward.push_back(f.ew("attention.repeat_kv_v", tokens * kv, a, a * expand, 0));
    op.backward.push_back(f.ew("attention.repeat_kv_v.backward", tokens * kv, a * expand, a, expand));
  }
  return op;
}

}  // namespace

Block layer_block(const ModelConfig& m, const TrainingConfig& t, Checkpointing checkpointing, bool cast_weights,
                  const TensorParallel& tp, const ContextParallel& cp, const ExpertParallel& ep) {
  const OpFactory f(m, t);
  const Dims full = dims(m);
  // A rank's share of the heads and of the MLP's hidden width; the norms and residuals see
  // 1/tp of the tokens under sequence parallelism.
  const Dims d{full.h, full.q / tp.tp, full.kv / tp.tp, full.f / tp.tp, full.v};
  const double tokens = t.tokens() / cp.cp, a = f.act();
  const double sp_tokens = tp.sequence_parallel ? tokens / tp.tp : tokens;
  const double heads = double(m.heads) / tp.tp;
  std::vector<ModuleOp> ops;
  auto linear = [&](const std::string& name, double in, double out, bool shares_input = false) {
    if (t.float8 != Float8::none) {
      ops.push_back(float8_linear(f, t, name, tokens, in, out, !shares_input));
      return;
    }
    ModuleOp op = f.linear(name, tokens, in, out);
    if (cast_weights) ops.push_back(f.weight_cast(name, op, in * out));
    ops.push_back(op);
  };
  // Compiled, the norms read the gradients of their consumers' GEMMs (summed before the
  // reduce-scatter under tensor parallelism) and of the residual branch.
  const bool compiled = t.compile;
  auto consumer_grads = [&](double gemms) { return (tp.tp > 1 ? 1 : gemms) + 1; };
  const double ffn_gemms = m.activation == Activation::swiglu ? 2 : 1;
  ops.push_back(compiled ? compiled_norm(f, m, "attention_norm", sp_tokens, 1, consumer_grads(3))
                         : f.norm("attention_norm", sp_tokens));
  // Float8 with sequence parallelism (tensorwise): torchao's Float8ColwiseParallel casts the
  // sequence shard to fp8 (its amax all-reduced over tp for one scale) and all-gathers fp8.
  const bool fp8_gather = t.float8 == Float8::tensorwise && tp.tp > 1 && tp.sequence_parallel;
  auto enter_tp = [&](const std::string& name) {
    if (tp.tp == 1) return;
    ModuleOp enter = f.tp_enter(name, tokens, tp);
    if (fp8_gather) {
      const double e = sp_tokens * d.h;
      enter.forward.front().comm->bytes /= a;
      enter.forward.insert(enter.forward.begin(),
                           {f.ew(name + ".input_amax", e, a, 0, 1),
                            OpFactory::comm(name + ".amax_all_reduce", models::CollectiveOp::allreduce, 4),
                            f.ew(name + ".input_to_float8", e, a, 1, 2)});
    }
    ops.push_back(enter);
  };
  enter_tp("attention.tp_input");
  linear("attention.wq", d.h, d.q, fp8_gather);
  linear("attention.wk", d.h, d.kv, true);
  linear("attention.wv", d.h, d.kv, true);
  if (compiled) {
    ops.push_back(compiled_rope(f, m, tokens, d.q, d.kv));
  } else if (m.positions == Positions::rope) {
    // apply_rotary_emb: view as complex fp32, multiply by freqs_cis, cast back; for q and k.
    Kernels rope;
    for (const auto& [which, width] : {std::pair{"q", d.q}, std::pair{"k", d.kv}}) {
      const std::string name = std::string("attention.rope_") + which;
      rope.push_back(f.widening(f.ew(name + ".float", tokens * width, a, 4)));
      rope.push_back(f.ew(name + ".mul", tokens * width, 4, 4, 3));
      rope.push_back(f.ew(name + ".type_as", tokens * width, 4, a));
    }
    ops.push_back(f.pointwise(rope));
  }
  if (!compiled && m.kv_heads < m.heads) {
    // repeat_kv expands K and V to every query head with a copy; its backward sums them back.
    ModuleOp repeat;
    for (const char* which : {"k", "v"}) {
      const std::string name = std::string("attention.repeat_kv_") + which;
      repeat.forward.push_back(f.strided(f.ew(name, tokens * d.kv, a, a * d.q / d.kv, 0)));
      repeat.backward.push_back(f.ew(name + ".backward", tokens * d.kv, a * d.q / d.kv, a));
    }
    ops.push_back(repeat);
  }
  {
    models::KernelSpec spec;
    spec.kind = "attention";
    spec.dtype = t.param_dtype;
    // K and V reach SDPA already expanded to `heads` heads by repeat_kv.
    spec.params = {{"batch", double(t.micro_batch)}, {"heads", heads}, {"kv_heads", heads},
                   {"seq_q", tokens / t.micro_batch}, {"seq_kv", tokens / t.micro_batch},
                   {"head_dim", double(m.head_dim())}, {"causal", 1}, {"backward", 0}};
    ops.push_back(cp.cp > 1 ? ring_attention(f, spec, tokens, d.q, d.q, cp, RingFlavour::torch) : sdpa(spec));
  }
  {
    // output.transpose(1, 2).contiguous(); the backward copies the gradient back.
    ModuleOp transpose;
    transpose.forward = {f.ew("attention.contiguous", tokens * d.q, a, a, 0)};
    transpose.backward = {f.ew("attention.contiguous.backward", tokens * d.q, a, a, 0)};
    ops.push_back(transpose);
  }
  linear("attention.wo", d.q, d.h);
  if (tp.tp > 1) ops.push_back(f.tp_leave("attention.tp_output", tokens, tp));
  // h = x + attention(...): the backward sums the two gradients where x forked.
  // Compiled, the fork's gradient sum is fused into the norm's backward (compiled_norm).
  auto residual = [&](const std::string& name) {
    ModuleOp add;
    add.forward = {f.ew(name, sp_tokens * d.h, 2 * a, a)};
    if (!compiled) add.backward = {f.ew(name + ".backward", sp_tokens * d.h, 2 * a, a)};
    ops.push_back(add);
  };
  if (compiled) {   // the residual sum and ffn_norm in one kernel
    ops.push_back(compiled_norm(f, m, "ffn_norm", sp_tokens, 2, consumer_grads(ffn_gemms)));
  } else {
    residual("attention_residual");
    ops.push_back(f.norm("ffn_norm", sp_tokens));
  }
  enter_tp("feed_forward.tp_input");
  if (m.moe.enabled()) {
    moe_mlp(f, m, tokens, ep, ops);
  } else if (m.activation == Activation::swiglu && compiled) {
    // silu(w1 x) * w3 x in one kernel; backward one kernel writing both gradients.
    linear("feed_forward.w1", d.h, d.f, fp8_gather);
    linear("feed_forward.w3", d.h, d.f, true);
    ModuleOp swiglu;
    swiglu.forward = {f.ew("feed_forward.silu_mul", tokens * d.f, 2 * a, a, 5)};
    swiglu.backward = {f.ew("feed_forward.silu_mul.backward", tokens * d.f, 3 * a, 2 * a, 8)};
    ops.push_back(swiglu);
    linear("feed_forward.w2", d.f, d.h);
  } else if (m.activation == Activation::swiglu) {
    // w2(F.silu(w1(x)) * w3(x)), in Python evaluation order.
    linear("feed_forward.w1", d.h, d.f);
    ops.push_back(f.pointwise({f.ew("feed_forward.silu", tokens * d.f, a, a, 4)}));
    linear("feed_forward.w3", d.h, d.f);
    ModuleOp mul;
    mul.forward = {f.ew("feed_forward.mul", tokens * d.f, 2 * a, a)};
    mul.backward = {f.ew("feed_forward.mul.backward_a", tokens * d.f, 2 * a, a),
                    f.ew("feed_forward.mul.backward_b", tokens * d.f, 2 * a, a)};
    ops.push_back(mul);
    linear("feed_forward.w2", d.f, d.h);
  } else {
    linear("feed_forward.fc1", d.h, d.f, fp8_gather);
    ops.push_back(f.pointwise({f.ew("feed_forward.gelu", tokens * d.f, a, a, 8)}));
    linear("feed_forward.fc2", d.f, d.h);
  }
  if (tp.tp > 1) ops.push_back(f.tp_leave("feed_forward.tp_output", tokens, tp));
  residual("ffn_residual");

  std::vector<std::string> registration;
  for (const auto& [name, _, __] : block_linears(m)) registration.push_back(name);
  if (m.moe.enabled()) registration.push_back("moe.experts");
  registration.insert(registration.end(), {"attention_norm", "ffn_norm"});

  // torchtitan's op-level selective AC (torchtitan/parallelisms/parallelize_llama.py,
  // _apply_ac_to_transformer_block): save the outputs of SDPA, of reduce-scatters
  // (_c10d_functional.reduce_scatter_tensor is on its save list) and of every mm except every
  // second one per block; recompute everything else.
  std::vector<bool> saved(ops.size());
  int mm = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    switch (checkpointing) {
      case Checkpointing::none: saved[i] = true; break;
      case Checkpointing::full: saved[i] = false; break;
      case Checkpointing::selective:
        saved[i] = ops[i].attention || ops[i].saved_by_selective || (ops[i].matmul && ++mm % 2 == 1);
        break;
    }
  }
  Block block = assemble(ops, registration, [&](std::size_t i) { return bool(saved[i]); });
  if (compiled)
    for (Kernels* pass : {&block.forward, &block.recompute, &block.backward})
      for (Kernel& k : *pass) k.compiled = true;
  if (tp.tp > 1 && tp.async) {
    for (Kernels* pass : {&block.forward, &block.recompute, &block.backward})
      *pass = micro_pipeline(*pass, tp.tp, tokens, tokens * m.hidden * a, fp8_gather ? tokens * m.hidden : 0);
  }
  return block;
}

namespace {

// A GEMM taking `rows` as its row operand (a forward or data-gradient GEMM; a weight gradient
// reduces over the rows instead).
bool consumes_rows(const Kernel& k, double rows) {
  const bool weight_gradient = k.name.size() >= 6 && k.name.compare(k.name.size() - 6, 6, ".wgrad") == 0;
  return !k.comm && !weight_gradient && k.spec.kind == "gemm" && k.spec.params.count("m") &&
         k.spec.params.at("m") == rows;
}

Kernel chunk_of(const Kernel& k, int chunk, int chunks) {
  Kernel out = k;
  out.name += fmt::format(".chunk{}", chunk);
  if (out.comm) {
    out.comm->bytes /= chunks;
    out.comm->tag = chunk;
  } else {
    out.spec.params["m"] /= chunks;
  }
  return out;
}

}  // namespace

Kernels micro_pipeline(const Kernels& kernels, int tp, double rows, Bytes activation, Bytes gathered_fp8) {
  // torch's micro_pipeline_tp pass (torch/_inductor/fx_passes/micro_pipeline_tp.py) fuses an
  // all-gather whose output is the row operand of matmuls (fused_all_gather_matmul) and a
  // matmul whose output is reduce-scattered (fused_matmul_reduce_scatter): both run as tp
  // steps, each a shard's transfer overlapping a shard's GEMM.
  auto is = [&](const Kernel& k, models::CollectiveOp op) {
    const bool sized = k.comm && (k.comm->bytes == activation ||
                                  (op == models::CollectiveOp::allgather && k.comm->bytes == gathered_fp8));
    return sized && k.comm->group == Comm::Group::tp && k.comm->tag < 0 && k.comm->op == op;
  };
  Kernels out;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const Kernel& k = kernels[i];
    if (is(k, models::CollectiveOp::allgather)) {
      // The GEMMs that take the gathered rows; kernels off the activations' path between them
      // (Float8 weight casts) run first.
      Kernels hoisted, gemms;
      std::size_t end = i + 1;
      for (; end < kernels.size(); ++end) {
        if (kernels[end].off_path) hoisted.push_back(kernels[end]);
        else if (consumes_rows(kernels[end], rows)) gemms.push_back(kernels[end]);
        else break;
      }
      if (!gemms.empty()) {
        out.insert(out.end(), hoisted.begin(), hoisted.end());
        for (int c = 0; c < tp; ++c) out.push_back(chunk_of(k, c, tp));
        for (int c = 0; c < tp; ++c)
          for (std::size_t g = 0; g < gemms.size(); ++g) {
            Kernel gemm = chunk_of(gemms[g], c, tp);
            if (g == 0) gemm.after = c;
            out.push_back(std::move(gemm));
          }
        i = end - 1;
        continue;
      }
    }
    if (consumes_rows(k, rows) && i + 1 < kernels.size() && is(kernels[i + 1], models::CollectiveOp::reduce_scatter)) {
      for (int c = 0; c < tp; ++c) {
        out.push_back(chunk_of(k, c, tp));
        out.push_back(chunk_of(kernels[i + 1], c, tp));
      }
      out.push_back(Kernel::wait_for(tp - 1));
      ++i;
      continue;
    }
    out.push_back(k);
  }
  return out;
}

Block embedding_block(const ModelConfig& m, const TrainingConfig& t, bool cast_weights, const TensorParallel& tp,
                      const ContextParallel& cp) {
  const OpFactory f(m, t);
  const double tokens = t.tokens() / cp.cp, h = m.hidden;
  std::vector<ModuleOp> ops;
  std::vector<std::string> registration = {"tok_embeddings"};
  ModuleOp lookup;
  // Row-parallel over the vocabulary: a rank looks up the rows it holds (zeros elsewhere).
  const double table = vocab_share(m, tp) * h;
  // Under torch.autocast the lookup is not an autocast op: the table and its rows stay fp32.
  const double w = cast_weights ? 4 : f.act();
  lookup.forward = {f.ew("tok_embeddings", tokens * h, w, w, 0)};
  // embedding_dense_backward: zero the table's gradient, scatter-add the rows; a tied output
  // projection's gradient is then accumulated into it.
  lookup.backward = {f.ew("tok_embeddings.backward_zero", table, 0, w, 0),
                     f.ew("tok_embeddings.backward_scatter", tokens * h, 2 * w, w)};
  if (m.tied_embeddings) lookup.backward.push_back(f.ew("tok_embeddings.backward_tied_sum", table, 2 * w, w));
  lookup.weight = "tok_embeddings";
  lookup.weight_params = table;
  ops.push_back(lookup);
  // The partial lookups are summed over tp: reduce-scattered onto the sequence shards, or
  // all-reduced (torchtitan's RowwiseParallel with output Shard(1); Megatron's g).
  if (tp.tp > 1) ops.push_back(f.tp_leave("tok_embeddings.tp_output", tokens, tp));
  if (m.positions == Positions::learned) {
    const double rows = tp.sequence_parallel ? tokens / tp.tp : tokens;
    ModuleOp positions;
    positions.forward = {f.ew("pos_embeddings", rows * h, w, w, 0), f.ew("pos_embeddings.add", rows * h, 2 * w, w)};
    // The gradient of the table sums the batch's gradients position by position.
    positions.backward = {f.ew("pos_embeddings.backward", rows * h, w, w * (double(t.sequence) / cp.cp) / tokens)};
    positions.weight = "pos_embeddings";
    positions.weight_params = double(t.sequence) * h;
    ops.push_back(positions);
    registration.push_back("pos_embeddings");
  }
  return assemble(ops, registration, [](std::size_t) { return true; });
}

Block head_block(const ModelConfig& m, const TrainingConfig& t, bool cast_weights, const TensorParallel& tp,
                 const ContextParallel& cp) {
  const OpFactory f(m, t);
  // Column-parallel output projection: a rank computes its share of the vocabulary's logits
  // and the loss runs vocabulary-parallel on them (torchtitan's loss_parallel).
  const double vocab = vocab_share(m, tp);
  const double tokens = t.tokens() / cp.cp, a = f.act(), logits = tokens * vocab;
  std::vector<ModuleOp> ops;
  ops.push_back(f.norm("norm", tp.sequence_parallel ? tokens / tp.tp : tokens));
  if (tp.tp > 1) ops.push_back(f.tp_enter("output.tp_input", tokens, tp));
  std::vector<std::string> registration = {"norm"};
  ModuleOp output = f.linear("output", tokens, m.hidden, vocab);
  if (m.tied_embeddings) output.weight.clear();   // its gradient lands in tok_embeddings
  else registration.push_back("output");
  if (cast_weights) ops.push_back(f.weight_cast("output", output, double(m.hidden) * vocab));
  ops.push_back(output);
  // torchtitan's loss_fn: cross_entropy(pred.flatten(0, 1).float(), labels): cast the logits to
  // fp32, log_softmax, nll_loss; backward: nll's one-hot gradient, log_softmax's, cast back.
  // PyTorch's softmax kernels (aten/src/ATen/native/cuda/SoftMax.cu) stage a row longer than 1024
  // in shared memory only when it fits the default 48 KiB per block; a vocabulary row does not,
  // so cunn_SoftMaxForward reads it three times (max, sum of exponentials, output) and
  // cunn_SoftMaxBackward reads the gradient twice and the output once. Measured on an H100
  // (validation/measurements/h100-sxm/fsdp-llama3-8b-4layers.json.gz, 16384 x 128256 fp32):
  // 11.09 and 11.36 ms, where four passes over the logits take 10.94 ms at the roof.
  const bool row_staged = vocab * 4.0 <= 48 * 1024;
  ModuleOp loss;
  loss.forward = {f.widening(f.ew("loss.float", logits, a, 4, 0)),
                  f.ew("loss.log_softmax", logits, row_staged ? 4 : 12, 4, 4), f.ew("loss.nll", tokens, 8, 4)};
  loss.backward = {f.ew("loss.nll.backward", logits, 0, 4, 0),
                   f.ew("loss.log_softmax.backward", logits, row_staged ? 8 : 12, 4, 3),
                   f.ew("loss.float.backward", logits, 4, a, 0)};
  if (tp.tp > 1) {
    // loss_parallel (torch.distributed.tensor.parallel): log_softmax all-reduces each token's
    // max and sum of exponentials over the shards, nll_loss the target's logit: 3 x T fp32.
    loss.forward.insert(loss.forward.begin() + 2,
                        {OpFactory::comm("loss.max.all_reduce", models::CollectiveOp::allreduce, tokens * 4),
                         OpFactory::comm("loss.sum_exp.all_reduce", models::CollectiveOp::allreduce, tokens * 4)});
    loss.forward.push_back(OpFactory::comm("loss.target.all_reduce", models::CollectiveOp::allreduce, tokens * 4));
  }
  ops.push_back(loss);
  return assemble(ops, registration, [](std::size_t) { return true; });
}

Kernels clip_norm_kernels(const TrainingConfig& t, double params) {
  if (t.max_norm <= 0) return {};
  // clip_grad_norm_(foreach=True): _foreach_norm reads every fp32 gradient once.
  return {{"clip_grad_norm.norm", models::multi_tensor(elementwise(models::Dtype::fp32, params, 4, 0, 2))}};
}

Kernels clip_scale_kernels(const TrainingConfig& t, double params) {
  if (t.max_norm <= 0) return {};
  return {{"clip_grad_norm.scale", models::multi_tensor(elementwise(models::Dtype::fp32, params, 4, 4, 1))}};
}

Kernels optimizer_kernels(const TrainingConfig& t, double params) {
  // fp32 parameters and states. AdamW (torch _fused_adamw_, torchtitan's default
  // optimizer.implementation = "fused"): reads param, grad, exp_avg, exp_avg_sq and writes
  // param, exp_avg, exp_avg_sq: 28 bytes per parameter. SGD with momentum: reads param, grad,
  // momentum, writes param, momentum: 20 bytes.
  if (t.optimizer == Optimizer::sgd)
    return {{"optimizer.sgd", models::multi_tensor(elementwise(models::Dtype::fp32, params, 12, 8, 3))}};
  return {{"optimizer.adamw", models::multi_tensor(elementwise(models::Dtype::fp32, params, 16, 12, 16))}};
}

ProgramBuilder::ProgramBuilder(std::string origin, int ranks, Seconds cpu_op_gap, std::size_t max_program_ops)
    : trace_(std::move(origin), ranks, max_program_ops), cpu_op_gap_(cpu_op_gap),
      writer_(std::make_unique<ProgramWriter>(trace_, cpu_op_gap)) {}

void ProgramBuilder::next_program(const std::vector<int>& ranks) {
  trace_.assign(ranks, writer_->take());
  writer_ = std::make_unique<ProgramWriter>(trace_, cpu_op_gap_);
  split_ = true;
}

void ProgramBuilder::kernels(int stream, const std::string& prefix, const Kernels& kernels) {
  for (const Kernel& k : kernels) {
    if (k.comm) throw std::logic_error("transformer: tensor-parallel collective " + k.name + " outside an emitter's tp group");
    writer_->kernel(stream, prefix + k.name, k.spec);
  }
}

void ProgramBuilder::collective(int stream, const std::string& name, models::CollectiveOp op, Bytes bytes, int group,
                                const std::string& algorithm, const models::AlgorithmOptions& options,
                                bool in_place) {
  const ProcessGroup& g = trace_.group_at(group);
  if (g.subgroups.empty() || (g.subgroups.front().size() < 2 && in_place)) return;
  CollectiveCall call;
  call.op = op;
  call.bytes = bytes;
  call.group = group;
  call.algorithm = algorithm;
  call.options = options;
  call.in_place = in_place;
  writer_->collective(stream, name, call);
}

void ProgramBuilder::set_work_and_note(const ModelConfig& model, const TrainingConfig& training, int sharers) {
  const double tokens = training.tokens() * training.gradient_accumulation;
  trace_.work() = {tokens / sharers, "tokens", model_flops_per_iteration(model, training) / sharers};
  note(fmt::format("model FLOPs per rank per iteration = {:.4g} (torchtitan's count: 6 x {:.4g} parameters without "
                   "the token embedding + 12 x layers x heads x head_dim x sequence, per token, x {:.0f} tokens{})",
                   trace_.work().model_flops_per_rank, flop_params(model, training), tokens,
                   sharers > 1 ? fmt::format(", over the {} ranks that share them", sharers) : ""));
}

Trace ProgramBuilder::finish() {
  if (!split_) trace_.assign_all(writer_->take());
  return trace_.finish();
}

}  // namespace stepsim::workloads::transformer
