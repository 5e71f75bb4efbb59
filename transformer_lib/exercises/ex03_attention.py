"""Checkers for notebook 03's exercises: a key mask from sequence lengths, a prefix-LM mask
(bidirectional over a prefix, causal after it), and additive attention (§3.2.1) as a module.

Masks follow the series' convention: bool, ``True`` = may attend, broadcastable to
(B, H, T_q, T_k)."""

from __future__ import annotations

from typing import Dict, Optional

import torch
from torch import nn

from ..masks import causal_mask, padding_mask
from . import Feedback, built_a_module, check_tensor, first_match, keeps_rng, run_learner_code
from .own_work import guard

Tensor = torch.Tensor


def _check_mask(fb: Feedback, got, expected: Tensor, mistakes: Dict[str, Tensor], what: str) -> bool:
    """A bool mask of the expected shape and values; else "not yet", naming a known mistake."""
    if not isinstance(got, Tensor):
        fb.fail(f"{what} should be a torch.Tensor, got {type(got).__name__}")
        return False
    if got.dtype != torch.bool:
        fb.fail(
            f"{what} has dtype {got.dtype}: return a bool mask (True = may attend), e.g. with "
            "a comparison; a float mask is added to the scores, not applied"
        )
        return False
    if got.shape != expected.shape:
        fb.fail(f"{what} has shape {tuple(got.shape)}, expected {tuple(expected.shape)}")
        for message, wrong in mistakes.items():
            if message.startswith("shape") and got.shape == wrong.shape:
                fb.fail(f"looks like: {message[len('shape: '):]}")
        return False
    if check_tensor(fb, what, got.float(), expected.float()):
        return True
    found = first_match(got.float(), {m: w.float() for m, w in mistakes.items()})
    if found:
        fb.fail(f"looks like: {found}")
    return False


def length_mask_reference(lengths: Tensor, L: int) -> Tensor:
    keep = torch.arange(L) < lengths[:, None]  # (B, L)
    return keep[:, None, None, :]  # (B, 1, 1, L)


def check_length_mask(length_mask) -> Feedback:
    """``length_mask(lengths, L)``: lengths (B,) int64, the number of real tokens of each
    sequence (padding after them) -> (B, 1, 1, L) bool, True = a real key."""
    fb = Feedback("Exercise 1 (a key mask from lengths)")
    for lengths, L in ((torch.tensor([3, 5, 1]), 5), (torch.tensor([0, 2]), 4)):
        got = run_learner_code(fb, length_mask, lengths.clone(), L)
        if got is None:
            return fb
        keep = torch.arange(L) < lengths[:, None]  # (B, L)
        mistakes = {
            "position lengths[b] is the first padding position: compare with <, not <=": (
                torch.arange(L) <= lengths[:, None]
            )[:, None, None, :],
            "mask convention inverted: True means 'may attend' (a real token)": ~keep[
                :, None, None, :
            ],
            "padding at the front: the real tokens come first, padding after them": (
                torch.arange(L) >= L - lengths[:, None]
            )[:, None, None, :],
            "shape: (B, L) has no head and query axes; index with [:, None, None, :] to get "
            "(B, 1, 1, L)": keep,
            "shape: the lengths mark keys, the last axis: (B, 1, 1, L), not (B, 1, L, 1)": keep[
                :, None, :, None
            ],
        }
        what = f"length_mask({lengths.tolist()}, {L})"
        if not _check_mask(fb, got, length_mask_reference(lengths, L), mistakes, what):
            return fb
    fb.ok("a length of 0 masks every key of its sequence (the library's attention then gives zeros)")
    return fb


def prefix_lm_reference(prefix_lengths: Tensor, T: int) -> Tensor:
    i, j = torch.arange(T)[:, None], torch.arange(T)  # query i (rows), key j (columns)
    prefix = prefix_lengths[:, None, None]  # (B, 1, 1)
    return ((j <= i) | (j < prefix))[:, None]  # (B, 1, T, T)


