"""Helpers shared by the benchmark scripts: arguments, the machine, timing, tables, the peak.

Timing rules used everywhere:

* variants compared with each other run **interleaved** (A, B, A, B, ... with the order
  rotated each round), so a burst of load from another process hits all of them;
* the figure reported is the **median** of the rounds, and ratios are taken between
  medians measured in the same run;
* on a GPU every timed region starts and ends with ``torch.cuda.synchronize()``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from typing import Callable, Dict, List, Optional, Sequence

import torch

from transformer_lib.training import bf16_problem


def parser(description: str) -> argparse.ArgumentParser:
    """An argument parser with the flags every script has."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--quick",
        action="store_true",
        help="tiny sizes and 1-2 repetitions (smoke test; figures meaningless)",
    )
    p.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    p.add_argument(
        "--threads", type=int, default=None, help="torch.set_num_threads (default: PyTorch's)"
    )
    p.add_argument("--seed", type=int, default=0)
    return p


def setup(args: argparse.Namespace) -> torch.device:
    """Apply --threads/--seed, check --device, print the machine; return the device."""
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = check_device(args.device)
    print(machine_line(device))
    return device


def check_device(name: str) -> torch.device:
    """``torch.device(name)``, or SystemExit with one line where it cannot be used here."""
    try:
        device = torch.device(name)
    except RuntimeError:
        raise SystemExit(f"--device {name}: not a device PyTorch knows; use cpu or cuda") from None
    if device.type not in ("cpu", "cuda"):
        raise SystemExit(f"--device {name}: the benchmarks run on cpu or cuda")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit(f"--device {name}: PyTorch sees no CUDA GPU on this machine")
        if (device.index or 0) >= torch.cuda.device_count():
            raise SystemExit(f"--device {name}: there are {torch.cuda.device_count()} GPUs")
        device = torch.device("cuda", device.index or 0)
    return device


def cpu_model() -> str:
    """The CPU's name as lscpu gives it (``model name`` of /proc/cpuinfo), else Python's."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit(folder: "os.PathLike[str] | str") -> str:
    """The commit checked out in ``folder`` ("" outside a clone of the repository, or where
    git is not installed): a results file names the code it came from."""
    import subprocess

    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True
        )
    except OSError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def results_file(
    parser: argparse.ArgumentParser, args: argparse.Namespace, name: str, counts: Sequence[str]
) -> None:
    """Refuse any of the ``counts`` options (dest names) below 1, and set ``args.out`` where
    it was not given: ``benchmarks/NAME`` for a real run, a temporary file with --quick."""
    for dest in counts:
        if getattr(args, dest) < 1:
            parser.error(f"--{dest} must be at least 1, got {getattr(args, dest)}")
    if args.out is None:
        import tempfile
        from pathlib import Path

        folder = Path(tempfile.mkdtemp()) if args.quick else Path(__file__).resolve().parent
        args.out = folder / name


def native_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX512-BF16, AMX or ARM's BF16)."""
    return bf16_problem(torch.device("cpu")) is None


def machine_line(device: torch.device) -> str:
    """One line naming the hardware, the PyTorch build, the threads and the current load."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    line = (
        f"# machine: {cpu_model()} ({torch.backends.cpu.get_cpu_capability()}; native bf16: "
        f"{'yes' if native_bf16() else 'no'}), {os.cpu_count()} logical CPUs, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"load avg (1 min) {load:.2f}"
    )
    if device.type == "cuda":
        line += f", GPU {torch.cuda.get_device_name(device)}, CUDA {torch.version.cuda}"
    return line


def usable_dtypes(wanted: Sequence[str], device: torch.device) -> List[str]:
    """The dtypes of ``wanted`` worth timing on ``device``, with a note for each left out:
    bf16 only where it is native, tf32 only on a CUDA GPU."""
    problem = bf16_problem(device) if "bf16" in wanted else None
    if problem:
        print(f"# bf16 left out: {problem}")
    if "tf32" in wanted and device.type != "cuda":
        print("# tf32 left out: TensorFloat-32 is a mode of NVIDIA GPUs' matrix units")
    left_out = {"bf16"} if problem else set()
    left_out |= {"tf32"} if device.type != "cuda" else set()
    return [d for d in wanted if d not in left_out]


class precision:
    """``with precision("tf32"):`` lets float32 matrix products use TensorFloat-32 on a CUDA
    GPU (``torch.set_float32_matmul_precision("high")``); any other name: full fp32."""

    def __init__(self, dtype_name: str):
        self.high = dtype_name == "tf32"

    def __enter__(self) -> None:
        try:
            self.old = torch.get_float32_matmul_precision()
        except RuntimeError:  # set elsewhere through the newer per-backend settings
            self.old = "highest"
        torch.set_float32_matmul_precision("high" if self.high else "highest")

    def __exit__(self, *exc: object) -> None:
        torch.set_float32_matmul_precision(self.old)


TORCH_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], object], device: torch.device) -> float:
    """Seconds one call of ``fn`` takes (synchronised before and after on a GPU)."""
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
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(row: Sequence[str]) -> str:
        return "| " + " | ".join(c.rjust(w) for c, w in zip(row, widths)) + " |"

    lines = ([f"\n### {title}\n"] if title else []) + [line(headers)]
    lines.append("|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|")
    lines += [line(r) for r in cells]
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
    calls = max(1, min(20, int(2e8 // flops)))  # about 0.2 GFLOP (a few ms on a CPU) a round
    if device.type == "cuda":
        calls = max(10, min(200, int(2e11 // flops)))  # a GPU: ~0.2 TFLOP, >= 10 calls
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
    best: Optional[str] = max(rates, key=lambda k: rates[k]) if rates else None
    if best is None or rates[best] <= peak:
        return {k: v / peak for k, v in rates.items()}, ""
    note = (
        f"row {best!r} ran at {rates[best] / 1e9:,.1f} GFLOP/s, above the "
        f"measured matmul peak {peak / 1e9:,.1f}: MFU taken against its rate instead "
        f"(the peak was measured low, e.g. under load)"
    )
    return {k: v / rates[best] for k, v in rates.items()}, note
