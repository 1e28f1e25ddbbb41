/// @file `kind: fsdp`: one training iteration of a decoder-only transformer under PyTorch FSDP,
/// as torchtitan runs FSDP2 (torch.distributed fully_shard) by default. docs/fsdp.md has the
/// schema, the stream and event protocol, and every assumption.
///
/// The protocol follows FSDP2's FSDPParamGroup (torch/distributed/_composable/fsdp/
/// _fsdp_param_group.py, torch 2.5-2.6): all-gathers run on their own stream and are waited on
/// by the compute stream, which then copies the gathered parameters out; in forward, the next
/// all-gather waits for the previous unit's copy-out (FSDP2's all_gather_state); gradients are
/// copied into a reduce_dtype buffer on the compute stream, which first waits for the previous
/// unit's reduce-scatter (reduce_scatter_state), then reduce-scattered on their own stream;
/// HSDP all-reduces the shards on a third stream; backward ends with the compute stream waiting
/// for the last reduction. The collectives themselves run on their process group's NCCL stream.
///
/// `parallelism:` lays the ranks on a device mesh (workloads/mesh.hpp) and composes FSDP with
/// tensor, sequence, context, pipeline and expert parallelism as torchtitan does
/// (docs/parallelism.md); without it the iteration is the 1D one above, unchanged.
#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "models/compression/compressed_schedules.hpp"
#include "models/compute/elementwise.hpp"
#include "workloads/generators/megatron.hpp"
#include "workloads/generators/transformer.hpp"
#include "workloads/generators/transformer_emitter.hpp"
#include "workloads/generators/transformer_ops.hpp"
#include "workloads/mesh.hpp"
#include "workloads/pipeline_schedule.hpp"
#include "workloads/workload.hpp"

