"""Training throughput of transformer_lib against torch.nn.Transformer, side by side.

The workload (the step, both models, the batch, the presets) is ``workload.py``'s. Rows:

* ``torch.nn.Transformer`` between our embeddings and output layer;
* ``transformer_lib``: our model as the notebooks run it (``nn.Dropout`` and all);
* ``+ accelerate, no kernels``: ``transformer_lib.fast.accelerate(model, kernels=False)``,
  the pure-PyTorch fast path (cheaper dropout masks; ``--no-accelerate`` leaves it out);
* ``+ compiled kernels``: ``accelerate(model)`` with the compiled CPU kernels, as the
  training command line runs it on a CPU (the same dropout masks in one pass, the
  feed-forward layer as one function, attention read in place from the projections; needs
  a C++ compiler, built on first use, ~30 s; ``--no-compiled-kernels`` leaves it out; left
  out with a note where they cannot be built);
* with ``--compile``: ``transformer_lib compiled``, ``torch.compile(model)`` with Inductor's
  defaults, and ``+ compile_model``, ``transformer_lib.fast.compile_model(model)`` (on a
  CPU: Inductor with PyTorch's own dropout masks and a ReLU backward that saves no ``bool``
  mask; the command line's ``--compile``); each prints how long its first step took.

The process keeps freed memory (glibc's malloc told not to hand it back to the OS; see
``transformer_lib.fast.allocator``), so each model runs at its steady state: with the C
library's defaults, how many pages a step faults in depends on what the other model left
behind (``--no-keep-freed-memory`` measures that way).

Also reports model FLOP utilisation (MFU): matmul FLOPs of a step, counted analytically,
per second, against the matmul peak measured by this script the way the rows run (this
process and its threads, the dtype, warmed up, on the step's own matmul shapes as well as
one square product; the best of a measurement before and one after the rows). No MFU is
above 100%: should a row outrun the measured peak, the peak is that row's rate, with a
note (``common.utilisation``).

    python benchmarks/train_throughput.py            # full run (a few minutes on 2 cores)
    python benchmarks/train_throughput.py --quick    # smoke test
    python benchmarks/train_throughput.py --isolated # each model alone in a fresh process
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Callable, Dict

import torch

import common
from transformer_lib import TransformerConfig
from transformer_lib.fast import compile_model, keep_freed_memory
from workload import (
    PRESETS,
    QUICK,
    compiled_kernels_available,
    make_batch,
    make_model,
    matmul_flops,
    step_matmul_shapes,
    train_step_fn,
)

TIMES_PREFIX = "# step times: "
LABELS = (
    "torch.nn.Transformer",
    "transformer_lib",
    "+ accelerate, no kernels",
    "+ compiled kernels",
    "transformer_lib compiled",
    "+ compile_model",
)


# the compiled rows: Inductor's defaults, and transformer_lib.fast.compile_model (on a CPU,
# Inductor with PyTorch's own dropout masks and a ReLU backward that saves no bool mask)
COMPILED: Dict[str, Callable[[torch.nn.Module], torch.nn.Module]] = {
    "transformer_lib compiled": torch.compile,
    "+ compile_model": compile_model,
}


def model_labels(args) -> list:
    """The rows of one preset and dtype, in order."""
    wanted = (True, True, args.accelerate, args.with_compiled_kernels, args.compile, args.compile)
    return [label for label, want in zip(LABELS, wanted) if want]


def step_for(
    label: str, c: TransformerConfig, src, tgt, dtype_name: str, args, device: torch.device
) -> Callable[[], None]:
    """A fresh model of row ``label`` and its training step."""
    torch.manual_seed(args.seed)
    model = make_model(label, c, device)
    compiled = label in COMPILED
    if compiled:
        t0 = time.perf_counter()
        model = COMPILED[label](model)
    step = train_step_fn(model, src, tgt, c.pad_id, dtype_name == "bf16", device, args.fused_adam)
    if compiled:
        step()  # compiles here
        common.sync(device)
        print(f"# {label} ({dtype_name}): first step took {time.perf_counter() - t0:.1f} s")
    return step


def isolated_times(label: str, preset: str, dtype_name: str) -> list:
    """Step times of one row, measured by this script in a fresh process with the same
    arguments: no other model's memory or caches in that process."""
    argv = [a for a in sys.argv[1:] if a != "--isolated"]
    cmd = [
        sys.executable,
        __file__,
        *argv,
        "--presets",
        preset,
        "--dtypes",
        dtype_name,
        "--only",
        label,
    ]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"the process timing {label!r} failed:\n{out.stderr[-3000:]}")
    lines = out.stdout.splitlines()
    for x in lines:
        if x.endswith(" s") and "first step took" in x:  # the child's compile time
            print(x)
    line = next(x for x in lines if x.startswith(TIMES_PREFIX))
    return json.loads(line[len(TIMES_PREFIX) :])


