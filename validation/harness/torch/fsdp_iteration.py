#!/usr/bin/env python3
"""Times training iterations of a Llama-3-style decoder under FSDP2, as stepsim's `fsdp`
generator models them (docs/fsdp.md, workloads/generators/transformer.cpp and fsdp.cpp), and
writes a measurement file (docs/measurements.md) and a Kineto trace of one iteration.

The model is torchtitan's Llama 3 in eager PyTorch, op for op as transformer.cpp lists it:
token embedding; per block RMSNorm (fp32 arithmetic, 8 kernels), wq/wk/wv, RoPE in complex
fp32, repeat_kv, causal SDPA, wo, residual, RMSNorm, SwiGLU w1/w3/w2, residual; final norm,
output projection, cross_entropy on fp32 logits. FSDP2 (fully_shard) per block, then the root,
bf16 parameters and fp32 gradient reduction, blocks reshard after forward except the last
(torchtitan's apply_fsdp); fused AdamW; clipping at max_norm 1.0.

--compile compiles each block as torchtitan's apply_compile does (after activation checkpointing,
before FSDP); --float8 tensorwise|rowwise swaps every block linear (not the output) for torchao's
Float8Linear as torchtitan's Float8Handler does, and --float8-all-gather all-gathers their
weights in fp8 with the scales precomputed after each step (torchao is needed for both).

Run: python3 fsdp_iteration.py --out f.yaml --trace f.json.gz        (one GPU)
     torchrun --standalone --nproc-per-node 8 fsdp_iteration.py ...   (several)
validation/harness/torch/README.md has the details and the memory estimate.
"""
import argparse
import collections
import os
import sys
from pathlib import Path

os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")  # torchtitan's setting

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard  # noqa: E402
from torch.distributed.tensor import DTensor  # noqa: E402
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts  # noqa: E402

import iteration_common as common  # noqa: E402  (the scripts' folder is on sys.path)
import torch_runtime as runtime  # noqa: E402


# ---------------------------------------------------------------- model (torchtitan's Llama 3)


class RMSNorm(nn.Module):
    """torchtitan's eager RMSNorm: x.float(), pow, mean, + eps, rsqrt, mul, type_as, * weight."""

    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def precompute_freqs_cis(head_dim, seq, theta=500000.0):
    """RoPE rotations as complex64, Llama 3's theta (rope_theta 500000)."""
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
    angles = torch.outer(torch.arange(seq, dtype=torch.float32), freqs)
    return torch.polar(torch.ones_like(angles), angles)


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    f = freqs_cis[: xq_.shape[1]].view(1, xq_.shape[1], 1, xq_.shape[-1])
    return torch.view_as_real(xq_ * f).flatten(3).type_as(xq), torch.view_as_real(xk_ * f).flatten(3).type_as(xk)


def repeat_kv(x, n_rep):
    """K/V heads copied to every query head (torchtitan's repeat_kv: expand + reshape copies)."""
    if n_rep == 1:
        return x
    bs, seq, kv_heads, head_dim = x.shape
    return x[:, :, :, None, :].expand(bs, seq, kv_heads, n_rep, head_dim).reshape(bs, seq, kv_heads * n_rep, head_dim)