namespace stepsim::workloads {
namespace {

using namespace transformer;
using models::CollectiveOp;
using platforms::find_node;
using platforms::YamlReader;

enum class Strategy { full_shard, shard_grad_op, hybrid_shard, no_shard };
enum class BackwardPrefetch { backward_pre, backward_post, none };

/// @brief `fsdp.compression`: codecs for the parameter all-gathers and the gradient
/// reduce-scatters (Zhou et al., IPDPS 2023; docs/compression.md), empty where they stay raw.
struct FsdpCompression {
  std::string allgather;         ///< CODEC[:k=v], with dtype set to the all-gathered values'
  std::string reduce_scatter;    ///< likewise for the reduced gradients
  models::CompressionMode mode = models::CompressionMode::collective;
  Bytes threshold = 1024.0 * 1024;   ///< collective: smaller collectives stay raw; p2p: smaller messages
};

struct FsdpConfig {
  Strategy strategy = Strategy::full_shard;
  bool reshard_after_forward = true;
  bool forward_prefetch = false;
  BackwardPrefetch backward_prefetch = BackwardPrefetch::backward_pre;
  bool limit_all_gathers = false;
  Checkpointing checkpointing = Checkpointing::none;
  bool wrap_layers = true;   ///< one unit per transformer block plus the root; else one unit
  std::string algorithm = "nccl";   ///< fsdp.collectives.algo: every FSDP collective's algorithm
  int channels = 0;                 ///< fsdp.collectives.channels (0: the algorithm decides)
  FsdpCompression compression;
};

/// @brief `fsdp.collectives: {algo, channels}`: what every collective of the iteration runs.
void read_collectives(const YAML::Node& section, const YamlReader& reader, FsdpConfig& c) {
  const YAML::Node node = section["collectives"];
  if (!node) return;
  if (!node.IsMap())
    reader.fail("fsdp.collectives", node, "expected a section", "write e.g. collectives: {algo: ring, channels: 1}");
  reader.check_keys(node, "fsdp.collectives", {"algo", "channels"});
  if (const YAML::Node algo = node["algo"]) {
    c.algorithm = reader.get_string(algo, "fsdp.collectives.algo");
    std::vector<std::string> names;
    for (const models::AlgorithmInfo* info : models::AlgorithmRegistry::instance().all()) names.push_back(info->name);
    if (std::find(names.begin(), names.end(), c.algorithm) == names.end())
      reader.fail("fsdp.collectives.algo", algo, "unknown algorithm '" + c.algorithm + "'",
                  "use one of: " + platforms::join(names));
  }
  if (const YAML::Node channels = node["channels"]) c.channels = reader.get_int(channels, "fsdp.collectives.channels", 1);
}

/// @brief The codec text at `path` for collectives that carry `values`: parsed (unknown codecs,
/// keys and values are ConfigErrors at that line), and for a codec that takes a `dtype`, given
/// the values' dtype when the text leaves it out (a dtype that disagrees is an error: the ratio
/// depends on it). `cast` narrows fp32 values only.
std::string read_codec(const YAML::Node& node, const std::string& path, models::Dtype values, const YamlReader& reader) {
  std::string text = reader.get_string(node, path);
  const std::string where = reader.where(path, node);
  models::parse_codec(text, where);   // unknown codecs, keys and values fail here, at the key's line
  const std::string name = text.substr(0, text.find(':'));
  const std::string dtype = models::to_string(values);
  if (name == "cast" && values != models::Dtype::fp32)
    reader.fail(path, node, fmt::format("cast narrows fp32 values, but these collectives carry {}", dtype),
                "use another codec, or set the training dtype to fp32");
  bool has_dtype = false;
  for (const models::CodecParam& param : models::CodecRegistry::instance().get(name, where).params)
    has_dtype = has_dtype || param.name == "dtype";
  if (!has_dtype) return text;
  const std::size_t colon = text.find(':');
  // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive) on "," + substr.
  std::string params;
  if (colon != std::string::npos) {
    params = ",";
    params += text.substr(colon + 1);
    params += ",";
  }
  const std::size_t given = params.find(",dtype=");
  if (given == std::string::npos) {
    text += (colon == std::string::npos ? ":" : ",") + std::string("dtype=") + dtype;
    models::parse_codec(text, where);   // a dtype the codec does not take (e.g. fp8) fails here
    return text;
  }
  const std::string said = params.substr(given + 7, params.find(',', given + 1) - given - 7);
  if (said != dtype)
    reader.fail(path, node, fmt::format("the codec says dtype={} but these collectives carry {} values", said, dtype),
                "drop dtype= (it follows the training dtypes), or change training.param_dtype / reduce_dtype");
  return text;
}

/// @brief `fsdp.compression` (docs/fsdp.md); after read_collectives.
void read_compression(const YAML::Node& section, const YamlReader& reader, const TrainingConfig& training,
                      FsdpConfig& c) {
  const YAML::Node node = section["compression"];
  if (!node) return;
  if (!node.IsMap())
    reader.fail("fsdp.compression", node, "expected a section",
                "write e.g. compression: {allgather: \"zfp:rate=8\", reduce_scatter: \"zfp:rate=8\"}");
  reader.check_keys(node, "fsdp.compression", {"allgather", "reduce_scatter", "mode", "threshold"});
  FsdpCompression& z = c.compression;
  if (const YAML::Node n = node["allgather"]) z.allgather = read_codec(n, "fsdp.compression.allgather", training.param_dtype, reader);
  if (const YAML::Node n = node["reduce_scatter"])
    z.reduce_scatter = read_codec(n, "fsdp.compression.reduce_scatter", training.reduce_dtype, reader);
  if (z.allgather.empty() && z.reduce_scatter.empty())
    reader.fail("fsdp.compression", node, "no codec given: nothing would be compressed",
                "add allgather: and/or reduce_scatter: with a codec, e.g. \"zfp:rate=8\"");
  if (const YAML::Node n = node["mode"])
    z.mode = reader.get_choice(n, "fsdp.compression.mode", {"collective", "p2p"}) == "p2p" ? models::CompressionMode::p2p
                                                                                          : models::CompressionMode::collective;
  if (const YAML::Node n = node["threshold"]) z.threshold = reader.get_size(n, "fsdp.compression.threshold");
  if (c.strategy == Strategy::no_shard)
    reader.fail("fsdp.compression", node, "NO_SHARD issues no all-gathers or reduce-scatters to compress",
                "use a sharding strategy, or drop fsdp.compression");
  const std::string why =
      models::compression_unsupported({z.allgather, z.mode, z.threshold}, c.algorithm, models::CollectiveOp::allgather);
  if (!why.empty())
    reader.fail("fsdp.compression", node, fmt::format("{} (fsdp.collectives.algo is '{}')", why, c.algorithm),
                "set fsdp.collectives: {algo: ring, channels: 1} (MVAPICH2-GDR's ring, as Zhou et al.), or "
                "mode: p2p to compress the large messages of any algorithm");
}

FsdpConfig read_fsdp(const YAML::Node& doc, const YamlReader& reader, const TrainingConfig& training) {
  const YAML::Node section = reader.require(doc, "", "fsdp");
  reader.check_keys(section, "fsdp",
                    {"strategy", "reshard_after_forward", "forward_prefetch", "backward_prefetch", "limit_all_gathers",
                     "activation_checkpointing", "wrap", "collectives", "compression"});
  FsdpConfig c;
  const YAML::Node strategy = reader.require(section, "fsdp", "strategy");
  const std::string s =
      reader.get_choice(strategy, "fsdp.strategy", {"FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD", "NO_SHARD"});
  c.strategy = s == "SHARD_GRAD_OP" ? Strategy::shard_grad_op
               : s == "HYBRID_SHARD" ? Strategy::hybrid_shard
               : s == "NO_SHARD"     ? Strategy::no_shard
                                     : Strategy::full_shard;
  c.reshard_after_forward = c.strategy != Strategy::shard_grad_op;
  if (const YAML::Node n = section["reshard_after_forward"]) {
    const bool value = reader.get_bool(n, "fsdp.reshard_after_forward");
    if (c.strategy == Strategy::shard_grad_op && value)
      reader.fail("fsdp.reshard_after_forward", n, "SHARD_GRAD_OP keeps parameters unsharded after forward",
                  "drop reshard_after_forward, or use strategy: FULL_SHARD to reshard after forward");
    if (c.strategy == Strategy::no_shard)
      reader.fail("fsdp.reshard_after_forward", n, "NO_SHARD never shards parameters",
                  "drop reshard_after_forward, or use a sharding strategy");
    c.reshard_after_forward = value;
  }
  if (const YAML::Node n = section["forward_prefetch"]) c.forward_prefetch = reader.get_bool(n, "fsdp.forward_prefetch");
  if (const YAML::Node n = section["backward_prefetch"]) {
    const std::string p = reader.get_choice(n, "fsdp.backward_prefetch", {"BACKWARD_PRE", "BACKWARD_POST", "NONE"});
    c.backward_prefetch = p == "BACKWARD_POST" ? BackwardPrefetch::backward_post
                          : p == "NONE"        ? BackwardPrefetch::none
                                               : BackwardPrefetch::backward_pre;
  }
  if (const YAML::Node n = section["limit_all_gathers"]) c.limit_all_gathers = reader.get_bool(n, "fsdp.limit_all_gathers");
  if (const YAML::Node n = section["activation_checkpointing"])
    c.checkpointing = read_checkpointing(n, "fsdp.activation_checkpointing", reader);
  if (const YAML::Node n = section["wrap"]) c.wrap_layers = reader.get_choice(n, "fsdp.wrap", {"layer", "model"}) == "layer";
  read_collectives(section, reader, c);
  read_compression(section, reader, training, c);
  return c;
}

const char* to_string(Strategy s) {
  switch (s) {
    case Strategy::full_shard: return "FULL_SHARD";
    case Strategy::shard_grad_op: return "SHARD_GRAD_OP";
    case Strategy::hybrid_shard: return "HYBRID_SHARD";
    case Strategy::no_shard: return "NO_SHARD";
  }
  return "?";
}

/// @brief The ranks of each node touched by the job, in rank order; ConfigError when nodes hold
/// different numbers of ranks (HSDP needs equal shard groups).
std::vector<std::vector<int>> ranks_by_node(const JobContext& job, const YamlReader& reader, const YAML::Node& doc) {
  std::map<int, std::vector<int>> by_node;
  for (int r = 0; r < job.ranks(); ++r) by_node[job.node_of(r)].push_back(r);
  std::vector<std::vector<int>> out;
  for (auto& [node, ranks] : by_node) {
    if (!out.empty() && ranks.size() != out.front().size())
      reader.fail_at(doc, "fsdp.strategy",
                     fmt::format("HYBRID_SHARD shards within a node, but node {} holds {} ranks and node {} holds {}",
                              by_node.begin()->first, out.front().size(), node, ranks.size()),
                     "allocate the same number of GPUs on every node (--gpus), or use FULL_SHARD");
    out.push_back(ranks);
  }
  return out;
}

/// @brief Emits one iteration: one program every rank runs, or with pipeline parallelism one per
/// stage, which that stage's ranks of every replica share. The device mesh, tensor, context and
/// expert parallelism are docs/parallelism.md's.
class FsdpEmitter : public TransformerEmitter {
 public:
  FsdpEmitter(const ModelConfig& model, const TrainingConfig& training, const FsdpConfig& fsdp, const JobContext& job,
              const YamlReader& reader, const YAML::Node& doc)
      : TransformerEmitter(model, training, job, reader), c_(fsdp) {
    par_ = read_parallelism(doc, reader, job.ranks());   // without the section: every rank in dp_shard
    if (doc["parallelism"]) {
      check_modelled(par_, reader, doc["parallelism"]);
      tp_ = read_tensor_parallel(doc, reader, par_.tp, m_, find_node(doc, "parallelism.tp"));
      if (tp_.async && !t_.compile)   // torchtitan: "Async TP requires --training.compile"
        reader.fail_at(doc, "tensor_parallel.async",
                       "torchtitan runs async TP as a torch.compile pass (micro_pipeline_tp)",
                       "set training.compile: true with tensor_parallel.async");
      pipe_ = read_pipeline(doc, reader, par_.pp, m_, t_);
      if (par_.pp > 1 && !c_.wrap_layers)
        reader.fail_at(doc, "fsdp.wrap", "pipeline stages shard each of their blocks (torchtitan)",
                       "use fsdp.wrap: layer with parallelism.pp");
      make_mesh_groups(par_, reader, doc);
    } else {
      tp_ = read_tensor_parallel(doc, reader, 1, m_, YAML::Node());
      pipe_ = read_pipeline(doc, reader, 1, m_, t_);
      make_groups(job, reader, doc);
    }
    check_layer_passes(doc, reader, par_.pp, m_, t_);
    cp_ = read_context_parallel(doc, reader, par_.cp, t_);
    if (m_.moe.enabled() && t_.compile)
      reader.fail_at(doc, "training.compile", "torch.compile of MoE blocks is not modelled yet",
                     "set training.compile: false for a model with model.moe");
    if (m_.moe.enabled()) {
      if (!c_.wrap_layers || c_.strategy == Strategy::no_shard)
        reader.fail("fsdp", doc["fsdp"], "MoE blocks shard their experts as units of their own (torchtitan)",
                    "use fsdp.wrap: layer and a sharding strategy with model.moe");
      if (efsdp_group_ < 0) {   // no parallelism section: the experts shard with the rest
        efsdp_group_ = shard_group_;
        efsdp_size_ = shard_size_;
      }
    }
    if (par_.pp == 1) {
      make_units();
      open_streams();
    }
  }

