"""Scaled dot-product attention (§3.2.1) and multi-head attention (§3.2.2).

Two paths compute the same thing and are proven equal by the tests:

* :func:`attention`, the explicit path: the formula written out, returns the weights
  (what the notebooks teach and what the heatmaps show);
* :func:`fused_attention`, through ``torch.nn.functional.scaled_dot_product_attention``
  (what training uses: fewer memory passes, no (T_q, T_k) weights kept).

A query whose every key is masked gets all-zero weights and a zero output in both paths
(a plain softmax over ``-inf`` only would give NaN).
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from .checks import (check_attention_inputs, check_bool, check_float, check_int, check_mask,
                     check_sequence, checked_inputs, inputs_checked, reads_values)
from .masks import causal_mask

Tensor = torch.Tensor


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor] = None,
              dropout_p: float = 0.0) -> Tuple[Tensor, Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V, written out (§3.2.1, Eq. 1).

    Shape:
        q: (..., T_q, d_k), k: (..., T_k, d_k), v: (..., T_k, d_v),
        mask: bool, True = may attend, broadcastable to (..., T_q, T_k)
        returns output (..., T_q, d_v) and weights (..., T_q, T_k)
    """
    check_attention_inputs(q, k, v, mask)         # a float mask would be added, not applied
    check_float(dropout_p, "dropout_p", 0.0, 1.0, max_open=True)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])               # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)                                         # (..., T_q, T_k)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # a fully masked row: zeros, not uniform
    if dropout_p > 0.0:
        weights = F.dropout(weights, dropout_p)
    return weights @ v, weights                                              # (..., T_q, d_v)


def fused_attention(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor] = None,
                    dropout_p: float = 0.0, is_causal: bool = False) -> Tensor:
    """The same as :func:`attention` through PyTorch's fused kernel; no weights returned.

    ``is_causal=True`` (with ``mask=None``) lets the kernel skip the future without a mask
    tensor. Shapes as in :func:`attention`.
    """
    check_attention_inputs(q, k, v, mask)   # SDPA would add a float mask to the scores
    check_float(dropout_p, "dropout_p", 0.0, 1.0, max_open=True)
    if is_causal and mask is not None:
        raise ValueError("pass either mask or is_causal=True, not both")
    if mask is not None and mask.dim() < 2:
        mask = mask.reshape(1, -1)                          # (T_k,) -> (1, T_k), as SDPA wants
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p,
                                         is_causal=is_causal)                # (..., T_q, d_v)
    if mask is not None:
        seen = mask.any(dim=-1, keepdim=True)               # False: a fully masked query row
        if not reads_values(seen) or not seen.all():        # (no check that waits on a GPU
            out = out.masked_fill(~seen, 0.0)               # or breaks a torch.compile graph)
    return out


