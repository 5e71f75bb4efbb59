"""Dropout (§5.4) with a cheaper random mask on the CPU: the same function as ``nn.Dropout``.

``nn.Dropout`` draws one random number per element (``bernoulli_``). :func:`keep_mask` draws
one 64-bit number per four elements from a counter-based generator (SplitMix64), computed
on every thread; the compiled kernel (:mod:`transformer_lib.fast.kernels`) makes the very
same mask in one pass. :class:`FastDropout` is what :func:`transformer_lib.fast.accelerate`
puts in place of each ``nn.Dropout`` of a model.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from . import kernels as cpu_kernels

RESOLUTION = 2**16  # the CPU mask rounds p to a multiple of 1 / 2^16


def _int64(u: int) -> int:
    """A 64-bit pattern as the signed integer PyTorch's int64 tensors hold."""
    return u - 2**64 if u >= 2**63 else u


# SplitMix64 (Steele, Lea & Flood, 2014): its w-th output from `key` is
# mix(key + (w + 1) * GOLDEN), mix being two rounds of xor-shift-multiply and a last xor-shift.
GOLDEN = _int64(0x9E3779B97F4A7C15)
MIX = ((30, _int64(0xBF58476D1CE4E5B9)), (27, _int64(0x94D049BB133111EB)), (31, 1))
_multiples = torch.empty(0, dtype=torch.int64)  # (w + 1) * GOLDEN, kept between calls


def draw_key() -> int:
    """One mask's key: one draw from PyTorch's default generator (``torch.manual_seed``
    fixes it)."""
    return int(torch.empty((), dtype=torch.int64).random_())


def random_words(key: int, count: int) -> torch.Tensor:
    """The first ``count`` outputs of SplitMix64 started at ``key``: 64 random bits each,
    held in an int64 tensor.

    A counter-based generator: output w depends only on ``key`` and w, so every element is
    computed independently (on every thread, here by element-wise tensor operations; the
    compiled kernel of :mod:`transformer_lib.fast.kernels` gives the same numbers). Integer
    multiplication wraps around, as in C; ``>>`` on int64 copies the sign bit, so the
    shifted-in bits are cleared to make the unsigned shift that SplitMix64 uses.
    """
    global _multiples
    if _multiples.numel() < count:
        _multiples = torch.arange(1, count + 1, dtype=torch.int64).mul_(GOLDEN)
    z = _multiples[:count] + key
    shifted = torch.empty_like(z)
    for shift, factor in MIX:
        torch.bitwise_right_shift(z, shift, out=shifted).bitwise_and_(2 ** (64 - shift) - 1)
        z.bitwise_xor_(shifted)
        if factor != 1:
            z.mul_(factor)
    return z