  Trace emit() {
    const Blocks blocks{embedding_block(m_, t_, false, tp_, cp_),
                        layer_block(m_, t_, c_.checkpointing, false, tp_, cp_, ExpertParallel{par_.ep}),
                        head_block(m_, t_, false, tp_, cp_)};
    if (par_.pp > 1) return emit_pipeline(blocks);
    for (int micro = 0; micro < t_.gradient_accumulation; ++micro) {
      forward(blocks.embedding, blocks.layer, blocks.head);
      end_action(0);
      backward(blocks.embedding, blocks.layer, blocks.head);
      end_action(0);
    }
    optimizer_step();
    add_notes(blocks.embedding, blocks.layer, blocks.head);
    return with_memory(b_.finish(), fsdp_iteration_layout({0, m_.layers}));
  }

 private:
  enum class State { sharded, gathering, unsharded };
  struct Unit {
    std::string name;
    double params = 0;
    bool reshard_after_forward = false;
    State state = State::sharded;
    int group = -1;   ///< its shard group (-1: the FSDP group); a block's experts: efsdp
    int shard = 0;    ///< that group's size (0: the FSDP group's)
    double fp8 = 0;   ///< of `params`, the Float8 linears' weights all-gathered in fp8
  };
  // Bytes per parameter a unit's all-gather carries: fp8 weights 1, the rest param_dtype.
  double gathered_bytes(const Unit& unit) const { return ((unit.params - unit.fp8) * a_ + unit.fp8) / unit.params; }
  int group_of(const Unit& unit) const { return unit.group >= 0 ? unit.group : shard_group_; }
  int shard_of(const Unit& unit) const { return unit.shard > 0 ? unit.shard : shard_size_; }

  IterationLayout fsdp_iteration_layout(const std::vector<int>& chunk_first) const {
    IterationLayout layout = iteration_layout(chunk_first);
    layout.cp = cp_;
    layout.checkpointing = c_.checkpointing;
    layout.sharding = c_.strategy == Strategy::no_shard         ? StateSharding::replicated
                      : c_.strategy == Strategy::shard_grad_op ? StateSharding::fsdp_unsharded
                                                               : StateSharding::fsdp;
    layout.shard = shard_size_;
    layout.replicate = c_.strategy == Strategy::hybrid_shard ? replicate_size_ : 1;
    layout.expert_shard = efsdp_size_ > 0 ? efsdp_size_ : shard_size_;
    layout.reshard_after_forward = c_.reshard_after_forward;
    return layout;
  }

