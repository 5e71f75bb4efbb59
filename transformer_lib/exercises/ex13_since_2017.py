"""Checkers for notebook 13's exercises (from the 2017 Transformer to today's models): rotary
position embeddings written from the formula, and multi-head attention turned into
grouped-query attention."""

from __future__ import annotations

from typing import Callable, Optional
from unittest import mock

import torch
import torch.nn.functional as F

from ..lm import GroupedQueryAttention, rope
from . import Feedback, check_tensor, first_match, keeps_rng, run_learner_code
from .own_work import guard, refuses

Tensor = torch.Tensor

# --- Exercise 1: rotary position embeddings ---------------------------------------------------


def _angles(d: int, start: int, T: int, step: int = 2) -> Tensor:
    inv_freq = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) * (step / 2) / d)
    return torch.arange(start, start + T, dtype=torch.float64)[:, None] * inv_freq  # (T, d/2)


def _turn(x: Tensor, angle: Tensor) -> Tensor:
    """Pairs (2i, 2i+1) turned by ``angle`` (T, d/2)."""
    even, odd = x[..., 0::2], x[..., 1::2]
    c, s = angle.cos(), angle.sin()
    return torch.stack((even * c - odd * s, even * s + odd * c), -1).flatten(-2)


def _halves(x: Tensor, angle: Tensor) -> Tensor:
    """The same rotation of the pairs (i, i + d/2): another layout, not this one."""
    first, second = x.chunk(2, -1)
    c, s = angle.cos(), angle.sin()
    return torch.cat((first * c - second * s, first * s + second * c), -1)


def _rope_mistakes(x: Tensor, start: int) -> dict:
    d, T = x.shape[-1], x.shape[-2]
    right = _angles(d, start, T)
    return {
        "each pair turns the wrong way (sin's signs swapped): the rotation by -p theta": (
            _turn(x, -right)
        ),
        "the positions start at 0 whatever `start` is: with a cache, the new token at "
        "position `start` must turn by start theta, not 0": _turn(x, _angles(d, 0, T)),
        "the pairs are (i, i + d/2), the halves layout some libraries use; here a pair is "
        "two neighbours (2i, 2i + 1), as in the sinusoids of §3.5": _halves(x, right),
        "theta_i = 10000^(-i/d): the exponent counts the pair's first column, 2i, not i": (
            _turn(x, _angles(d, start, T, step=1))
        ),
    }


@refuses(rope, rule="to write the rotation yourself, without the library's `rope`")
@keeps_rng
def check_rope(my_rope: Callable[[Tensor, int], Tensor]) -> Feedback:
    """``my_rope(x, start)``: x (B, H, T, d) at positions start .. start + T - 1, each pair
    (2i, 2i + 1) turned by the angle p / 10000^(2i/d)."""
    fb = Feedback("Exercise 1 (rotary position embeddings)")
    torch.manual_seed(0)
    for shape, start in (((2, 3, 5, 8), 0), ((1, 2, 4, 16), 7), ((1, 1, 1, 4), 30)):
        x = torch.randn(shape, dtype=torch.float64)
        got = run_learner_code(fb, my_rope, x.clone(), start)
        if got is None:
            return fb
        expected = _turn(x, _angles(shape[-1], start, shape[-2]))
        if not check_tensor(fb, f"my_rope(x of {shape}, start={start})", got, expected):
            mistake = first_match(got, _rope_mistakes(x, start))
            if mistake:
                fb.fail(f"looks like: {mistake}")
            return fb
    q, k = (
        torch.randn(1, 1, 1, 8, dtype=torch.float64),
        torch.randn(1, 1, 1, 8, dtype=torch.float64),
    )
    scores = [float((my_rope(q, p) * my_rope(k, p + 5)).sum()) for p in (0, 11)]
    fb.ok(f"a query at p and a key at p + 5 score {scores[0]:.4f} for p = 0 and {scores[1]:.4f} "
          "for p = 11: the score depends on the distance only")  # fmt: skip
    return fb


# --- Exercise 2: grouped-query attention --------------------------------------------------------


def gqa_reference(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor] = None) -> Tensor:
    """q (B, H, T, d); k, v (B, G, S, d), G dividing H: query head j reads key/value head
    j // (H / G). -> (B, H, T, d)."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


def _gqa_mistakes(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> dict:
    group = q.shape[1] // k.shape[1]
    tiled = (k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1))
    return {
        "`repeat` tiles the heads (0, 1, 0, 1, ...): query head j then reads key/value head "
        "j % G; with `repeat_interleave` it reads j // (H / G), its own group's": (
            F.scaled_dot_product_attention(q, *tiled, attn_mask=mask)
        ),
        "the mask is ignored": gqa_reference(q, k, v),
        "scores not divided by sqrt(d_k)": F.scaled_dot_product_attention(
            q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1), attn_mask=mask,
            scale=1.0),
    }  # fmt: skip


@refuses(gqa_reference, GroupedQueryAttention,
         rule="to share the heads yourself, without the checker's reference or the library's "
         "GroupedQueryAttention")  # fmt: skip
@keeps_rng
def check_gqa(grouped_query_attention: Callable[..., Tensor]) -> Feedback:
    """``grouped_query_attention(q, k, v, mask)``: q (B, H, T, d), k and v (B, G, S, d) with
    G dividing H, mask bool (True = may attend) broadcastable to (B, H, T, S) -> (B, H, T, d)."""
    fb = Feedback("Exercise 2 (multi-head attention turned into grouped-query attention)")
    torch.manual_seed(0)

    for H, G in ((4, 2), (8, 2), (6, 1), (4, 4)):
        q = torch.randn(2, H, 5, 8, dtype=torch.float64)
        k, v = (torch.randn(2, G, 7, 8, dtype=torch.float64) for _ in range(2))
        mask = torch.rand(2, 1, 5, 7) > 0.3
        mask[..., 0] = True  # every query sees at least one key
        sdpa = F.scaled_dot_product_attention  # watched: who asks it to share the heads
        with mock.patch.object(F, "scaled_dot_product_attention", wraps=sdpa) as spy:
            got = run_learner_code(fb, grouped_query_attention, q, k, v, mask)
        if got is None:
            return fb
        if any(call.kwargs.get("enable_gqa") for call in spy.call_args_list):
            fb.fail("the exercise says to share the heads yourself: `enable_gqa=True` makes "
                    "PyTorch's attention do it for you")  # fmt: skip
            return fb
        if not check_tensor(fb, f"H = {H} query heads, G = {G} key/value heads", got,
                            gqa_reference(q, k, v, mask)):  # fmt: skip
            mistake = first_match(got, _gqa_mistakes(q, k, v, mask))
            if mistake:
                fb.fail(f"looks like: {mistake}")
            return fb
    fb.ok("G = H is multi-head attention, G = 1 multi-query attention; in between, the cache "
          "holds G heads instead of H: H / G times less memory per token")  # fmt: skip
    return fb


def _right_rope(x: Tensor, start: int) -> Tensor:
    return _turn(x, _angles(x.shape[-1], start, x.shape[-2]).to(x.dtype))


def _right_gqa(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor] = None) -> Tensor:
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


CHECKS = {"rope": (check_rope, lambda: _right_rope), "gqa": (check_gqa, lambda: _right_gqa)}


guard(globals())  # an answer that is, or calls, a right answer above is refused
