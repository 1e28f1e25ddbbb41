#!/usr/bin/env python3
"""Times training iterations of DLRM as stepsim's `dlrm` generator models it (docs/dlrm.md,
workloads/generators/dlrm.cpp) and writes a measurement file (docs/measurements.md) and a
Kineto trace of one iteration.

The model is the preset's (workloads/presets/dlrm-criteo-1tb.yaml, read at run time): bottom MLP
13-512-256-128, 26 embedding bags (sum, fp32 tables, rows capped by --rows-cap), dot
interaction (479 features), top MLP 1024-1024-512-256-1, BCE loss; AMP fp16 (torch.autocast,
pooled embeddings cast to fp16 as NVIDIA DLE does, GradScaler); SGD, with sparse row-wise
updates of the tables (stepsim's embedding_backward is a fused sparse update, not a dense one).
On several GPUs: tables whole on ranks by stepsim's `naive` planner (table i on rank i mod n),
the pooled fp16 embeddings exchanged by an all-to-all on their own process group, the MLPs
data-parallel under DDP (25 MiB buckets) on another.

Run: python3 dlrm_iteration.py --out d.yaml --trace d.json.gz          (one GPU)
     torchrun --standalone --nproc-per-node 8 dlrm_iteration.py ...     (several)
validation/harness/torch/README.md has the details and the memory estimate.
"""
import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import iteration_common as common  # noqa: E402  (the scripts' folder is on sys.path)
import torch_runtime as runtime  # noqa: E402


