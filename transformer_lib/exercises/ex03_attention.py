"""Checker for notebook 03 (scaled dot-product attention with masks, §3.2.1); the checkers of
multi-head attention (§3.2.2) are notebook 04's, in :mod:`.ex04_heads` and :mod:`.ex04_multi_head`."""

from __future__ import annotations

import math

import torch

from ..attention import attention, fused_attention
from ..masks import causal_mask
from . import Feedback, check_tensor, run_learner_code
from .own_work import refuses


def _inputs(seed: int = 0, B: int = 2, T: int = 5, d_k: int = 16):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, T, d_k, generator=g) * 2 for _ in range(3))  # (B, T, d_k)
    return q, k, v


def _wrong_attention(q, k, v, mask) -> dict:
    """Weights of the classic mistakes, each with its diagnosis."""
    d_k = q.shape[-1]
    raw = q @ k.transpose(-2, -1)  # (B, T, T)
    fill = torch.finfo(raw.dtype).min

    def soft(scores, m, dim=-1):
        if m is None:
            return scores.softmax(dim)
        return scores.masked_fill(~m, fill).softmax(dim).masked_fill(~m, 0.0)

    return {
        "forgot the 1/sqrt(d_k) scale: scores = Q K^T / math.sqrt(d_k)": soft(raw, mask),
        "divided by d_k instead of sqrt(d_k)": soft(raw / d_k, mask),
        "softmax over the wrong dimension: each query's row (dim=-1, over the keys) must "
        "sum to 1": soft(raw / math.sqrt(d_k), mask, dim=-2),
        "mask convention inverted: True means 'may attend' (the convention of "
        "scaled_dot_product_attention); you blocked the allowed keys": soft(
            raw / math.sqrt(d_k), None if mask is None else ~mask
        ),
        "the mask is ignored: masked_fill the blocked scores before the softmax": soft(
            raw / math.sqrt(d_k), None
        ),
    }


def _close_where_defined(got: torch.Tensor, wrong: torch.Tensor) -> bool:
    """allclose on the query rows that keep a key under the mistake's mask (a fully masked
    row is NaN with -inf, uniform or zero depending on the fill: a separate question)."""
    rows = ~got.isnan().any(dim=-1) & (wrong != 0).any(dim=-1)  # (B, T_q)
    return bool(rows.any()) and torch.allclose(got[rows], wrong[rows].to(got.dtype), atol=1e-5)


def _empty_row_mask(T: int) -> torch.Tensor:
    """A causal mask whose last query may attend to no key at all: (1, T, T)."""
    mask = causal_mask(T)[0].clone()  # (1, T, T)
    mask[:, -1] = False
    return mask


EMPTY_ROW = (
    "the query whose keys are all masked: the library's convention gives it all-zero "
    "weights and a zero output. Fill the blocked scores with "
    "torch.finfo(scores.dtype).min (not -inf: a softmax over -inf only is NaN), then "
    "set the blocked weights to 0 after the softmax"
)


def _diagnose_empty_row(fb: Feedback, weights, T: int) -> None:
    if not isinstance(weights, torch.Tensor) or weights.shape[-2:] != (T, T):
        return
    last = weights.detach()[..., -1, :]  # (B, T_k)
    if last.isnan().any():
        fb.fail("NaN on the fully masked row: " + EMPTY_ROW)
    elif torch.allclose(last, torch.full_like(last, 1.0 / T), atol=1e-5):
        fb.fail(
            "uniform weights on the fully masked row (it attends to blocked keys): " + EMPTY_ROW
        )


@refuses(
    attention,
    fused_attention,
    rule="to write attention yourself, not with the library's `attention`",
)
def check_scaled_dot_product(attn_fn) -> Feedback:
    """``attn_fn(q, k, v, mask=None)`` -> (output, weights), mask bool with True = attend;
    a query whose keys are all masked gets zero weights and a zero output."""
    fb = Feedback("Exercise 1 (scaled dot-product attention)")
    q, k, v = _inputs()
    T = q.shape[1]
    cases = (
        (None, "weights", "output"),
        (causal_mask(T)[0], "weights with a causal mask", "output with mask"),
        (_empty_row_mask(T), "weights with a fully masked row", "output with that row"),
    )
    for mask, w_label, out_label in cases:
        result = run_learner_code(fb, attn_fn, q, k, v, mask)
        if result is None:
            return fb
        if not (isinstance(result, tuple) and len(result) == 2):
            fb.fail("return a pair (output, weights)")
            return fb
        out_ref, w_ref = attention(q, k, v, mask)
        if not check_tensor(fb, w_label, result[1], w_ref):
            if isinstance(result[1], torch.Tensor) and result[1].shape == w_ref.shape:
                for message, wrong in _wrong_attention(q, k, v, mask).items():
                    if _close_where_defined(result[1].detach(), wrong):
                        fb.fail(message)
                        return fb
                if out_label == "output with that row":
                    _diagnose_empty_row(fb, result[1], T)
            return fb
        if not check_tensor(fb, out_label, result[0], out_ref):
            return fb
    return fb
