"""Where a training step's time goes: torch.profiler on one model's step, by operator.

    python benchmarks/profile_step.py                          # ours, fp32, d256 preset
    python benchmarks/profile_step.py --model torch --dtype bf16
"""
from __future__ import annotations

import torch
from torch.profiler import ProfilerActivity, profile

import common
from train_throughput import PRESETS, QUICK, TorchTransformer, make_batch, train_step_fn
from transformer_lib import Transformer, TransformerConfig


def main() -> None:
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--model", choices=["ours", "torch"], default="ours")
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--preset", choices=list(PRESETS), default="d256")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--vocab", type=int, default=1000)
    p.add_argument("--fused-adam", action="store_true")
    p.add_argument("--rows", type=int, default=25)
    args = p.parse_args()
    device = common.setup(args)
    overrides, batch, length = QUICK["tiny"] if args.quick else PRESETS[args.preset]
    c = TransformerConfig.tiny(args.vocab, P_drop=0.1, max_len=128, **overrides)
    src, tgt = make_batch(c, batch, length + 1, device, torch.Generator().manual_seed(0))
    model = (Transformer if args.model == "ours" else TorchTransformer)(c).to(device).train()
    step = train_step_fn(model, src[:, :length], tgt, c.pad_id, args.dtype == "bf16", device,
                         args.fused_adam)
    step()
    step()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda"
                                           else [])
    with profile(activities=activities) as prof:
        for _ in range(1 if args.quick else args.steps):
            step()
            common.sync(device)
    sort = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(prof.key_averages().table(sort_by=sort, row_limit=args.rows))


if __name__ == "__main__":
    main()