  void make_groups(const JobContext& job, const YamlReader& reader, const YAML::Node& doc) {
    ProcessGroup shard{"fsdp", {}, std::vector<int>(static_cast<std::size_t>(job.ranks()), 0)};
    if (c_.strategy == Strategy::hybrid_shard) {
      const std::vector<std::vector<int>> nodes = ranks_by_node(job, reader, doc);
      ProcessGroup replicate{"replicate", {}, std::vector<int>(static_cast<std::size_t>(job.ranks()), 0)};
      replicate.subgroups.resize(nodes.front().size());
      for (std::size_t n = 0; n < nodes.size(); ++n) {
        for (std::size_t local = 0; local < nodes[n].size(); ++local) {
          shard.subgroup_of_rank[static_cast<std::size_t>(nodes[n][local])] = static_cast<int>(n);
          replicate.subgroup_of_rank[static_cast<std::size_t>(nodes[n][local])] = static_cast<int>(local);
          replicate.subgroups[local].push_back(nodes[n][local]);
        }
      }
      shard.subgroups = nodes;
      shard_size_ = static_cast<int>(nodes.front().size());
      replicate_size_ = static_cast<int>(nodes.size());
      shard_group_ = b_.group(std::move(shard));
      replicate_group_ = b_.group(std::move(replicate));
      return;
    }
    shard.subgroups.emplace_back();
    for (int r = 0; r < job.ranks(); ++r) shard.subgroups[0].push_back(r);
    shard_size_ = c_.strategy == Strategy::no_shard ? 1 : job.ranks();
    replicate_size_ = c_.strategy == Strategy::no_shard ? job.ranks() : 1;
    shard_group_ = b_.group(std::move(shard));
  }

  // parallelism: FSDP shards over dp_shard x cp (torchtitan's fsdp axis), HSDP replicates over
  // dp_replicate, NO_SHARD all-reduces over both; tensor parallelism runs within tp.
  void make_mesh_groups(const Parallelism& par, const YamlReader& reader, const YAML::Node& doc) {
    const DeviceMesh mesh = dense_mesh(par);
    if (par.dp_replicate > 1 && (c_.strategy == Strategy::full_shard || c_.strategy == Strategy::shard_grad_op))
      reader.fail_at(doc, "parallelism.dp_replicate",
                     fmt::format("{} shards over every data-parallel rank, but dp_replicate is {}", to_string(c_.strategy),
                              par.dp_replicate),
                     "use fsdp.strategy: HYBRID_SHARD (shard within dp_shard, replicate over dp_replicate), or fold "
                     "dp_replicate into dp_shard");
    if (c_.strategy == Strategy::no_shard) {
      shard_group_ = b_.group(mesh.group("fsdp", {"dp_replicate", "dp_shard", "cp"}));
      replicate_size_ = par.dp_replicate * par.dp_shard * par.cp;
    } else {
      shard_group_ = b_.group(mesh.group("fsdp", {"dp_shard", "cp"}));
      shard_size_ = par.dp_shard * par.cp;
      replicate_size_ = par.dp_replicate;
      if (c_.strategy == Strategy::hybrid_shard) replicate_group_ = b_.group(mesh.group("replicate", {"dp_replicate"}));
    }
    make_model_parallel_groups(mesh);
  }

  // What the transformer generators do not build yet is refused, not approximated.
  void check_modelled(const Parallelism& par, const YamlReader& reader, const YAML::Node& section) const {
    if (par.ep > 1 && !m_.moe.enabled())
      reader.fail("parallelism.ep", section["ep"], "expert parallelism needs experts", "add model.moe, or drop parallelism.ep");
    if (m_.moe.enabled() && par.tp > 1)
      reader.fail("parallelism.tp", section["tp"],
                  "tensor parallelism of MoE blocks (torchtitan's expert tensor parallelism) is not modelled yet",
                  "set parallelism.tp to 1 for a model with model.moe");
  }

  void open_streams() {
    compute_ = b_.stream("compute");
    if (c_.strategy != Strategy::no_shard) {
      all_gather_ = b_.stream("all_gather");
      reduce_scatter_ = b_.stream("reduce_scatter");
    }
    if (c_.strategy == Strategy::no_shard || c_.strategy == Strategy::hybrid_shard) all_reduce_ = b_.stream("all_reduce");
  }

  // --- pipeline parallelism ------------------------------------------------------------------
  // One program per stage (its ranks of every replica share it: their sends name pp ranks).
  // torchtitan with PP: each chunk's blocks and its root are FSDP units kept unsharded after
  // forward (reshard_after_forward is off with PP); torch.distributed.pipelining turns gradient
  // sync off for every micro-batch and reduce-scatters each unit once after the last backward
  // (perform_reduce_grad); activations go forward and their gradients back over the pp group.
  Trace emit_pipeline(const Blocks& blocks) {
    const int chunks = par_.pp * pipe_.virtual_stages;
    const std::vector<int> first = chunk_first_layers(m_.layers, chunks);
    for (int stage = 0; stage < par_.pp; ++stage) {
      begin_stage(stage, first);
      run_stage(stage, first, blocks);
      reduce_stage();
      sync_tied_embeddings(stage);
      optimizer_step();
      hand_to_stage(stage);
    }
    add_notes(blocks.embedding, blocks.layer, blocks.head);
    add_pipeline_note(first);
    return with_memory(b_.finish(), fsdp_iteration_layout(first));
  }