def keep_mask(
    shape: torch.Size, p: float, dtype: torch.dtype = torch.float32, key: int | None = None
) -> torch.Tensor:
    """A CPU dropout mask of ``shape``: 1 / (1 - p) with probability 1 - p, else 0 (§5.4).

    One 64-bit random number gives four 16-bit ones: element i takes the (i mod 4)-th 16 bits
    of word i // 4 of :func:`random_words`, and is kept when they, read as a signed integer,
    are at least ``-2^15 + round(p * 2^16)``. Drawing a quarter as many random numbers as
    ``bernoulli_`` does is what makes it cheaper. The key is drawn from PyTorch's generator
    unless given; the compiled kernel makes the same mask from the same key.
    """
    n = shape.numel()
    key = draw_key() if key is None else key
    bits = random_words(key, (n + 3) // 4).view(torch.int16)[:n].view(shape)  # 4 per word
    keep = bits.float().ge_(-RESOLUTION // 2 + round(p * RESOLUTION))  # 1.0 or 0.0
    return keep.mul_(1.0 / (1.0 - p)).to(dtype)


class _ReluDropout(torch.autograd.Function):
    """ReLU(h * mask), built in the mask's own buffer; the gradient needs only the output.

    Where the output y is positive the gradient is the mask's scale, elsewhere 0 (a dropped
    element or a negative h), so y, which the next layer keeps anyway, is all backward needs:
    no mask is kept and no buffer besides the output is written.
    """

    @staticmethod
    def forward(ctx, h: torch.Tensor, p: float) -> torch.Tensor:
        y = keep_mask(h.shape, p, h.dtype).mul_(h).relu_()  # ReLU(h * mask)
        ctx.save_for_backward(y)
        ctx.scale = 1.0 / (1.0 - p)
        return y

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (y,) = ctx.saved_tensors
        # grad where y > 0, else 0 (what ReLU's own backward computes), times the scale
        return torch.ops.aten.threshold_backward(grad, y, 0.0).mul_(ctx.scale), None


def compiled_arguments(p: float) -> tuple:
    """(threshold, scale, key) of one compiled-kernel call; the key is drawn as
    :func:`keep_mask` draws it, so both paths make the same mask after the same seed."""
    return round(p * RESOLUTION), 1.0 / (1.0 - p), draw_key()


class _CompiledDropout(torch.autograd.Function):
    """x * mask in one pass of the compiled kernel; backward makes the same mask again."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, p: float) -> torch.Tensor:
        ctx.arguments = compiled_arguments(p)
        return cpu_kernels.load().dropout(x, *ctx.arguments)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return cpu_kernels.load().dropout(grad, *ctx.arguments), None  # same key, same mask


class _CompiledReluDropout(_ReluDropout):
    """ReLU(h * mask) in one pass of the compiled kernel; backward as :class:`_ReluDropout`."""

    @staticmethod
    def forward(ctx, h: torch.Tensor, p: float) -> torch.Tensor:
        threshold, scale, key = compiled_arguments(p)
        y = cpu_kernels.load().relu_dropout(h, threshold, scale, key)
        ctx.save_for_backward(y)
        ctx.scale = scale
        return y


def compiled_dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    """Dropout of a CPU tensor with the compiled kernel (:mod:`transformer_lib.fast.kernels`)."""
    return _CompiledDropout.apply(x, p)


def compiled_relu_dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    """Dropout(ReLU(x)) of a CPU tensor with the compiled kernel, in one pass."""
    return _CompiledReluDropout.apply(x, p)


def relu_dropout(x: torch.Tensor, p: float, kernels: bool) -> torch.Tensor:
    """Dropout(ReLU(x)) of a CPU tensor in training, same mask and gradient as the two layers,
    two activation-sized buffers less.

    With a mask m >= 0, Dropout(ReLU(x)) = ReLU(x) * m = ReLU(x * m): the product and the
    ReLU run in place in the mask's buffer (or in one kernel pass with ``kernels``), and the
    backward pass finds the gradient from the output alone (:class:`_ReluDropout`).
    ``x`` is never changed.
    """
    return compiled_relu_dropout(x, p) if kernels else _ReluDropout.apply(x, p)


def cheap_mask_applies(module: nn.Dropout, x: torch.Tensor) -> bool:
    """Whether the CPU mask replaces ``nn.Dropout``'s for ``x``: training, 0 < p < 1, not in
    place, a floating-point CPU tensor, not under ``torch.compile``. Elsewhere (GPU, eval,
    compiled) PyTorch's own dropout runs."""
    return (
        module.training
        and 0.0 < module.p < 1.0
        and not module.inplace
        and x.device.type == "cpu"
        and x.is_floating_point()
        and not torch.compiler.is_compiling()
    )  # its key draw would break a compiled graph


class FastDropout(nn.Dropout):
    """``nn.Dropout`` (§5.4) with the cheaper CPU mask of :func:`keep_mask`.

    Each element is kept with probability 1 - p and scaled by 1 / (1 - p); p is rounded to
    a multiple of 2^-16 (0.1 becomes 0.100006). With ``kernels`` the compiled kernel makes
    the same mask in one pass. Other devices use ``F.dropout``.

    Shape: any -> the same.
    """

    kernels: bool = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        if not cheap_mask_applies(self, x):
            return F.dropout(x, self.p, self.training, self.inplace)
        if self.kernels:
            return compiled_dropout(x, self.p)
        return x * keep_mask(x.shape, self.p, x.dtype)
