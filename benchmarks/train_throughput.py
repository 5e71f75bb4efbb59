"""Training throughput of transformer_lib against torch.nn.Transformer, side by side.

One training step = forward, cross-entropy loss, backward, Adam step. Both models get the
same sizes, the same batch, the same masks (source padding; target padding + causal), the
same embeddings (``TokenEmbedding`` + ``PositionalEncoding``), the same output layer and the
same optimizer (``Adam(fused=True)``, as ``transformer_lib``'s trainer uses; ``--no-fused-adam``
for PyTorch's default). Dropout is 0.1 on sub-layer outputs, embeddings and the feed-forward hidden
layer in both, and 0 on attention weights in both (the paper has none there; ``nn.Transformer``
would put its single ``dropout`` there too, so it is switched off in its attention modules).

A third row, "+ compiled kernels", is ``transformer_lib`` with its compiled CPU kernels, as
the training command line runs it on a CPU (``transformer_lib.cpu_kernels``: the same dropout
masks in one pass, the feed-forward layer as one function, and attention read in place from
the projections; needs a C++ compiler, built on first use, ~30 s; ``--no-compiled-kernels``
leaves it out; skipped with a note where they cannot be built).

The process keeps freed memory (glibc's malloc told not to hand it back to the OS; see
``transformer_lib.training.allocator``), so each model runs at its steady state: with the C
library's defaults, how many pages a step faults in depends on what the other model left
behind (``--no-keep-freed-memory`` measures that way).

Also reports model FLOP utilisation (MFU): matmul FLOPs of a step, counted analytically,
per second, against the matmul peak measured by this script on this machine and dtype.

    python benchmarks/train_throughput.py            # full run (a few minutes on 2 cores)
    python benchmarks/train_throughput.py --quick    # smoke test
    python benchmarks/train_throughput.py --isolated # each model alone in a fresh process
"""
from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
from typing import Callable, Dict, Tuple

import torch
import torch.nn.functional as F
from torch import nn

import common
from transformer_lib import Transformer, TransformerConfig, cpu_kernels
from transformer_lib.embedding import TokenEmbedding
from transformer_lib.masks import causal_mask
from transformer_lib.positional import PositionalEncoding
from transformer_lib.training.allocator import keep_freed_memory

# name -> (config overrides, batch size, sequence length)
PRESETS: Dict[str, Tuple[dict, int, int]] = {
    "tiny": (dict(N=2, d_model=32, d_ff=64, h=4), 32, 48),
    "d256": (dict(N=3, d_model=256, d_ff=1024, h=4), 32, 48),
}
QUICK = {"tiny": (dict(N=1, d_model=16, d_ff=32, h=2), 4, 8)}


class TorchTransformer(nn.Module):
    """``torch.nn.Transformer`` between the same embeddings and output layer as ours."""

    def __init__(self, c: TransformerConfig):
        super().__init__()
        self.config = c
        self.src_embed = TokenEmbedding(c.src_vocab_size, c.d_model, c.pad_id)
        self.tgt_embed = self.src_embed if c.tie_embeddings else TokenEmbedding(
            c.tgt_vocab_size, c.d_model, c.pad_id)
        self.positions = PositionalEncoding(c.d_model, c.max_len, c.P_drop, c.pe_layout)
        self.transformer = nn.Transformer(
            c.d_model, c.h, c.N, c.N, c.d_ff, c.P_drop, batch_first=True,
            norm_first=c.norm_first, layer_norm_eps=c.layer_norm_eps)
        for module in self.transformer.modules():          # no dropout on attention weights
            if isinstance(module, nn.MultiheadAttention):
                module.dropout = 0.0
        self.generator = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        if c.tie_embeddings:
            self.generator.weight = self.tgt_embed.weight

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        pad = self.config.pad_id
        src_blocked, tgt_blocked = src == pad, tgt == pad                  # True = blocked
        causal_blocked = ~causal_mask(tgt.shape[1], tgt.device)[0, 0]      # (T, T)
        h = self.transformer(
            self.positions(self.src_embed(src)), self.positions(self.tgt_embed(tgt)),
            tgt_mask=causal_blocked, src_key_padding_mask=src_blocked,
            tgt_key_padding_mask=tgt_blocked, memory_key_padding_mask=src_blocked,
            tgt_is_causal=True)                                            # (B, T, D)
        return self.generator(h)                                           # (B, T, V)


def make_batch(c: TransformerConfig, batch: int, length: int, device: torch.device,
               gen: torch.Generator, shortest: float = 0.75
               ) -> Tuple[torch.Tensor, torch.Tensor]:
    """Random ids with padding: each row keeps between ``shortest`` x ``length`` tokens and
    all of them (the first row all of them)."""
    def ids(vocab: int) -> torch.Tensor:
        x = torch.randint(1, vocab, (batch, length), generator=gen)
        keep = torch.randint(max(1, int(shortest * length)), length + 1, (batch, 1),
                             generator=gen)
        x[torch.arange(length)[None, :] >= keep] = c.pad_id
        x[0] = torch.randint(1, vocab, (length,), generator=gen)           # one full row
        return x.to(device)
    return ids(c.src_vocab_size), ids(c.tgt_vocab_size)