  // The stage's units (per chunk: its root, then its blocks) and fresh per-program state.
  void begin_stage(int stage, const std::vector<int>& first) {
    units_.clear();
    chunk_units_.clear();
    chunk_first_ = first;
    layer_unit_.assign(static_cast<std::size_t>(m_.layers), -1);
    if (m_.moe.enabled()) expert_unit_.assign(static_cast<std::size_t>(m_.layers), -1);
    stage_local_params_ = 0;
    previous_copy_out_ = previous_reduce_scatter_ = last_reduction_ = -1;
    free_events_.clear();
    open_streams();
    open_pipeline_streams();
    const int chunks = static_cast<int>(first.size()) - 1;
    for (int c = stage; c < chunks; c += par_.pp) {
      std::vector<int>& ids = chunk_units_[c];
      const double root = (c == 0 ? embedding_params(m_, t_, tp_) : 0) +
                          (c + 1 == chunks ? head_params(m_, tp_) + tied_output_copy() : 0);
      ids.push_back(static_cast<int>(units_.size()));
      units_.push_back({fmt::format("chunks.{}.root", c), root, false});
      for (int i = first[static_cast<std::size_t>(c)]; i < first[static_cast<std::size_t>(c) + 1]; ++i) {
        add_layer_units(i, false);
        ids.push_back(layer_unit_[static_cast<std::size_t>(i)]);
      }
    }
    for (const Unit& unit : units_) stage_local_params_ += unit.params / shard_of(unit);
  }

  // Tied embeddings across stages, as Megatron-LM keeps them: the last stage holds its own copy
  // of the token embedding as the output projection, and the first and last stages all-reduce
  // the two copies' gradients (its embedding group, finalize_model_grads) before the step.
  void sync_tied_embeddings(int stage) {
    if (embedding_group_ < 0 || (stage != 0 && stage + 1 != par_.pp)) return;
    // FSDP has reduce-scattered both copies' gradients alike: each rank all-reduces its shard.
    collective(compute_, "tok_embeddings.tied.all_reduce", CollectiveOp::allreduce,
               tied_output_copy() / shard_size_ * r_, embedding_group_);
  }

  // A chunk's root and blocks are gathered as its forward reaches them.
  void enter_chunk_forward(const PipelineAction& a) override {
    const int root = chunk_units_.at(a.chunk).front();
    previous_copy_out_ = -1;
    unshard(root);
    wait_for_unshard(root, true);
  }
  void enter_layer_forward(const PipelineAction&, int layer) override {
    unshard(layer_unit_[static_cast<std::size_t>(layer)]);
    wait_for_unshard(layer_unit_[static_cast<std::size_t>(layer)], true);
    unshard_experts(layer, true);
  }

  // After the last micro-batch: every unit's gradients, last block first, chunk by chunk from
  // the last (the order their backwards finished in).
  void reduce_stage() {
    previous_reduce_scatter_ = -1;
    for (auto it = chunk_units_.rbegin(); it != chunk_units_.rend(); ++it) {
      const std::vector<int>& ids = it->second;
      for (std::size_t k = ids.size(); k-- > 0;) {
        if (units_[static_cast<std::size_t>(ids[k])].params > 0) reduce(ids[k]);
        const int e = k > 0 ? expert_unit(chunk_first_[static_cast<std::size_t>(it->first)] + static_cast<int>(k) - 1) : -1;
        if (e >= 0) reduce(e);
      }
    }
    if (last_reduction_ >= 0) b_.wait(compute_, last_reduction_);
  }

  void add_pipeline_note(const std::vector<int>& first) {
    std::string split;
    for (std::size_t c = 0; c + 1 < first.size(); ++c)
      split += fmt::format("{}{}", c ? ", " : "", first[c + 1] - first[c]);
    b_.note(fmt::format(
        "pipeline: {} stages x {} chunk(s) per rank, schedule {}, {} micro-batches of {} tokens; blocks per chunk "
        "{} (torchtitan's split: the embedding and the output weigh one block each); activations and their "
        "gradients of {} per hop on the pp group; FSDP units stay unsharded after forward and reduce once after "
        "the last backward",
        par_.pp, pipe_.virtual_stages, to_string(pipe_.schedule), t_.gradient_accumulation, t_.tokens(), split,
        format_size(activation_bytes())));
  }

  void make_units() {
    const double root = embedding_params(m_, t_, tp_) + head_params(m_, tp_);
    if (!c_.wrap_layers) {
      units_.push_back({"model", root + m_.layers * layer_params(m_, tp_), false});
      return;
    }
    // FSDP2 keeps the root unsharded after forward (backward needs it at once); torchtitan's
    // apply_fsdp does the same for the last block, whose backward comes right after.
    units_.push_back({"root", root, false});
    layer_unit_.assign(static_cast<std::size_t>(m_.layers), -1);
    if (m_.moe.enabled()) expert_unit_.assign(static_cast<std::size_t>(m_.layers), -1);
    for (int i = 0; i < m_.layers; ++i) add_layer_units(i, c_.reshard_after_forward && i + 1 < m_.layers);
  }

  int unit_of_layer(int layer) const { return c_.wrap_layers ? layer_unit_[static_cast<std::size_t>(layer)] : 0; }
  // A MoE block's experts: their own unit, sharded over efsdp (torchtitan fully_shards
  // moe.experts on the efsdp mesh); -1 for a dense block.
  int expert_unit(int layer) const {
    return expert_unit_.empty() ? -1 : expert_unit_[static_cast<std::size_t>(layer)];
  }
  void unshard_experts(int layer, bool forward) {
    if (const int e = expert_unit(layer); e >= 0) {
      unshard(e);
      wait_for_unshard(e, forward);
    }
  }
  // Appends layer `i`'s units (the block, then its experts) with the given reshard policy.
  void add_layer_units(int i, bool reshard_after_forward) {
    layer_unit_[static_cast<std::size_t>(i)] = static_cast<int>(units_.size());
    units_.push_back({fmt::format("layers.{}", i), layer_params(m_, tp_) - expert_params(m_), reshard_after_forward});
    if (t_.float8_all_gather) units_.back().fp8 = linear_weights(m_, tp_);
    if (!m_.moe.enabled()) return;
    expert_unit_[static_cast<std::size_t>(i)] = static_cast<int>(units_.size());
    units_.push_back({fmt::format("layers.{}.moe.experts", i), expert_params(m_) / par_.ep, reshard_after_forward,
                      State::sharded, efsdp_group_, efsdp_size_});
  }

