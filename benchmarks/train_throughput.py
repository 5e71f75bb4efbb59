"""Training throughput of transformer_lib against torch.nn.Transformer, side by side.

The workload (the step, both models, the batch, the presets) is ``workload.py``'s. Rows, on
a CPU:

* ``torch.nn.Transformer`` between our embeddings and output layer;
* ``transformer_lib``: our model as the notebooks run it;
* ``+ accelerate, no kernels``: ``transformer_lib.fast.accelerate(model, kernels=False)``,
  the pure-PyTorch fast path (``--no-accelerate`` leaves it out);
* ``+ compiled kernels``: ``accelerate(model)`` with the compiled CPU kernels, as the
  training command line runs it on a CPU (needs a C++ compiler; built on first use, ~30 s;
  left out with a note where they cannot be built; ``--no-compiled-kernels`` leaves it out);
* with ``--compile``: ``transformer_lib compiled``, ``torch.compile(model)`` with Inductor's
  defaults, and ``+ compile_model``, ``transformer_lib.fast.compile_model(model)`` (the
  command line's ``--compile``); each prints how long its first step took.

On a CUDA GPU (``--device cuda``) the rows are ``torch.nn.Transformer``, ``transformer_lib``
eager and ``transformer_lib compiled`` (``torch.compile``, on by default there;
``--no-compile`` leaves it out), at the benchmark size (d256) and Table 3's base size, in
fp32, TF32 (fp32 tensors, TensorFloat-32 matrix products) and bf16 autocast.

Also reports model FLOP utilisation (MFU): matmul FLOPs of a step, counted analytically,
per second, against the matmul peak this script measures on the device the way the rows
run (this process and its threads, the dtype, warmed up, on the step's own matmul shapes
and one large square product; the best of a measurement before and one after the rows).
No MFU is above 100%: should a row outrun the measured peak, the peak is that row's rate,
with a note (``common.utilisation``). The process keeps the memory it frees
(``transformer_lib.training.keep_freed_memory``), so each model runs at its steady state.

    python benchmarks/train_throughput.py                   # CPU: tiny and d256, fp32 (+ bf16)
    python benchmarks/train_throughput.py --presets d256 --dtypes fp32 --threads 2
    python benchmarks/train_throughput.py --device cuda     # GPU: d256 and base, 3 precisions
    python benchmarks/train_throughput.py --quick           # smoke test (also with --device)
    python benchmarks/train_throughput.py --isolated        # each model alone in a process
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional

import torch

import common
from transformer_lib.training import keep_freed_memory
from workload import (
    PRESETS,
    QUICK,
    ROWS,
    Preset,
    compiled_kernels_usable,
    make_batch,
    make_model,
    matmul_flops,
    preset_config,
    step_matmul_shapes,
    train_step_fn,
)

TIMES_PREFIX = "# step times: "
COMPILED = ("transformer_lib compiled", "+ compile_model")
DTYPES = ("fp32", "tf32", "bf16")


def model_labels(args, device: torch.device) -> List[str]:
    """The rows of one preset and dtype, in order."""
    if args.only:
        return [args.only]
    if device.type == "cuda":  # accelerate and the kernels are CPU work; compile_model is
        wanted = [True, True, False, False, args.compile, False]  # torch.compile there
    else:
        kernels = args.with_compiled_kernels
        wanted = [True, True, args.accelerate, kernels, args.compile, args.compile]
    return [label for label, want in zip(ROWS, wanted) if want]


def step_for(
    label: str, c, src, tgt, dtype_name: str, args, device: torch.device
) -> Callable[[], None]:
    """A fresh model of row ``label`` and its training step (compiled here, if it is)."""
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    model = make_model(label, c, device)
    bf16 = dtype_name == "bf16"
    step = train_step_fn(model, src, tgt, c.pad_id, bf16, device, args.fused_adam)
    if label in COMPILED:
        step()  # compiles here
        common.sync(device)
        print(f"# {label} ({dtype_name}): first step took {time.perf_counter() - start:.1f} s")
    return step


def isolated_times(label: str, preset: str, dtype_name: str, argv: List[str]) -> List[float]:
    """Step times of one row, measured by this script in a fresh process with the same
    arguments ``argv``: no other model's memory or caches in that process."""
    argv = [a for a in argv if a != "--isolated"]
    cmd = [sys.executable, __file__, *argv, "--presets", preset, "--dtypes", dtype_name]
    out = subprocess.run(cmd + ["--only", label], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"the process timing {label!r} failed:\n{out.stderr[-3000:]}")
    lines = out.stdout.splitlines()
    for x in lines:
        if "first step took" in x:  # the child's compile time
            print(x)
    line = next(x for x in lines if x.startswith(TIMES_PREFIX))
    return json.loads(line[len(TIMES_PREFIX) :])


def run_preset(name: str, preset: Preset, args, device: torch.device) -> list:
    """Time every row of one preset, dtype by dtype: [(preset, dtype, label, real target
    tokens, matmul FLOPs of a step, [seconds a step, one per round])]."""
    c = preset_config(preset, args.vocab, args.dropout)
    gen = torch.Generator().manual_seed(args.seed)
    src, tgt = make_batch(c, preset.batch, preset.length + 1, device, gen)
    src = src[:, : preset.length]
    tokens = int((tgt[:, 1:] != c.pad_id).sum())  # real target tokens
    flops = matmul_flops(c, preset.batch, preset.length, preset.length)
    labels = model_labels(args, device)
    results = []
    for dtype_name in args.dtypes:
        if args.isolated:  # each model timed alone, in a fresh process
            times = {label: isolated_times(label, name, dtype_name, args.argv) for label in labels}
        else:
            with common.precision(dtype_name):
                if any(label in COMPILED for label in labels):
                    torch._dynamo.reset()  # each dtype's graphs compiled afresh
                fns = {
                    label: step_for(label, c, src, tgt, dtype_name, args, device)
                    for label in labels
                }
                times = common.interleaved(fns, device, args.reps, args.warmup, args.calls)
                del fns  # the next dtype's models do not share the memory with these
            if args.only:  # a child of --isolated: hand the times back
                print(f"{TIMES_PREFIX}{json.dumps(times[args.only])}")
                continue
        results += [(name, dtype_name, label, tokens, flops, ts) for label, ts in times.items()]
    return results


