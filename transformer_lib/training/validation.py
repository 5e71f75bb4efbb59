"""What the trainer records (§6.1's development-set scores): the history of a run and the
validation loss under teacher forcing.

The history is a dict of lists, one entry a step (``step``, ``loss``, ``lr``) or one a
validation (``val_step``, ``val_loss``, ``val_exact_match``, ``val_bleu``), in the plain
types a checkpoint stores.
"""

from __future__ import annotations

import math
from typing import Callable, ContextManager, Dict, List, Sequence

import torch
from torch import nn

from ..data.batching import Example, token_batches
from ..model import Transformer

HISTORY_KEYS = ("step", "loss", "lr", "val_step", "val_loss", "val_exact_match", "val_bleu")


def new_history() -> Dict[str, List[float]]:
    """An empty history: one list for each of ``HISTORY_KEYS``."""
    return {k: [] for k in HISTORY_KEYS}


@torch.no_grad()
def validation_loss(
    model: Transformer,
    criterion: nn.Module,
    examples: Sequence[Example],
    max_tokens: int,
    device: torch.device,
    autocast: Callable[[], ContextManager],
) -> float:
    """The mean per-token loss of teacher-forced ``examples`` [(src_ids, tgt_ids)], in
    batches of ``max_tokens`` in their order; NaN when there is none. ``model`` is left in
    the mode it was given in (the trainer puts it in eval mode)."""
    total, tokens = 0.0, 0
    for batch in token_batches(
        examples, max_tokens, shuffle=False, pad_id=model.config.pad_id
    ):  # [] if none
        batch = batch.to(device)
        with autocast():
            logits = model(batch.src, batch.tgt_in)  # (B, T, V)
        total += criterion(logits, batch.tgt_out).item() * batch.n_tokens
        tokens += batch.n_tokens
    return total / tokens if tokens else math.nan
