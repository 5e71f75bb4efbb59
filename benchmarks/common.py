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
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Sequence

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:                       # run as `python benchmarks/x.py` from anywhere
    sys.path.insert(0, str(ROOT))


def parser(description: str) -> argparse.ArgumentParser:
    """An argument parser with the flags every script has."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes and 1-2 repetitions (smoke test; figures meaningless)")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.add_argument("--threads", type=int, default=None,
                   help="torch.set_num_threads (default: PyTorch's choice)")
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


def cpu_model() -> str:
    """The CPU's model name (lscpu), or platform.processor() as a fallback."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=5).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return platform.processor() or "unknown CPU"


def machine_line(device: torch.device) -> str:
    """One line naming the hardware, the PyTorch build and the current load."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    line = (f"# machine: {cpu_model()}, {os.cpu_count()} logical CPUs, "
            f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
            f"load avg (1 min) {load:.2f}")
    if device.type == "cuda":
        line += f", GPU {torch.cuda.get_device_name(device)}"
    return line


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


def interleaved(fns: Dict[str, Callable[[], object]], device: torch.device, reps: int,
                warmup: int = 1, calls: int = 1) -> Dict[str, List[float]]:
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
        order = names[r % len(names):] + names[:r % len(names)]          # rotate the order
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
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    fmt = lambda r: "| " + " | ".join(c.rjust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    lines = ([f"\n### {title}\n"] if title else []) + [fmt(headers)]
    lines.append("|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|")
    lines += [fmt(r) for r in cells]
    return "\n".join(lines)


def matmul_peak(dtype: torch.dtype, device: torch.device, n: int = 2048,
                reps: int = 5) -> float:
    """Measured matmul FLOP/s: the best of ``reps`` timed (n x n) @ (n x n) products.

    The best (not the median) is the machine's attainable peak; 2 n^3 FLOPs per product.
    """
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    torch.mm(a, b)                                                        # warm up
    calls = 3 if device.type == "cpu" else 20
    best = min(timed(lambda: [torch.mm(a, b) for _ in range(calls)], device) / calls
               for _ in range(reps))
    return 2 * n ** 3 / best
