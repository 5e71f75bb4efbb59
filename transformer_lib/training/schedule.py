"""Adam with the paper's warm-up learning-rate schedule (§5.3, Eq. 3)."""
from __future__ import annotations

from typing import Tuple

import torch
from torch import nn

from ..checks import check_float, check_int


def noam_lr(step: int, d_model: int, warmup_steps: int = 4000, factor: float = 1.0) -> float:
    """lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)  (Eq. 3).

    The rate grows linearly for the first ``warmup_steps`` steps, peaks at
    ``factor * (d_model * warmup_steps)^-0.5`` and then decays as 1/sqrt(step).
    ``step`` counts from 1 (the first update), as in the paper.
    """
    for name, value in (("step", step), ("d_model", d_model), ("warmup_steps", warmup_steps)):
        check_int(value, name, 1)
    check_float(factor, "factor", 0.0, min_open=True)
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


def make_optimizer(model: nn.Module, d_model: int, warmup_steps: int = 4000,
                   factor: float = 1.0
                   ) -> Tuple[torch.optim.Adam, torch.optim.lr_scheduler.LambdaLR]:
    """Adam(beta1=0.9, beta2=0.98, eps=1e-9) and a LambdaLR that follows :func:`noam_lr`.

    Adam's base rate is 1, so the schedule's factor *is* the learning rate. LambdaLR counts
    its own calls from 0; the update after k calls of ``scheduler.step()`` uses
    ``noam_lr(k + 1)``: call ``scheduler.step()`` once after every ``optimizer.step()``.
    On the CPU and CUDA, Adam runs fused (``fused=True``): the same update, fewer kernels.
    """
    noam_lr(1, d_model, warmup_steps, factor)          # the same checks, before Adam is built
    params = list(model.parameters())
    fused = all(p.device.type in ("cpu", "cuda") for p in params)
    optimizer = torch.optim.Adam(params, lr=1.0, betas=(0.9, 0.98), eps=1e-9,
                                 fused=fused or None)              # one kernel per step
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda k: noam_lr(k + 1, d_model, warmup_steps, factor))
    return optimizer, scheduler


def cooldown_scale(done: float, cooldown: float) -> float:
    """The factor on the learning rate once the fraction ``done`` (0 to 1) of the run is
    over: 1, then a straight line down to 0 over the run's last ``cooldown`` (0: always 1).

    Warm-up, a plateau (here the schedule's own slow decay), then a fall to zero: a short
    run ends on its smallest steps, where the schedule alone would still take large ones.
    """
    if cooldown <= 0.0:
        return 1.0
    return min(1.0, max(0.0, (1.0 - done) / cooldown))
