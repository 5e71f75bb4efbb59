"""Scaled dot-product attention (§3.2.1) and multi-head attention (§3.2.2).

Two paths compute the same thing and are proven equal by the tests:

* :func:`attention`, the explicit path: the formula written out, returns the weights
  (what the notebooks teach and what the heatmaps show);
* :func:`fused_attention`, PyTorch's ``scaled_dot_product_attention`` (what training uses:
  fewer passes over memory, no (T_q, T_k) weights kept).

A query whose every key is masked gets all-zero weights and a zero output in both paths
(a plain softmax over ``-inf`` only would give NaN).
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from .checks import check_float, check_int, check_mask, check_sequence

Tensor = torch.Tensor


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor] = None,
              dropout_p: float = 0.0) -> Tuple[Tensor, Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V, written out (§3.2.1, Eq. 1).

    Shape:
        q: (..., T_q, d_k), k: (..., T_k, d_k), v: (..., T_k, d_v),
        mask: bool, True = may attend, broadcastable to (..., T_q, T_k)
        returns output (..., T_q, d_v) and weights (..., T_q, T_k)
    """
    check_qkv(q, k, v, mask, dropout_p)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])               # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1).nan_to_num(0.0)   # a fully masked row: zeros, not NaN
    weights = F.dropout(weights, dropout_p) if dropout_p > 0.0 else weights
    return weights @ v, weights                                              # (..., T_q, d_v)


def fused_attention(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor] = None,
                    dropout_p: float = 0.0) -> Tensor:
    """The same as :func:`attention` through PyTorch's fused kernel; no weights returned.
    Shapes as in :func:`attention`."""
    check_qkv(q, k, v, mask, dropout_p)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
    if mask is not None and q.device.type != "cpu":    # some GPU kernels (cuDNN's) give a
        out = out.masked_fill(~mask.any(-1, keepdim=True), 0.0)  # fully masked query no zeros
    return out


