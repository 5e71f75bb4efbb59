"""Faster CPU training of the same model, kept apart from the lesson.

The teaching modules (``attention``, ``feedforward``, ...) hold the paper's formulas and
PyTorch's own layers. This subpackage makes a model built from them train faster on a CPU
without changing what it computes, through one entry point::

    from transformer_lib.fast import accelerate
    accelerate(model)                  # in place, like torch.compile(model); returns model

:func:`accelerate` swaps modules for subclasses (their parameters, buffers and
``state_dict`` stay as they are, so checkpoints do not change):

* every ``nn.Dropout`` becomes :class:`~.dropout.FastDropout`: a cheaper CPU mask, one
  counter-based 64-bit random number per four elements (:mod:`.dropout`);
* every :class:`~transformer_lib.feedforward.PositionwiseFeedForward` becomes
  :class:`~.feedforward.FastFeedForward`: ReLU and dropout as one function;
* every :class:`~transformer_lib.attention.MultiHeadAttention` becomes
  :class:`~.attention.FastMultiHeadAttention`: fp32 attention under CPU autocast.

Each subclass overrides ``forward`` and reuses the plain module's public parts (its
projections, its checks); nothing in a teaching module exists for this subpackage, and
nothing here uses an underscore name of one.

With ``kernels`` (the default where a C++ compiler can build them, :mod:`.kernels`), small
compiled kernels make the same dropout masks in one pass, run the feed-forward layer as one
function and attention without copying heads. Results agree with the plain modules up to
floating-point rounding, with the same dropout masks with or without the kernels (the
tests in ``tests/test_fast_*.py`` check it); the masks differ from ``nn.Dropout``'s, which
draws its own. On a GPU the swapped modules run the plain code.

:func:`compile_model` (:mod:`.inductor`) is ``torch.compile`` with the two Inductor settings
that keep a compiled CPU step from losing to eager (the training command line's
``--compile``).
"""

from __future__ import annotations

from typing import Optional

from torch import nn

from ..attention import MultiHeadAttention
from ..feedforward import PositionwiseFeedForward
from . import kernels as compiled_kernels
from .attention import FastMultiHeadAttention
from .dropout import FastDropout
from .feedforward import FastFeedForward
from .inductor import compile_model

__all__ = [
    "accelerate",
    "compile_model",
    "kernels_available",
    "FastDropout",
    "FastFeedForward",
    "FastMultiHeadAttention",
]

_SWAPS = (
    (nn.Dropout, FastDropout),
    (PositionwiseFeedForward, FastFeedForward),
    (MultiHeadAttention, FastMultiHeadAttention),
)


def kernels_available() -> Optional[str]:
    """None when the compiled kernels can be used here (built now if need be), else the
    reason in one line (no compiler, no ninja, a failed build)."""
    try:
        compiled_kernels.load()
    except RuntimeError as e:
        return str(e).splitlines()[0]
    return None


def accelerate(model: nn.Module, kernels: Optional[bool] = None) -> nn.Module:
    """Make ``model`` train faster on a CPU, in place; returns it.

    Args:
        model: any module built from the package's layers (a ``Transformer``, an encoder
            layer, ...); other modules inside it are left alone.
        kernels: use the compiled kernels: True (raise if they cannot be built), False
            (pure PyTorch), or None (where they can be built). Calling again switches them.

    Raises:
        TypeError: ``model`` is not an ``nn.Module`` or ``kernels`` not a bool or None.
        RuntimeError: ``kernels=True`` and the kernels cannot be built (says why).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if kernels is not None and not isinstance(kernels, bool):
        raise TypeError(f"kernels must be True, False or None, got {kernels!r}")
    if kernels is None:
        kernels = kernels_available() is None
    elif kernels:
        compiled_kernels.load()  # raises here, not in the middle of training
    for module in model.modules():
        for plain, fast in _SWAPS:
            if type(module) in (plain, fast):
                module.__class__ = fast
                setattr(module, "kernels", kernels)
    return model