def run_preset(
    name: str, overrides: dict, batch: int, length: int, args, device: torch.device
) -> list:
    """Time every row of one preset and dtype: [(preset, dtype, label, real target tokens,
    matmul FLOPs of a step, [seconds a step, one per round])]."""
    c = preset_config(overrides, length, args)
    gen = torch.Generator().manual_seed(args.seed)
    src, tgt = make_batch(c, batch, length + 1, device, gen)
    src = src[:, :length]
    tokens = int((tgt[:, 1:] != c.pad_id).sum())  # real target tokens
    flops = matmul_flops(c, batch, length, length)
    results, labels = [], model_labels(args)
    for dtype_name in args.dtypes:
        if args.isolated:  # each model timed alone, in a fresh process
            times = {label: isolated_times(label, name, dtype_name) for label in labels}
        else:
            fns = {
                label: step_for(label, c, src, tgt, dtype_name, args, device)
                for label in ([args.only] if args.only else labels)
            }
            times = common.interleaved(fns, device, args.reps, warmup=args.warmup)
            if args.only:  # a child of --isolated: hand the times back
                print(f"{TIMES_PREFIX}{json.dumps(times[args.only])}")
                return []
        results += [(name, dtype_name, label, tokens, flops, ts) for label, ts in times.items()]
    return results


def preset_config(overrides: dict, length: int, args) -> TransformerConfig:
    return TransformerConfig.tiny(
        args.vocab, P_drop=args.dropout, max_len=max(128, length + 1), **overrides
    )


def measure_peaks(presets: dict, args, device: torch.device) -> Dict[str, float]:
    """The matmul peak of every dtype, measured the way the rows run: this process and its
    threads, the dtype, warmed up, on the presets' own matmul shapes and one square."""
    side = 256 if args.quick else 2048
    shapes = {(side, side, side)}
    for overrides, batch, length in presets.values():
        shapes |= set(
            step_matmul_shapes(preset_config(overrides, length, args), batch, length, length)
        )
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16}
    return {
        name: common.matmul_peak(dtypes[name], device, sorted(shapes), reps=2 if args.quick else 5)
        for name in args.dtypes
    }


def table_rows(results: list, peaks: Dict[str, float]) -> list:
    """The table's rows: ratios against torch.nn.Transformer of the same preset and dtype,
    and MFU against the peak, never above 100% (:func:`common.utilisation`)."""
    rows = []
    for preset, dtype_name in dict.fromkeys((r[0], r[1]) for r in results):
        group = [r for r in results if r[:2] == (preset, dtype_name)]
        base = common.median(next(r[5] for r in group if r[2] == "torch.nn.Transformer"))
        rates = {r[2]: r[4] / common.median(r[5]) for r in group}
        mfu, note = common.utilisation(rates, peaks[dtype_name])
        if note:
            print(f"# {preset} {dtype_name}: {note}")
        for _, _, label, tokens, flops, ts in group:
            m = common.median(ts)
            rows.append(
                [
                    preset,
                    dtype_name,
                    label,
                    f"{tokens / m:,.0f}",
                    f"{1e3 * m:.1f}",
                    common.spread(ts),
                    f"{base / m:.2f}x",
                    f"{flops / m / 1e9:.1f}",
                    f"{100 * mfu[label]:.0f}%",
                ]
            )
    return rows


