#pragma once
/// @file What every data-parallel flavour of the transformer iteration shares (torchtitan's FSDP2
/// in fsdp.cpp, Megatron-LM's distributed optimizer in megatron.cpp): the mesh's model-parallel
/// process groups, collectives on their groups' NCCL streams, a block's kernels with their
/// tensor-, context- and expert-parallel collectives, and a pipeline chunk's forward and
/// backward with the activations sent between stages. The data-parallel protocol (when
/// parameters are gathered and gradients reduced) is the subclass's, through four hooks.
/// Internal to workloads/generators/.
#include <map>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "workloads/generators/transformer.hpp"
#include "workloads/generators/transformer_memory.hpp"
#include "workloads/mesh.hpp"
#include "workloads/pipeline_schedule.hpp"
#include "workloads/workload.hpp"

namespace stepsim::workloads::transformer {

/// @brief A transformer block's forward and backward, and the embedding's and the head's.
struct Blocks {
  Block embedding, layer, head;
};

class TransformerEmitter {
 public:
  virtual ~TransformerEmitter() = default;

 protected:
  TransformerEmitter(const ModelConfig& model, const TrainingConfig& training, const JobContext& job,
                     const platforms::YamlReader& reader);

  /// @brief The tp, pp, cp, ep / efsdp and (tied embeddings across stages) embedding groups of
  /// `mesh`; the data-parallel groups are the subclass's.
  void make_model_parallel_groups(const DeviceMesh& mesh);

  /// @brief ProcessGroupNCCL (torch 2.6 and before; Megatron-LM's synchronous calls alike) runs
  /// every collective of a process group on the group's one internal NCCL stream, after that
  /// stream waits for the issuing one, and makes the issuing stream wait for it: a group's
  /// collectives serialize in issue order. Streams are named after the group.
  void collective(int stream, const std::string& name, models::CollectiveOp op, Bytes bytes, int group);
  /// @brief An async_op=True collective issued from the compute stream: its group's NCCL stream
  /// runs it once the compute stream has reached this point, and records event `done`; nothing
  /// waits.
  void async_collective(const std::string& name, models::CollectiveOp op, Bytes bytes, int group,
                        const std::string& done);
  /// @brief A block's kernels on the compute stream; its tensor-, context- and expert-parallel
  /// collectives on their groups, waited for unless tagged (async, Kernel::after waits).
  void run(const std::string& prefix, const Kernels& kernels);
  /// @brief The algorithm and options of a collective (the subclass may compress some).
  virtual models::AlgorithmOptions options(models::CollectiveOp op, Bytes bytes, int group);
  virtual const std::string& algorithm() const;

  // --- pipeline parallelism -------------------------------------------------------------------
  void open_pipeline_streams();
  /// @brief One pipeline action's pass over chunk a.chunk of `chunks` (blocks first[c] ..
  /// first[c + 1] - 1): receive from the previous stage (forward) or the next (backward), run
  /// the chunk's embedding, blocks and head as they fall in it, send on. With pp = 1 the one
  /// chunk holds the whole model and nothing is sent.
  void forward_chunk(const PipelineAction& a, const std::vector<int>& first, const Blocks& blocks);
  void backward_chunk(const PipelineAction& a, const std::vector<int>& first, const Blocks& blocks);
  /// @brief Stage `stage`'s passes in its schedule's order (pipe_, micro-batches from t_).
  void run_stage(int stage, const std::vector<int>& first, const Blocks& blocks);
  /// @brief Gives the program written so far to stage `stage`'s rank in every replica.
  void hand_to_stage(int stage);
  /// @brief The activation (or its gradient) one pipeline hop carries: a micro-batch's residual
  /// stream, sequence-sharded under sequence parallelism.
  Bytes activation_bytes() const;
  /// @brief The last stage's copy of a tied token embedding (Megatron-LM's embedding group).
  double tied_output_copy() const { return m_.tied_embeddings ? vocab_share(m_, tp_) * m_.hidden : 0; }
  /// @brief The clip-norm all-reduces of one fp32 over `dp_group` (when its gradients are
  /// sharded), tp and pp: the total norm is a sum of partial norms.
  void clip_norm_all_reduces(int dp_group);
  void add_tp_note(const Block& layer);

  // Hooks of the data-parallel protocol around a chunk's passes.
  virtual void enter_chunk_forward(const PipelineAction&) {}
  virtual void enter_layer_forward(const PipelineAction&, int /*layer*/) {}
  virtual void leave_layer_backward(const PipelineAction&, int /*layer*/) {}
  virtual void leave_chunk_backward(const PipelineAction&) {}

  static std::string layer_prefix(int layer);

  /// @brief The memory layout's fields this class knows (model, training, tp, ep, pipeline);
  /// the subclass adds how its data-parallel ranks hold the state.
  IterationLayout iteration_layout(const std::vector<int>& chunk_first) const;
  /// @brief `trace` with every rank's peak memory (transformer_memory): ranks grouped by their
  /// pipeline stage, each joining the communicators its groups give it, with the last op of
  /// each of the stage's actions (end_action) for the timeline's memory track.
  Trace with_memory(Trace trace, const IterationLayout& layout) const;
  /// @brief Marks the end of one action (a chunk's forward or backward) of stage `stage`.
  void end_action(int stage);

  const ModelConfig& m_;
  const TrainingConfig& t_;
  const platforms::GpuModel& gpu_;
  Parallelism par_;
  TensorParallel tp_;
  PipelineConfig pipe_;
  ProgramBuilder b_;
  double a_;   ///< bytes per parameter in param_dtype
  double r_;   ///< bytes per gradient in reduce_dtype
  int tp_group_ = -1, pp_group_ = -1, cp_group_ = -1, ep_group_ = -1, efsdp_group_ = -1, efsdp_size_ = 0;
  int embedding_group_ = -1;   ///< pipeline with tied embeddings: first and last stage
  std::map<int, std::vector<int>> action_last_op_;   ///< per stage: its actions' last ops
  int compute_ = -1;
  int send_next_ = -1, recv_prev_ = -1, send_prev_ = -1, recv_next_ = -1;   ///< pipeline p2p streams

 private:
  /// The collective on its group's NCCL stream once `stream` has reached it; the NCCL stream.
  int issue(int stream, const std::string& name, models::CollectiveOp op, Bytes bytes, int group);
  void receive(int stream, const std::string& name, int peer);
  void pass_on(int stream, const std::string& name, int peer);
  inline static const std::string kNccl = "nccl";
};

}  // namespace stepsim::workloads::transformer
