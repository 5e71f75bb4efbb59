"""Whether bfloat16 is worth using on a device: native bf16 arithmetic, or a slow emulation.

On x86 CPUs only AVX512-BF16 and AMX compute bf16 natively; elsewhere (AVX2, most AMD EPYC
and laptop CPUs) PyTorch emulates it, and a bf16 matrix product can run ~100x slower than
in fp32 (1.2 vs 115 GFLOP/s for 512 x 512 on a 2-core AMD EPYC with AVX2). The training
command line refuses ``--bf16`` there, the trainer warns, and the benchmarks leave bf16 out.
"""

from __future__ import annotations

import functools
import platform
import time
from dataclasses import dataclass
from typing import Optional

import torch

X86_FLAGS = ("amx_bf16", "avx512_bf16")  # /proc/cpuinfo flags of native bf16
ARM_FLAGS = ("bf16",)  # /proc/cpuinfo "Features" (ARMv8.6 BF16)


@dataclass(frozen=True)
class Bf16Support:
    """``native``: bf16 arithmetic is fast here. ``how``: what that was decided from."""

    native: bool
    how: str


def cpu_flags() -> set:
    """The CPU's feature flags from /proc/cpuinfo (Linux); empty where it cannot be read."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), or what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def cpu_capability() -> str:
    """PyTorch's name for the vector instructions its CPU kernels use (AVX2, AVX512, ...)."""
    try:
        return torch.backends.cpu.get_cpu_capability()
    except (AttributeError, RuntimeError):
        return "unknown"


def timed_ratio(n: int = 512) -> float:
    """How many times longer an (n x n) @ (n x n) product takes in bf16 than in fp32 here."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    times = []
    for dtype in (torch.float32, torch.bfloat16):
        x, y = a.to(dtype), b.to(dtype)
        torch.mm(x, y)  # warm up
        start = time.perf_counter()
        torch.mm(x, y)
        times.append(time.perf_counter() - start)
    return times[1] / max(times[0], 1e-9)


def decide(flags: set, capability: str, ratio: Optional[float] = None) -> Bf16Support:
    """The decision from the CPU's flags, else from a timing (``ratio``, measured if None):
    native when bf16 is at most three times as slow as fp32 (emulated bf16 is 10-100x)."""
    found = sorted(set(X86_FLAGS + ARM_FLAGS) & flags)
    if found:
        return Bf16Support(True, f"CPU flags {', '.join(found)}")
    ratio = timed_ratio() if ratio is None else ratio
    native = ratio <= 3.0
    return Bf16Support(
        native,
        f"{capability}, no bf16 flags; a bf16 matrix product took {ratio:.1f}x the fp32 time",
    )


@functools.lru_cache(maxsize=None)
def cpu_bf16() -> Bf16Support:
    """Whether this CPU computes bf16 natively (decided once per process)."""
    return decide(cpu_flags(), cpu_capability())


def bf16_problem(device: torch.device) -> str | None:
    """None when bf16 autocast is a sound choice on ``device``, else why not, in one line."""
    device = torch.device(device)
    if device.type == "cuda":
        if torch.cuda.is_available() and not torch.cuda.is_bf16_supported():
            return f"{torch.cuda.get_device_name(device)} has no bfloat16 support"
        return None
    if device.type != "cpu":
        return None
    support = cpu_bf16()
    if support.native:
        return None
    return (
        f"this CPU ({cpu_model()}; {support.how}) has no "
        "native bfloat16 (AVX512-BF16 or AMX on x86): bf16 training would be many times "
        "slower than fp32 here"
    )
