"""Every mask of the model, built here and nowhere else.

One convention: a boolean tensor, ``True`` = may attend, broadcastable to
(B, H, T_q, T_k). This is the convention of ``torch.nn.functional.scaled_dot_product_attention``.
``torch.nn.MultiheadAttention`` and ``nn.Transformer*Layer`` use the *opposite* meaning
(``True`` = blocked): use :func:`to_blocked` where the two meet.
"""
from __future__ import annotations

import torch

from .checks import check_ids, check_int, check_mask


def padding_mask(ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Keys that are not padding: (B, L) ids -> (B, 1, 1, L) bool."""
    check_ids(ids, "ids")
    check_int(pad_id, "pad_id", 0)
    return (ids != pad_id)[:, None, None, :]                                 # (B, 1, 1, L)


def causal_mask(length: int, device: torch.device | str | None = None,
                past: int = 0) -> torch.Tensor:
    """Position t may attend to positions <= t: (1, 1, T, past + T) bool.

    ``past`` counts positions already decoded (a key/value cache): the T new queries sit
    at positions past .. past + T - 1 and see every earlier key.
    """
    check_int(length, "length", 0)
    check_int(past, "past", 0)
    ones = torch.ones(length, past + length, dtype=torch.bool, device=device)
    return torch.tril(ones, diagonal=past)[None, None]                       # (1, 1, T, past+T)


def decoder_mask(tgt: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Causal mask combined with the target's padding mask: (B, T) -> (B, 1, T, T)."""
    return padding_mask(tgt, pad_id) & causal_mask(tgt.shape[1], tgt.device)  # (B, 1, T, T)


def to_blocked(mask: torch.Tensor) -> torch.Tensor:
    """Convert to ``nn.MultiheadAttention``'s convention, where True means *blocked*."""
    if mask is None:
        raise TypeError("mask must be a bool tensor, got None")
    check_mask(mask, "mask")
    return ~mask