def measure_peaks(presets: Dict[str, Preset], args, device: torch.device) -> Dict[str, float]:
    """The matmul peak of every dtype, measured the way the rows run: this process and its
    threads, the dtype, warmed up, on the presets' own matmul shapes and one large square."""
    side = (
        (1024 if args.quick else 8192) if device.type == "cuda" else (256 if args.quick else 2048)
    )
    shapes = {(side, side, side)}
    for preset in presets.values():
        c = preset_config(preset, args.vocab)
        shapes |= set(step_matmul_shapes(c, preset.batch, preset.length, preset.length))
    peaks = {}
    for name in args.dtypes:
        with common.precision(name):
            peaks[name] = common.matmul_peak(
                common.TORCH_DTYPES[name], device, sorted(shapes), reps=2 if args.quick else 5
            )
    return peaks


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
                    f"{flops / m / 1e9:,.1f}",
                    f"{100 * mfu[label]:.0f}%",
                ]
            )
    return rows


def main(argv: Optional[List[str]] = None) -> int:
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=None, help="timed rounds (default 7; GPU 10)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps of each row first")
    p.add_argument(
        "--vocab", type=int, default=None, help="shared vocabulary (default: the preset's)"
    )
    p.add_argument(
        "--presets",
        nargs="+",
        choices=list(PRESETS),
        default=None,
        help="default: tiny d256 on a CPU, d256 base on a GPU",
    )
    p.add_argument(
        "--dropout",
        type=float,
        default=0.1,
        help="P_drop of both models (0: how much of the step dropout costs)",
    )
    p.add_argument(
        "--dtypes",
        nargs="+",
        choices=DTYPES,
        default=None,
        help="default: fp32 bf16 on a CPU, fp32 tf32 bf16 on a GPU; bf16 is left out, with "
        "a note, on a CPU without native bf16, tf32 on a CPU",
    )
    p.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also time torch.compile(ours) (and, on a CPU, fast.compile_model(ours)); "
        "default: on a GPU only",
    )
    p.add_argument(
        "--fused-adam",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Adam(fused=True) for every model, as the trainer uses (default)",
    )
    p.add_argument(
        "--accelerate",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="CPU: also time accelerate(model, kernels=False), the pure-PyTorch fast path",
    )
    p.add_argument(
        "--compiled-kernels",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="CPU: also time accelerate(model) with the compiled kernels, as the training "
        "command line runs it (default, where a C++ compiler can build them)",
    )
    p.add_argument(
        "--keep-freed-memory",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="glibc malloc keeps freed memory (default); --no-keep-freed-memory: the C "
        "library's defaults",
    )
    p.add_argument(
        "--isolated",
        action="store_true",
        help="time each model alone in a fresh process of this script instead of "
        "interleaved in one (the machine's load is then not shared evenly)",
    )
    p.add_argument("--only", choices=list(ROWS), help=argparse.SUPPRESS)  # --isolated's child
    args = p.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)
    if args.keep_freed_memory:
        keep_freed_memory()
    device = common.setup(args)
    gpu = device.type == "cuda"
    print(f"# allocator: {'keeps freed memory' if args.keep_freed_memory else 'C defaults'}")
    wanted = args.dtypes or (["fp32", "tf32", "bf16"] if gpu else ["fp32", "bf16"])
    args.dtypes = common.usable_dtypes(wanted, device)
    if not args.dtypes:
        return 0
    args.compile = gpu if args.compile is None else args.compile
    args.with_compiled_kernels = compiled_kernels_usable(args.compiled_kernels, device)
    names = args.presets or (["d256", "base"] if gpu else ["tiny", "d256"])
    presets = QUICK if args.quick else {k: PRESETS[k] for k in names}
    args.reps = args.reps or (2 if args.quick else 10 if gpu else 7)
    args.warmup = 1 if args.quick else args.warmup
    args.calls = 5 if gpu and not args.quick else 1  # steps a round: a GPU step is short
    if args.only:  # a child of --isolated: times only, no tables
        for name, preset in presets.items():
            run_preset(name, preset, args, device)
        return 0
    before = measure_peaks(presets, args, device)
    results = []
    for name, preset in presets.items():
        results += run_preset(name, preset, args, device)
    after = measure_peaks(presets, args, device)
    peaks = {k: max(before[k], after[k]) for k in before}
    print(
        common.table(
            ["dtype", "matmul peak GFLOP/s"],
            [[k, f"{v / 1e9:,.0f}"] for k, v in peaks.items()],
            "Measured matmul peak (the step's own matmul shapes and one square product, "
            "warmed up, best of before and after the rows)",
        )
    )
    how = "each model in its own process" if args.isolated else "interleaved"
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
            table_rows(results, peaks),
            f"Training step (forward + backward + Adam), median of {args.reps} rounds"
            f"{f' of {args.calls} steps' if args.calls > 1 else ''}, {how}",
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