def main() -> None:
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=None, help="timed repetitions (default 7)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--vocab", type=int, default=1000, help="source = target vocabulary size")
    p.add_argument("--presets", nargs="+", default=list(PRESETS), choices=list(PRESETS))
    p.add_argument(
        "--dropout",
        type=float,
        default=0.1,
        help="P_drop of both models (0: how much of the step dropout costs)",
    )
    p.add_argument(
        "--dtypes",
        nargs="+",
        default=["fp32", "bf16"],
        choices=["fp32", "bf16"],
        help="bf16 is left out, with a note, on a CPU without native bf16",
    )
    p.add_argument(
        "--compile",
        action="store_true",
        help="also time torch.compile(ours) and transformer_lib.fast.compile_model(ours)",
    )
    p.add_argument(
        "--fused-adam",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Adam(fused=True) for every model, as transformer_lib's trainer uses "
        "(default); --no-fused-adam: PyTorch's default Adam for every model",
    )
    p.add_argument(
        "--accelerate",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time transformer_lib.fast.accelerate(model, kernels=False): "
        "the pure-PyTorch fast path (default)",
    )
    p.add_argument(
        "--compiled-kernels",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time transformer_lib with its compiled CPU kernels, as the "
        "training command line runs it (default, where a C++ compiler can "
        "build them)",
    )
    p.add_argument(
        "--keep-freed-memory",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="glibc malloc keeps freed memory, so that no model's step pays for "
        "page faults the other's left behind (default); "
        "--no-keep-freed-memory: the C library's defaults",
    )
    p.add_argument(
        "--isolated",
        action="store_true",
        help="time each model alone in a fresh process of this script instead of "
        "interleaved in one (a check on what one model's steps do to the "
        "other's; the machine's load is then not shared evenly)",
    )
    p.add_argument("--only", choices=LABELS, help=argparse.SUPPRESS)  # a child of --isolated
    args = p.parse_args()
    allocator = keep_freed_memory() if args.keep_freed_memory else ""
    device = common.setup(args)
    print(f"# allocator: {allocator or 'the C library defaults'}")
    args.dtypes = common.usable_dtypes(args.dtypes, device)
    if not args.dtypes:
        return
    args.with_compiled_kernels = compiled_kernels_available(args, device)
    presets = QUICK if args.quick else {k: PRESETS[k] for k in args.presets}
    args.reps = args.reps or (1 if args.quick else 7)
    args.warmup = 1 if args.quick else args.warmup
    if args.only:  # a child of --isolated: times only, no tables
        for name, (overrides, batch, length) in presets.items():
            run_preset(name, overrides, batch, length, args, device)
        return
    before = measure_peaks(presets, args, device)
    results = []
    for name, (overrides, batch, length) in presets.items():
        results += run_preset(name, overrides, batch, length, args, device)
    after = measure_peaks(presets, args, device)  # the best of before and after
    peaks = {k: max(before[k], after[k]) for k in before}
    print(
        common.table(
            ["dtype", "matmul peak GFLOP/s"],
            [[k, f"{v / 1e9:,.0f}"] for k, v in peaks.items()],
            "Measured matmul peak (the step's own matmul shapes and one square "
            "product, warmed up, best of before and after the rows)",
        )
    )
    rows = table_rows(results, peaks)
    print(
        common.table(
            [
                "preset",
                "dtype",
                "model",
                "tgt tokens/s",
                "ms/step",
                "spread",
                "vs torch",
                "GFLOP/s",
                "MFU",
            ],
            rows,
            f"Training step (forward + backward + Adam), median of {args.reps}, "
            + ("each model in its own process" if args.isolated else "interleaved"),
        )
    )


if __name__ == "__main__":
    main()
