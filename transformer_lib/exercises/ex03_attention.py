"""Checkers for notebook 03 (scaled dot-product and multi-head attention, §3.2)."""
from __future__ import annotations

import math

import torch

from ..attention import MultiHeadAttention, attention
from ..masks import causal_mask
from . import Feedback, check_tensor, run_learner_code


def _inputs(seed: int = 0, B: int = 2, T: int = 5, d_k: int = 16):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, T, d_k, generator=g) * 2 for _ in range(3))    # (B, T, d_k)
    return q, k, v


def _wrong_attention(q, k, v, mask) -> dict:
    """Weights of the classic mistakes, each with its diagnosis."""
    d_k = q.shape[-1]
    raw = q @ k.transpose(-2, -1)                                            # (B, T, T)
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
        "scaled_dot_product_attention); you blocked the allowed keys":
            soft(raw / math.sqrt(d_k), None if mask is None else ~mask),
        "the mask is ignored: masked_fill the blocked scores before the softmax":
            soft(raw / math.sqrt(d_k), None),
    }


def _close_where_defined(got: torch.Tensor, wrong: torch.Tensor) -> bool:
    """allclose on the query rows that keep a key under the mistake's mask (a fully masked
    row is NaN with -inf, uniform or zero depending on the fill: a separate question)."""
    rows = ~got.isnan().any(dim=-1) & (wrong != 0).any(dim=-1)               # (B, T_q)
    return bool(rows.any()) and torch.allclose(got[rows], wrong[rows].to(got.dtype), atol=1e-5)


def _empty_row_mask(T: int) -> torch.Tensor:
    """A causal mask whose last query may attend to no key at all: (1, T, T)."""
    mask = causal_mask(T)[0].clone()                                         # (1, T, T)
    mask[:, -1] = False
    return mask


EMPTY_ROW = ("the query whose keys are all masked: the library's convention gives it all-zero "
             "weights and a zero output. Fill the blocked scores with "
             "torch.finfo(scores.dtype).min (not -inf: a softmax over -inf only is NaN), then "
             "set the blocked weights to 0 after the softmax")


def _diagnose_empty_row(fb: Feedback, weights, T: int) -> None:
    if not isinstance(weights, torch.Tensor) or weights.shape[-2:] != (T, T):
        return
    last = weights.detach()[..., -1, :]                                      # (B, T_k)
    if last.isnan().any():
        fb.fail("NaN on the fully masked row: " + EMPTY_ROW)
    elif torch.allclose(last, torch.full_like(last, 1.0 / T), atol=1e-5):
        fb.fail("uniform weights on the fully masked row (it attends to blocked keys): "
                + EMPTY_ROW)


def check_scaled_dot_product(attn_fn) -> Feedback:
    """``attn_fn(q, k, v, mask=None)`` -> (output, weights), mask bool with True = attend;
    a query whose keys are all masked gets zero weights and a zero output."""
    fb = Feedback("Exercise 1 (scaled dot-product attention)")
    q, k, v = _inputs()
    T = q.shape[1]
    cases = ((None, "weights", "output"),
             (causal_mask(T)[0], "weights with a causal mask", "output with mask"),
             (_empty_row_mask(T), "weights with a fully masked row", "output with that row"))
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


