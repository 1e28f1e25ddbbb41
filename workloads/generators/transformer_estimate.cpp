#include "workloads/generators/transformer_estimate.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>

#include "workloads/generators/transformer_ops.hpp"
#include "workloads/pipeline_schedule.hpp"

namespace stepsim::workloads::transformer {
namespace {

using models::CollectiveOp;

using Pass = PassTimes::Pass;

Seconds kernel_time(models::KernelSpec spec, const platforms::GpuModel& gpu) {
  models::complete_kernel(spec, "estimate");
  return models::kernel_cost(spec, gpu).time;
}

void check_covered(const IterationLayout& l) {
  if (l.megatron || l.model.moe.enabled() || (l.pp > 1 && l.sharding == StateSharding::fsdp_unsharded))
    throw std::invalid_argument("estimate_iteration: torchtitan's dense layouts only");
}

// One pass's time on a rank whose CPU runs ahead (TransformerEmitter::run's issue order): the
// compute stream's busy time (kernels, the launch gap before each, waits for collectives) and
// the CPU's issue time (the eager op gap and the launch call per op), whichever is longer.
Pass run_pass(const Kernels& kernels, const IterationLayout& l, const platforms::GpuModel& gpu,
              const LaunchModel& launch, const CollectivePricer& price) {
  Pass pass;
  Seconds cpu = 0, compute = 0;
  std::map<int, Seconds> done;
  std::map<Comm::Group, Seconds> stream;
  for (const Kernel& k : kernels) {
    if (k.after >= 0) compute = std::max(compute, done[k.after]);
    if (k.is_wait()) continue;
    if (k.comm) {
      cpu += l.training.cpu_op_gap + launch.cpu_launch;
      const LayoutGroup group = k.comm->group == Comm::Group::cp   ? LayoutGroup::cp
                                : k.comm->group == Comm::Group::ep ? LayoutGroup::ep
                                                                   : LayoutGroup::tp;
      const CollectiveCost c = price(group, k.comm->op, k.comm->bytes);
      Seconds& free = stream[k.comm->group];
      free = std::max(free, compute) + c.time;
      if (k.comm->tag >= 0) {
        done[k.comm->tag] = free;
        pass.sm_seconds += c.time * c.channels;
      } else {
        compute = free;
      }
      continue;
    }
    cpu += (k.compiled ? 0 : l.training.cpu_op_gap) + launch.cpu_launch;
    const Seconds t = kernel_time(k.spec, gpu);
    compute += launch.kernel_gap + t;
    pass.kernels += t;
  }
  pass.elapsed = std::max(compute, cpu);
  return pass;
}

class Estimator {
 public:
  Estimator(const IterationLayout& l, const platforms::GpuModel& gpu, const LaunchModel& launch,
            const CollectivePricer& price)
      : l_(l),
        gpu_(gpu),
        launch_(launch),
        price_(price),
        a_(models::bytes_of(l.training.param_dtype)),
        r_(models::bytes_of(l.training.reduce_dtype)),
        chunks_(l.pp * l.pipeline.virtual_stages),
        unit_params_(layer_params(l.model, l.tp)),
        gathered_bytes_((unit_params_ - (l.training.float8_all_gather ? linear_weights(l.model, l.tp) : 0)) * a_ +
                        (l.training.float8_all_gather ? linear_weights(l.model, l.tp) : 0)),
        root_params_(embedding_params(l.model, l.training, l.tp) + head_params(l.model, l.tp)) {
    check_covered(l);
  }

  IterationEstimate run(const PassTimes& p) {
    compose(p);
    IterationEstimate best;
    for (int stage = 0; stage < l_.pp; ++stage) {
      const auto [finish, compute] = stage_time(stage);
      const Seconds tail = tail_time(stage);
      if (finish + tail > best.iteration) best = {finish + tail, compute, finish, tail};
    }
    return best;
  }

 private:
  struct BlockTimes {
    Seconds forward = 0, backward = 0, kernels = 0;
  };

