#!/usr/bin/env python3
"""Times PyTorch's own nn.EmbeddingBag forward (sum pooling, one table per launch: the kernel
that eager DLRMs such as dlrm_iteration.py run) over rows, dim, pooling, batch and dtype, and
writes a measurement file (docs/measurements.md) of `kind: embedding` entries with
`kernel: torch`, which stepsim validates against its torch_embedding_bag model
(models/compute/torch_embedding_bag.cpp).

Run: python3 embedding_bag_sweep.py --out embedding-bag.yaml [--quick]
Indices are uniform (torch.randint, --seed); every case cycles through a pool of 8 index
batches, so the L2 does not keep one batch's rows. The calls replay from a CUDA graph, so small
cases measure the GPU, not PyTorch's ~25 us of CPU per eager call.
"""
import argparse
import itertools
import sys

import torch
from torch import nn

import iteration_common as common
import torch_runtime as runtime

FULL = {"rows": [1000, 10_000_000], "dim": [32, 64, 128, 256], "pooling": [1, 4, 16], "batch": [8192, 65536],
        "dtype": ["fp32", "fp16"]}
QUICK = {"rows": [1000, 10_000_000], "dim": [128], "pooling": [1, 4], "batch": [65536], "dtype": ["fp32"]}
DTYPES = {"fp32": torch.float32, "fp16": torch.float16}
POOL = 8  # index batches cycled through


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="measurement file (YAML) to write")
    p.add_argument("--quick", action="store_true", help="a few cases only")
    p.add_argument("--reps", type=int, default=20, help="timed repetitions per case")
    p.add_argument("--calls", type=int, default=20, help="back-to-back calls per repetition")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--platform", default="", help="stepsim platform preset (default: from the GPU name)")
    a = p.parse_args()
    if a.reps < 1 or a.calls < 1:
        p.error("--reps and --calls must be >= 1")
    return a


def time_case(rows, dim, pooling, batch, dtype, a, generator):
    bag = nn.EmbeddingBag(rows, dim, mode="sum", device="cuda", dtype=DTYPES[dtype])
    indices = [torch.randint(rows, (batch * pooling,), device="cuda", generator=generator) for _ in range(POOL)]
    offsets = torch.arange(0, batch * pooling, pooling, device="cuda")
    with torch.no_grad():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up before capture, as torch.cuda.graphs asks
            for i in range(5):
                bag(indices[i % POOL], offsets)
        torch.cuda.current_stream().wait_stream(side)
        # The calls replay from a CUDA graph: the GPU's time, not the CPU's launch rate (an eager
        # call costs ~25 us of Python and launches, longer than the kernel at small batches).
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for i in range(a.calls):
                bag(indices[i % POOL], offsets)
        graph.replay()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(a.reps):
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3 / a.calls)
    return common.spread(times)


def main():
    a = parse_args()
    grid = QUICK if a.quick else FULL
    generator = torch.Generator(device="cuda").manual_seed(a.seed)
    measurements = []
    for rows, dim, pooling, batch, dtype in itertools.product(*grid.values()):
        s = time_case(rows, dim, pooling, batch, dtype, a, generator)
        print(f"embedding_bag rows {rows} dim {dim} pooling {pooling} batch {batch} {dtype}: "
              f"{s['mean_s'] * 1e6:.1f} us", file=sys.stderr)
        measurements.append({"kind": "embedding", "rows": rows, "dim": dim, "pooling": pooling, "batch": batch,
                             "tables": 1, "dtype": dtype, "distribution": "uniform", "seed": a.seed,
                             "pass": "forward", "kernel": "torch", "time_s": s["mean_s"],
                             "spread": common.spread_entry(s)})
        torch.cuda.empty_cache()
    runtime.write_sweep("embedding_bag_sweep", a.out, a.platform,
                        f"nn.EmbeddingBag(mode='sum') forward under no_grad, offsets every `pooling` indices; "
                        f"time_s is the mean over {a.reps} repetitions of a CUDA graph of {a.calls} calls (timed "
                        f"with CUDA events, divided by {a.calls}), cycling through {POOL} uniform index batches; "
                        f"seed {a.seed}", measurements)


if __name__ == "__main__":
    runtime.run_main(main, "embedding_bag_sweep", "try --quick")
