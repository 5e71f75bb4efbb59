"""Keep freed memory in the process for the next training step (Linux with glibc).

By default glibc's ``malloc`` hands memory back to the OS: large blocks come from fresh
``mmap``s, and the top of the heap is returned once enough of it is free. A training step
frees most of its activations at its end, so the next step may touch new pages again, and
each first touch of a 4 KiB page is a page fault (several microseconds on a virtual machine).
Raising glibc's trim and mmap thresholds keeps that memory for reuse: what jemalloc or
tcmalloc would do, without installing either. It changes no result, only the time spent
faulting in fresh pages (``benchmarks/README.md``); the process's resident memory then stays
near its peak, as a training process's does anyway.
"""

from __future__ import annotations

import platform
import sys

THRESHOLD = 1 << 30  # bytes: glibc's trim and mmap thresholds (1 GiB)


def keep_freed_memory() -> str:
    """Tell glibc's malloc to keep freed memory for reuse, for the rest of the process.

    Returns what was set (for a log line), or "" where the C library is not glibc (macOS,
    Windows, musl): nothing is changed there.
    """
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return ""
    import ctypes

    libc = ctypes.CDLL("libc.so.6")
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # from <malloc.h>
    if (
        libc.mallopt(M_TRIM_THRESHOLD, THRESHOLD) != 1
        or libc.mallopt(M_MMAP_THRESHOLD, THRESHOLD) != 1
    ):
        return ""
    return "glibc malloc keeps freed memory (mallopt: trim and mmap thresholds 1 GiB)"