  Seconds kernel_time(const models::KernelSpec& spec) const { return transformer::kernel_time(spec, gpu_); }

  CollectiveCost cost(LayoutGroup group, CollectiveOp op, Bytes bytes) {
    const auto key = std::make_tuple(group, op, bytes);
    auto it = costs_.find(key);
    if (it == costs_.end()) it = costs_.emplace(key, price_(group, op, bytes)).first;
    return it->second;
  }
  Seconds comm(LayoutGroup group, CollectiveOp op, Bytes bytes) { return cost(group, op, bytes).time; }

  // Compute of `work` seconds beside `comm` seconds of a collective holding `channels` SMs: the
  // kernels run on the SMs left (workloads/trace.hpp, SM interference).
  Seconds overlapped(Seconds work, Seconds comm, int channels) const {
    const double share = double(channels) / gpu_.sm_count;
    return std::max(comm, work + std::min(work, comm) * share);
  }

  double unit_params() const { return unit_params_; }
  Bytes gathered_bytes() const { return gathered_bytes_; }  ///< a block's all-gather (fp8 weights: 1 B)
  double gathered_per_param() const { return gathered_bytes_ / unit_params_; }
  bool sharded() const { return l_.sharding != StateSharding::replicated; }
  bool gathers_per_microbatch() const { return sharded() && l_.pp == 1 && l_.sharding == StateSharding::fsdp; }

  // FSDP's copy kernels around a unit's all-gather (compute stream: copy-out; its own stream:
  // copy-in) and its reduction (compute stream: the cast into the reduce dtype).
  Seconds copy_out() {
    return kernel_time(
        elementwise(l_.training.param_dtype, unit_params(), gathered_per_param(), gathered_per_param(), 0));
  }
  Seconds copy_in() {
    return kernel_time(elementwise(l_.training.param_dtype, unit_params() / l_.shard, 4, gathered_per_param(), 0));
  }
  Seconds reduce_copy_in() {
    models::KernelSpec spec = elementwise(l_.training.param_dtype, unit_params(), a_, r_, 0);
    return kernel_time(r_ > a_ ? models::strided(spec) : spec);
  }
  CollectiveCost all_gather() { return cost(LayoutGroup::fsdp, CollectiveOp::allgather, gathered_bytes()); }
  CollectiveCost reduction() {
    if (!sharded()) return cost(LayoutGroup::fsdp, CollectiveOp::allreduce, unit_params() * r_);
    CollectiveCost rs = cost(LayoutGroup::fsdp, CollectiveOp::reduce_scatter, unit_params() * r_);
    if (l_.replicate > 1)
      rs.time += comm(LayoutGroup::replicate, CollectiveOp::allreduce, unit_params() / l_.shard * r_);
    return rs;
  }

  void compose(const PassTimes& p) {
    Seconds fwd = p.forward.elapsed + p.forward.sm_seconds / gpu_.sm_count;
    Seconds bwd =
        p.recompute.elapsed + p.backward.elapsed + (p.recompute.sm_seconds + p.backward.sm_seconds) / gpu_.sm_count;
    block_.kernels = p.forward.kernels + p.recompute.kernels + p.backward.kernels;
    if (gathers_per_microbatch()) {
      const CollectiveCost ag = all_gather(), red = reduction();
      const Seconds in = copy_in();
      fwd = overlapped(copy_out() + fwd, ag.time + in, ag.channels);
      bwd =
          overlapped(copy_out() + bwd + reduce_copy_in(), ag.time + in + red.time, std::max(ag.channels, red.channels));
    } else if (l_.pp == 1) {
      const CollectiveCost red = reduction();
      bwd = overlapped(bwd + (sharded() ? reduce_copy_in() : 0), red.time, red.channels);
    }
    block_.forward = fwd;
    block_.backward = bwd;
    embedding_ = {p.embedding_forward.elapsed, p.embedding_backward.elapsed,
                  p.embedding_forward.kernels + p.embedding_backward.kernels};
    head_ = {p.head_forward.elapsed, p.head_backward.elapsed, p.head_forward.kernels + p.head_backward.kernels};
  }