def check_prefix_lm_mask(prefix_lm_mask) -> Feedback:
    """``prefix_lm_mask(prefix_lengths, T)``: (B,) int64 prefix lengths -> (B, 1, T, T) bool:
    every query sees the whole prefix of its sequence, and the positions after the prefix see
    themselves and the positions before them (causal)."""
    fb = Feedback("Exercise 2 (a prefix-LM mask)")
    T = 6
    prefixes = torch.tensor([2, 4, 0, 6])
    got = run_learner_code(fb, prefix_lm_mask, prefixes.clone(), T)
    if got is None:
        return fb
    expected = prefix_lm_reference(prefixes, T)
    i, j = torch.arange(T)[:, None], torch.arange(T)
    p = prefixes[:, None, None]
    causal = causal_mask(T).expand(len(prefixes), 1, T, T)
    mistakes = {
        "a plain causal mask: the prefix must be visible to every query, in both directions": (
            causal
        ),
        "the prefix queries see the whole sequence: a query in the prefix may not read the "
        "positions after the prefix": ((j <= i) | (i < p))[:, None],
        "off by one: the prefix holds positions 0 .. prefix - 1, so compare key < prefix": (
            (j <= i) | (j <= p)
        )[:, None],
        "off by one: the prefix holds positions 0 .. prefix - 1; yours stops one position "
        "short": ((j <= i) | (j < p - 1))[:, None],
        "queries and keys swapped (rows are queries, columns keys): the transpose of the "
        "right mask": expected.transpose(-2, -1),
        "mask convention inverted: True means 'may attend'": ~expected,
        "shape: (B, T, T) has no head axis; add it with [:, None] to get (B, 1, T, T)": (
            expected[:, 0]
        ),
    }
    if _check_mask(fb, got, expected, mistakes, f"prefix_lm_mask({prefixes.tolist()}, {T})"):
        fb.ok("prefix 0 gives the causal mask, prefix T a mask with nothing blocked")
    return fb


def additive_reference(layers, q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], *,
                       tanh: bool = True, scale: float = 1.0, swap: bool = False,
                       dim: int = -1, mask_mode: str = "right"):
    """Additive attention score(q, k) = w^T tanh(W_q q + W_k k), with one thing changeable
    (a typical mistake). Returns (output, weights)."""
    w_q, w_k, w = layers
    if swap:
        w_q, w_k = w_k, w_q
    hidden = w_q(q)[..., :, None, :] + w_k(k)[..., None, :, :]  # (B, T_q, T_k, d_a)
    hidden = torch.tanh(hidden) if tanh else hidden
    scores = w(hidden).squeeze(-1) * scale  # (B, T_q, T_k)
    keep = {"right": mask, "inverted": None if mask is None else ~mask, "ignored": None}[mask_mode]
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    weights = scores.softmax(dim=dim).nan_to_num(0.0)  # a fully masked row: zeros
    return weights @ v, weights  # (B, T_q, d_v)


def _additive_layers(fb: Feedback, module: nn.Module, d_k: int, d_a: int):
    """The learner's w_q, w_k, w: nn.Linear without bias, of the right sizes; or None."""
    sizes = {"w_q": (d_k, d_a), "w_k": (d_k, d_a), "w": (d_a, 1)}
    layers = []
    for name, (n_in, n_out) in sizes.items():
        layer = getattr(module, name, None)
        if not isinstance(layer, nn.Linear):
            fb.fail(
                f"no nn.Linear named {name}: the exercise names the layers w_q = "
                f"nn.Linear(d_k, d_a), w_k = nn.Linear(d_k, d_a) and w = nn.Linear(d_a, 1), "
                "all with bias=False (the check copies its weights into them)"
            )
            return None
        if (layer.in_features, layer.out_features) != (n_in, n_out) or layer.bias is not None:
            fb.fail(
                f"{name} is nn.Linear({layer.in_features}, {layer.out_features}, bias="
                f"{layer.bias is not None}); with d_k={d_k}, d_a={d_a} it should be "
                f"nn.Linear({n_in}, {n_out}, bias=False)"
            )
            return None
        layers.append(layer)
    fb.ok(f"layers w_q, w_k: nn.Linear({d_k}, {d_a}); w: nn.Linear({d_a}, 1); no biases")
    return layers


