#!/usr/bin/env python3
"""Times host-to-device copies as PyTorch data loaders issue them, `tensor.to("cuda",
non_blocking=True)`, from pageable and from pinned host memory, and writes a measurement file
(docs/measurements.md) of `kind: copy` entries with `host_memory`.

Run: python3 host_copy_sweep.py --out host-copy.yaml
A pageable copy is staged by the driver through its own pinned buffer, so the call returns only
once the CPU has copied the data there (NVIDIA/DLE's prefetcher, for one, copies from pageable
memory). Each repetition times one call from just before it to the end of the copy on the GPU
(perf_counter around the call and a stream synchronize); `cpu_s` in the entry is the mean time
the call itself blocked the CPU. The source is written before every repetition, as a loader
writes each new batch, so its pages are resident (and, up to the last-level cache's size, cached:
NVIDIA DLE's own copies of batches its loader wrote earlier ran at about 9 GB/s on the same host
against this sweep's 11).
"""
import argparse
import sys
import time

import torch

import iteration_common as common
import torch_runtime as runtime


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="measurement file (YAML) to write")
    p.add_argument("--min-size", type=int, default=4096, help="smallest copy in bytes")
    p.add_argument("--max-size", type=int, default=256 * 2**20, help="largest copy in bytes")
    p.add_argument("--reps", type=int, default=20, help="timed repetitions per size and memory kind")
    p.add_argument("--platform", default="", help="stepsim platform preset (default: from the GPU name)")
    a = p.parse_args()
    if a.reps < 1 or a.min_size < 1 or a.max_size < a.min_size:
        p.error("--reps >= 1 and 1 <= --min-size <= --max-size")
    return a


def time_copies(size, pinned, reps):
    """Per repetition (wall seconds to the copy's end, seconds the call blocked the CPU)."""
    source = torch.empty(size, dtype=torch.uint8, pin_memory=pinned)
    stream = torch.cuda.current_stream()
    walls, calls = [], []
    for rep in range(reps + 3):  # three untimed first
        source.fill_(rep % 251)
        stream.synchronize()
        start = time.perf_counter()
        copy = source.to("cuda", non_blocking=True)
        returned = time.perf_counter()
        stream.synchronize()
        end = time.perf_counter()
        del copy
        if rep >= 3:
            walls.append(end - start)
            calls.append(returned - start)
    return walls, calls


def main():
    a = parse_args()
    sizes = []
    size = a.min_size
    while size <= a.max_size:
        sizes.append(size)
        size *= 2
    measurements = []
    for memory in ("pageable", "pinned"):
        for size in sizes:
            walls, calls = time_copies(size, memory == "pinned", a.reps)
            s = common.spread(walls)
            cpu = sum(calls) / len(calls)
            print(f"h2d {memory} {size} B: {s['mean_s'] * 1e6:.1f} us ({size / s['mean_s'] / 1e9:.2f} GB/s), call "
                  f"{cpu * 1e6:.1f} us", file=sys.stderr)
            measurements.append({"kind": "copy", "direction": "h2d", "host_memory": memory, "size_bytes": size,
                                 "time_s": s["mean_s"], "cpu_s": cpu,
                                 "spread": common.spread_entry(s)})
    runtime.write_sweep("host_copy_sweep", a.out, a.platform,
                        f"tensor.to('cuda', non_blocking=True) of a uint8 host tensor, pageable or pinned "
                        f"(pin_memory=True), on the current stream; time_s is the mean over {a.reps} repetitions of "
                        f"perf_counter from the call to a synchronize after it; cpu_s the mean time the call "
                        f"blocked; the source rewritten (fill_) before each repetition", measurements)


if __name__ == "__main__":
    runtime.run_main(main, "host_copy_sweep", "try a smaller --max-size")
