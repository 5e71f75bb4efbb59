"""Checkpoint averaging (§6.1): the model that is evaluated is the mean of the weights at
the last few snapshot steps ("the last 5 checkpoints, written at 10-minute intervals").

:class:`WeightAveraging` is the part of :class:`~transformer_lib.training.trainer.Trainer`
that keeps the running sum: ``settings.average_last`` snapshots, ``settings.average_every``
steps apart, ending at ``settings.steps``.
"""

from __future__ import annotations

import warnings
from typing import Any, Dict, List, Optional

import torch

from ..model import Transformer
from .distributed import DistContext
from .settings import TrainSettings


class WeightAveraging:
    """The running sum of the snapshots taken so far and their steps (saved in checkpoints).

    Used by the trainer, whose ``settings``, ``model``, ``step`` and ``dist`` it reads.
    """

    settings: TrainSettings
    model: Transformer
    step: int
    dist: DistContext

    def reset_average(self) -> None:
        self.weight_sum: Dict[str, torch.Tensor] = {}  # snapshots for averaging
        self.averaged_steps: List[Optional[int]] = []  # ... and their steps

    @property
    def n_averaged(self) -> int:
        return len(self.averaged_steps)

    def average_state(self) -> Dict[str, Any]:
        """The running sum as a checkpoint stores it."""
        return {"sum": self.weight_sum, "count": self.n_averaged, "steps": self.averaged_steps}

    def load_average_state(self, average: Dict[str, Any]) -> None:
        """Restore :meth:`average_state`; snapshots these settings would not take (the run
        was resumed with other steps or averaging settings) are dropped with a warning."""
        self.weight_sum = dict(average["sum"])
        self.averaged_steps = list(average.get("steps", [None] * average["count"]))
        if any(t is not None and not self.snapshot_due(t) for t in self.averaged_steps):
            s = self.settings
            warnings.warn(
                f"the checkpoint's weight average holds snapshots from steps "
                f"{self.averaged_steps}, which are not snapshot steps of these settings "
                f"(steps={s.steps}, average_last={s.average_last}, "
                f"average_every={s.average_every}): starting the average afresh",
                stacklevel=3,
            )
            self.reset_average()

    def snapshot_due(self, step: int) -> bool:
        """Whether ``step`` is one of the last ``average_last`` snapshot steps."""
        s = self.settings
        to_go = s.steps - step
        return (
            bool(s.average_last)
            and to_go % s.average_every == 0
            and 0 <= to_go < s.average_last * s.average_every
        )

    @torch.no_grad()
    def take_snapshot(self, bar, last: bool) -> None:
        """Add the weights to the running sum at the last ``average_last`` snapshot steps;
        at the last step, load their mean into the model."""
        s = self.settings
        if not self.snapshot_due(self.step):
            return
        for name, p in self.model.named_parameters():
            if name in self.weight_sum:
                self.weight_sum[name] += p
            else:
                self.weight_sum[name] = p.clone()  # under no_grad
        self.averaged_steps.append(self.step)
        if last:
            for name, p in self.model.named_parameters():
                p.copy_(self.weight_sum[name] / self.n_averaged)
            if s.verbose and self.dist.is_main:
                bar.write(
                    f"step {self.step}: weights averaged over the last {self.n_averaged} "
                    f"snapshots, {s.average_every} steps apart"
                )
            self.reset_average()
