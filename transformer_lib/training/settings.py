"""How to train: :class:`TrainSettings` (the model's own sizes live in
:class:`~transformer_lib.config.TransformerConfig`) and the device to train on."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import torch

from .progress import check_style


@dataclass
class TrainSettings:
    """How to train (the model's own sizes live in :class:`TransformerConfig`).

    ``eval_every``/``save_every`` = 0: only at the end. ``eval_limit``: validation pairs
    that are greedy-decoded for exact match and BLEU (the loss uses all of them).
    ``average_last`` > 0: the final model is the mean of the weights at the last
    ``average_last`` snapshots, taken every ``average_every`` steps up to ``steps`` (the
    paper's base models average the last 5 checkpoints, §6.1). ``decode_max_len``: the
    longest translation decoded in validation; None: the longest training target + 10,
    within the model's positions. ``progress``: True (a
    terminal bar), ``"notebook"`` (one status line updated in place, validation results
    as plain lines) or False (:mod:`.progress`). ``time_budget``: minutes of training
    (validation included) after which :meth:`Trainer.fit` stops cleanly after the current
    step, with a checkpoint, as after a stop request; None: no limit.
    """

    steps: int = 1000
    max_tokens: int = 1000
    warmup: int = 400
    lr_factor: float = 1.0
    label_smoothing: float = 0.1
    eval_every: int = 0
    save_every: int = 0
    checkpoint: Optional[str] = None
    seed: int = 0
    bf16: bool = False
    decode_max_len: Optional[int] = None
    bleu_tokenize: str = "13a"
    eval_limit: Optional[int] = 500
    progress: Union[bool, str] = True
    verbose: bool = True
    average_last: int = 0
    average_every: int = 100
    time_budget: Optional[float] = None

    def __post_init__(self) -> None:
        for name in ("steps", "max_tokens", "warmup", "average_every"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive int, got {getattr(self, name)!r}")
        for name in ("eval_every", "save_every", "average_last"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ValueError(f"{name} must be an int >= 0, got {getattr(self, name)!r}")
        budget = self.time_budget
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float))
                                   or not budget > 0):
            raise ValueError(f"time_budget must be None or a positive number of minutes, got "
                             f"{budget!r}")
        check_style(self.progress)


def pick_device(device: Optional[str] = None) -> torch.device:
    """``device`` if given, else CUDA when available, else the CPU."""
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device)