def check_qkv(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], dropout_p: float) -> None:
    """q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v): floating-point tensors of one
    dtype that fit together; ``mask`` None or bool (a float mask would be added, not applied)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, Tensor) or t.dim() < 2 or not t.is_floating_point():
            got = (t.dtype, tuple(t.shape)) if isinstance(t, Tensor) else type(t).__name__
            raise TypeError(f"{name} must be a floating-point tensor (..., length, size), "
                            f"got {got}")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"q, k and v must have one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"q and k must share d_k, k and v must share T_k: got q "
                         f"{tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    check_mask(mask, "mask", (*k.shape[:-2], q.shape[-2], k.shape[-2]))
    check_float(dropout_p, "dropout_p", 0.0, 1.0, max_open=True)


class MultiHeadAttention(nn.Module):
    """h heads of attention over learned projections, concatenated and projected (§3.2.2).

    The three input projections W^Q, W^K, W^V are stored stacked in one ``in_proj``, as in
    ``torch.nn.MultiheadAttention``: self-attention projects queries, keys and values in one
    matrix multiply. Queries and keys have ``d_k`` per head (d_model / h unless given:
    Table 3, row B), values d_model / h.

    Shape:
        x: (B, T, D) queries; memory: (B, S, D) keys and values for cross-attention, or None
        for self-attention; mask: bool, True = may attend, broadcastable to (B, H, T, S).
        Returns (output (B, T, D), weights (B, H, T, S) if ``need_weights`` else None).
        ``cache``: a dict that keeps the keys and values of earlier calls (decoding: see
        :class:`~transformer_lib.decoder.KVCache`).
    """

    def __init__(self, d_model: int, h: int, dropout: float = 0.0, d_k: Optional[int] = None):
        super().__init__()
        check_int(d_model, "d_model", 1)
        check_int(h, "h", 1)
        if d_model % h:
            raise ValueError(f"d_model must be divisible by h, got d_model={d_model}, h={h}")
        self.dropout = check_float(dropout, "dropout", 0.0, 1.0, max_open=True)
        self.d_model, self.h, self.d_v = d_model, h, d_model // h
        self.d_k = self.d_v if d_k is None else check_int(d_k, "d_k", 1)
        self.sizes = (h * self.d_k, h * self.d_k, d_model)                   # Q, K, V widths
        self.in_proj = nn.Linear(d_model, sum(self.sizes))                   # W^Q; W^K; W^V
        self.out_proj = nn.Linear(d_model, d_model)                          # W^O
        nn.init.xavier_uniform_(self.in_proj.weight)
        nn.init.zeros_(self.in_proj.bias)
        nn.init.zeros_(self.out_proj.bias)

    def split_heads(self, x: Tensor) -> Tensor:
        """(B, L, H * size) -> (B, H, L, size)."""
        B, L, _ = x.shape
        return x.view(B, L, self.h, -1).transpose(1, 2)                      # (B, H, L, size)

    def project(self, x: Tensor, memory: Optional[Tensor],
                cache: Optional[dict]) -> Tuple[Tensor, Tensor, Tensor]:
        """Queries from x; keys and values from x (self-attention) or from the memory
        (cross-attention), appended to or taken from ``cache``. Heads split."""
        if memory is None:                                   # self-attention: one matmul
            q, k, v = self.in_proj(x).split(self.sizes, dim=-1)
            k, v = self.split_heads(k), self.split_heads(v)                  # (B, H, T, d_k)
            if cache is not None and "k" in cache:           # the keys of earlier positions
                k = torch.cat((cache["k"], k), dim=2)                        # (B, H, past+T, d_k)
                v = torch.cat((cache["v"], v), dim=2)
        else:                                                # cross-attention
            w_q, w_kv = self.in_proj.weight.split((self.sizes[0], sum(self.sizes[1:])))
            b_q, b_kv = self.in_proj.bias.split((self.sizes[0], sum(self.sizes[1:])))
            q = F.linear(x, w_q, b_q)                                        # (B, T, H*d_k)
            if cache is not None and "k" in cache:           # the memory, projected once
                k, v = cache["k"], cache["v"]
            else:
                k, v = F.linear(memory, w_kv, b_kv).split(self.sizes[1:], dim=-1)
                k, v = self.split_heads(k), self.split_heads(v)              # (B, H, S, d_k)
        if cache is not None:
            cache["k"], cache["v"] = k, v
        return self.split_heads(q), k, v                                     # q: (B, H, T, d_k)

    def forward(self, x: Tensor, memory: Optional[Tensor] = None, mask: Optional[Tensor] = None,
                need_weights: bool = False,
                cache: Optional[dict] = None) -> Tuple[Tensor, Optional[Tensor]]:
        dtype = self.in_proj.weight.dtype
        check_sequence(x, "x", self.d_model, dtype=dtype)
        if memory is not None:
            check_sequence(memory, "memory", self.d_model, batch=x.shape[0], dtype=dtype)
        q, k, v = self.project(x, memory, cache)
        B, H, T, S = q.shape[0], self.h, q.shape[2], k.shape[2]
        check_mask(mask, "mask", (B, H, T, S))
        p = self.dropout if self.training else 0.0
        if need_weights:
            out, weights = attention(q, k, v, mask, p)                       # (B, H, T, d_v)
        else:
            out, weights = fused_attention(q, k, v, mask, p), None
        out = out.transpose(1, 2).reshape(B, T, self.d_model)                # heads concatenated
        return self.out_proj(out), weights                                   # (B, T, D)

    def to_torch(self, batch_first: bool = True) -> nn.MultiheadAttention:
        """This layer as a ``torch.nn.MultiheadAttention`` with the same weights, in eval mode
        (for comparisons). Mind its opposite mask convention: see ``masks.to_blocked``."""
        if self.d_k != self.d_v:
            raise ValueError("nn.MultiheadAttention needs d_k = d_model / h")
        ref = nn.MultiheadAttention(self.d_model, self.h, batch_first=batch_first)
        ref.load_state_dict({"in_proj_weight": self.in_proj.weight,
                             "in_proj_bias": self.in_proj.bias,
                             "out_proj.weight": self.out_proj.weight,
                             "out_proj.bias": self.out_proj.bias})
        return ref.to(self.in_proj.weight.device).eval()
