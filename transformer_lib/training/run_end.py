"""How a training run ends: a stop request (Ctrl-C), the time budget, and the cool-down of
the learning rate before the end (``settings.cooldown``).

:class:`RunEnd` is the part of :class:`~transformer_lib.training.trainer.Trainer` that
decides when :meth:`~transformer_lib.training.trainer.Trainer.fit` stops and how far the
rate has come down by then.
"""

from __future__ import annotations

import time
from typing import Optional

import torch

from .distributed import DistContext
from .schedule import cooldown_scale
from .settings import TrainSettings


class RunEnd:
    """Stop requests, the budget and the cool-down. Used by the trainer, whose ``settings``,
    ``step``, ``optimizer``, ``device`` and ``dist`` it reads."""

    settings: TrainSettings
    step: int
    optimizer: torch.optim.Optimizer
    device: torch.device
    dist: DistContext
    stop_signal: Optional[int]
    budget_spent: bool
    lr_scale: float

    def request_stop(self, signum: int = 1) -> None:
        """Ask :meth:`fit` to stop after the current step (safe to call from a signal
        handler): it writes a checkpoint of that step and returns."""
        self.stop_signal = signum

    def _track_end(self, deadline: Optional[float]) -> None:
        """Where the run stands, from one reading of the clock: ``budget_spent`` once the
        ``deadline`` has passed, and the next step's ``lr_scale``. The run is done by the
        fraction of its steps taken, or of its time budget used if that is further along."""
        s = self.settings
        done = self.step / s.steps
        if deadline is not None and s.time_budget is not None:
            now = time.perf_counter()
            self.budget_spent = self.budget_spent or now >= deadline
            done = max(done, 1.0 - (deadline - now) / (60 * s.time_budget))
        self.lr_scale = cooldown_scale(done, s.cooldown)

    def _cool_down(self) -> None:
        """This step's rate: the schedule's, times ``lr_scale`` (settings.cooldown). The
        scheduler sets the rate afresh at every step, so nothing builds up, and a checkpoint
        holds the schedule's own rate."""
        if self.lr_scale < 1.0:
            for group in self.optimizer.param_groups:
                group["lr"] *= self.lr_scale

    def _stop_requested(self) -> bool:
        """Whether any process was asked to stop (all processes stop at the same step). With
        DDP, every process also takes the lowest ``lr_scale``: their clocks differ, their
        updates must not."""
        flag = 1 if self.stop_signal or self.budget_spent else 0
        if self.dist.enabled:
            import torch.distributed as dist

            t = torch.tensor([flag, 1.0 - self.lr_scale], device=self.device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            flag, self.lr_scale = int(t[0].item()), 1.0 - float(t[1].item())
        self.budget_spent = self.budget_spent or (bool(flag) and not self.stop_signal)
        return bool(flag)
