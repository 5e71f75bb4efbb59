"""Why ``torch.compile`` lost to eager on a CPU, and what ``fast.compile_model`` changes.

Times, eager against compiled, median of interleaved rounds:

* the **mask** ``y <= 0`` of a feed-forward layer's ReLU output, stored as ``bool``: what
  Inductor's own ReLU backward makes the forward pass save when dropout follows the ReLU.
  Inductor's vectorised CPU code stores ``bool`` values through a slow conversion;
* the **feed-forward layer's training step** (forward and backward of
  ``PositionwiseFeedForward`` with dropout 0.1, the d256 preset's sizes: 32 x 48 tokens,
  256 -> 1024 -> 256) eager, with ``torch.compile``'s defaults and with
  ``transformer_lib.fast.compile_model`` (Inductor with ``fallback_random`` and a ReLU
  backward that saves no ``bool`` mask).

    python benchmarks/inductor_cpu.py            # about a minute on 2 cores (compiles first)
    python benchmarks/inductor_cpu.py --quick    # smoke test
"""

from __future__ import annotations

import sys
from typing import List, Optional

import torch

import common
from transformer_lib.fast import compile_model
from transformer_lib.feedforward import PositionwiseFeedForward
from transformer_lib.training import keep_freed_memory


def main(argv: Optional[List[str]] = None) -> int:
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=15, help="interleaved rounds")
    args = p.parse_args(argv)
    device = common.setup(args)
    if device.type != "cpu":
        raise SystemExit("--device: this benchmark is about Inductor's CPU code; use cpu")
    keep_freed_memory()
    tokens, d_model, d_ff = (32 * 48, 256, 1024) if not args.quick else (64, 16, 32)
    reps = 2 if args.quick else args.reps

    y = torch.randn(tokens, d_ff).clamp_min(0)
    mask = torch.compile(lambda t: t <= 0, dynamic=False)
    mask_rows = {"eager": lambda: y <= 0, "torch.compile": lambda: mask(y)}

    torch.manual_seed(0)
    layers = [PositionwiseFeedForward(d_model, d_ff, 0.1).train() for _ in range(3)]
    x = torch.randn(tokens, d_model, requires_grad=True)
    step_models = {
        "eager": layers[0],
        "torch.compile": torch.compile(layers[1], dynamic=False),
        "fast.compile_model": compile_model(layers[2], dynamic=False),
    }

    def step(model):
        return lambda: model(x).sum().backward()

    step_rows = {name: step(m) for name, m in step_models.items()}
    rows = []
    for what, fns, calls in (
        ("bool mask y <= 0", mask_rows, 10),
        ("feed-forward step", step_rows, 2),
    ):
        times = common.interleaved(fns, device, reps, warmup=2, calls=calls)  # warm-up compiles
        eager = common.median(times["eager"])
        for name, ts in times.items():
            ms = common.median(ts) * 1e3
            rows.append(
                [what, name, f"{ms:.2f}", common.spread(ts), f"{eager / common.median(ts):.2f}x"]
            )
    print(
        common.table(
            ["work", "how", "ms", "spread", "vs eager"],
            rows,
            title=f"Inductor on a CPU, {tokens} tokens, {d_model} -> {d_ff} -> {d_model}, "
            f"median of {reps} interleaved",
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
