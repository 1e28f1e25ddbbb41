/// @file `kind: ddp`: one training iteration of a decoder-only transformer under PyTorch
/// DistributedDataParallel. docs/fsdp.md (section DDP) has the schema and the assumptions.
///
/// The protocol follows DDP's C++ Reducer (torch/csrc/distributed/c10d/reducer.cpp): gradients
/// are bucketed in reverse parameter registration order, the first bucket capped at 1 MiB
/// (dist._DEFAULT_FIRST_BUCKET_BYTES) and the others at bucket_cap_mb (default 25); as each
/// gradient is ready its autograd hook copies it, divided by the world size, into its bucket
/// on the compute stream; a bucket is all-reduced on the communication stream once all its
/// gradients are in, buckets strictly in order; at the end of backward the compute stream waits
/// for the all-reduces and, unless gradient_as_bucket_view, copies the buckets back to .grad.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "workloads/generators/transformer.hpp"
#include "workloads/generators/transformer_memory.hpp"
#include "workloads/workload.hpp"

namespace stepsim::workloads {
namespace {

using namespace transformer;
using models::CollectiveOp;
using platforms::YamlReader;

constexpr Bytes kFirstBucketBytes = 1024 * 1024;   // torch.distributed._DEFAULT_FIRST_BUCKET_BYTES

struct DdpConfig {
  double bucket_cap_mb = 25;            ///< DistributedDataParallel(bucket_cap_mb=25), in MiB
  bool gradient_as_bucket_view = false;
  Checkpointing checkpointing = Checkpointing::none;
};

DdpConfig read_ddp(const YAML::Node& doc, const YamlReader& reader) {
  DdpConfig c;
  const YAML::Node section = doc["ddp"];
  if (!section) return c;
  reader.check_keys(section, "ddp", {"bucket_cap_mb", "gradient_as_bucket_view", "activation_checkpointing"});
  if (const YAML::Node n = section["bucket_cap_mb"]) {
    c.bucket_cap_mb = reader.get_number(n, "ddp.bucket_cap_mb");
    if (!(c.bucket_cap_mb > 0)) reader.fail("ddp.bucket_cap_mb", n, "must be > 0", "write a size in MiB such as 25");
  }
  if (const YAML::Node n = section["gradient_as_bucket_view"])
    c.gradient_as_bucket_view = reader.get_bool(n, "ddp.gradient_as_bucket_view");
  if (const YAML::Node n = section["activation_checkpointing"])
    c.checkpointing = read_checkpointing(n, "ddp.activation_checkpointing", reader);
  return c;
}

/// @brief Emits one DDP iteration (every rank runs the same ops).
class DdpEmitter {
 public:
  DdpEmitter(const ModelConfig& model, const TrainingConfig& training, const DdpConfig& ddp, const JobContext& job,
             const std::string& origin)
      : m_(model), t_(training), c_(ddp), gpu_(job.platform.gpu()), b_(origin, job.ranks(), training.cpu_op_gap, job.max_program_ops) {
    ProcessGroup world{"data_parallel", {{}}, std::vector<int>(static_cast<std::size_t>(job.ranks()), 0)};
    for (int r = 0; r < job.ranks(); ++r) world.subgroups[0].push_back(r);
    group_ = b_.group(std::move(world));
    compute_ = b_.stream("compute");
    all_reduce_ = b_.stream("all_reduce");
  }

  Trace emit() {
    // Under torch.autocast the fp32 weights are cast to param_dtype at each use.
    const bool cast = t_.param_dtype != models::Dtype::fp32;
    blocks_.push_back({"", embedding_block(m_, t_, cast)});
    const Block layer = layer_block(m_, t_, c_.checkpointing, cast);
    for (int i = 0; i < m_.layers; ++i) blocks_.push_back({fmt::format("layers.{}.", i), layer});
    blocks_.push_back({"", head_block(m_, t_, cast)});
    make_buckets();
    for (int micro = 0; micro < t_.gradient_accumulation; ++micro) {
      for (const Module& module : blocks_) b_.kernels(compute_, module.prefix, module.block.forward);
      backward(micro + 1 == t_.gradient_accumulation, micro > 0);
    }
    const double params = total_params(m_, t_);
    b_.kernels(compute_, "", clip_norm_kernels(t_, params));
    b_.kernels(compute_, "", clip_scale_kernels(t_, params));
    b_.kernels(compute_, "", optimizer_kernels(t_, params));
    add_notes(layer);
    Trace trace = b_.finish();
    IterationLayout layout;
    layout.model = m_;
    layout.training = t_;
    layout.checkpointing = c_.checkpointing;
    layout.sharding = StateSharding::replicated;
    layout.ddp_bucket_copy = !c_.gradient_as_bucket_view;
    layout.chunk_first = {0, m_.layers};
    trace.memory = transformer_memory(layout, std::vector<int>(static_cast<std::size_t>(trace.ranks), 0), gpu_,
                                      trace.ranks > 1 ? 1 : 0);
    return trace;
  }

