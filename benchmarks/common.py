"""Helpers shared by the benchmark scripts: arguments, timing, tables, the machine.

Timing rules used everywhere:

* variants compared with each other run **interleaved** (A, B, A, B, ... with the order
  rotated each repetition), so a burst of load from another process hits all of them;
* the figure reported is the **median** of the repetitions, and ratios are taken between
  medians measured in the same run;
* on a GPU every timed region ends with ``torch.cuda.synchronize()``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Callable, Dict, List, Sequence

import torch

from transformer_lib.training.precision import bf16_problem, cpu_bf16, cpu_capability, cpu_model


def parser(description: str) -> argparse.ArgumentParser:
    """An argument parser with the flags every script has."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--quick",
        action="store_true",
        help="tiny sizes and 1-2 repetitions (smoke test; figures meaningless)",
    )
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch.set_num_threads (default: PyTorch's choice)",
    )
    p.add_argument("--seed", type=int, default=0)
    return p


def setup(args: argparse.Namespace) -> torch.device:
    """Apply --threads/--seed, check --device, print the machine; return the device."""
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda given but torch.cuda.is_available() is False")
    print(machine_line(device))
    return device


def machine_line(device: torch.device) -> str:
    """One line naming the hardware, the PyTorch build and the current load."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    bf16 = cpu_bf16()
    line = (
        f"# machine: {cpu_model()} ({cpu_capability()}; native bf16: "
        f"{'yes' if bf16.native else 'no'}, {bf16.how}), {os.cpu_count()} logical CPUs, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"load avg (1 min) {load:.2f}"
    )
    if device.type == "cuda":
        line += f", GPU {torch.cuda.get_device_name(device)}"
    return line


def usable_dtypes(wanted: Sequence[str], device: torch.device) -> List[str]:
    """The dtypes of ``wanted`` worth timing on ``device``: bf16 only where it is native
    (printing a note when it is left out)."""
    problem = bf16_problem(device) if "bf16" in wanted else None
    if problem:
        print(f"# bf16 left out: {problem}")
    return [d for d in wanted if not (d == "bf16" and problem)]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], object], device: torch.device) -> float:
    """Seconds one call of ``fn`` takes (synchronised on a GPU)."""
    sync(device)
    start = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - start


def interleaved(
    fns: Dict[str, Callable[[], object]],
    device: torch.device,
    reps: int,
    warmup: int = 1,
    calls: int = 1,
) -> Dict[str, List[float]]:
    """Run every fn ``warmup`` times, then ``reps`` rounds in rotating order.

    Each round times ``calls`` consecutive calls of each fn and records seconds per call.
    Returns {name: [seconds per call, one entry per round]}.
    """
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            fns[name]()
    times: Dict[str, List[float]] = {name: [] for name in names}
    for r in range(reps):
        order = names[r % len(names) :] + names[: r % len(names)]  # rotate the order
        for name in order:
            total = timed(lambda: [fns[name]() for _ in range(calls)], device)
            times[name].append(total / calls)
    return times


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def spread(xs: Sequence[float]) -> str:
    """Relative spread (max - min) / median as a percentage string."""
    m = statistics.median(xs)
    return f"{100 * (max(xs) - min(xs)) / m:.0f}%" if m > 0 else "-"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], title: str = "") -> str:
    """A GitHub-flavoured Markdown table (also readable in a terminal)."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [
        max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)
    ]
    fmt = lambda r: "| " + " | ".join(c.rjust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    lines = ([f"\n### {title}\n"] if title else []) + [fmt(headers)]
    lines.append("|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|")
    lines += [fmt(r) for r in cells]
    return "\n".join(lines)


def matmul_rate(
    m: int, k: int, n: int, dtype: torch.dtype, device: torch.device, reps: int = 5, warmup: int = 3
) -> float:
    """Measured FLOP/s of one (m x k) @ (k x n) product in ``dtype``, as a linear layer calls
    it (``F.linear``, the weight stored (n x k)): the best of ``reps`` timed rounds after
    ``warmup`` untimed calls, in this process, with its threads. 2 m k n FLOPs a product."""
    a = torch.randn(m, k, device=device).to(dtype)
    w = torch.randn(n, k, device=device).to(dtype)
    for _ in range(warmup):
        torch.nn.functional.linear(a, w)
    flops = 2.0 * m * k * n
    calls = max(1, min(20, int(2e8 // flops)))  # about 0.2 GFLOP (a few ms) a round
    if device.type == "cuda":
        calls *= 10
    best = min(
        timed(lambda: [torch.nn.functional.linear(a, w) for _ in range(calls)], device) / calls
        for _ in range(reps)
    )
    return flops / best


def matmul_peak(
    dtype: torch.dtype,
    device: torch.device,
    shapes: Sequence[Sequence[int]] = ((2048, 2048, 2048),),
    reps: int = 5,
) -> float:
    """The attainable matmul FLOP/s here: the best :func:`matmul_rate` over ``shapes``
    ((m, k, n) each).

    A model's step multiplies matrices of its own sizes, and on some CPUs those run faster
    than one big square product (they stay in cache; the library may pick another kernel
    for them), so pass the step's own shapes (``workload.step_matmul_shapes``) as well as a
    square one: a peak measured on the square product alone can sit below what the step
    reaches, and MFU then comes out above 100%.
    """
    return max(matmul_rate(*shape, dtype, device, reps) for shape in shapes)


def utilisation(rates: Dict[str, float], peak: float) -> tuple:
    """MFU of every row, as fractions, against ``max(peak, best row)``, and a note (or "").

    A row cannot do matmul FLOPs faster than the machine's matmul peak; where one seems to
    (the peak was measured during a burst of load from another process, say), the peak is
    raised to that row's rate and the note says so, so that no MFU is above 100%.
    """
    best_label = max(rates, key=rates.get) if rates else None
    if best_label is None or rates[best_label] <= peak:
        return {k: v / peak for k, v in rates.items()}, ""
    note = (
        f"row {best_label!r} ran at {rates[best_label] / 1e9:,.1f} GFLOP/s, above the "
        f"measured matmul peak {peak / 1e9:,.1f}: MFU taken against its rate instead "
        f"(the peak was measured low, e.g. under load)"
    )
    return {k: v / rates[best_label] for k, v in rates.items()}, note