  // The collective's algorithm options: fsdp.collectives' channels, and fsdp.compression's codec
  // for the shard group's all-gathers / reduce-scatters (collective mode: those of at least the
  // threshold; p2p: all, the threshold then deciding per message).
  const std::string& algorithm() const override { return c_.algorithm; }
  models::AlgorithmOptions options(CollectiveOp op, Bytes bytes, int group) override {
    models::AlgorithmOptions o;
    o.channels = c_.channels;
    const FsdpCompression& z = c_.compression;
    const std::string& codec = op == CollectiveOp::allgather        ? z.allgather
                               : op == CollectiveOp::reduce_scatter ? z.reduce_scatter
                                                                    : kNone;
    if (codec.empty() || group != shard_group_) return o;
    if (z.mode == models::CompressionMode::collective && bytes < z.threshold) {
      ++raw_small_;
      return o;
    }
    o.compression = {codec, z.mode, z.threshold};
    ++(op == CollectiveOp::allgather ? compressed_all_gathers_ : compressed_reduce_scatters_);
    return o;
  }

  // FSDP unshard: NO_SHARD only casts its fp32 parameters to param_dtype; the others copy
  // their fp32 shard into a param_dtype buffer and all-gather it (FSDP1's rate limiter first
  // blocks the CPU while two resharded-but-not-freed units are pending).
  void unshard(int u) {
    Unit& unit = units_[static_cast<std::size_t>(u)];
    if (unit.state != State::sharded) return;
    if (unit.params <= 0) {   // a pipeline chunk's root without the embedding or the output
      unit.state = State::unsharded;
      return;
    }
    if (c_.limit_all_gathers && free_events_.size() >= 2) {
      b_.sync_event(free_events_.front());
      free_events_.pop_front();
    }
    const double local = unit.params / shard_of(unit);
    if (c_.strategy == Strategy::no_shard) {
      if (t_.param_dtype != models::Dtype::fp32)
        b_.kernel(compute_, unit.name + ".", {"cast_params", elementwise(t_.param_dtype, unit.params, 4, a_, 0)});
      unit.state = State::unsharded;
      return;
    }
    // The fp32 shard cast to param_dtype (Float8 weights: to fp8 with their precomputed scale).
    const double gathered = gathered_bytes(unit);
    b_.kernel(all_gather_, unit.name + ".", {"all_gather.copy_in", elementwise(t_.param_dtype, local, 4, gathered, 0)});
    collective(all_gather_, unit.name + ".all_gather", CollectiveOp::allgather, unit.params * gathered, group_of(unit));
    b_.record(all_gather_, b_.event(unit.name + ".all_gather"));
    ++all_gathers_;
    unit.state = State::gathering;
  }

  void wait_for_unshard(int u, bool forward) {
    Unit& unit = units_[static_cast<std::size_t>(u)];
    if (unit.state != State::gathering) return;
    // FSDP2 decides by training state: in forward the previous unit's gathered buffer is freed
    // once this copy-out is issued, so the next all-gather waits for that copy-out.
    if (forward && previous_copy_out_ >= 0) b_.wait(all_gather_, previous_copy_out_);
    b_.wait(compute_, b_.event(unit.name + ".all_gather"));
    const double gathered = gathered_bytes(unit);
    b_.kernel(compute_, unit.name + ".",
              {"all_gather.copy_out", elementwise(t_.param_dtype, unit.params, gathered, gathered, 0)});
    const int copied = b_.event(unit.name + ".copy_out");
    b_.record(compute_, copied);
    if (forward) {
      previous_copy_out_ = copied;
    } else {
      b_.wait(all_gather_, copied);
    }
    unit.state = State::unsharded;
  }

  void reshard(int u) {
    Unit& unit = units_[static_cast<std::size_t>(u)];
    if (c_.strategy == Strategy::no_shard && t_.param_dtype == models::Dtype::fp32) return;
    unit.state = State::sharded;
    if (c_.limit_all_gathers) {
      const int freed = b_.event(unit.name + ".freed");
      b_.record(compute_, freed);
      free_events_.push_back(freed);
    }
  }

  // Post-backward reduction of a unit's gradients.
  void reduce(int u) {
    const Unit& unit = units_[static_cast<std::size_t>(u)];
    const double n = unit.params;
    if (previous_reduce_scatter_ >= 0) b_.wait(compute_, previous_reduce_scatter_);
    // torch._chunk_cat of the param_dtype gradients into the reduce_dtype buffer: widening, at the
    // non-vectorized copies' fraction of the roof (strided; measured on the H100, fsdp-llama3-8b-
    // 4layers.json.gz: 6.35 ms for 1.92e9 bf16 -> fp32 values, 0.59 of the roof).
    const models::KernelSpec copy_in = elementwise(t_.param_dtype, n, a_, r_, 0);
    b_.kernel(compute_, unit.name + ".", {"reduce.copy_in", r_ > a_ ? models::strided(copy_in) : copy_in});
    const int ready = b_.event(unit.name + ".grads_ready");
    b_.record(compute_, ready);
    if (c_.strategy == Strategy::no_shard) {
      b_.wait(all_reduce_, ready);
      collective(all_reduce_, unit.name + ".all_reduce", CollectiveOp::allreduce, n * r_, shard_group_);
      last_reduction_ = b_.event("all_reduce.done");
      b_.record(all_reduce_, last_reduction_);
      ++all_reduces_;
      return;
    }
    b_.wait(reduce_scatter_, ready);
    collective(reduce_scatter_, unit.name + ".reduce_scatter", CollectiveOp::reduce_scatter, n * r_, group_of(unit));
    previous_reduce_scatter_ = b_.event(unit.name + ".reduce_scatter");
    b_.record(reduce_scatter_, previous_reduce_scatter_);
    last_reduction_ = previous_reduce_scatter_;
    ++reduce_scatters_;
    if (c_.strategy == Strategy::hybrid_shard && replicate_size_ > 1) {
      b_.wait(all_reduce_, previous_reduce_scatter_);
      collective(all_reduce_, unit.name + ".all_reduce", CollectiveOp::allreduce, n / shard_of(unit) * r_,
                 replicate_group_);
      last_reduction_ = b_.event(unit.name + ".all_reduce");
      b_.record(all_reduce_, last_reduction_);
      ++all_reduces_;
    }
  }

