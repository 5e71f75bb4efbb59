"""Multi-head attention (§3.2.2) for CPU training: the same function as
:class:`transformer_lib.attention.MultiHeadAttention`, without the heads' copies."""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from ..attention import MultiHeadAttention, fused_attention
from ..checks import check_mask
from ..masks import causal_mask, combine
from . import kernels as cpu_kernels

Tensor = torch.Tensor

MAX_SCORES = 128 * 128      # T x S up to which the compiled kernel is used: it keeps the
                            # weights, and gains nothing at 256 x 256 (benchmarks/README.md)


def cpu_fused_attention(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor] = None,
                        dropout_p: float = 0.0, is_causal: bool = False) -> Tensor:
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
            out = fused_attention(q.float(), k.float(), v.float(), mask, dropout_p, is_causal)
        return out.to(dtype)                                                 # (..., T_q, d_v)
    return fused_attention(q, k, v, mask, dropout_p, is_causal)


class _CompiledAttention(torch.autograd.Function):
    """Attention of all heads from the projections, with the compiled kernel: in fp32, no
    dropout on the weights.

    The same function as :func:`fused_attention` on the split heads, but the kernel reads
    each head's queries, keys and values in place from the projections' (B, L, D) outputs
    and writes the heads' outputs side by side, so no head is split off or merged with a
    copy; the backward pass writes the gradients into one buffer shaped like the input, so
    the projection's gradient needs no ``cat``. It keeps the (B, H, T, S) weights for the
    backward pass, which suits the short sequences it is used for (``MAX_SCORES``).

    ``x`` is W^Q;W^K;W^V's output (B, T, 3D) when ``kv`` is None (self-attention), else
    the queries (B, T, D), with ``kv`` the keys and values (B, S, 2D).
    """

    @staticmethod
    def forward(ctx, x, kv, mask, h):
        q, k, v = _CompiledAttention._split(x, kv)
        B, T, D = q.shape
        scale = 1.0 / math.sqrt(D // h)
        mask = None if mask is None else mask.expand(B, h, T, k.shape[1])
        out, weights = cpu_kernels.load().attention_forward(q, k, v, mask, h, scale)
        ctx.save_for_backward(x, kv, weights)
        ctx.scale = scale
        return out                                                           # (B, T, D)

    @staticmethod
    def _split(x, kv):
        if kv is None:
            return x.chunk(3, dim=-1)
        return (x, *kv.chunk(2, dim=-1))

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        x, kv, weights = ctx.saved_tensors
        grad_x = torch.empty_like(x)
        grad_kv = None if kv is None else torch.empty_like(kv)
        inputs = _CompiledAttention._split(x, kv)
        grads = _CompiledAttention._split(grad_x, grad_kv)                  # views to fill
        cpu_kernels.load().attention_backward(grad.contiguous(), *inputs, weights, ctx.scale,
                                              *grads)
        return grad_x, grad_kv, None, None


class FastMultiHeadAttention(MultiHeadAttention):
    """:class:`MultiHeadAttention` for CPU training.

    * ``kernels``: short fp32 sequences go through :class:`_CompiledAttention` (see
      :meth:`compiled_for`);
    * the fused path runs in fp32 under CPU autocast (:func:`cpu_fused_attention`).

    Everything else (weights requested, a decoding cache, a GPU) is the plain module.
    """

    kernels: bool = False
    fused_attention = staticmethod(cpu_fused_attention)

    def forward(self, x: Tensor, memory: Optional[Tensor] = None, mask: Optional[Tensor] = None,
                need_weights: bool = False, cache: Optional[dict] = None,
                is_causal: bool = False) -> Tuple[Tensor, Optional[Tensor]]:
        self._check_inputs(x, memory)
        if self.compiled_for(x, memory, need_weights, cache):
            return self._compiled(x, memory, mask, is_causal), None
        return super().forward(x, memory, mask, need_weights, cache, is_causal)

    def compiled_for(self, x: Tensor, memory: Optional[Tensor], need_weights: bool,
                     cache: Optional[dict]) -> bool:
        """Whether this call goes through :class:`_CompiledAttention`: ``kernels`` on, fp32
        inputs and weights (under CPU autocast too: the kernel then works in fp32, as
        :func:`cpu_fused_attention` does), the fused path, no weights asked for, no dropout
        on them, no decoding cache, and a short enough sequence."""
        if not (self.kernels and self.fused and not need_weights and cache is None
                and (self.dropout == 0.0 or not self.training)
                and x.device.type == "cpu" and x.dtype == torch.float32
                and self.in_proj.weight.dtype == torch.float32):
            return False
        S = x.shape[1] if memory is None else memory.shape[1]
        return x.shape[1] * S <= MAX_SCORES and cpu_kernels.attention_available()

    def _compiled(self, x: Tensor, memory: Optional[Tensor], mask: Optional[Tensor],
                  is_causal: bool) -> Tensor:
        """The layer's output through the compiled kernel (see :meth:`compiled_for`)."""
        B, T, _ = x.shape
        S = T if memory is None else memory.shape[1]
        check_mask(mask, "mask", (B, self.h, T, S))
        if is_causal:
            mask = combine(mask, causal_mask(T, x.device, past=S - T))
        # .float(): nothing in fp32; under autocast the projections come in bf16/fp16
        if memory is None:
            out = _CompiledAttention.apply(self.in_proj(x).float(), None, mask, self.h)
        else:
            w_q, b_q, w_kv, b_kv = self._cross_weights()
            out = _CompiledAttention.apply(F.linear(x, w_q, b_q).float(),
                                           F.linear(memory, w_kv, b_kv).float(), mask, self.h)
        return self.out_proj(out)                                            # (B, T, D)
