"""Torch-free logic of fsdp_iteration.py and dlrm_iteration.py, kept apart so that it is
unit-tested on machines without torch or a GPU (tests/iteration_common_test.py).

It reads the stepsim workload presets (so a run is described relative to the preset it
mirrors), writes measurement files (schema: docs/measurements.md), summarises the kernels of a
Kineto trace, and holds the small pieces of the scripts' set-up that need no torch: the
timing statistics, GPU naming and DLRM's table placement and all-to-all splits.
"""
import datetime
import json
import math
import os
import re
import statistics
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
PRESETS = REPO_ROOT / "workloads" / "presets"

# ---------------------------------------------------------------- timing


def spread(times):
    """Mean and spread of per-iteration times (seconds), as the schema's `spread` wants them."""
    if not times:
        raise ValueError("no timed iterations: use --steps 1 or more")
    return {
        "mean_s": statistics.fmean(times),
        "repetitions": len(times),
        "min_s": min(times),
        "max_s": max(times),
        # The sample standard deviation; one repetition has none.
        "stdev_s": statistics.stdev(times) if len(times) > 1 else 0.0,
    }


# ---------------------------------------------------------------- presets


def read_preset(name):
    """Text of workloads/presets/NAME.yaml."""
    path = PRESETS / (name + ".yaml")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: stepsim preset not found; run the script from a stepsim checkout")
    return path.read_text()


_SECTION = re.compile(r"^([A-Za-z_]\w*):\s*(#.*)?$")
_TOP_SCALAR = re.compile(r"^([A-Za-z_]\w*):\s*([^\s#\[{][^#]*?)\s*(#.*)?$")
_SCALAR = re.compile(r"^  ([A-Za-z_]\w*):\s*([^\s#\[{][^#]*?)\s*(#.*)?$")


def preset_scalars(text):
    """The scalar keys of a preset as {"section.key": "value"} (top-level keys without a
    section). Lists, flow maps and deeper levels are skipped: `-p` overrides cannot set them."""
    out, section = {}, None
    for line in text.splitlines():
        if m := _SECTION.match(line):
            section = m.group(1)
        elif m := _TOP_SCALAR.match(line):
            section = None
            out[m.group(1)] = m.group(2)
        elif (m := _SCALAR.match(line)) and section:
            out[f"{section}.{m.group(1)}"] = m.group(2)
    return out


def preset_list(text, key):
    """The flow list `KEY: [a, b, ...]` of a preset (it may span lines), as numbers."""
    m = re.search(r"^\s*" + re.escape(key) + r":\s*\[([^\]]*)\]", text, re.MULTILINE)
    if not m:
        raise KeyError(f"no list '{key}' in the preset")
    return [int(v) if re.fullmatch(r"-?\d+", v.strip()) else float(v) for v in m.group(1).split(",") if v.strip()]


def replace_preset_list(text, key, values):
    """The preset text with the flow list KEY replaced by `values` (everything else kept)."""
    pattern = re.compile(r"^(\s*" + re.escape(key) + r":\s*)\[[^\]]*\]", re.MULTILINE)
    new, count = pattern.subn(lambda m: m.group(1) + "[" + ", ".join(str(v) for v in values) + "]", text, count=1)
    if count != 1:
        raise KeyError(f"no list '{key}' in the preset")
    return new


def drop_preset_scalar(text, key):
    """The preset text without the scalar "section.key" (its line, comment included): for a key
    that a run's own settings make invalid, since a `-p` override can change a key, not remove it.
    Text without the key comes back unchanged."""
    section, name = key.split(".")
    out, current = [], None
    for line in text.splitlines(keepends=True):
        if m := _SECTION.match(line):
            current = m.group(1)
        elif (m := _SCALAR.match(line)) and current == section and m.group(1) == name:
            continue
        out.append(line)
    return "".join(out)