 private:
  struct Module {
    std::string prefix;
    Block block;
  };
  struct Bucket {
    std::vector<std::pair<int, int>> grads;   ///< (module, grad index)
    double params = 0;
    int pending = 0;                          ///< gradients not yet ready this backward
  };

  // DDP's _compute_bucket_assignment_by_size over the parameters in reverse registration order:
  // a bucket closes once it reaches its cap.
  void make_buckets() {
    const Bytes per = models::bytes_of(t_.reduce_dtype);
    Bucket current;
    for (int mod = static_cast<int>(blocks_.size()) - 1; mod >= 0; --mod) {
      const std::vector<GradReady>& grads = blocks_[static_cast<std::size_t>(mod)].block.grads;
      for (int g = static_cast<int>(grads.size()) - 1; g >= 0; --g) {
        current.grads.emplace_back(mod, g);
        current.params += grads[static_cast<std::size_t>(g)].params;
        const Bytes cap = buckets_.empty() ? kFirstBucketBytes : c_.bucket_cap_mb * 1024 * 1024;
        if (current.params * per >= cap) {
          buckets_.push_back(current);
          current = Bucket{};
        }
      }
    }
    if (!current.grads.empty()) buckets_.push_back(current);
    bucket_of_.assign(blocks_.size(), {});
    for (std::size_t m = 0; m < blocks_.size(); ++m) bucket_of_[m].assign(blocks_[m].block.grads.size(), 0);
    for (std::size_t k = 0; k < buckets_.size(); ++k)
      for (const auto& [mod, g] : buckets_[k].grads)
        bucket_of_[static_cast<std::size_t>(mod)][static_cast<std::size_t>(g)] = static_cast<int>(k);
  }

  // Backward of every module in reverse; `sync` is false under no_sync (gradient accumulation).
  void backward(bool sync, bool accumulate) {
    const Bytes per = models::bytes_of(t_.reduce_dtype);
    for (Bucket& bucket : buckets_) bucket.pending = static_cast<int>(bucket.grads.size());
    std::size_t next = 0;   // next bucket to all-reduce
    const int done = b_.event("all_reduce.done");
    for (int mod = static_cast<int>(blocks_.size()) - 1; mod >= 0; --mod) {
      const Module& module = blocks_[static_cast<std::size_t>(mod)];
      b_.kernels(compute_, module.prefix, module.block.recompute);
      for (int k = 0; k < static_cast<int>(module.block.backward.size()); ++k) {
        b_.kernel(compute_, module.prefix, module.block.backward[static_cast<std::size_t>(k)]);
        for (std::size_t g = 0; g < module.block.grads.size(); ++g) {
          const GradReady& grad = module.block.grads[g];
          if (grad.ready_after != k) continue;
          const double n = grad.params;
          if (accumulate)
            b_.kernel(compute_, module.prefix, {grad.name + ".accumulate_grad", elementwise(t_.reduce_dtype, n, 2 * per, per, 1)});
          if (!sync) continue;
          b_.kernel(compute_, module.prefix, {grad.name + ".copy_to_bucket", elementwise(t_.reduce_dtype, n, per, per, 1)});
          --buckets_[static_cast<std::size_t>(bucket_of_[static_cast<std::size_t>(mod)][g])].pending;
        }
        while (sync && next < buckets_.size() && buckets_[next].pending == 0) {
          const int ready = b_.event(fmt::format("bucket.{}.ready", next));
          b_.record(compute_, ready);
          b_.wait(all_reduce_, ready);
          b_.collective(all_reduce_, fmt::format("bucket.{}.all_reduce", next), CollectiveOp::allreduce,
                        buckets_[next].params * per, group_);
          b_.record(all_reduce_, done);
          ++next;
        }
      }
    }
    if (!sync) return;
    b_.wait(compute_, done);
    if (c_.gradient_as_bucket_view) return;
    for (std::size_t k = 0; k < buckets_.size(); ++k) {
      const double n = buckets_[k].params;
      b_.kernel(compute_, "", {fmt::format("bucket.{}.copy_to_grad", k), elementwise(t_.reduce_dtype, n, per, per, 0)});
    }
  }

