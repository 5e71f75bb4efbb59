"""Where a training step's time goes: torch.profiler on one step, grouped by kind of work.

Prints, for ``torch.nn.Transformer`` and for transformer_lib, the share of the step spent
in matrix multiplies (projections, feed-forward, output layer), the attention kernel,
dropout, layer norms, ReLU, the loss, the optimizer, copies/reshapes, other element-wise
work, and the rest (Python and dispatch overhead = wall time minus the operators' time).
``--table`` also prints PyTorch's own per-operator table. A third column profiles
transformer_lib with its compiled CPU kernels where they can be built
(``--no-compiled-kernels`` leaves it out).

Page faults: the first touch of a fresh memory page costs microseconds, charged to whichever
operator touches it, so the script prints how many each profiled step took. Like
``train_throughput.py`` the process keeps freed memory (``--no-keep-freed-memory``: the C
library's defaults), and each model's steps are profiled once before the profile that is
kept, so that the memory the profiler's own records take is already there. The profiler
still allocates as it records: where a model's line shows thousands of faults a step, its
element-wise rows (copies, ReLU) are inflated; rerun, or read ``train_throughput.py``.

    python benchmarks/profile_step.py                 # d256 preset, fp32
    python benchmarks/profile_step.py --dtype bf16 --table
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from typing import Dict, List, Optional

import torch
from torch.profiler import ProfilerActivity, profile

import common
from transformer_lib.training import keep_freed_memory
from workload import (
    PRESETS,
    QUICK,
    compiled_kernels_usable,
    make_batch,
    make_model,
    preset_config,
    train_step_fn,
)

CATEGORIES = (  # (category, substrings of operator names), first match wins
    ("matmul", ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")),
    # the compiled kernels run inside the autograd functions of transformer_lib.fast.attention,
    # .dropout and .feedforward (their own time: the kernels' work and their Python)
    (
        "attention kernel",
        ("scaled_dot_product", "aten::_softmax", "_softmax_backward", "CompiledAttention"),
    ),
    (
        "dropout",
        (
            "bernoulli",
            "random_",
            "aten::ge",
            "native_dropout",
            "Dropout",
            "_CompiledFeedForward",
            "bitwise_",
        ),
    ),
    ("layer norm", ("layer_norm",)),
    ("relu", ("relu", "clamp_min", "threshold_backward")),
    ("loss", ("log_softmax", "nll_loss")),
    ("copies/reshapes", ("copy_", "aten::cat", "aten::contiguous", "aten::clone")),
    ("other element-wise", ("aten::",)),
)


def categorise(prof, wall: float) -> Dict[str, float]:
    """Seconds per category: each event's self time, optimizer work by its ancestor."""
    out: Dict[str, float] = defaultdict(float)
    for ev in prof.events():
        parent, in_optimizer = ev, False
        while parent is not None:
            if parent.name.startswith("Optimizer.step"):
                in_optimizer = True
                break
            parent = parent.cpu_parent
        name = ev.name
        if in_optimizer:
            cat = "optimizer (Adam)"
        else:
            cat = next(
                (c for c, keys in CATEGORIES if any(k in name for k in keys)),
                "autograd/other operators",
            )
        out[cat] += ev.self_cpu_time_total / 1e6
    out["Python/dispatch overhead"] = max(0.0, wall - sum(out.values()))
    return out


def profile_model(label: str, c, src, tgt, args, device, steps: int):
    torch.manual_seed(args.seed)
    model = make_model(label, c, device)
    step = train_step_fn(model, src, tgt, c.pad_id, args.dtype == "bf16", device, args.fused_adam)
    step()
    step()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities):  # a first, discarded profile: the memory the
        for _ in range(steps):  # profiler's records take is then already there
            step()
    faults = minor_faults()
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            step()
        common.sync(device)
        wall = time.perf_counter() - start
    faults = minor_faults() - faults
    return prof, wall, faults


def minor_faults() -> int:
    """Page faults of this process so far (first touches of fresh memory; 0 off Unix)."""
    try:
        import resource
    except ImportError:
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def main(argv: Optional[List[str]] = None) -> int:
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--preset", choices=list(PRESETS), default="d256")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--vocab", type=int, default=None, help="default: the preset's")
    p.add_argument(
        "--fused-adam",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Adam(fused=True), as in train_throughput.py (default)",
    )
    p.add_argument("--table", action="store_true", help="also the per-operator table")
    p.add_argument(
        "--compiled-kernels",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also profile transformer_lib with its compiled CPU kernels "
        "(default, where a C++ compiler can build them)",
    )
    p.add_argument(
        "--keep-freed-memory",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="glibc malloc keeps freed memory, as in train_throughput.py (default)",
    )
    args = p.parse_args(argv)
    if args.keep_freed_memory:
        keep_freed_memory()
    device = common.setup(args)
    print(f"# allocator: {'keeps freed memory' if args.keep_freed_memory else 'C defaults'}")
    if not common.usable_dtypes([args.dtype], device):
        return 0
    with_compiled = compiled_kernels_usable(args.compiled_kernels, device)
    preset = QUICK["tiny"] if args.quick else PRESETS[args.preset]
    batch, length = preset.batch, preset.length
    steps = 1 if args.quick else args.steps
    c = preset_config(preset, args.vocab)
    src, tgt = make_batch(c, batch, length + 1, device, torch.Generator().manual_seed(0))
    results = {}
    models = ["torch.nn.Transformer", "transformer_lib"]
    if with_compiled:
        models.append("+ compiled kernels")
    for label in models:
        prof, wall, faults = profile_model(label, c, src[:, :length], tgt, args, device, steps)
        print(f"# {label}: {faults / steps:,.0f} page faults a profiled step")
        results[label] = (categorise(prof, wall), wall)
        if args.table:
            sort = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
            print(f"\n{label}\n" + prof.key_averages().table(sort_by=sort, row_limit=25))
    cats = sorted(
        {k for r, _ in results.values() for k in r},
        key=lambda k: -results["torch.nn.Transformer"][0].get(k, 0.0),
    )
    rows = []
    for cat in cats:
        row = [cat]
        for label, (r, wall) in results.items():
            row += [f"{1e3 * r.get(cat, 0.0) / steps:,.1f}", f"{100 * r.get(cat, 0.0) / wall:.0f}%"]
        rows.append(row)
    rows.append(
        ["total (wall)"]
        + [x for _, (r, w) in results.items() for x in (f"{1e3 * w / steps:,.1f}", "100%")]
    )
    preset = "quick" if args.quick else args.preset
    heads = ["work", "torch ms/step", "torch share", "ours ms/step", "ours share"]
    if with_compiled:
        heads += ["compiled ms/step", "compiled share"]
    print(
        common.table(
            heads,
            rows,
            f"Training step profile, preset {preset}, {args.dtype}, "
            f"{steps} steps each (profiler overhead included)",
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
