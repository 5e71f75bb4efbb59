"""Checkers for notebook 04's exercises 1 and 2 (§3.2.2): heads split and merged, and
``torch.nn.MultiheadAttention`` run with the weights of the library's module (exercise 3, the
whole module, is checked in :mod:`.ex04_multi_head`)."""

from __future__ import annotations

import torch

from ..attention import MultiHeadAttention
from ..masks import causal_mask
from . import Feedback, check_tensor, run_learner_code
from .own_work import refuses


def _split_ref(x: torch.Tensor, h: int) -> torch.Tensor:
    B, L, D = x.shape
    return x.view(B, L, h, D // h).transpose(1, 2)  # (B, H, L, d_k)


def check_split_merge(split_heads, merge_heads) -> Feedback:
    """``split_heads(x, h)``: (B, L, D) -> (B, H, L, d_k); ``merge_heads(x)``: the inverse."""
    fb = Feedback("Exercise 1 (split and merge heads)")
    B, L, D, h = 2, 5, 12, 3
    x = torch.arange(B * L * D, dtype=torch.float32).view(B, L, D)  # (B, L, D)
    got = run_learner_code(fb, split_heads, x, h)
    if got is None:
        return fb
    expected = _split_ref(x, h)
    if isinstance(got, torch.Tensor) and got.shape == (B, L, h, D // h):
        fb.fail("shape (B, L, H, d_k): you forgot .transpose(1, 2) after the view")
        return fb
    if not check_tensor(fb, "split_heads(x, h)", got, expected):
        if isinstance(got, torch.Tensor) and torch.equal(got, x.view(B, h, L, D // h)):
            fb.fail(
                "view straight to (B, H, L, d_k) without transpose: each 'head' then "
                "holds pieces of several positions; view to (B, L, H, d_k), then "
                ".transpose(1, 2)"
            )
        return fb
    merged = run_learner_code(fb, merge_heads, expected.contiguous())
    if merged is None:
        if any("view" in n or "contiguous" in n for n in fb.notes):
            fb.fail(
                "after transpose the tensor is not contiguous: use .reshape or .contiguous().view"
            )
        return fb
    if (
        isinstance(merged, torch.Tensor)
        and merged.shape == x.shape
        and torch.equal(merged, expected.reshape(B, L, D))
    ):
        fb.fail(
            "merged without transposing back: transpose(1, 2) to (B, L, H, d_k) "
            "before reshaping to (B, L, D)"
        )
        return fb
    if check_tensor(fb, "merge_heads(split_heads(x))", merged, x):
        fb.ok("merge_heads undoes split_heads exactly")
    return fb


@refuses(
    MultiHeadAttention,
    rule="to build PyTorch's module yourself, not with our module or its `to_torch`",
)
def check_torch_mha(run_torch_mha, batch: int = 3) -> Feedback:
    """``run_torch_mha(ours, x, mask)`` -> output of a ``torch.nn.MultiheadAttention`` with
    the weights of ``ours`` (a MultiHeadAttention), on batch-first ``x`` and our bool mask
    (True = may attend); must equal ``ours(x, mask=mask)[0]``."""
    fb = Feedback("Exercise 2 (parity with torch.nn.MultiheadAttention)")
    torch.manual_seed(0)
    ours = MultiHeadAttention(16, 4, fused=False).eval()
    x = torch.randn(batch, 5, 16)  # (B, T, D)
    mask = causal_mask(5)[0, 0]  # (T, T)
    got = run_learner_code(fb, run_torch_mha, ours, x, mask)
    if got is None:
        if any("attn_mask" in n and "should be" in n for n in fb.notes):
            fb.fail(
                "the mask has shape (T, T) but PyTorch read the batch as the sequence: "
                "batch_first trap, build nn.MultiheadAttention(..., batch_first=True)"
            )
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


def _diagnose_torch_mha(
    fb: Feedback, ours: MultiHeadAttention, x: torch.Tensor, mask: torch.Tensor, got: torch.Tensor
) -> None:
    """Recognise the batch_first and mask-convention traps by reproducing them."""
    ref = ours.to_torch()
    got = got.detach()
    with torch.no_grad():
        inverted = ref(x, x, x, attn_mask=mask, need_weights=False)[0]
        rows = (~mask).any(dim=-1)  # queries that keep a key once the mask is inverted
        not_first = None
        if x.shape[0] == x.shape[1]:  # only then does the wrong layout run without an error
            not_first = ours.to_torch(batch_first=False)(
                x, x, x, attn_mask=~mask, need_weights=False
            )[0]
    if not_first is not None and torch.allclose(got, not_first, atol=1e-5):
        fb.fail(
            "batch_first trap: nn.MultiheadAttention defaults to (T, B, D); with "
            "batch_first=False it attended across the batch, not the sequence"
        )
    elif torch.allclose(got[:, rows], inverted[:, rows], atol=1e-5):
        fb.fail(
            "mask convention inverted: nn.MultiheadAttention's True means *blocked*; "
            "pass transformer_lib.masks.to_blocked(mask)"
        )
