"""What fsdp_iteration.py and dlrm_iteration.py share that needs torch: the process group,
the timed loop, the profiled iteration and the `system` section. The torch-free part is
iteration_common.py (unit-tested without torch)."""
import gzip
import json
import os
import socket
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
import torch.distributed as dist

import iteration_common as common

OOM_EXIT = 3  # run-all retries a smaller run on this exit code


def init_distributed():
    """torchrun's environment, or one rank on GPU 0 when there is none (FSDP2 and the
    scripts' collectives need a process group either way). Returns (rank, world, local_rank)."""
    with socket.socket() as s:  # a free port for a run without torchrun
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(common.single_rank_env(os.environ, port))
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    return dist.get_rank(), dist.get_world_size(), local_rank


def time_steps(step, warmup, steps):
    """Runs `warmup` untimed then `steps` timed iterations, each between two synchronizes;
    returns the per-iteration seconds of the slowest rank (the job's iteration time)."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    slowest = torch.tensor(times, device="cuda", dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return slowest.tolist()


def profile_step(step, trace_path, write):
    """Profiles one iteration (after one profiler warm-up iteration, so CUPTI's start-up is not
    in it) with shapes recorded; when `write`, gzips the Kineto trace to `trace_path` and returns
    it as a dict, else returns None. Every rank runs it, so ranks stay in step."""
    folder = Path(tempfile.mkdtemp(prefix="stepsim-trace-"))
    raw = folder / "trace.json"
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=1, repeat=1)
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    # The profiler warns that a new cycle would drop this one's events; there is one cycle.
    warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle.*")
    with torch.profiler.profile(activities=activities, schedule=schedule, record_shapes=True,
                                on_trace_ready=lambda p: p.export_chrome_trace(str(raw))) as prof:
        for _ in range(2):
            step()
            torch.cuda.synchronize()
            prof.step()
    trace = None
    if write:
        trace = json.loads(raw.read_text())
        Path(trace_path).parent.mkdir(parents=True, exist_ok=True)
        with open(raw, "rb") as source, gzip.open(trace_path, "wb") as packed:
            packed.write(source.read())
        size = Path(trace_path).stat().st_size
        if size > 12e6:
            print(f"warning: {trace_path} is {size / 1e6:.1f} MB (over 12 MB)", file=sys.stderr)
    raw.unlink(missing_ok=True)
    folder.rmdir()
    return trace


def peak_memory():
    """The caching allocator's peaks since the process started, for the measurement notes:
    live blocks (max_memory_allocated, what stepsim's memory model predicts as `allocated`) and
    reserved segments (max_memory_reserved, what torchtitan logs)."""
    gib = 2**30
    return (f"peak memory (rank 0) {torch.cuda.max_memory_allocated() / gib:.1f} GiB "
            f"(max_memory_reserved {torch.cuda.max_memory_reserved() / gib:.1f} GiB)")


def software():
    """Versions of the software that ran the measurement."""
    out = {"torch": torch.__version__, "cuda": torch.version.cuda or ""}
    nccl = torch.cuda.nccl.version()
    if nccl:
        out["nccl"] = ".".join(str(v) for v in nccl) if isinstance(nccl, tuple) else str(nccl)
    if torch.backends.cudnn.version():
        out["cudnn"] = str(torch.backends.cudnn.version())
    return {k: v for k, v in out.items() if v}


def system(world, platform):
    """The measurement file's `system` section of this job."""
    name = torch.cuda.get_device_name()
    model = common.gpu_model(name)
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    out = {"platform": platform or common.platform_of(model), "gpu": name, "gpu_model": model, "gpus": world,
           "nodes": max(1, world // local), "software": software()}
    if world == local:  # one node: its GPU indices; several: stepsim's default allocation
        out["gpu_list"] = common.gpu_list(local, os.environ.get("CUDA_VISIBLE_DEVICES"))
    return out


def write_sweep(script, out, platform, notes, measurements):
    """Writes a one-GPU sweep's measurement file: `script` (its name without .py) as the tool, the
    command line, the UTC date, and `notes` after the time of day."""
    date, clock = common.utc_now()
    source = {"tool": f"torch {script}.py", "command": common.command_line(sys.argv, 1, 1), "date": date,
              "notes": f"{clock} UTC; {notes}"}
    common.write_text(out, common.format_measurements(source, system(1, platform), measurements))
    print(f"{script}: {len(measurements)} cases; wrote {out}", file=sys.stderr)


def is_oom(error):
    """Whether an exception is the GPU running out of memory (also as cuBLAS or NCCL say it)."""
    text = str(error).lower()
    return isinstance(error, torch.cuda.OutOfMemoryError) or "out of memory" in text or "alloc_failed" in text


def run_main(main, script, hint):
    """Calls main(); an out-of-memory error exits with OOM_EXIT and a hint."""
    try:
        main()
    except (torch.cuda.OutOfMemoryError, RuntimeError) as error:
        if not is_oom(error):
            raise
        print(f"{script}: out of GPU memory ({str(error).splitlines()[0]}); {hint}", file=sys.stderr)
        sys.exit(OOM_EXIT)