  void add_notes(const Block& layer) {
    const Bytes per = models::bytes_of(t_.reduce_dtype);
    b_.set_work_and_note(m_, t_);
    b_.note(fmt::format("parameters: {:.4g} in all, {:.4g} per transformer block; fp32 parameters, gradients and "
                        "optimizer state on every rank",
                        total_params(m_, t_), layer_params(m_)));
    b_.note(fmt::format("DDP: {} buckets (first {} MiB, then {} MiB caps, reverse registration order), all-reduced "
                        "in {} ({} B/param) as their gradients are ready; gradient_as_bucket_view {}",
                        buckets_.size(), kFirstBucketBytes / (1024 * 1024), c_.bucket_cap_mb,
                        models::to_string(t_.reduce_dtype), per, c_.gradient_as_bucket_view));
    if (t_.param_dtype != models::Dtype::fp32)
      b_.note(fmt::format("torch.autocast to {}: every weight cast at each forward use, its gradient cast back to fp32",
                          models::to_string(t_.param_dtype)));
    if (t_.gradient_accumulation > 1)
      b_.note("gradient accumulation under no_sync: only the last micro-batch all-reduces; later micro-batches add "
              "into .grad");
    b_.note(fmt::format("activation checkpointing {}: {} of {} forward kernels per block recomputed; eager PyTorch "
                        "kernels (no torch.compile), an elementwise backward kernel moves twice its forward's bytes",
                        transformer::to_string(c_.checkpointing), layer.recompute.size(), layer.forward.size()));
    b_.note(fmt::format("CPU: {:.0f} us before every launch (Lin et al.'s mean op gap T1) plus the launch model's cost",
                        t_.cpu_op_gap * 1e6));
  }

  const ModelConfig& m_;
  const TrainingConfig& t_;
  const DdpConfig& c_;
  const platforms::GpuModel& gpu_;
  ProgramBuilder b_;
  int group_ = -1, compute_ = -1, all_reduce_ = -1;
  std::vector<Module> blocks_;
  std::vector<Bucket> buckets_;
  std::vector<std::vector<int>> bucket_of_;   ///< [module][grad] -> bucket
};

class DdpGenerator : public Generator {
 public:
  Trace generate(const YAML::Node& doc, const YamlReader& reader, const JobContext& job) const override {
    reader.check_keys(doc, "", {"version", "kind", "description", "model", "training", "ddp"});
    const ModelConfig model = read_model(doc, reader);
    const TrainingConfig training = read_training(doc, reader);
    check_dtypes(training, job.platform.gpu(), doc, reader);
    check_layer_passes(doc, reader, 1, model, training);
    if (training.float8 != Float8::none)
      reader.fail_at(doc, "training.float8", "Float8 linears are modelled with FSDP (torchtitan) only",
                     "use kind: fsdp for Float8 training, or set training.float8: none");
    if (training.reduce_dtype != models::Dtype::fp32)
      reader.fail_at(doc, "training.reduce_dtype",
                     "DDP all-reduces gradients in the fp32 parameters' dtype",
                     "drop reduce_dtype or write reduce_dtype: fp32 (compression hooks are not modelled)");
    const DdpConfig ddp = read_ddp(doc, reader);
    return DdpEmitter(model, training, ddp, job, reader.origin()).emit();
  }
};

}  // namespace
}  // namespace stepsim::workloads

using stepsim::workloads::DdpGenerator;
STEPSIM_REGISTER_GENERATOR(DdpGenerator, "ddp",
                           "decoder-only transformer under PyTorch DDP: bucketed gradient all-reduce overlapped "
                           "with backward")
