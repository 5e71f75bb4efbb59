"""Peak memory of the explicit attention path against the fused one, per sequence length.

One causal self-attention call, forward and backward (what training does), B=1 by default:

* ``explicit``: :func:`transformer_lib.attention.attention` with a (L, L) causal mask; it
  builds the (B, H, L, L) scores and weights, and autograd keeps them for the backward pass;
* ``fused``: :func:`transformer_lib.attention.fused_attention` with the same mask, as the
  model calls it: PyTorch's fused kernel works block by block and keeps only O(L)
  statistics per row, plus a float copy of the (L, L) mask;
* ``is_causal``: the same kernel told ``is_causal=True`` instead of given a mask tensor
  (``F.scaled_dot_product_attention``), the least it can keep.

On a CPU each case runs in a fresh subprocess and reports its peak resident memory above
the level just before the call (``resource.getrusage``: the high-water mark of the
process); on a GPU, ``torch.cuda.max_memory_allocated`` above the same baseline. ``--quick``
runs its cases in this process (no fresh process each: its figures mean nothing).

    python benchmarks/attention_memory.py            # L = 512 .. 8192
    python benchmarks/attention_memory.py --quick    # smoke test
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from typing import List, Optional

import torch
import torch.nn.functional as F

import common
from transformer_lib.attention import attention, fused_attention
from transformer_lib.masks import causal_mask

VARIANTS = ("explicit", "fused", "is_causal")


def current_rss() -> int:
    """Resident set size of this process now, in bytes (Linux /proc; else the peak)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize()
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def one_case(variant: str, L: int, batch: int, heads: int, d_k: int, device: torch.device) -> dict:
    """Run forward + backward of one attention call; return peak extra bytes and seconds."""
    shape = (batch, heads, L, d_k)
    q, k, v = (torch.randn(shape, device=device, requires_grad=True) for _ in range(3))
    mask = causal_mask(L, device) if variant != "is_causal" else None  # (1, 1, L, L)
    common.sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
    else:
        base = current_rss()
    start = time.perf_counter()
    if variant == "explicit":
        out, _ = attention(q, k, v, mask)  # (B, H, L, d_k)
    elif variant == "fused":
        out = fused_attention(q, k, v, mask)  # (B, H, L, d_k)
    else:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, L, d_k)
    out.sum().backward()
    common.sync(device)
    seconds = time.perf_counter() - start
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated(device) - base
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
    return {"peak": max(peak, 0), "seconds": seconds}


def measure(variant: str, L: int, args, device: torch.device) -> dict:
    """One case: in-process on a GPU (or with --quick), in a fresh subprocess on a CPU."""
    if device.type == "cuda" or args.quick:
        return one_case(variant, L, args.batch, args.heads, args.d_k, device)
    cmd = [
        sys.executable,
        __file__,
        "--child",
        variant,
        str(L),
        "--batch",
        str(args.batch),
        "--heads",
        str(args.heads),
        "--d-k",
        str(args.d_k),
    ]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv: Optional[List[str]] = None) -> int:
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--d-k", type=int, default=64)
    p.add_argument("--child", nargs=2, metavar=("VARIANT", "L"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        if args.threads:
            torch.set_num_threads(args.threads)
        print(
            json.dumps(
                one_case(
                    args.child[0],
                    int(args.child[1]),
                    args.batch,
                    args.heads,
                    args.d_k,
                    torch.device("cpu"),
                )
            )
        )
        return 0
    device = common.setup(args)
    lengths = [64] if args.quick else args.lengths
    rows = []
    for L in lengths:
        res = {v: measure(v, L, args, device) for v in VARIANTS}
        mb = {v: res[v]["peak"] / 2**20 for v in VARIANTS}
        weights_mb = args.batch * args.heads * L * L * 4 / 2**20
        rows.append(
            [
                L,
                f"{weights_mb:,.0f}",
                f"{mb['explicit']:,.1f}",
                f"{mb['fused']:,.1f}",
                f"{mb['is_causal']:,.1f}",
                f"{mb['fused'] / mb['explicit']:.3f}" if mb["explicit"] else "-",
                f"{1e3 * res['explicit']['seconds']:,.0f}",
                f"{1e3 * res['fused']['seconds']:,.0f}",
            ]
        )
    print(
        common.table(
            [
                "L",
                "one (B,H,L,L) fp32 MiB",
                "explicit MiB",
                "fused MiB",
                "is_causal MiB",
                "fused / explicit",
                "explicit ms",
                "fused ms",
            ],
            rows,
            f"Peak extra memory of causal self-attention, forward + backward, B={args.batch}, "
            f"H={args.heads}, d_k={args.d_k}, fp32",
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