def matmul_flops(c: TransformerConfig, batch: int, S: int, T: int) -> float:
    """Matmul FLOPs of one training step (forward + backward = 3 x forward).

    Forward: 2 FLOPs per weight per token for every Linear (attention projections, the
    feed-forward network, the output layer) plus the two attention products
    (Q K^T and weights @ V: 2 * 2 * T_q * T_k * D per layer). Embedding look-ups, softmax,
    layer norms and the loss are not counted (not matmuls).
    """
    D, F_, N, V = c.d_model, c.d_ff, c.N, c.tgt_vocab_size
    per_token_enc = 4 * D * D + 2 * D * F_                     # Q,K,V,O + FFN, per source token
    per_token_dec = 4 * D * D + 2 * D * D + 2 * D * F_ + D * V  # self Q,K,V,O; cross Q,O; FFN; out
    per_src_cross = 2 * D * D                                   # cross K,V from the memory
    linear = 2 * batch * (N * (S * per_token_enc + T * per_token_dec + S * per_src_cross))
    linear -= 2 * batch * T * D * V * (N - 1)                   # the output layer runs once
    attn = 2 * 2 * batch * D * N * (S * S + T * T + T * S)
    return 3.0 * (linear + attn)


def train_step_fn(model: nn.Module, src: torch.Tensor, tgt: torch.Tensor, pad_id: int,
                  autocast: bool, device: torch.device, fused_adam: bool) -> Callable[[], None]:
    """A closure doing one step: teacher forcing on tgt[:, :-1] -> tgt[:, 1:]."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, **(
        {"fused": True} if fused_adam else {}))
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    ctx = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) if autocast else \
        contextlib.nullcontext

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with ctx():
            logits = model(src, tgt_in)                                       # (B, T, V)
            loss = F.cross_entropy(logits.flatten(0, 1).float(), tgt_out.flatten(),
                                   ignore_index=pad_id)
        loss.backward()
        opt.step()
    return step


def with_compiled_kernels(step: Callable[[], None]) -> Callable[[], None]:
    """The same step with transformer_lib's compiled CPU kernels switched on around it."""
    def run() -> None:
        with cpu_kernels.use_compiled_kernels(True):
            step()
    return run


def compiled_kernels_available(args, device: torch.device) -> bool:
    """Whether to add the "+ compiled kernels" row (built here, once, if needed)."""
    if not args.compiled_kernels or device.type != "cpu":
        return False
    try:
        cpu_kernels.load()
    except RuntimeError as e:
        print(f"# compiled kernels left out: {str(e).splitlines()[0]}")
        return False
    return True


TIMES_PREFIX = "# step times: "
LABELS = ("torch.nn.Transformer", "transformer_lib", "+ compiled kernels",
          "transformer_lib compiled")


def model_labels(args) -> list:
    """The rows of one preset and dtype, in order."""
    wanted = (True, True, args.with_compiled_kernels, args.compile)
    return [label for label, want in zip(LABELS, wanted) if want]


def step_for(label: str, c: TransformerConfig, src, tgt, dtype_name: str, args,
             device: torch.device) -> Callable[[], None]:
    """A fresh model of row ``label`` and its training step."""
    torch.manual_seed(args.seed)
    model = (TorchTransformer if label == "torch.nn.Transformer" else Transformer)(c)
    model = model.to(device).train()
    if label == "transformer_lib compiled":
        t0 = time.perf_counter()
        model = torch.compile(model)
    step = train_step_fn(model, src, tgt, c.pad_id, dtype_name == "bf16", device,
                         args.fused_adam)
    if label == "+ compiled kernels":
        step = with_compiled_kernels(step)
    if label == "transformer_lib compiled":
        step()                                                    # compiles here
        common.sync(device)
        print(f"# torch.compile ({dtype_name}): first step took "
              f"{time.perf_counter() - t0:.1f} s")
    return step


def isolated_times(label: str, preset: str, dtype_name: str) -> list:
    """Step times of one row, measured by this script in a fresh process with the same
    arguments: no other model's memory or caches in that process."""
    argv = [a for a in sys.argv[1:] if a != "--isolated"]
    cmd = [sys.executable, __file__, *argv, "--presets", preset, "--dtypes", dtype_name,
           "--only", label]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"the process timing {label!r} failed:\n{out.stderr[-3000:]}")
    lines = out.stdout.splitlines()
    for x in lines:
        if x.startswith("# torch.compile"):                      # the child's compile time
            print(x)
    line = next(x for x in lines if x.startswith(TIMES_PREFIX))
    return json.loads(line[len(TIMES_PREFIX):])