def mlp(widths, last_relu):
    layers = []
    for i, (fan_in, fan_out) in enumerate(zip(widths, widths[1:])):
        layers.append(nn.Linear(fan_in, fan_out))
        if last_relu or i < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DenseArch(nn.Module):
    """Bottom MLP, dot interaction and top MLP: the data-parallel part (DDP) of DLRM."""

    def __init__(self, dense_features, bottom, top, tables):
        super().__init__()
        dim = bottom[-1]
        self.bottom = mlp([dense_features] + bottom, last_relu=True)  # DLE: ReLU after every bottom layer
        self.top = mlp([dim + (tables + 1) * tables // 2] + top, last_relu=False)  # logits out
        # The strictly lower triangle of the (F + 1) x (F + 1) products, as flat indices: an
        # index_select, whose backward is an index_add, not advanced indexing's sort-based one.
        rows, cols = torch.tril_indices(tables + 1, tables + 1, offset=-1)
        self.register_buffer("pairs", rows * (tables + 1) + cols, persistent=False)

    def forward(self, dense, pooled):
        x = self.bottom(dense)                                   # [b, D]
        vectors = torch.cat([x.unsqueeze(1), pooled], dim=1)     # [b, F + 1, D]
        products = torch.bmm(vectors, vectors.transpose(1, 2))   # [b, F + 1, F + 1]
        pairs = products.flatten(1).index_select(1, self.pairs)  # [b, (F + 1) F / 2]
        return self.top(torch.cat([x, pairs], dim=1)).squeeze(1)


class AllToAll(torch.autograd.Function):
    """all_to_all_single of a flat tensor with uneven splits; backward sends the gradients back."""

    @staticmethod
    def forward(ctx, flat, send, receive, group):
        ctx.send, ctx.receive, ctx.group = send, receive, group
        out = flat.new_empty(sum(receive))
        dist.all_to_all_single(out, flat.contiguous(), receive, send, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        out = grad.new_empty(sum(ctx.send))
        dist.all_to_all_single(out, grad.contiguous(), ctx.send, ctx.receive, group=ctx.group)
        return out, None, None, None


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--global-batch", type=int, default=65536, help="samples per iteration, all GPUs together")
    p.add_argument("--rows-cap", type=int, default=10_000_000,
                   help="rows of a table at most (0: none; Criteo 1TB's tables take 96 GB in fp32)")
    p.add_argument("--distribution", choices=["uniform", "zipf"], default="uniform", help="how indices are drawn")
    p.add_argument("--alpha", type=float, default=1.05, help="Zipf exponent (with --distribution zipf)")
    p.add_argument("--precision", choices=["amp", "fp32"], default="amp",
                   help="amp: autocast fp16 + GradScaler (DLE's --amp); fp32: no autocast, no scaler")
    p.add_argument("--cuda-graph", action="store_true",
                   help="NVIDIA DLE's loop (one GPU): forward and backward replayed from a CUDA graph, the weight "
                        "update eager after it, the next batch copied from host memory on a side stream, a device "
                        "sync per iteration")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--steps", type=int, default=20, help="timed iterations")
    p.add_argument("--warmup", type=int, default=5, help="untimed iterations first")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kernels", type=int, default=30, help="kernel entries: the top N of the profiled iteration")
    p.add_argument("--workload", default="dlrm-criteo-1tb", help="stepsim preset the run is described against")
    p.add_argument("--platform", default="", help="stepsim platform preset (default: from the GPU name)")
    p.add_argument("--out", required=True, help="measurement file (YAML) to write")
    p.add_argument("--trace", required=True, help="Kineto trace of one iteration to write (.json.gz)")
    a = p.parse_args()
    if a.steps < 1 or a.warmup < 0 or a.global_batch < 1 or a.rows_cap < 0 or a.alpha <= 0:
        p.error("--steps, --global-batch, --alpha must be positive; --warmup and --rows-cap >= 0")
    return a


def draw_indices(rows, batches, batch, a, generator):
    """`batches` x `batch` row indices of a table: uniform, or Zipf (row r with probability
    r^-alpha / H, hottest rows first), by inverting the CDF."""
    if a.distribution == "uniform":
        return torch.randint(rows, (batches, batch), device="cuda", generator=generator)
    cdf = torch.arange(1, rows + 1, device="cuda", dtype=torch.float64).pow_(-a.alpha).cumsum_(0)
    u = torch.rand((batches, batch), device="cuda", dtype=torch.float64, generator=generator) * cdf[-1]
    return torch.searchsorted(cdf, u).clamp_(max=rows - 1)


def prefetcher(host, stream):
    """NVIDIA DLE's prefetcher (dlrm/data/utils.py): yields a batch once the side stream has copied it,
    after starting the next one's copies there. The loader's host tensors (numerical fp16, categorical
    int64, labels fp32; pageable) go to the GPU, the numerical ones cast to fp32 there, with one
    record_stream each."""
    numerical, categorical, labels = host
    consumer = torch.cuda.current_stream()

    def load(i):
        with torch.cuda.stream(stream):
            copies = [tensor.to("cuda", non_blocking=True) for tensor in (labels[i], categorical[i], numerical[i])]
            copies[2] = copies[2].float()
            for copy in copies:
                copy.record_stream(consumer)
            return copies[2], copies[1], copies[0]

    i = 0
    upcoming = load(i)
    while True:
        consumer.wait_stream(stream)
        batch = upcoming
        i = (i + 1) % len(labels)
        upcoming = load(i)
        yield batch


def dle_loop(a, tables, dense, scaler, dense_sgd, sparse_sgd, host, losses):
    """One iteration of NVIDIA DLE's training loop with --cuda_graphs (dlrm/scripts/main.py at 00100f20):
    next(batch_iter) (the prefetcher), torch.cuda.synchronize(), the learning-rate scheduler, the batch
    copied into the graph's static inputs, graph.replay() of forward_backward (the embedding lookups,
    MLPs, loss and scaled backward), then weight_update() eagerly (GradScaler.step on both optimizers and
    its update) and moving_loss += loss. Returns the iteration as a function."""
    amp = a.precision == "amp"
    batches = prefetcher(host, torch.cuda.Stream())
    numerical, categorical, labels = next(batches)
    static_numerical, static_categorical, static_labels = numerical.clone(), categorical.clone(), labels.clone()

    def forward_backward():
        # cache_enabled=False: autocast's weight-cast cache cannot outlive a capture.
        with torch.autocast("cuda", dtype=torch.float16, enabled=amp, cache_enabled=False):
            local = torch.stack([bag(static_categorical[t]) for t, bag in enumerate(tables)], dim=1)
            if amp:
                local = local.to(torch.float16)
            logits = dense(static_numerical, local)
        loss = F.binary_cross_entropy_with_logits(logits.float(), static_labels)
        scaler.scale(loss).backward()
        return loss.detach()

    def weight_update():
        scaler.step(dense_sgd)
        scaler.step(sparse_sgd)
        scaler.update()

    def zero_grad():
        dense_sgd.zero_grad(set_to_none=True)
        sparse_sgd.zero_grad(set_to_none=True)

    # Warm-up on a side stream before the capture (autograd, GradScaler's state, cuBLAS handles),
    # then the gradients dropped so that the captured backward allocates them in the graph's pool.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            zero_grad()
            forward_backward()
            weight_update()
    torch.cuda.current_stream().wait_stream(side)
    zero_grad()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = forward_backward()
    moving_loss = torch.zeros((), device="cuda")

    def step():
        numerical, categorical, labels = next(batches)
        torch.cuda.synchronize()
        for group in dense_sgd.param_groups + sparse_sgd.param_groups:  # the learning-rate scheduler
            group["lr"] = a.lr
        static_numerical.copy_(numerical)
        static_categorical.copy_(categorical)
        static_labels.copy_(labels)
        graph.replay()
        weight_update()
        moving_loss.add_(static_loss)
        if not losses:
            losses.append(static_loss.clone())

    return step, static_loss


def run_values(a):
    """The run's workload keys as stepsim names them (docs/dlrm.md), for the -p overrides."""
    values = {"training.global_batch": a.global_batch, "training.dtype": "fp16" if a.precision == "amp" else "fp32",
              "training.embedding_dtype": "fp32", "training.embedding_gradient": "sparse",
              "model.interaction_kernel": "gemm", "model.interaction_pad_to": 1, "model.mlp_epilogue": "torch",
              "model.embedding_kernel": "torch",
              "training.optimizer": "sgd", "training.cuda_graphs": a.cuda_graph,
              "training.ddp_bucket": "25MiB",
              "sharding.plan": "table_wise", "sharding.planner": "naive", "sharding.bottom_mlp": "data_parallel",
              "sharding.process_groups": "separate",
              "index_distribution.kind": a.distribution}
    if a.distribution == "zipf":
        values["index_distribution.alpha"] = a.alpha
    if a.cuda_graph:  # torch_runtime.time_steps synchronizes before each step's next(batch_iter)
        values["training.sync_each_step"] = True
    return values


def main():
    a = parse_args()
    preset = common.read_preset(a.workload)
    rows = common.capped_rows(common.preset_list(preset, "rows"), a.rows_cap)
    scalars = common.preset_scalars(preset)
    dense_features, dim = int(scalars["model.dense_features"]), int(scalars["model.embedding_dim"])
    bottom, top = common.preset_list(preset, "bottom_mlp"), common.preset_list(preset, "top_mlp")
    rank, world, local_rank = runtime.init_distributed()
    if a.global_batch % world or world > len(rows):
        raise SystemExit(f"dlrm_iteration: --global-batch {a.global_batch} must divide by the {world} GPUs, and "
                         f"every GPU needs a table (at most {len(rows)} GPUs)")
    if a.cuda_graph and world > 1:
        raise SystemExit("dlrm_iteration: --cuda-graph runs on one GPU (DDP and the all-to-all are not captured)")
    b = a.global_batch // world
    mine = common.tables_of_rank(len(rows), world, rank)

    torch.manual_seed(a.seed)
    with torch.device("cuda"):
        tables = nn.ModuleList(nn.EmbeddingBag(rows[t], dim, mode="sum", sparse=True) for t in mine)
        dense = DenseArch(dense_features, bottom, top, len(rows))
    if world > 1:
        # No buffer broadcast: the only buffer is the constant `pairs` (stepsim has no broadcast).
        dense = nn.parallel.DistributedDataParallel(dense, device_ids=[local_rank], bucket_cap_mb=25,
                                                    broadcast_buffers=False)
        embedding_group = dist.new_group()  # TorchRec's layout: the exchange has its own communicator
        send, receive = common.alltoall_splits(len(rows), world, rank, b, dim)
        widths = [len(common.tables_of_rank(len(rows), world, r)) for r in range(world)]
    sparse_sgd = torch.optim.SGD(tables.parameters(), lr=a.lr, foreach=False)
    dense_sgd = torch.optim.SGD(dense.parameters(), lr=a.lr, fused=True)
    amp = a.precision == "amp"
    scaler = torch.amp.GradScaler("cuda", enabled=amp)

    batches = a.warmup + a.steps + 2  # a fresh batch for every iteration, the profiled two included
    indices = [draw_indices(rows[t], batches, a.global_batch, a,
                            torch.Generator(device="cuda").manual_seed(a.seed * 1000 + 1 + t))[:, :, None]
               for t in mine]  # [batches, B, 1]: one lookup per sample (pooling 1)
    data = torch.Generator(device="cuda").manual_seed(a.seed * 1000 + 999 + rank)
    features = torch.randn((batches, b, dense_features), device="cuda", generator=data)
    labels = torch.randint(2, (batches, b), device="cuda", generator=data).float()
    losses = []
    if a.cuda_graph:
        host = (features.half().cpu(), torch.stack(indices, dim=1).cpu(), labels.cpu())  # pageable, as DLE's loader
        del features, indices, labels
        step, graph_loss = dle_loop(a, tables, dense, scaler, dense_sgd, sparse_sgd, host, losses)
    else:
        counter = [0]

        def step():
            i = counter[0] % batches
            counter[0] += 1
            with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
                # Lookups of this rank's tables for the whole global batch, cast to fp16 under AMP (DLE).
                local = torch.stack([bag(idx[i]) for bag, idx in zip(tables, indices)], dim=1)
                if amp:
                    local = local.to(torch.float16)
                if world > 1:
                    flat = AllToAll.apply(local.reshape(-1), send, receive, embedding_group)
                    parts = flat.split(receive)
                    pooled = torch.cat([part.view(b, w, dim) for part, w in zip(parts, widths)], dim=1)
                else:
                    pooled = local
                logits = dense(features[i], pooled)
            loss = F.binary_cross_entropy_with_logits(logits.float(), labels[i])
            scaler.scale(loss).backward()
            scaler.step(dense_sgd)
            scaler.step(sparse_sgd)
            scaler.update()
            dense_sgd.zero_grad(set_to_none=True)
            sparse_sgd.zero_grad(set_to_none=True)
            losses.append(loss.detach())
    times = runtime.time_steps(step, a.warmup, a.steps)
    peak_text = runtime.peak_memory()
    trace = runtime.profile_step(step, a.trace, write=rank == 0)
    if a.cuda_graph:
        losses.append(graph_loss.clone())
    if rank == 0:
        write_outputs(a, world, rows, preset, times, peak_text, trace, losses, scaler.get_scale())
    dist.barrier()
    dist.destroy_process_group()


def write_outputs(a, world, rows, preset, times, peak_text, trace, losses, scale):
    out = Path(a.out)
    workload = a.workload
    # `-p` can neither set list entries (YamlReader::apply_override) nor remove a key, so the capped
    # tables and an eager run's lack of a CUDA graph (graph_scope needs one) go into a workload file
    # beside the measurement: the preset with `rows` replaced and, eager, `training.graph_scope` dropped.
    described = common.replace_preset_list(preset, "rows", rows)
    if not a.cuda_graph:
        described = common.drop_preset_scalar(described, "training.graph_scope")
    if described != preset:
        workload_file = out.with_name(out.stem + ".workload.yaml")
        graph = "" if a.cuda_graph else " and no training.graph_scope (no CUDA graph)"
        header = (f"# {a.workload} with every table capped at {a.rows_cap} rows{graph}, as dlrm_iteration.py ran it (written with {out.name}; the -p overrides of its iteration "
                  f"apply on top).\n")
        common.write_text(workload_file, header + described)
        workload = workload_file.name
    date, clock = common.utc_now()
    table_gb = sum(rows) * int(common.preset_scalars(preset)["model.embedding_dim"]) * 4 / 1e9
    source = {
        "tool": "torch dlrm_iteration.py",
        "command": common.command_line(sys.argv, world, int(os.environ.get("LOCAL_WORLD_SIZE", world))),
        "date": date,
        "notes": (f"{clock} UTC; {world} rank(s); DLRM {len(rows)} tables ({table_gb:.1f} GB fp32, rows capped at "
                  f"{a.rows_cap}), {a.distribution} indices{f' alpha {a.alpha}' if a.distribution == 'zipf' else ''}, "
                  f"{f'AMP fp16 with GradScaler (final scale {scale:g})' if a.precision == 'amp' else 'fp32'}, SGD lr {a.lr}, sparse table updates; "
                  f"{'NVIDIA DLE loop: forward and backward in a CUDA graph, batches from pageable host memory; ' if a.cuda_graph else 'eager; '}"
                  f"workload: {'a file beside this one' if workload != a.workload else 'the preset'}; seed {a.seed}; "
                  f"{a.warmup} warm-up + {a.steps} timed iterations, each the slowest rank's; samples_per_s is per "
                  f"GPU; {peak_text}; loss {float(losses[0]):.4f} -> "
                  f"{float(losses[-1]):.4f}; kernel entries: top {a.kernels} of one profiled iteration on rank 0 "
                  f"({Path(a.trace).name}). {common.environment_summary()}").strip(),
    }
    iteration = common.iteration_entry(workload, times, common.overrides(preset, run_values(a)),
                                       ("samples_per_s", a.global_batch // world))
    measurements = [iteration] + common.kernel_entries(trace, a.kernels)
    common.write_text(out, common.format_measurements(source, runtime.system(world, a.platform), measurements))
    print(f"dlrm_iteration: {iteration['time_s'] * 1e3:.3f} ms per iteration, {iteration['samples_per_s']:.0f} "
          f"samples/s per GPU, {peak_text}; wrote {a.out} and {a.trace}")


if __name__ == "__main__":
    runtime.run_main(main, "dlrm_iteration", "try a smaller --global-batch or --rows-cap")