class Attention(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = a.heads, a.kv_heads, a.hidden // a.heads
        self.wq = nn.Linear(a.hidden, a.heads * self.head_dim, bias=False)
        self.wk = nn.Linear(a.hidden, a.kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(a.hidden, a.kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(a.heads * self.head_dim, a.hidden, bias=False)

    def forward(self, x, freqs_cis):
        bs, seq, _ = x.shape
        xq = self.wq(x).view(bs, seq, -1, self.head_dim)
        xk = self.wk(x).view(bs, seq, -1, self.head_dim)
        xv = self.wv(x).view(bs, seq, -1, self.head_dim)
        xq, xk = apply_rotary_emb(xq, xk, freqs_cis)
        n_rep = self.heads // self.kv_heads
        keys, values = repeat_kv(xk, n_rep), repeat_kv(xv, n_rep)
        out = F.scaled_dot_product_attention(xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2),
                                             is_causal=True)
        return self.wo(out.transpose(1, 2).contiguous().view(bs, seq, -1))


class FeedForward(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.w1 = nn.Linear(a.hidden, a.ffn_hidden, bias=False)
        self.w2 = nn.Linear(a.ffn_hidden, a.hidden, bias=False)
        self.w3 = nn.Linear(a.hidden, a.ffn_hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.attention_norm = RMSNorm(a.hidden)
        self.attention = Attention(a)
        self.ffn_norm = RMSNorm(a.hidden)
        self.feed_forward = FeedForward(a)

    def forward(self, x, freqs_cis):
        h = x + self.attention(self.attention_norm(x), freqs_cis)
        return h + self.feed_forward(self.ffn_norm(h))


# torchtitan's op-level selective AC (_apply_ac_to_transformer_block, selective_ac_option "op"):
# SDPA outputs and every odd-numbered mm of a block are saved, the rest recomputed. stepsim's
# `activation_checkpointing: selective` is exactly this (transformer.cpp, layer_block).
def _attention_ops():
    ops = []
    for name in ("_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                 "_scaled_dot_product_cudnn_attention"):
        try:
            ops.append(getattr(torch.ops.aten, name).default)
        except (AttributeError, RuntimeError):
            pass  # an older torch without this backend
    return ops


_SAVE = set(_attention_ops()) | {torch.ops.aten.mm.default}


def _selective_context():
    counts = collections.defaultdict(int)

    def policy(ctx, func, *args, **kwargs):
        mode = "recompute" if ctx.is_recompute else "forward"
        if func == torch.ops.aten.mm.default:
            counts[mode] += 1
        save = func in _SAVE and not (func == torch.ops.aten.mm.default and counts[mode] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if save else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


class Checkpointed(nn.Module):
    """A block under activation checkpointing: `full` recomputes its whole forward before its
    backward, `selective` only the ops the policy above does not save."""

    def __init__(self, block, mode):
        super().__init__()
        self.block, self.mode = block, mode

    def forward(self, x, freqs_cis):
        extra = {"context_fn": _selective_context} if self.mode == "selective" else {}
        return checkpoint(self.block, x, freqs_cis, use_reentrant=False, preserve_rng_state=False, **extra)


class Transformer(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.tok_embeddings = nn.Embedding(a.vocab, a.hidden)
        self.layers = nn.ModuleList(TransformerBlock(a) for _ in range(a.layers))
        self.norm = RMSNorm(a.hidden)
        self.output = nn.Linear(a.hidden, a.vocab, bias=False)
        self.register_buffer("freqs_cis", precompute_freqs_cis(a.hidden // a.heads, a.seq), persistent=False)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, self.freqs_cis)
        return self.output(self.norm(h))


# ---------------------------------------------------------------- run


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--layers", type=int, default=4, help="Llama 3 8B has 32; 4 fit one 80 GB GPU with AdamW")
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--ffn-hidden", type=int, default=14336)
    p.add_argument("--vocab", type=int, default=128256)
    p.add_argument("--seq", type=int, default=8192)
    p.add_argument("--micro-batch", type=int, default=2, help="sequences per GPU")
    p.add_argument("--ac", choices=["none", "selective", "full"], default="selective",
                   help="activation checkpointing of every block")
    p.add_argument("--compile", action="store_true", help="torch.compile each block (torchtitan's training.compile)")
    p.add_argument("--float8", choices=["none", "tensorwise", "rowwise"], default="none",
                   help="torchao Float8Linear for the block linears (needs --compile, an SM89+ GPU and torchao)")
    p.add_argument("--float8-all-gather", action="store_true",
                   help="FSDP all-gathers the Float8 weights in fp8, scales precomputed (tensorwise only)")
    p.add_argument("--steps", type=int, default=10, help="timed iterations")
    p.add_argument("--warmup", type=int, default=3, help="untimed iterations first")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kernels", type=int, default=30, help="kernel entries: the top N of the profiled iteration")
    p.add_argument("--workload", default="llama3-8b", help="stepsim preset the run is described against")
    p.add_argument("--platform", default="", help="stepsim platform preset (default: from the GPU name)")
    p.add_argument("--out", required=True, help="measurement file (YAML) to write")
    p.add_argument("--trace", required=True, help="Kineto trace of one iteration to write (.json.gz)")
    a = p.parse_args()
    if a.hidden % a.heads or a.heads % a.kv_heads:
        p.error("--heads must divide --hidden and --kv-heads must divide --heads")
    if a.steps < 1 or a.warmup < 0:
        p.error("--steps must be >= 1 and --warmup >= 0")
    if a.float8 != "none" and not a.compile:
        p.error("--float8 is run as torchtitan runs it, under --compile")
    if a.float8_all_gather and a.float8 != "tensorwise":
        p.error("--float8-all-gather needs --float8 tensorwise (torchao's fp8 all-gather)")
    return a


def build(a, world):
    """The model on this GPU, checkpointed and sharded as torchtitan does, and its optimizer."""
    torch.manual_seed(a.seed)  # identical initial weights on every rank
    with torch.device("cuda"):
        model = Transformer(a)
    expected = common.llama_params(a.layers, a.hidden, a.heads, a.kv_heads, a.ffn_hidden, a.vocab)
    if sum(p.numel() for p in model.parameters()) != expected:  # stepsim's count (transformer.cpp)
        raise AssertionError(f"the model has {sum(p.numel() for p in model.parameters())} parameters, stepsim's "
                             f"transformer generator counts {expected}")
    if a.float8 != "none":
        convert_float8(model, a)
    if a.ac != "none":
        for i, block in enumerate(model.layers):
            model.layers[i] = Checkpointed(block, a.ac)
    if a.compile:  # torchtitan's apply_compile: each block on its own, after AC, before FSDP
        for i, block in enumerate(model.layers):
            model.layers[i] = torch.compile(block, fullgraph=True)
    mesh = init_device_mesh("cuda", (world,))
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for i, block in enumerate(model.layers):
        # The last block stays unsharded after forward: backward needs it at once (torchtitan).
        fully_shard(block, mesh=mesh, mp_policy=mp, reshard_after_forward=i < len(model.layers) - 1)
    fully_shard(model, mesh=mesh, mp_policy=mp, reshard_after_forward=True)
    # torchtitan's defaults: lr 8e-4, betas (0.9, 0.95), weight decay 0.1, fused implementation.
    optimizer = torch.optim.AdamW(model.parameters(), lr=8e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1,
                                  fused=True)
    return model, optimizer


def convert_float8(model, a):
    """torchtitan's Float8Handler: every nn.Linear but the output becomes a torchao Float8Linear
    (dynamic scaling; tensorwise, or the rowwise recipe)."""
    try:
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    except ImportError as e:
        raise SystemExit(f"fsdp_iteration: --float8 needs torchao ({e}); pip install torchao, or drop --float8")
    if torch.cuda.get_device_capability() < (8, 9):
        raise SystemExit("fsdp_iteration: --float8 needs FP8 tensor cores (SM89 or later); drop --float8")
    if a.float8 == "rowwise":
        config = Float8LinearConfig.from_recipe_name("rowwise")
    else:
        config = Float8LinearConfig(enable_fsdp_float8_all_gather=a.float8_all_gather)
    convert_to_float8_training(model, config=config, module_filter_fn=lambda mod, fqn: fqn != "output")


def clip_grad_norm(params, max_norm):
    """torchtitan's clipping: the total norm of the sharded gradients is a DTensor whose
    full_tensor() all-reduces one number; then every gradient is scaled in place."""
    grads = [p.grad for p in params if p.grad is not None]
    total = torch.nn.utils.get_total_norm(grads, foreach=True)
    if isinstance(total, DTensor):
        total = total.full_tensor()
    torch.nn.utils.clip_grads_with_norm_(params, max_norm, total, foreach=True)


def run_values(a):
    """The run's workload keys as stepsim names them (docs/fsdp.md), for the -p overrides."""
    return {"model.layers": a.layers, "model.hidden": a.hidden, "model.heads": a.heads, "model.kv_heads": a.kv_heads,
            "model.ffn_hidden": a.ffn_hidden, "model.vocab": a.vocab, "training.micro_batch": a.micro_batch,
            "training.sequence": a.seq, "training.gradient_accumulation": 1, "training.param_dtype": "bf16",
            "training.reduce_dtype": "fp32", "training.optimizer": "adamw", "training.max_norm": 1.0,
            "fsdp.strategy": "FULL_SHARD", "fsdp.activation_checkpointing": a.ac, "fsdp.wrap": "layer",
            "training.compile": a.compile, "training.float8": a.float8,
            "training.float8_all_gather": a.float8_all_gather}


def main():
    a = parse_args()
    preset = common.read_preset(a.workload)  # before any GPU work: a wrong name fails at once
    rank, world, _ = runtime.init_distributed()
    model, optimizer = build(a, world)
    params = list(model.parameters())
    generator = torch.Generator(device="cuda").manual_seed(a.seed + 1 + rank)  # each rank its own data
    tokens = torch.randint(a.vocab, (a.micro_batch, a.seq), device="cuda", generator=generator)
    labels = torch.randint(a.vocab, (a.micro_batch, a.seq), device="cuda", generator=generator)
    losses = []

    def step():
        optimizer.zero_grad(set_to_none=True)
        logits = model(tokens)
        # torchtitan's loss: cross entropy of the fp32 logits.
        loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(0, 1))
        loss.backward()
        clip_grad_norm(params, 1.0)
        optimizer.step()
        if a.float8_all_gather:  # torchtitan: the next all-gathers' scales, one all-reduce
            from torchao.float8 import precompute_float8_dynamic_scale_for_fsdp
            precompute_float8_dynamic_scale_for_fsdp(model)
        losses.append(loss.detach())

    times = runtime.time_steps(step, a.warmup, a.steps)
    peak_text = runtime.peak_memory()
    trace = runtime.profile_step(step, a.trace, write=rank == 0)
    if rank == 0:
        date, clock = common.utc_now()
        source = {
            "tool": "torch fsdp_iteration.py",
            "command": common.command_line(sys.argv, world, int(os.environ.get("LOCAL_WORLD_SIZE", world))),
            "date": date,
            "notes": (f"{clock} UTC; {world} rank(s); Llama 3 decoder, FSDP2 fully_shard per block then root, "
                      f"bf16 params, fp32 reduce-scatter, AC {a.ac}, compile {a.compile}, float8 {a.float8}"
                      f"{' (fp8 all-gather)' if a.float8_all_gather else ''}, fused AdamW, clip_grad_norm 1.0; "
                      f"seed {a.seed}; {common.kernel_launch_count(trace)} GPU kernels in the profiled iteration; "
                      f"{a.warmup} warm-up + {a.steps} timed iterations, each the slowest rank's; tokens_per_s is "
                      f"per GPU; {peak_text}; loss {float(losses[0]):.4f} -> "
                      f"{float(losses[-1]):.4f}; kernel entries: top {a.kernels} of one profiled iteration on "
                      f"rank 0 ({Path(a.trace).name}). {common.environment_summary()}").strip(),
        }
        iteration = common.iteration_entry(a.workload, times, common.overrides(preset, run_values(a)),
                                           ("tokens_per_s", a.micro_batch * a.seq))
        measurements = [iteration] + common.kernel_entries(trace, a.kernels)
        common.write_text(a.out, common.format_measurements(source, runtime.system(world, a.platform), measurements))
        print(f"fsdp_iteration: {iteration['time_s']:.4f} s per iteration, {iteration['tokens_per_s']:.0f} tokens/s "
              f"per GPU, {peak_text}; wrote {a.out} and {a.trace}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    runtime.run_main(main, "fsdp_iteration", "try a smaller --micro-batch or --seq, or --ac full")
