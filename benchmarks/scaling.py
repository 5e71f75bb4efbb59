"""How a training step's time grows with sequence length and with batch size.

Times one transformer_lib training step (forward, backward, Adam; fp32) while varying one
size at a time, and fits ``time = a * size^k`` by least squares on log(time) against
log(size). Attention is quadratic in the length but the projections and the feed-forward
network are linear, so at these lengths k stays near 1 and rises slowly as L grows; in the
batch size everything is linear, so k <= 1 (below 1 where fixed per-step costs, such as
the optimizer and Python overhead, still matter).

    python benchmarks/scaling.py            # d_model 256, 3+3 layers
    python benchmarks/scaling.py --quick    # smoke test
"""

from __future__ import annotations

import math
import sys
from typing import List, Optional, Sequence, Tuple

import torch

import common
from transformer_lib.config import TransformerConfig
from transformer_lib.model import Transformer
from workload import make_batch, train_step_fn


def fit_exponent(sizes: Sequence[float], times: Sequence[float]) -> Tuple[float, float]:
    """Least-squares line through (log size, log time): returns (exponent k, a)."""
    xs, ys = [math.log(s) for s in sizes], [math.log(t) for t in times]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    k = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return k, math.exp(my - k * mx)


def sweep(
    c: TransformerConfig, shapes: List[Tuple[int, int]], args, device: torch.device
) -> List[float]:
    """Median seconds per step for each (batch, length); interleaved across shapes."""
    fns = {}
    for batch, length in shapes:
        torch.manual_seed(args.seed)
        model = Transformer(c).to(device).train()
        src, tgt = make_batch(
            c, batch, length + 1, device, torch.Generator().manual_seed(args.seed)
        )
        fns[(batch, length)] = train_step_fn(
            model, src[:, :length], tgt, c.pad_id, False, device, False
        )
    times = common.interleaved(fns, device, args.reps, warmup=1)
    return [common.median(times[s]) for s in shapes]


def report(name: str, sizes: List[int], seconds: List[float], tokens: List[int]) -> str:
    k, a = fit_exponent(sizes, seconds)
    k_hi, _ = fit_exponent(sizes[-3:], seconds[-3:])
    rows = [
        [s, f"{1e3 * t:,.1f}", f"{tok / t:,.0f}", f"{1e3 * a * s**k:,.1f}"]
        for s, t, tok in zip(sizes, seconds, tokens)
    ]
    return common.table(
        [name, "ms/step", "tokens/s", "fit ms"],
        rows,
        f"Step time against {name}: time ~ {name}^{k:.2f} (largest three sizes: ^{k_hi:.2f})",
    )


def main(argv: Optional[List[str]] = None) -> int:
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    p.add_argument("--batches", type=int, nargs="+", default=[4, 8, 16, 32, 64])
    p.add_argument("--batch", type=int, default=32, help="batch for the length sweep")
    p.add_argument("--length", type=int, default=48, help="length for the batch sweep")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--vocab", type=int, default=1000)
    args = p.parse_args(argv)
    device = common.setup(args)
    if args.quick:
        c = TransformerConfig.tiny(64, N=1, d_model=16, d_ff=32, h=2, P_drop=0.1)
        lengths, batches, args.batch, args.length, args.reps = [4, 8, 16], [2, 4, 8], 4, 8, 1
    else:
        lengths, batches = args.lengths, args.batches
        c = TransformerConfig.tiny(
            args.vocab, N=3, d_model=256, d_ff=1024, h=4, P_drop=0.1, max_len=max(lengths) + 1
        )
    secs = sweep(c, [(args.batch, L) for L in lengths], args, device)
    print(report("length", lengths, secs, [args.batch * L for L in lengths]))
    secs = sweep(c, [(b, args.length) for b in batches], args, device)
    print(report("batch", batches, secs, [b * args.length for b in batches]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
