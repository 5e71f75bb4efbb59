"""Multi-head attention (§3.2.2) for CPU training: the same function as
:class:`transformer_lib.attention.MultiHeadAttention`, without the heads' copies."""

from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
from torch.autograd.function import once_differentiable

from ..attention import MultiHeadAttention, fused_attention
from ..checks import check_mask, check_sequence
from . import kernels as cpu_kernels

Tensor = torch.Tensor

MAX_SCORES = 128 * 128  # T x S up to which the compiled kernel is used: it keeps the
# weights, and gains nothing at 256 x 256 (benchmarks/README.md)


def cpu_fused_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor] = None, dropout_p: float = 0.0
) -> Tensor:
    """:func:`transformer_lib.attention.fused_attention`, in fp32 for bf16/fp16 CPU inputs.

    PyTorch's CPU kernel is about 3x slower in bf16 than in fp32 at training sizes
    (benchmarks/README.md), and fp32 is the more accurate: under CPU autocast, or given
    low-precision CPU tensors, the inputs go through the kernel in fp32 and the output comes
    back in the low precision.
    """
    autocast = torch.is_autocast_enabled("cpu") and q.dtype == torch.float32
    if q.device.type == "cpu" and (autocast or q.dtype in (torch.bfloat16, torch.float16)):
        dtype = torch.get_autocast_dtype("cpu") if autocast else q.dtype
        with torch.autocast("cpu", enabled=False):
            out = fused_attention(q.float(), k.float(), v.float(), mask, dropout_p)
        return out.to(dtype)  # (..., T_q, d_v)
    return fused_attention(q, k, v, mask, dropout_p)


class CompiledAttention(torch.autograd.Function):
    """Attention of all heads with the compiled kernel: in fp32, no dropout on the weights.

    The same function as :func:`fused_attention` on the split heads, but the kernel reads
    each head's queries, keys and values in place from (B, L, D) tensors with unit stride
    along D and any row stride (the projections' outputs, or slices of W^Q;W^K;W^V's), and
    writes the heads' outputs side by side, so no head is split off or merged with a copy.
    It keeps the (B, H, T, S) weights for the backward pass, which suits the short
    sequences it is used for (``MAX_SCORES``).

    ``q``: (B, T, D); ``k``, ``v``: (B, S, D), float32 on the CPU; ``mask``: bool,
    broadcastable to (B, h, T, S), True = may attend; ``h``: heads. Returns (B, T, D).
    """

    @staticmethod
    def forward(ctx, q, k, v, mask, h):
        B, T, D = q.shape
        scale = 1.0 / math.sqrt(D // h)
        mask = None if mask is None else mask.expand(B, h, T, k.shape[1])
        out, weights = cpu_kernels.load().attention_forward(q, k, v, mask, h, scale)
        ctx.save_for_backward(q, k, v, weights)
        ctx.scale = scale
        return out  # (B, T, D)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        q, k, v, weights = ctx.saved_tensors
        grads = [torch.empty(t.shape, dtype=t.dtype) for t in (q, k, v)]  # (B, L, D) each
        cpu_kernels.load().attention_backward(
            grad.contiguous(), q, k, v, weights, ctx.scale, *grads
        )
        return (*grads, None, None)


def merged_heads(x: Tensor) -> Optional[Tensor]:
    """(B, H, L, d_k) heads as the (B, L, H * d_k) tensor they were split from, as a view
    (no copy); None where the heads are not laid out side by side in memory (the keys of a
    decoding cache, say, which are concatenated head by head)."""
    rows = x.transpose(1, 2)  # (B, L, H, d_k)
    if rows.stride(3) != 1 or rows.stride(2) != x.shape[-1]:
        return None
    return rows.flatten(2)  # (B, L, D)


class FastMultiHeadAttention(MultiHeadAttention):
    """:class:`MultiHeadAttention` for CPU training: the same projections, checks and masks
    (its own ``project`` and input checks), with the attention of the split heads computed
    here (:meth:`attend`):

    * ``kernels``: short sequences go through :class:`CompiledAttention` (see
      :meth:`compiled_for`);
    * otherwise the fused path runs in fp32 under CPU autocast (:func:`cpu_fused_attention`).
    """

    kernels: bool = False

    def forward(self, x: Tensor, memory: Optional[Tensor] = None, mask: Optional[Tensor] = None,
                need_weights: bool = False,
                cache: Optional[dict] = None) -> Tuple[Tensor, Optional[Tensor]]:
        if need_weights:                      # the explicit path: the plain layer's
            return super().forward(x, memory, mask, need_weights, cache)
        dtype = self.in_proj.weight.dtype
        check_sequence(x, "x", self.d_model, dtype=dtype)
        if memory is not None:
            check_sequence(memory, "memory", self.d_model, batch=x.shape[0], dtype=dtype)
        q, k, v = self.project(x, memory, cache)
        B, T = q.shape[0], q.shape[2]
        check_mask(mask, "mask", (B, self.h, T, k.shape[2]))
        out = self.attend(q, k, v, mask, self.dropout if self.training else 0.0)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, self.d_model)), None

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor],
               dropout_p: float) -> Tensor:
        """Attention of the split heads, q: (B, H, T, d_k), k, v: (B, H, S, d_k), as
        :func:`fused_attention` computes it; through the compiled kernel where it applies."""
        rows = self.compiled_for(q, k, v, dropout_p)
        if rows is None:
            return cpu_fused_attention(q, k, v, mask, dropout_p)
        B, H, T, d_k = q.shape
        out = CompiledAttention.apply(*rows, mask, H)  # (B, T, D)
        return out.view(B, T, H, d_k).transpose(1, 2)  # (B, H, T, d_k)

    def compiled_for(
        self, q: Tensor, k: Tensor, v: Tensor, dropout_p: float
    ) -> Optional[Tuple[Tensor, Tensor, Tensor]]:
        """The (B, L, D) fp32 queries, keys and values :class:`CompiledAttention` reads, or
        None where the compiled kernel does not apply. It applies with ``kernels`` on, on
        the CPU, with no dropout on the weights, d_k = d_model / h, fp32 weights and fp32
        inputs (under CPU autocast the projections come in bf16/fp16 and the kernel works on
        fp32 copies, as :func:`cpu_fused_attention` does), heads that lie side by side in
        memory (not a decoding cache's past keys) and a short enough sequence."""
        if not (
            self.kernels
            and dropout_p == 0.0
            and self.d_k == self.d_v
            and q.device.type == "cpu"
            and self.in_proj.weight.dtype == torch.float32
            and (q.dtype == torch.float32 or torch.is_autocast_enabled("cpu"))
            and q.shape[2] * k.shape[2] <= MAX_SCORES
            and cpu_kernels.attention_available()
        ):
            return None
        q_rows, k_rows, v_rows = (merged_heads(t) for t in (q, k, v))
        if q_rows is None or k_rows is None or v_rows is None:
            return None
        return q_rows.float(), k_rows.float(), v_rows.float()