  // One pass of chunk c: its blocks, the embedding or the head when it holds them.
  Seconds chunk_pass(int c, bool forward) const {
    const int layers = l_.chunk_first.at(c + 1) - l_.chunk_first.at(c);
    Seconds t = layers * (forward ? block_.forward : block_.backward);
    if (c == 0) t += forward ? embedding_.forward : embedding_.backward;
    if (c + 1 == chunks_) t += forward ? head_.forward : head_.backward;
    return t;
  }
  Seconds chunk_kernels(int c) const {
    const int layers = l_.chunk_first.at(c + 1) - l_.chunk_first.at(c);
    return layers * block_.kernels + (c == 0 ? embedding_.kernels : 0) + (c + 1 == chunks_ ? head_.kernels : 0);
  }

  // The stage's last backward's end and its kernels' time: every rank's actions list-scheduled
  // with each chunk's pass times, a pipeline hop between dependent passes on different ranks.
  std::pair<Seconds, Seconds> stage_time(int stage) {
    const int m = l_.training.gradient_accumulation;
    const int v = l_.pipeline.virtual_stages;
    Seconds start = 0;
    if (gathers_per_microbatch()) {
      // The root's and the first block's all-gathers are exposed: nothing runs before them.
      const CollectiveCost ag = all_gather();
      start = ag.time + copy_in() + copy_out();
    }
    if (l_.pp == 1) {
      const Seconds per = chunk_pass(0, true) + chunk_pass(0, false) + start;
      return {m * per, m * chunk_kernels(0)};
    }
    if (finish_.empty()) schedule(m, v);
    Seconds kernels = 0;
    for (int c = stage; c < chunks_; c += l_.pp) kernels += m * chunk_kernels(c);
    return {finish_[static_cast<std::size_t>(stage)], kernels};
  }

  void schedule(int m, int v) {
    const Seconds hop =
        comm(LayoutGroup::pp, CollectiveOp::sendrecv,
             l_.training.tokens() / l_.cp.cp * l_.model.hidden * a_ / (l_.tp.sequence_parallel ? l_.tp.tp : 1));
    std::vector<std::vector<PipelineAction>> ranks;
    for (int r = 0; r < l_.pp; ++r)
      ranks.push_back(pipeline_actions(l_.pipeline.schedule, l_.pp, v, m, r, l_.pipeline.runtime));
    // End times of each (direction, chunk, micro-batch); -1 until it has run.
    std::vector<Seconds> done(static_cast<std::size_t>(2 * chunks_ * m), -1);
    const auto at = [&](bool forward, int chunk, int microbatch) -> Seconds& {
      return done[static_cast<std::size_t>(((forward ? 0 : 1) * chunks_ + chunk) * m + microbatch)];
    };
    std::vector<std::size_t> next(static_cast<std::size_t>(l_.pp), 0);
    finish_.assign(static_cast<std::size_t>(l_.pp), 0);
    std::vector<Seconds> free(static_cast<std::size_t>(l_.pp), 0);
    for (bool progress = true; progress;) {
      progress = false;
      for (int r = 0; r < l_.pp; ++r) {
        std::size_t& i = next[static_cast<std::size_t>(r)];
        while (i < ranks[static_cast<std::size_t>(r)].size()) {
          const PipelineAction& a = ranks[static_cast<std::size_t>(r)][i];
          Seconds begin = free[static_cast<std::size_t>(r)];
          bool ready = true;
          const auto need = [&](bool forward, int chunk, Seconds delay) {
            const Seconds end = at(forward, chunk, a.microbatch);
            if (end < 0)
              ready = false;
            else
              begin = std::max(begin, end + delay);
          };
          if (a.forward && a.chunk > 0) need(true, a.chunk - 1, hop);
          if (!a.forward) need(true, a.chunk, 0);
          if (!a.forward && a.chunk + 1 < chunks_) need(false, a.chunk + 1, hop);
          if (!ready) break;
          const Seconds end = begin + chunk_pass(a.chunk, a.forward);
          at(a.forward, a.chunk, a.microbatch) = end;
          free[static_cast<std::size_t>(r)] = end;
          ++i;
          progress = true;
        }
      }
    }
    finish_ = free;
  }

