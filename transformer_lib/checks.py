"""Argument checks shared by the modules: clear errors that name the argument."""
from __future__ import annotations

import math
from typing import Any, Collection, Optional, Sequence

import torch


def check_int(value: Any, name: str, minimum: Optional[int] = None,
              maximum: Optional[int] = None) -> int:
    """Return ``value`` if it is a Python (or NumPy) integer in ``[minimum, maximum]``.

    ``bool`` is refused: ``True`` is an ``int`` to Python, never a size to the model.
    """
    if isinstance(value, bool) or not hasattr(value, "__index__") or isinstance(
            value, torch.Tensor):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum}, got {value}")
    return value


def check_float(value: Any, name: str, minimum: Optional[float] = None,
                maximum: Optional[float] = None, *, min_open: bool = False,
                max_open: bool = False) -> float:
    """Return ``value`` as a finite float in the range given (bounds closed unless ``*_open``).

    ``bool``, strings, NaN and infinities are refused.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not (
            hasattr(value, "__float__") and not isinstance(value, (str, bytes, torch.Tensor))):
        raise TypeError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    low = minimum is not None and (value <= minimum if min_open else value < minimum)
    high = maximum is not None and (value >= maximum if max_open else value > maximum)
    if low or high:
        left = "(" if min_open else "["
        right = ")" if max_open else "]"
        lo = "-inf" if minimum is None else minimum
        hi = "inf" if maximum is None else maximum
        raise ValueError(f"{name} must be in {left}{lo}, {hi}{right}, got {value}")
    return value


def check_bool(value: Any, name: str) -> bool:
    """Return ``value`` if it is a ``bool``; refuse the strings, ints and Nones that look like one."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")
    return value


def check_choice(value: Any, name: str, choices: Collection[Any]) -> Any:
    """Return ``value`` if it is one of ``choices``."""
    if value not in choices:
        listed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {listed}, got {value!r}")
    return value


def check_token_ids(ids: torch.Tensor, name: str, vocab_size: int) -> None:
    """Raise unless ``ids`` is a 2-D integer tensor of ids in ``[0, vocab_size)``."""
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token ids, got {type(ids).__name__}")
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise TypeError(
            f"{name} must hold integer token ids (torch.long), got dtype {ids.dtype}")
    if ids.dim() != 2:
        raise ValueError(f"{name} must have shape (batch, length), got {tuple(ids.shape)}")
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        raise ValueError(
            f"{name} holds ids outside the vocabulary [0, {vocab_size}): "
            f"min {int(ids.min())}, max {int(ids.max())}")


def check_mask(mask: Optional[torch.Tensor], name: str, shape: Sequence[int]) -> None:
    """Raise unless ``mask`` is None or a bool tensor broadcastable to ``shape``.

    The convention is that of ``scaled_dot_product_attention``: True = may attend.
    """
    if mask is None:
        return
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a bool torch.Tensor or None, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"{name} must have dtype torch.bool (True = may attend), got {mask.dtype}")
    expected = tuple(shape)
    ok = mask.dim() <= len(expected) and all(
        m in (1, e) for m, e in zip(reversed(mask.shape), reversed(expected)))
    if not ok:
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} does not broadcast to (B, H, T_q, T_k) = "
            f"{expected}")


def check_attention_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                           mask: Optional[torch.Tensor]) -> None:
    """Raise unless q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v) fit together
    and ``mask`` is None or bool, broadcastable to (..., T_q, T_k)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() < 2:
            got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{name} must be a tensor of shape (..., length, size), got {got}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same d_k (last dimension): q has shape "
                         f"{tuple(q.shape)}, k has shape {tuple(k.shape)}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same T_k (second-to-last dimension): k has "
                         f"shape {tuple(k.shape)}, v has shape {tuple(v.shape)}")
    try:
        batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise ValueError(f"the leading (batch, head) dimensions of q {tuple(q.shape)}, "
                         f"k {tuple(k.shape)} and v {tuple(v.shape)} do not broadcast") from None
    check_mask(mask, "mask", (*batch, q.shape[-2], k.shape[-2]))