def run_preset(name: str, overrides: dict, batch: int, length: int, args,
               device: torch.device, peaks: Dict[str, float]) -> list:
    c = TransformerConfig.tiny(args.vocab, P_drop=args.dropout, max_len=max(128, length + 1),
                               **overrides)
    gen = torch.Generator().manual_seed(args.seed)
    src, tgt = make_batch(c, batch, length + 1, device, gen)
    src = src[:, :length]
    tokens = int((tgt[:, 1:] != c.pad_id).sum())                   # real target tokens
    flops = matmul_flops(c, batch, length, length)
    rows, labels = [], model_labels(args)
    for dtype_name in args.dtypes:
        if args.isolated:                   # each model timed alone, in a fresh process
            times = {label: isolated_times(label, name, dtype_name) for label in labels}
        else:
            fns = {label: step_for(label, c, src, tgt, dtype_name, args, device)
                   for label in ([args.only] if args.only else labels)}
            times = common.interleaved(fns, device, args.reps, warmup=args.warmup)
            if args.only:                   # a child of --isolated: hand the times back
                print(f"{TIMES_PREFIX}{json.dumps(times[args.only])}")
                return []
        base = common.median(times["torch.nn.Transformer"])
        for label, ts in times.items():
            m = common.median(ts)
            rows.append([name, dtype_name, label, f"{tokens / m:,.0f}", f"{1e3 * m:.1f}",
                         common.spread(ts), f"{base / m:.2f}x",
                         f"{flops / m / 1e9:.1f}", f"{100 * flops / m / peaks[dtype_name]:.0f}%"])
    return rows


def main() -> None:
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=None, help="timed repetitions (default 7)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--vocab", type=int, default=1000, help="source = target vocabulary size")
    p.add_argument("--presets", nargs="+", default=list(PRESETS), choices=list(PRESETS))
    p.add_argument("--dropout", type=float, default=0.1,
                   help="P_drop of both models (0: how much of the step dropout costs)")
    p.add_argument("--dtypes", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    p.add_argument("--compile", action="store_true", help="also time torch.compile(ours)")
    p.add_argument("--fused-adam", action=argparse.BooleanOptionalAction, default=True,
                   help="Adam(fused=True) for every model, as transformer_lib's trainer uses "
                        "(default); --no-fused-adam: PyTorch's default Adam for every model")
    p.add_argument("--compiled-kernels", action=argparse.BooleanOptionalAction, default=True,
                   help="also time transformer_lib with its compiled CPU kernels "
                        "(default, where a C++ compiler can build them)")
    p.add_argument("--keep-freed-memory", action=argparse.BooleanOptionalAction, default=True,
                   help="glibc malloc keeps freed memory, so that no model's step pays for "
                        "page faults the other's left behind (default); "
                        "--no-keep-freed-memory: the C library's defaults")
    p.add_argument("--isolated", action="store_true",
                   help="time each model alone in a fresh process of this script instead of "
                        "interleaved in one (a check on what one model's steps do to the "
                        "other's; the machine's load is then not shared evenly)")
    p.add_argument("--only", choices=LABELS, help=argparse.SUPPRESS)  # a child of --isolated
    args = p.parse_args()
    allocator = keep_freed_memory() if args.keep_freed_memory else ""
    device = common.setup(args)
    print(f"# allocator: {allocator or 'the C library defaults'}")
    args.with_compiled_kernels = compiled_kernels_available(args, device)
    presets = QUICK if args.quick else {k: PRESETS[k] for k in args.presets}
    args.reps = args.reps or (1 if args.quick else 7)
    args.warmup = 1 if args.quick else args.warmup
    if args.only:                           # a child of --isolated: times only, no tables
        for name, (overrides, batch, length) in presets.items():
            run_preset(name, overrides, batch, length, args, device, {})
        return
    n = 256 if args.quick else 2048
    peaks = {"fp32": common.matmul_peak(torch.float32, device, n),
             "bf16": common.matmul_peak(torch.bfloat16, device, n)}
    print(common.table(["dtype", "matmul peak GFLOP/s"],
                       [[k, f"{v / 1e9:,.0f}"] for k, v in peaks.items()],
                       f"Measured matmul peak ({n} x {n} @ {n} x {n}, best of 5)"))
    rows = []
    for name, (overrides, batch, length) in presets.items():
        rows += run_preset(name, overrides, batch, length, args, device, peaks)
    print(common.table(
        ["preset", "dtype", "model", "tgt tokens/s", "ms/step", "spread", "vs torch",
         "GFLOP/s", "MFU"], rows,
        f"Training step (forward + backward + Adam), median of {args.reps}, "
        + ("each model in its own process" if args.isolated else "interleaved")))


if __name__ == "__main__":
    main()
