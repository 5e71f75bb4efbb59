"""How to train: :class:`TrainSettings` (the model's own sizes live in
:class:`~transformer_lib.config.TransformerConfig`) and the device to train on."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, Union

import torch

from ..checks import check_bool, check_choice, check_float, check_int
from .progress_display import check_progress

SEED_MAX = 2**32 - 1  # numpy's seeds stop here


def bleu_tokenizers() -> tuple:
    """The names sacrebleu accepts as ``tokenize`` (``"13a"``, ``"char"``, ...)."""
    from sacrebleu.metrics.bleu import _TOKENIZERS

    return tuple(_TOKENIZERS)


@dataclass
class TrainSettings:
    """How to train (the model's own sizes live in :class:`TransformerConfig`).

    ``eval_every``/``save_every`` = 0: only at the end. ``eval_limit``: validation pairs
    that are greedy-decoded for exact match and BLEU (the loss uses all of them; None: all).
    ``average_last`` > 0: the final model is the mean of the weights at the last
    ``average_last`` snapshots, taken every ``average_every`` steps up to ``steps`` (the
    paper's base models average the last 5 checkpoints, §6.1). ``decode_max_len``: the
    longest translation decoded in validation; None: the longest training target + 10,
    within the model's positions. ``progress``: True (a
    terminal bar), ``"notebook"`` (one status line updated in place, validation results
    as plain lines) or False (:mod:`.progress_display`). ``time_budget``: minutes of training
    (validation included) after which :meth:`Trainer.fit` stops cleanly after the current
    step, with a checkpoint, as after a stop request; None: no limit. ``cooldown``: the
    last fraction of the run over which the learning rate falls linearly to zero (the run's
    end is ``steps``, or the time budget if that comes first); 0: the schedule alone.
    ``keep_freed_memory``: on Linux with glibc, :meth:`Trainer.fit` first tells ``malloc`` to
    keep the memory a step frees for the next step, for the rest of the process
    (:func:`transformer_lib.fast.keep_freed_memory`): fewer page faults, above all around
    a large vocabulary's logits, and the same results; False leaves the C library's
    defaults (once set, they stay set in that process).
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
    cooldown: float = 0.0
    keep_freed_memory: bool = True

    def __post_init__(self) -> None:
        """Refuse, naming the field, any value training could not honour."""
        for name in ("steps", "max_tokens", "warmup", "average_every"):
            check_int(getattr(self, name), name, 1)
        for name in ("eval_every", "save_every", "average_last"):
            check_int(getattr(self, name), name, 0)
        check_int(self.seed, "seed", 0, SEED_MAX)
        check_float(self.lr_factor, "lr_factor", 0.0, min_open=True)
        check_float(self.label_smoothing, "label_smoothing", 0.0, 1.0, max_open=True)
        for name in ("bf16", "verbose", "keep_freed_memory"):
            check_bool(getattr(self, name), name)
        if self.decode_max_len is not None:
            check_int(self.decode_max_len, "decode_max_len", 1)
        if self.eval_limit is not None:
            check_int(self.eval_limit, "eval_limit", 1)
        check_choice(self.bleu_tokenize, "bleu_tokenize", bleu_tokenizers())
        if self.time_budget is not None:
            check_float(self.time_budget, "time_budget (minutes)", 0.0, min_open=True)
        check_float(self.cooldown, "cooldown", 0.0, 1.0)
        if self.checkpoint is not None:  # stored in the checkpoint: a str, never a Path
            if not isinstance(self.checkpoint, (str, os.PathLike)):
                raise TypeError(
                    f"checkpoint must be None or a path (str), got "
                    f"{self.checkpoint!r} ({type(self.checkpoint).__name__})"
                )
            self.checkpoint = os.fspath(self.checkpoint)
            if not self.checkpoint:
                raise ValueError("checkpoint must be None (no checkpoint) or a file path, got ''")
        check_progress(self.progress)


def check_trainer_arguments(
    model: object, src_tok: object, tgt_tok: object, settings: object, extra: object
) -> None:
    """The :class:`Trainer`'s arguments, whatever the caller passed: TypeError naming the one
    that is wrong."""
    from ..model import Transformer
    from .state_integrity import check_loadable

    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a transformer_lib.Transformer, got {type(model).__name__}")
    if not isinstance(settings, TrainSettings):
        raise TypeError(f"settings must be a TrainSettings, got {type(settings).__name__}")
    for name, tok in (("src_tok", src_tok), ("tgt_tok", tgt_tok)):
        if not all(hasattr(tok, a) for a in ("encode", "decode", "to_dict")):
            raise TypeError(
                f"{name} must be a tokenizer (encode, decode, to_dict), got {type(tok).__name__}"
            )
    if extra is not None:
        if not isinstance(extra, dict):
            raise TypeError(f"extra must be None or a dict, got {type(extra).__name__}")
        check_loadable(extra, "extra")  # else its checkpoints could never be resumed


def pick_device(device: Optional[str] = None) -> torch.device:
    """``device`` if given, else CUDA when available, else the CPU."""
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device)