def value_text(value):
    """A Python value as a `-p` override writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _same(a, b):
    try:
        return float(a) == float(b)
    except ValueError:
        return a.lower() == b.lower() if a.lower() in ("true", "false") else a == b


def overrides(preset, run):
    """`-p workload.KEY=VALUE` overrides (as stepsim simulate takes them) that turn the preset
    into the run: one per key of `run` whose value the preset lacks or differs from."""
    scalars = preset_scalars(preset)
    out = []
    for key, value in run.items():
        text = value_text(value)
        if key not in scalars or not _same(scalars[key], text):
            out.append(f"workload.{key}={text}")
    return out


# ---------------------------------------------------------------- models (sizes)


def llama_params(layers, hidden, heads, kv_heads, ffn_hidden, vocab):
    """Parameters of the Llama decoder stepsim's transformer generator describes (untied
    output, RMSNorm, no biases): 8,030,261,248 for Llama 3.1 8B."""
    head_dim = hidden // heads
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    block = attention + 3 * hidden * ffn_hidden + 2 * hidden
    return 2 * vocab * hidden + layers * block + hidden


def capped_rows(rows, cap):
    """Table rows with every table capped at `cap` (MLPerf's --max-ind-range does the same)."""
    return [min(r, cap) if cap else r for r in rows]


def tables_of_rank(tables, ranks, rank):
    """stepsim's `naive` planner (docs/dlrm.md): table i on rank i mod ranks."""
    return [t for t in range(tables) if t % ranks == rank]


def alltoall_splits(tables, ranks, rank, local_batch, dim):
    """Element counts of the pooled-embedding all-to-all of `rank` (forward): it sends each
    peer its own tables' rows for that peer's `local_batch` samples and receives every peer's
    tables for its own samples. Returns (input_splits, output_splits)."""
    mine = len(tables_of_rank(tables, ranks, rank))
    send = [local_batch * mine * dim] * ranks
    receive = [local_batch * len(tables_of_rank(tables, ranks, peer)) * dim for peer in range(ranks)]
    return send, receive


# ---------------------------------------------------------------- system


def gpu_model(name):
    """stepsim's catalogue name (platforms/presets/gpus.yaml) of a driver GPU name, or ""."""
    known = [("H100 80GB HBM3", "H100-SXM5-80GB"), ("H200", "H200-SXM5-141GB"), ("B200", "B200"),
             ("A100-SXM4-80GB", "A100-SXM4-80GB"), ("A100-SXM4-40GB", "A100-SXM4-40GB")]
    for fragment, model in known:
        if fragment in name:
            return model
    return ""


def platform_of(model):
    """The stepsim platform preset built around a GPU model, or ""."""
    return {"H100-SXM5-80GB": "dgx-h100", "H200-SXM5-141GB": "dgx-h200", "B200": "dgx-b200",
            "A100-SXM4-40GB": "dgx-a100"}.get(model, "")


def gpu_list(local_ranks, visible_devices):
    """The job's GPUs in stepsim's --gpus syntax ("0,1,2"), physical indices when
    CUDA_VISIBLE_DEVICES renumbers them (UUIDs or MIG names cannot be mapped: "")."""
    if visible_devices:
        ids = [v.strip() for v in visible_devices.split(",")]
        if not all(v.isdigit() for v in ids) or local_ranks > len(ids):
            return ""
        return ",".join(ids[:local_ranks])
    return ",".join(str(i) for i in range(local_ranks))


def single_rank_env(environ, port):
    """Environment that torch.distributed's env:// initialisation needs, for a run without
    torchrun: one rank on local GPU 0. Keys torchrun set are kept."""
    if "WORLD_SIZE" in environ:
        return {}
    return {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0", "LOCAL_RANK": "0",
            "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1"}


def command_line(argv, world, local):
    """The command that ran the script, as one would type it again (torchrun for several ranks)."""
    words = [Path(argv[0]).name] + list(argv[1:])
    if world > 1:
        nodes = f"--nnodes {world // local} " if world > local else ""
        words = [f"torchrun {nodes}--nproc-per-node {local}"] + words
    return " ".join(words)


def utc_now():
    """(date, time) in UTC, as the measurement file's source.date and notes write them."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return now.strftime("%Y-%m-%d"), now.strftime("%H:%M:%S")


# ---------------------------------------------------------------- Kineto trace


def kernel_totals(trace, top):
    """The `top` GPU kernels of a Kineto trace (a dict from its JSON) by summed duration:
    [{"name", "time_s", "count", "stream"}]. Kernels of one name on several streams are kept
    apart (the stream matters to a replay)."""
    totals = {}
    for event in trace.get("traceEvents", []):
        if event.get("ph") != "X" or event.get("cat") != "kernel":
            continue
        args = event.get("args") or {}
        stream = args.get("stream", event.get("tid"))
        key = (event.get("name", "?"), stream if isinstance(stream, int) else None)
        entry = totals.setdefault(key, [0.0, 0])
        entry[0] += float(event.get("dur", 0)) * 1e-6
        entry[1] += 1
    ranked = sorted(totals.items(), key=lambda item: (-item[1][0], item[0][0]))
    out = []
    for (name, stream), (time_s, count) in ranked[:top]:
        if time_s <= 0:
            continue
        entry = {"name": name, "time_s": time_s, "count": count}
        if stream is not None:
            entry["stream"] = stream
        out.append(entry)
    return out


def kernel_launch_count(trace):
    """GPU kernels in a Kineto trace (a dict from its JSON): what stepsim's kernel count per
    iteration is compared with (eager launches far more than a compiled graph)."""
    return sum(1 for e in trace.get("traceEvents", []) if e.get("ph") == "X" and e.get("cat") == "kernel")


# ---------------------------------------------------------------- measurement file


def yaml_number(value):
    """A number as YAML that yaml-cpp and PyYAML both read back as the same float or int."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"not a number: {value!r}")
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        raise ValueError(f"cannot write a non-finite number: {value}")
    text = repr(value)
    mantissa, e, exponent = text.partition("e")
    if e and "." not in mantissa:  # PyYAML (YAML 1.1) needs the dot: 1.0e-05, not 1e-05
        text = mantissa + ".0e" + exponent
    return text


def yaml_text(value):
    """A string as a double-quoted YAML scalar (a JSON string is one)."""
    return json.dumps(str(value))


def _flow_map(mapping):
    return "{" + ", ".join(f"{k}: {yaml_text(v) if isinstance(v, str) else yaml_number(v)}"
                           for k, v in mapping.items()) + "}"


def format_measurements(source, system, measurements):
    """The text of a measurement file (docs/measurements.md), keys in the schema's order.
    `source` and `system` are dicts of the schema's keys; each measurement a dict whose
    `spread` is a dict and `params` a list of strings."""
    lines = ["# stepsim measurement file (schema: docs/measurements.md)", "version: 1", "source:"]
    for key in ("tool", "command", "file", "date", "notes"):
        if source.get(key):
            lines.append(f"  {key}: {yaml_text(source[key])}")
    lines.append("system:")
    for key in ("platform", "gpu", "gpu_model", "gpus", "nodes", "gpu_list", "software", "params"):
        value = system.get(key)
        if value in (None, "", [], {}):
            continue
        if key == "software":
            lines.append(f"  software: {_flow_map(value)}")
        elif key == "params":
            lines.append("  params: [" + ", ".join(yaml_text(p) for p in value) + "]")
        elif isinstance(value, str):
            lines.append(f"  {key}: {yaml_text(value)}")
        else:
            lines.append(f"  {key}: {yaml_number(value)}")
    lines.append("measurements:")
    for m in measurements:
        first = True
        for key, value in m.items():
            lead = "  - " if first else "    "
            first = False
            if key == "spread":
                text = _flow_map(value)
            elif key == "params":
                text = "[" + ", ".join(yaml_text(p) for p in value) + "]"
            elif isinstance(value, str):
                text = yaml_text(value)
            else:
                text = yaml_number(value)
            lines.append(f"{lead}{key}: {text}")
    return "\n".join(lines) + "\n"


def spread_entry(s):
    """The schema's `spread` mapping of a spread() result (its mean goes to `time_s`)."""
    return {k: s[k] for k in ("repetitions", "min_s", "max_s", "stdev_s")}


def iteration_entry(workload, times, params, per_gpu_rate=None):
    """The `iteration` measurement: mean time, spread, -p overrides and (when given) the
    throughput per GPU as ("tokens_per_s" | "samples_per_s", items per iteration per GPU)."""
    s = spread(times)
    entry = {"kind": "iteration", "workload": workload, "time_s": s["mean_s"]}
    if per_gpu_rate:
        key, items = per_gpu_rate
        entry[key] = items / s["mean_s"]
    entry["spread"] = spread_entry(s)
    if params:
        entry["params"] = list(params)
    return entry


def kernel_entries(trace, top):
    """`kernel` measurements of the `top` kernels of one profiled iteration."""
    return [{"kind": "kernel", **k} for k in kernel_totals(trace, top)]


def write_text(path, text):
    """Writes `text` to `path`, creating its folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def environment_summary(keys=("PYTORCH_CUDA_ALLOC_CONF", "NCCL_ALGO", "NCCL_PROTO", "CUDA_VISIBLE_DEVICES")):
    """The environment variables that change what a run measures, as `K=V` text."""
    return " ".join(f"{k}={os.environ[k]}" for k in keys if k in os.environ)