  void forward(const Block& embedding, const Block& layer, const Block& head) {
    previous_copy_out_ = -1;
    unshard(0);
    wait_for_unshard(0, true);
    if (c_.forward_prefetch && c_.wrap_layers) unshard(unit_of_layer(0));
    run("", embedding.forward);
    for (int i = 0; i < m_.layers; ++i) {
      const int u = unit_of_layer(i);
      if (u != 0) {
        unshard(u);
        wait_for_unshard(u, true);
        unshard_experts(i, true);
        if (c_.forward_prefetch && i + 1 < m_.layers) unshard(unit_of_layer(i + 1));
      }
      run(layer_prefix(i), layer.forward);
      if (u != 0 && units_[static_cast<std::size_t>(u)].reshard_after_forward) {
        reshard(u);
        if (const int e = expert_unit(i); e >= 0) reshard(e);
      }
    }
    run("", head.forward);
  }

  void prefetch_backward(int layer) {
    if (layer >= 0 && c_.wrap_layers) unshard(unit_of_layer(layer));
  }

  void backward(const Block& embedding, const Block& layer, const Block& head) {
    previous_reduce_scatter_ = -1;
    if (c_.backward_prefetch == BackwardPrefetch::backward_pre) prefetch_backward(m_.layers - 1);
    run("", head.backward);
    for (int i = m_.layers - 1; i >= 0; --i) {
      const int u = unit_of_layer(i);
      if (u != 0) {
        unshard(u);
        wait_for_unshard(u, false);
        unshard_experts(i, false);
        if (c_.backward_prefetch == BackwardPrefetch::backward_pre) prefetch_backward(i - 1);
      }
      run(layer_prefix(i), layer.recompute);
      run(layer_prefix(i), layer.backward);
      if (u != 0) {
        reshard(u);
        if (c_.backward_prefetch == BackwardPrefetch::backward_post) prefetch_backward(i - 1);
        reduce(u);
        if (const int e = expert_unit(i); e >= 0) {
          reshard(e);
          reduce(e);
        }
      }
    }
    run("", embedding.backward);
    reshard(0);
    reduce(0);
    b_.wait(compute_, last_reduction_);
  }

  void optimizer_step() {
    const double local = par_.pp > 1 ? stage_local_params_ : total_params(m_, t_, tp_) / shard_size_;
    b_.kernels(compute_, "", clip_norm_kernels(t_, local));
    // The total norm is a partial sum over the shards: DTensor all-reduces one fp32 within the
    // shard group (replicated gradients need none), over tp and over pp.
    clip_norm_all_reduces(c_.strategy != Strategy::no_shard ? shard_group_ : -1);
    b_.kernels(compute_, "", clip_scale_kernels(t_, local));
    b_.kernels(compute_, "", optimizer_kernels(t_, local));
    if (t_.float8_all_gather) precompute_float8_scales();
  }

  // torchao's precompute_float8_dynamic_scale_for_fsdp (torchtitan calls it after each step):
  // one foreach amax over the local shards of every Float8 weight, one all-reduce (max) of
  // their amaxes over the shard group; the next iteration's casts use the scales.
  void precompute_float8_scales() {
    double local = 0, weights = 0;
    for (const Unit& unit : units_) {
      local += unit.fp8 / shard_of(unit);
      weights += unit.fp8 > 0 ? double(block_linears(m_).size()) : 0;
    }
    b_.kernel(compute_, "", {"float8.weight_amax", models::multi_tensor(elementwise(models::Dtype::fp32, local, 4, 0, 1))});
    collective(compute_, "float8.amax_all_reduce", CollectiveOp::allreduce, weights * 4, shard_group_);
  }