def _additive_cases(d_k: int):
    """(label, q, k, v, mask): self-attention, cross-attention to padded keys, and a causal
    mask whose last query may attend to no key at all."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, 5, d_k, generator=g)  # (B, T, d_k)
    q = torch.randn(2, 3, d_k, generator=g)  # (B, T_q=3, d_k)
    v = torch.randn(2, 5, 6, generator=g)  # (B, T_k=5, d_v=6)
    pad = padding_mask(torch.tensor([[5, 6, 7, 8, 9], [5, 6, 7, 0, 0]]), 0)[:, 0]  # (B, 1, 5)
    empty = causal_mask(5)[0].clone()  # (1, T, T)
    empty[:, -1] = False
    return [
        ("self-attention, mask=None", x, x, x, None),
        ("3 queries, 5 keys, the last 2 keys of example 2 padding", q, x, v, pad),
        ("causal mask, the last query with no key", x, x, v, empty),
    ]


@keeps_rng
def check_additive_attention(additive_cls) -> Feedback:
    """``additive_cls(d_k, d_a)`` builds layers ``w_q``, ``w_k`` (nn.Linear(d_k, d_a)) and
    ``w`` (nn.Linear(d_a, 1)), no biases; ``module(q, k, v, mask=None)`` returns (output,
    weights) with score(q, k) = w^T tanh(W_q q + W_k k), softmax over the keys."""
    fb = Feedback("Exercise 3 (additive attention, §3.2.1)")
    d_k, d_a = 8, 12
    module = run_learner_code(fb, additive_cls, d_k, d_a)
    if module is None or not built_a_module(fb, module):
        return fb
    layers = _additive_layers(fb, module, d_k, d_a)
    if layers is None:
        return fb
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for layer in layers:
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=g) * 0.6)
    for label, q, k, v, mask in _additive_cases(d_k):
        result = run_learner_code(fb, module, q, k, v, mask)
        if result is None:
            if mask is None and any("NoneType" in n for n in fb.notes):
                fb.fail("mask=None means no mask: apply the mask only when one is given")
            return fb
        if not (isinstance(result, tuple) and len(result) == 2):
            fb.fail("return a pair (output, weights)")
            return fb
        with torch.no_grad():
            out_ref, w_ref = additive_reference(layers, q, k, v, mask)
            got = result[1].detach() if isinstance(result[1], Tensor) else result[1]
            if not check_tensor(fb, f"weights, {label}", got, w_ref):
                _diagnose_additive(fb, got, layers, q, k, v, mask)
                return fb
        if not check_tensor(fb, f"output, {label}", result[0], out_ref):
            return fb
    return fb


def _diagnose_additive(fb, got, layers, q, k, v, mask) -> None:
    if not isinstance(got, Tensor) or got.shape != (q.shape[0], q.shape[1], k.shape[1]):
        return
    last = got[..., -1, :]
    if mask is not None and not mask[..., -1, :].any() and last.isnan().any():
        fb.fail(
            "NaN on the query with no key: a softmax over -inf only is 0/0; set those "
            "weights to 0 after the softmax (e.g. .nan_to_num(0.0)), as the library does"
        )
        return
    wrong = {
        "no tanh: score = w^T tanh(W_q q + W_k k); without it the score is linear and "
        "w^T W_q q is the same for every key, so the softmax ignores the query": dict(
            tanh=False
        ),
        "divided by sqrt(d_k): that scale belongs to dot-product attention, additive "
        "attention has none": dict(scale=q.shape[-1] ** -0.5),
        "w_q and w_k swapped: W_q transforms the queries, W_k the keys": dict(swap=True),
        "softmax over the wrong dimension: over the keys (dim=-1), so that each query's "
        "weights sum to 1": dict(dim=-2),
        "mask convention inverted: True means 'may attend'": dict(mask_mode="inverted"),
        "the mask is ignored: fill the blocked scores with -inf before the softmax": dict(
            mask_mode="ignored"
        ),
    }
    rows = ~got.isnan().any(-1)  # compare where the answer is defined
    for message, change in wrong.items():
        if mask is None and "mask" in message:
            continue
        w_wrong = additive_reference(layers, q, k, v, mask, **change)[1]
        if rows.any() and torch.allclose(got[rows].float(), w_wrong[rows], atol=1e-5):
            fb.fail(f"looks like: {message}")
            return


class _Additive(nn.Module):
    def __init__(self, d_k: int, d_a: int):
        super().__init__()
        self.w_q = nn.Linear(d_k, d_a, bias=False)
        self.w_k = nn.Linear(d_k, d_a, bias=False)
        self.w = nn.Linear(d_a, 1, bias=False)

    def forward(self, q, k, v, mask=None):
        return additive_reference((self.w_q, self.w_k, self.w), q, k, v, mask)


CHECKS = {
    "length_mask": (check_length_mask, lambda: length_mask_reference),
    "prefix_lm_mask": (check_prefix_lm_mask, lambda: prefix_lm_reference),
    "additive_attention": (check_additive_attention, lambda: _Additive),
}


guard(globals())  # an answer that is, or calls, a right answer above is refused