def _split_ref(x: torch.Tensor, h: int) -> torch.Tensor:
    B, L, D = x.shape
    return x.view(B, L, h, D // h).transpose(1, 2)                           # (B, H, L, d_k)


def check_split_merge(split_heads, merge_heads) -> Feedback:
    """``split_heads(x, h)``: (B, L, D) -> (B, H, L, d_k); ``merge_heads(x)``: the inverse."""
    fb = Feedback("Exercise 2 (split and merge heads)")
    B, L, D, h = 2, 5, 12, 3
    x = torch.arange(B * L * D, dtype=torch.float32).view(B, L, D)           # (B, L, D)
    got = run_learner_code(fb, split_heads, x, h)
    if got is None:
        return fb
    expected = _split_ref(x, h)
    if isinstance(got, torch.Tensor) and got.shape == (B, L, h, D // h):
        fb.fail("shape (B, L, H, d_k): you forgot .transpose(1, 2) after the view")
        return fb
    if not check_tensor(fb, "split_heads(x, h)", got, expected):
        if isinstance(got, torch.Tensor) and torch.equal(got, x.view(B, h, L, D // h)):
            fb.fail("view straight to (B, H, L, d_k) without transpose: each 'head' then "
                    "holds pieces of several positions; view to (B, L, H, d_k), then "
                    ".transpose(1, 2)")
        return fb
    merged = run_learner_code(fb, merge_heads, expected.contiguous())
    if merged is None:
        if any("view" in n or "contiguous" in n for n in fb.notes):
            fb.fail("after transpose the tensor is not contiguous: use .reshape or "
                    ".contiguous().view")
        return fb
    if isinstance(merged, torch.Tensor) and merged.shape == x.shape and torch.equal(
            merged, expected.reshape(B, L, D)):
        fb.fail("merged without transposing back: transpose(1, 2) to (B, L, H, d_k) "
                "before reshaping to (B, L, D)")
        return fb
    if check_tensor(fb, "merge_heads(split_heads(x))", merged, x):
        fb.ok("merge_heads undoes split_heads exactly")
    return fb


def check_torch_mha(run_torch_mha, batch: int = 3) -> Feedback:
    """``run_torch_mha(ours, x, mask)`` -> output of a ``torch.nn.MultiheadAttention`` with
    the weights of ``ours`` (a MultiHeadAttention), on batch-first ``x`` and our bool mask
    (True = may attend); must equal ``ours(x, mask=mask)[0]``."""
    fb = Feedback("Exercise 3 (parity with torch.nn.MultiheadAttention)")
    torch.manual_seed(0)
    ours = MultiHeadAttention(16, 4, fused=False).eval()
    x = torch.randn(batch, 5, 16)                                            # (B, T, D)
    mask = causal_mask(5)[0, 0]                                              # (T, T)
    got = run_learner_code(fb, run_torch_mha, ours, x, mask)
    if got is None:
        if any("attn_mask" in n and "should be" in n for n in fb.notes):
            fb.fail("the mask has shape (T, T) but PyTorch read the batch as the sequence: "
                    "batch_first trap, build nn.MultiheadAttention(..., batch_first=True)")
        return fb
    if isinstance(got, tuple):
        got = got[0]
    with torch.no_grad():
        expected = ours(x, mask=mask)[0]
    if check_tensor(fb, "output", got, expected, atol=1e-5):
        return fb
    if isinstance(got, torch.Tensor) and got.shape == expected.shape:
        _diagnose_torch_mha(fb, ours, x, mask, got)
    return fb


def _diagnose_torch_mha(fb: Feedback, ours: MultiHeadAttention, x: torch.Tensor,
                        mask: torch.Tensor, got: torch.Tensor) -> None:
    """Recognise the batch_first and mask-convention traps by reproducing them."""
    ref = ours.to_torch()
    got = got.detach()
    with torch.no_grad():
        inverted = ref(x, x, x, attn_mask=mask, need_weights=False)[0]
        rows = (~mask).any(dim=-1)  # queries that keep a key once the mask is inverted
        not_first = None
        if x.shape[0] == x.shape[1]:  # only then does the wrong layout run without an error
            not_first = ours.to_torch(batch_first=False)(x, x, x, attn_mask=~mask,
                                                         need_weights=False)[0]
    if not_first is not None and torch.allclose(got, not_first, atol=1e-5):
        fb.fail("batch_first trap: nn.MultiheadAttention defaults to (T, B, D); with "
                "batch_first=False it attended across the batch, not the sequence")
    elif torch.allclose(got[:, rows], inverted[:, rows], atol=1e-5):
        fb.fail("mask convention inverted: nn.MultiheadAttention's True means *blocked*; "
                "pass transformer_lib.masks.to_blocked(mask)")


# Exercise 4 (multi-head attention, written by the learner) has its own module.
from .ex04_multi_head import check_multi_head_attention  # noqa: E402,F401