  void add_notes(const Block& embedding, const Block& layer, const Block& head) {
    const double total = total_params(m_, t_);
    b_.set_work_and_note(m_, t_, tp_.tp * par_.pp * par_.cp);
    if (tp_.tp > 1) add_tp_note(layer);
    b_.note(fmt::format("parameters: {:.4g} in all, {:.4g} per transformer block, {:.4g} in the root (embeddings, "
                        "final norm, output); {} units; shard groups of {} rank(s){}",
                        total, layer_params(m_), embedding_params(m_, t_) + head_params(m_), units_.size(), shard_size_,
                        c_.strategy == Strategy::hybrid_shard ? fmt::format(", replicated over {} node(s)", replicate_size_)
                                                              : ""));
    b_.note(fmt::format("FSDP {} as torchtitan applies FSDP2: parameters all-gathered in {} ({} B/param), gradients "
                        "reduced in {} ({} B/param), collective sizes in nccl-tests convention (the whole unsharded "
                        "buffer); shard padding ignored; collectives over a single rank are skipped",
                        to_string(c_.strategy), models::to_string(t_.param_dtype), a_,
                        models::to_string(t_.reduce_dtype), r_));
    b_.note(fmt::format("per micro-batch: {} all-gathers, {} reduce-scatters, {} all-reduces; {} unsharded "
                        "between forward and backward (FSDP2 root; torchtitan's apply_fsdp for the last block)",
                        all_gathers_ / t_.gradient_accumulation, reduce_scatters_ / t_.gradient_accumulation,
                        all_reduces_ / t_.gradient_accumulation,
                        c_.wrap_layers ? "the root and the last block stay" : "the root stays"));
    if (!c_.compression.allgather.empty() || !c_.compression.reduce_scatter.empty()) {
      const FsdpCompression& z = c_.compression;
      const int micro = t_.gradient_accumulation;
      b_.note(fmt::format(
          "compression ({} mode, Zhou et al.): {} of {} all-gathers per micro-batch with {}, {} of {} reduce-scatters "
          "with {}; {}; codec steps take the whole GPU while they run (compute kernels wait)",
          models::to_string(z.mode), compressed_all_gathers_ / micro, all_gathers_ / micro,
          z.allgather.empty() ? "none" : z.allgather, compressed_reduce_scatters_ / micro, reduce_scatters_ / micro,
          z.reduce_scatter.empty() ? "none" : z.reduce_scatter,
          z.mode == models::CompressionMode::p2p
              ? fmt::format("messages under {} stay raw", format_size(z.threshold))
              : fmt::format("{} collective(s) under {} left raw", raw_small_ / micro, format_size(z.threshold))));
    }
    b_.note(fmt::format("activation checkpointing {}: {} of {} forward kernels per block recomputed before its backward{}",
                        transformer::to_string(c_.checkpointing), kernel_count(layer.recompute), kernel_count(layer.forward),
                        c_.checkpointing == Checkpointing::selective
                            ? " (torchtitan's op policy: SDPA and every odd-numbered mm saved, so wk, wo and w3 (or the "
                              "second MLP GEMM) and every elementwise op rerun)"
                            : ""));
    b_.note(fmt::format("eager PyTorch kernels, no torch.compile: {} per block forward, {} backward, {} in the "
                        "embedding and {} in the head and loss (fp32 cross-entropy over micro_batch x sequence x "
                        "vocab logits); an elementwise backward kernel moves twice its forward's bytes",
                        kernel_count(layer.forward), kernel_count(layer.backward),
                        kernel_count(embedding.forward) + kernel_count(embedding.backward),
                        kernel_count(head.forward) + kernel_count(head.backward)));
    b_.note(std::string(t_.optimizer == Optimizer::adamw ? "fused AdamW: 28" : "SGD with momentum: 20") +
            " B per local fp32 parameter" +
            (t_.max_norm > 0 ? "; gradient clipping: one read for the norm, an all-reduce of one fp32, one scaling pass"
                             : ""));
    b_.note(fmt::format("CPU: {:.0f} us before every launch (Lin et al.'s mean op gap T1) plus the launch model's "
                        "cost{}",
                        t_.cpu_op_gap * 1e6, c_.limit_all_gathers ? "; FSDP1 rate limiter: the CPU waits before an "
                                                                    "all-gather while two freed units are pending"
                                                                  : ""));
  }

  const FsdpConfig& c_;
  ContextParallel cp_;
  std::vector<Unit> units_;
  int shard_group_ = -1, replicate_group_ = -1;
  std::map<int, std::vector<int>> chunk_units_;   ///< pipeline: chunk -> its units (root first)
  double stage_local_params_ = 0;                 ///< pipeline: the stage's parameter shards per rank
  std::vector<int> chunk_first_;                  ///< pipeline: chunk_first_layers
  std::vector<int> layer_unit_;                   ///< per block: its unit
  std::vector<int> expert_unit_;                  ///< per block: its experts' unit (MoE), or -1
  int shard_size_ = 1, replicate_size_ = 1;
  int all_gather_ = -1, reduce_scatter_ = -1, all_reduce_ = -1;
  int previous_copy_out_ = -1;        ///< FSDP2 all_gather_state: last forward copy-out
  int previous_reduce_scatter_ = -1;  ///< FSDP2 reduce_scatter_state
  int last_reduction_ = -1;
  std::deque<int> free_events_;       ///< FSDP1 rate limiter queue
  int all_gathers_ = 0, reduce_scatters_ = 0, all_reduces_ = 0;
  int compressed_all_gathers_ = 0, compressed_reduce_scatters_ = 0;
  int raw_small_ = 0;                 ///< collectives left raw for being below the threshold
  inline static const std::string kNone;
};

class FsdpGenerator : public Generator {
 public:
  Trace generate(const YAML::Node& doc, const YamlReader& reader, const JobContext& job) const override {
    reader.check_keys(doc, "",
                      {"version", "kind", "description", "model", "training", "fsdp", "parallelism", "tensor_parallel",
                       "pipeline", "context_parallel", "framework", "megatron"});
    const ModelConfig model = read_model(doc, reader);
    const TrainingConfig training = read_training(doc, reader);
    const bool megatron =
        doc["framework"] && reader.get_choice(doc["framework"], "framework", {"torchtitan", "megatron"}) == "megatron";
    if (megatron && doc["fsdp"])
      reader.fail("fsdp", doc["fsdp"], "framework: megatron shards with Megatron-LM's distributed optimizer, not FSDP",
                  "replace the fsdp: section with megatron: {distributed_optimizer: true, ...} (docs/parallelism.md)");
    if (!megatron && doc["megatron"])
      reader.fail("megatron", doc["megatron"], "the megatron: section configures framework: megatron",
                  "add framework: megatron, or drop the megatron: section");
    if (megatron) {
      check_dtypes(training, job.platform.gpu(), doc, reader);
      return megatron_iteration(doc, reader, job, model, training);
    }
    check_dtypes(training, job.platform.gpu(), doc, reader);
    const FsdpConfig fsdp = read_fsdp(doc, reader, training);
    return FsdpEmitter(model, training, fsdp, job, reader, doc).emit();
  }
};

}  // namespace
}  // namespace stepsim::workloads

using stepsim::workloads::FsdpGenerator;
STEPSIM_REGISTER_GENERATOR(FsdpGenerator, "fsdp",
                           "decoder-only transformer under PyTorch FSDP (FSDP2 as torchtitan runs it): all-gather, "
                           "reduce-scatter and HSDP all-reduce overlapped with compute")
