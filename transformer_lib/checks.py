"""Argument checks shared by the modules: clear errors that name the argument.

Each argument is checked once on its way through the model: a stack (``Transformer``,
``Decoder``) checks what it was given, then runs its layers inside :func:`checked_inputs`,
where the layers take the sequences and masks passed down as checked
(:func:`inputs_checked`). A layer called on its own checks its inputs itself.
"""

from __future__ import annotations

import math
import threading
from contextlib import contextmanager
from typing import Any, Collection, Iterator, Optional, Sequence

import torch


class _CheckedDepth(threading.local):
    depth = 0  # > 0 inside checked_inputs() (per thread)


_CHECKED = _CheckedDepth()


@contextmanager
def checked_inputs() -> Iterator[None]:
    """A block in which the layers take their tensor inputs as checked: the caller checked
    the arguments it passes down (shapes, dtypes, masks) and builds the rest itself.

    Under ``torch.compile`` it does nothing (the checks are traced once, not run per call).
    """
    if torch.compiler.is_compiling():
        yield
        return
    _CHECKED.depth += 1
    try:
        yield
    finally:
        _CHECKED.depth -= 1


def inputs_checked() -> bool:
    """Whether the caller checked the inputs already (inside :func:`checked_inputs`)."""
    return not torch.compiler.is_compiling() and _CHECKED.depth > 0


def check_int(
    value: Any, name: str, minimum: Optional[int] = None, maximum: Optional[int] = None
) -> int:
    """Return ``value`` if it is a Python (or NumPy) integer in ``[minimum, maximum]``.

    ``bool`` is refused: ``True`` is an ``int`` to Python, never a size to the model.
    Under ``torch.compile`` nothing is checked (sizes are symbolic there; eager mode checks).
    """
    if torch.compiler.is_compiling():
        return value
    if (
        isinstance(value, bool)
        or not hasattr(value, "__index__")
        or isinstance(value, torch.Tensor)
    ):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum}, got {value}")
    return value


def check_float(
    value: Any,
    name: str,
    minimum: Optional[float] = None,
    maximum: Optional[float] = None,
    *,
    min_open: bool = False,
    max_open: bool = False,
) -> float:
    """Return ``value`` as a finite float in the range given (bounds closed unless ``*_open``).

    ``bool``, strings, NaN and infinities are refused. Not checked under ``torch.compile``
    (numbers may be symbolic there; eager mode checks).
    """
    if torch.compiler.is_compiling():
        return value
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        and not (hasattr(value, "__float__") and not isinstance(value, (str, bytes, torch.Tensor)))
    ):
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


def reads_values(t: torch.Tensor) -> bool:
    """Whether a check may read ``t``'s values for free: in eager mode and on the CPU.

    Reading an accelerator's tensor from Python waits for the device (a device-to-host
    sync), and under ``torch.compile`` it would break the graph: value checks are skipped
    there, and made where the data enters (see ``check_token_ids(values=True)``).
    """
    return t.device.type == "cpu" and not torch.compiler.is_compiling()


def check_token_ids(
    ids: Any, name: str, vocab_size: Optional[int] = None, *, values: Optional[bool] = None
) -> None:
    """Raise unless ``ids`` is a 2-D ``torch.long`` tensor of ids in ``[0, vocab_size)``.

    Every other dtype is refused, other integer ones included (``nn.Embedding`` takes
    ``torch.long`` only; a silent cast would hide a wrong tensor). The range is checked
    when ``vocab_size`` is given, and only where it costs no device sync
    (:func:`reads_values`) unless ``values=True`` (where the data enters); never under
    ``torch.compile``.
    """
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token ids, got {type(ids).__name__}")
    if ids.dtype != torch.long:
        raise TypeError(
            f"{name} must hold integer token ids (torch.long), got dtype "
            f"{ids.dtype}: convert with {name}.long()"
        )
    if ids.dim() != 2:
        raise ValueError(f"{name} must have shape (batch, length), got {tuple(ids.shape)}")
    read = reads_values(ids) if values is None else (values and not torch.compiler.is_compiling())
    if vocab_size is None or not read or not ids.numel():
        return
    low, high = (int(t) for t in torch.aminmax(ids))  # one pass over the ids
    if low < 0 or high >= vocab_size:
        raise ValueError(
            f"{name} holds ids outside the vocabulary [0, {vocab_size}): min {low}, max {high}"
        )


def check_mask(
    mask: Any, name: str, shape: Optional[Sequence[int]] = None, *, optional: bool = True
) -> None:
    """Raise unless ``mask`` is a bool tensor broadcastable to ``shape`` (any shape when
    None), or None when ``optional``.

    The convention is that of ``scaled_dot_product_attention``: True = may attend.
    """
    if mask is None and optional:
        return
    if not isinstance(mask, torch.Tensor):
        none = " or None" if optional else ""
        raise TypeError(f"{name} must be a bool torch.Tensor{none}, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(f"{name} must have dtype torch.bool (True = may attend), got {mask.dtype}")
    if shape is None:
        return
    expected = tuple(shape)
    ok = mask.dim() <= len(expected) and all(
        m in (1, e) for m, e in zip(reversed(mask.shape), reversed(expected))
    )
    if not ok:
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} does not broadcast to (B, H, T_q, T_k) = "
            f"{expected}"
        )


def check_sequence(x: Any, name: str, width: int, batch: Optional[int] = None) -> None:
    """Raise unless ``x`` is a floating-point (B, L, width) tensor (with B = ``batch`` if
    given): the embedded sequences every layer takes."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor of shape (B, L, {width}), got {type(x).__name__}"
        )
    if x.dim() != 3 or x.shape[-1] != width or batch is not None and x.shape[0] != batch:
        rows = "B" if batch is None else batch
        raise ValueError(f"{name} must have shape ({rows}, L, {width}), got {tuple(x.shape)}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")


def check_attention_inputs(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor]
) -> None:
    """Raise unless q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v) are floating-point
    tensors of one dtype that fit together and ``mask`` is None or bool, broadcastable to
    (..., T_q, T_k). Nothing is checked inside :func:`checked_inputs`: there the caller
    (``MultiHeadAttention``) made q, k and v from inputs it checked."""
    if inputs_checked():
        return
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() < 2:
            got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{name} must be a tensor of shape (..., length, size), got {got}")
        if not t.dtype.is_floating_point:
            raise TypeError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(
            f"q, k and v must have the same dtype, got {q.dtype}, {k.dtype} and {v.dtype}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same d_k (last dimension): q has shape "
            f"{tuple(q.shape)}, k has shape {tuple(k.shape)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same T_k (second-to-last dimension): k has "
            f"shape {tuple(k.shape)}, v has shape {tuple(v.shape)}"
        )
    try:
        batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"the leading (batch, head) dimensions of q {tuple(q.shape)}, "
            f"k {tuple(k.shape)} and v {tuple(v.shape)} do not broadcast"
        ) from None
    check_mask(mask, "mask", (*batch, q.shape[-2], k.shape[-2]))