class MultiHeadAttention(nn.Module):
    """h heads of attention over learned projections, concatenated and projected (§3.2.2).

    The three input projections W^Q, W^K, W^V (each D x D) are stored stacked in one
    ``in_proj`` of shape (3D, D), as in ``torch.nn.MultiheadAttention``: self-attention then
    projects queries, keys and values in one matrix multiply.

    Args:
        d_model: D. h: number of heads. dropout: on attention weights.
        fused: use the fused kernel unless weights are requested.

    Shape:
        x: (B, T, D) queries; memory: (B, S, D) keys/values for cross-attention, or None
        for self-attention; mask: bool, True = may attend, broadcastable to (B, H, T, S).
        Returns (output (B, T, D), weights (B, H, T, S) if ``need_weights`` else None).
    """

    def __init__(self, d_model: int, h: int, dropout: float = 0.0, fused: bool = True):
        super().__init__()
        _check_arguments(d_model, h, dropout, fused)
        self.d_model, self.h, self.d_k = d_model, h, d_model // h
        self.dropout = dropout
        self.fused = fused
        self.in_proj = nn.Linear(d_model, 3 * d_model)                       # W^Q; W^K; W^V
        self.out_proj = nn.Linear(d_model, d_model)                          # W^O
        nn.init.xavier_uniform_(self.in_proj.weight)
        nn.init.zeros_(self.in_proj.bias)
        nn.init.zeros_(self.out_proj.bias)

    fused_attention = staticmethod(fused_attention)      # the fused path's function

    def _split_heads(self, x: Tensor) -> Tensor:
        B, L, _ = x.shape
        return x.view(B, L, self.h, self.d_k).transpose(1, 2)               # (B, H, L, d_k)

    def cross_weights(self) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        """W^Q, b^Q and the stacked W^K;W^V, b^K;b^V for cross-attention: queries come from
        x, keys and values from the memory."""
        D = self.d_model
        w_q, w_kv = self.in_proj.weight.split((D, 2 * D))                    # (D, D), (2D, D)
        b_q, b_kv = self.in_proj.bias.split((D, 2 * D))
        return w_q, b_q, w_kv, b_kv

    def _project(self, x: Tensor, memory: Optional[Tensor],
                 cache: Optional[dict]) -> Tuple[Tensor, Tensor, Tensor]:
        D = self.d_model
        if memory is None:                                   # self-attention: one matmul
            q, k, v = self.in_proj(x).split(D, dim=-1)                       # 3 x (B, T, D)
            k, v = self._split_heads(k), self._split_heads(v)                # (B, H, T, d_k)
            if cache is not None:                            # append to the past keys/values
                if "k" in cache:
                    k = torch.cat((cache["k"], k), dim=2)                    # (B, H, T_past+T, d_k)
                    v = torch.cat((cache["v"], v), dim=2)
                cache["k"], cache["v"] = k, v
        else:                                                # cross-attention
            w_q, b_q, w_kv, b_kv = self.cross_weights()
            q = F.linear(x, w_q, b_q)                                        # (B, T, D)
            if cache is not None and "k" in cache:           # memory projected once per sequence
                k, v = cache["k"], cache["v"]
            else:
                k, v = F.linear(memory, w_kv, b_kv).split(D, dim=-1)         # 2 x (B, S, D)
                k, v = self._split_heads(k), self._split_heads(v)            # (B, H, S, d_k)
                if cache is not None:
                    cache["k"], cache["v"] = k, v
        return self._split_heads(q), k, v                                    # q: (B, H, T, d_k)

    def forward(self, x: Tensor, memory: Optional[Tensor] = None, mask: Optional[Tensor] = None,
                need_weights: bool = False, cache: Optional[dict] = None,
                is_causal: bool = False) -> Tuple[Tensor, Optional[Tensor]]:
        checked = inputs_checked()               # by the stack that called this layer
        if not checked:
            self.check_inputs(x, memory)
        B, T, D = x.shape
        q, k, v = self._project(x, memory, cache)
        if not checked:
            check_mask(mask, "mask", (B, self.h, T, k.shape[2]))
        p = self.dropout if self.training else 0.0
        explicit = need_weights or not self.fused
        if is_causal and (mask is not None or explicit or T != k.shape[2]):
            causal = causal_mask(T, x.device, past=k.shape[2] - T)           # (1, 1, T, S)
            mask, is_causal = causal if mask is None else mask & causal, False
        with checked_inputs():                   # q, k, v and the mask: made or checked here
            if explicit:
                out, weights = attention(q, k, v, mask, p)                   # (B, H, T, d_k)
            else:
                out, weights = self.fused_attention(q, k, v, mask, p, is_causal), None
        out = out.transpose(1, 2).reshape(B, T, D)                           # (B, T, D)
        return self.out_proj(out), (weights if need_weights else None)

    def check_inputs(self, x: Tensor, memory: Optional[Tensor]) -> None:
        """Raise unless x is (B, T, D) and memory None or (B, S, D), both floating-point."""
        check_sequence(x, "x", self.d_model)
        if memory is not None:
            check_sequence(memory, "memory", self.d_model, batch=x.shape[0])

    def to_torch(self, batch_first: bool = True) -> nn.MultiheadAttention:
        """This layer as a ``torch.nn.MultiheadAttention`` with the same weights, in eval mode
        (for comparisons). Mind its opposite mask convention: see ``masks.to_blocked``."""
        ref = nn.MultiheadAttention(self.d_model, self.h, batch_first=batch_first)
        ref.load_state_dict({"in_proj_weight": self.in_proj.weight,
                             "in_proj_bias": self.in_proj.bias,
                             "out_proj.weight": self.out_proj.weight,
                             "out_proj.bias": self.out_proj.bias})
        return ref.to(self.in_proj.weight.device).eval()


def _check_arguments(d_model: int, h: int, dropout: float, fused: bool) -> None:
    check_int(d_model, "d_model", 1)
    check_int(h, "h", 1)
    if d_model % h:
        raise ValueError(f"d_model must be divisible by h, got d_model={d_model}, h={h}")
    check_float(dropout, "dropout", 0.0, 1.0, max_open=True)
    check_bool(fused, "fused")
