"""The argument checks of the public entry points: one clear error that names the argument.

Each public function or module checks what it is given where it is given it; the layers
inside trust their callers. Only cheap facts are checked (types, dtypes, ranks, widths);
the one check that reads tensor values, the range of token ids, runs on CPU tensors only
(reading a GPU tensor would wait for the device) and never under ``torch.compile``.
"""

from __future__ import annotations

import math
from typing import Any, Collection, Optional, Sequence

import torch


def check_int(value: Any, name: str, minimum: Optional[int] = None,
              maximum: Optional[int] = None) -> int:
    """``value`` as an int in [minimum, maximum]; ``bool`` is refused (never a size)."""
    if torch.compiler.is_compiling():      # a traced size (torch.compile): checked in eager mode
        return value
    if isinstance(value, (bool, torch.Tensor)) or not hasattr(value, "__index__"):
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
    """``value`` as a finite float in the range (bounds closed unless ``*_open``)."""
    if torch.compiler.is_compiling():      # a traced rate (torch.compile): checked in eager mode
        return value
    if isinstance(value, (bool, str, bytes, torch.Tensor)) or not hasattr(value, "__float__"):
        raise TypeError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    value = float(value)
    low = minimum is not None and (value <= minimum if min_open else value < minimum)
    high = maximum is not None and (value >= maximum if max_open else value > maximum)
    if not math.isfinite(value) or low or high:
        lo, hi = "-inf" if minimum is None else minimum, "inf" if maximum is None else maximum
        span = f"{'(' if min_open else '['}{lo}, {hi}{')' if max_open else ']'}"
        raise ValueError(f"{name} must be a finite number in {span}, got {value}")
    return value


def check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")
    return value


def check_choice(value: Any, name: str, choices: Collection[Any]) -> Any:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


def check_ids(ids: Any, name: str, vocab_size: Optional[int] = None, *,
              any_device: bool = False) -> None:
    """A (B, L) ``torch.long`` tensor of ids in [0, vocab_size); the range is read on CPU
    tensors only, unless ``any_device`` (once per call of a decoding function)."""
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token ids, got {type(ids).__name__}")
    if ids.dtype != torch.long:
        raise TypeError(f"{name} must hold token ids of dtype torch.long, got {ids.dtype}: "
                        f"convert with {name}.long()")
    if ids.dim() != 2:
        raise ValueError(f"{name} must have shape (B, L), got {tuple(ids.shape)}")
    if (vocab_size is None or not (any_device or ids.device.type == "cpu") or not ids.numel()
            or torch.compiler.is_compiling()):
        return
    low, high = (int(t) for t in torch.aminmax(ids))
    if low < 0 or high >= vocab_size:
        raise ValueError(f"{name} holds ids outside the vocabulary [0, {vocab_size}): "
                         f"min {low}, max {high}")


def check_mask(mask: Any, name: str, shape: Optional[Sequence[int]] = None) -> None:
    """None, or a bool tensor (True = may attend) that broadcasts to ``shape``."""
    if mask is None:
        return
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise TypeError(f"{name} must be a bool tensor (True = may attend) or None, got {got}")
    if shape is not None and (mask.dim() > len(shape) or any(
            m not in (1, s) for m, s in zip(reversed(mask.shape), reversed(shape)))):
        raise ValueError(f"{name} of shape {tuple(mask.shape)} does not broadcast to "
                         f"(B, H, T_q, T_k) = {tuple(shape)}")


def check_sequence(x: Any, name: str, width: int, batch: Optional[int] = None,
                   dtype: Optional[torch.dtype] = None) -> None:
    """A floating-point (B, L, width) tensor; with ``dtype``, of that dtype (a layer's
    weights' dtype: outside autocast, a float64 input to float32 weights fails in PyTorch)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape (B, L, {width}), "
                        f"got {type(x).__name__}")
    if x.dim() != 3 or x.shape[-1] != width or (batch is not None and x.shape[0] != batch):
        rows = "B" if batch is None else batch
        raise ValueError(f"{name} must have shape ({rows}, L, {width}), got {tuple(x.shape)}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating-point tensor, got {x.dtype}")
    if dtype is not None and x.dtype != dtype and not torch.is_autocast_enabled(x.device.type):
        raise TypeError(f"{name} has dtype {x.dtype} but the layer's weights are {dtype}: "
                        f"convert with {name}.to({dtype})")