  // After the stage's last backward: with PP every unit's reduction (accumulated until now), with
  // per-micro-batch FSDP the root's; then clipping (a norm, one fp32 all-reduced over fsdp, tp and
  // pp) and the step over the rank's fp32 parameters.
  Seconds tail_time(int stage) {
    double local = 0;
    for (int c = stage; c < chunks_; c += l_.pp) {
      const int layers = l_.chunk_first.at(c + 1) - l_.chunk_first.at(c);
      local += layers * unit_params() + (c == 0 ? embedding_params(l_.model, l_.training, l_.tp) : 0) +
               (c + 1 == chunks_ ? head_params(l_.model, l_.tp) : 0);
    }
    Seconds t = 0;
    if (l_.pp > 1) {
      for (int c = stage; c < chunks_; c += l_.pp)
        t += (l_.chunk_first.at(c + 1) - l_.chunk_first.at(c)) * (reduction().time + reduce_copy_in());
    } else {
      t += comm(LayoutGroup::fsdp, sharded() ? CollectiveOp::reduce_scatter : CollectiveOp::allreduce,
                root_params_ * r_);
    }
    local /= sharded() ? l_.shard : 1;
    for (const Kernels& ks : {clip_norm_kernels(l_.training, local), clip_scale_kernels(l_.training, local),
                              optimizer_kernels(l_.training, local)})
      for (const Kernel& k : ks) t += kernel_time(k.spec) + launch_.kernel_gap;
    if (l_.training.max_norm > 0) {
      if (sharded() && l_.shard > 1) t += comm(LayoutGroup::fsdp, CollectiveOp::allreduce, 4);
      if (l_.tp.tp > 1) t += comm(LayoutGroup::tp, CollectiveOp::allreduce, 4);
      if (l_.pp > 1) t += comm(LayoutGroup::pp, CollectiveOp::allreduce, 4);
    }
    return t;
  }

  const IterationLayout& l_;
  const platforms::GpuModel& gpu_;
  const LaunchModel& launch_;
  const CollectivePricer& price_;
  const double a_, r_;
  const int chunks_;
  const double unit_params_, gathered_bytes_, root_params_;
  std::map<std::tuple<LayoutGroup, CollectiveOp, Bytes>, CollectiveCost> costs_;
  BlockTimes block_, embedding_, head_;
  std::vector<Seconds> finish_;
};

}  // namespace

PassTimes pass_times(const IterationLayout& l, const platforms::GpuModel& gpu, const LaunchModel& launch,
                     const CollectivePricer& price) {
  check_covered(l);
  const Block layer = layer_block(l.model, l.training, l.checkpointing, false, l.tp, l.cp, ExpertParallel{l.ep});
  const Block embedding = embedding_block(l.model, l.training, false, l.tp, l.cp);
  const Block head = head_block(l.model, l.training, false, l.tp, l.cp);
  const auto run = [&](const Kernels& k) { return run_pass(k, l, gpu, launch, price); };
  return {run(layer.forward),      run(layer.recompute), run(layer.backward), run(embedding.forward),
          run(embedding.backward), run(head.forward),    run(head.backward)};
}

IterationEstimate estimate_iteration(const IterationLayout& layout, const PassTimes& passes,
                                     const platforms::GpuModel& gpu, const LaunchModel& launch,
                                     const CollectivePricer& price) {
  return Estimator(layout, gpu, launch, price).run(passes);
}

}  // namespace stepsim::workloads::transformer
