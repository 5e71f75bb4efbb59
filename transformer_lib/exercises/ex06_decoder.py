"""Checkers for notebook 06 (the decoder and the whole model): causal mask, cross-attention,
parameter count of the complete Transformer; the assembly exercises (a decoder layer, the
whole model's constructor) are checked in :mod:`.ex06_assembly` and :mod:`.ex06_model_init`
and re-exported here."""

from __future__ import annotations

import math
from typing import Callable

import torch

from ..config import TransformerConfig
from ..masks import causal_mask, decoder_mask
from ..model import Transformer
from ..params import count_parameters, formula_counts
from . import Feedback, check_count, check_tensor, first_match, keeps_rng, run_learner_code
from .own_work import refuses
from .ex06_assembly import check_decoder_layer  # noqa: F401
from .ex06_model_init import check_transformer_init  # noqa: F401

Tensor = torch.Tensor


# Exercise 1 --------------------------------------------------------------------------
def _as_square(fb: Feedback, got, T: int):
    """The learner's mask as a (T, T) tensor (leading size-1 dimensions allowed), or None."""
    if not isinstance(got, Tensor):
        fb.fail(f"your mask function should return a torch.Tensor, got {type(got).__name__}")
        return None
    if got.dim() >= 2 and all(n == 1 for n in got.shape[:-2]):
        got = got.reshape(got.shape[-2:])
    if tuple(got.shape) != (T, T):
        fb.fail(f"for T={T} the mask should be (T, T) = ({T}, {T}), got {tuple(got.shape)}")
        return None
    return got


@refuses(
    causal_mask, decoder_mask, rule="to write the mask without calling the library's `causal_mask`"
)
@keeps_rng
def check_causal_mask(fn: Callable[[int], Tensor]) -> Feedback:
    """Exercise 1: ``fn(T)`` returns the (T, T) bool causal mask, True = may attend."""
    fb = Feedback("Exercise 1 (causal mask, §3.2.3)")
    for T in (5, 1, 8):
        got = run_learner_code(fb, fn, T)
        if got is None or (got := _as_square(fb, got, T)) is None:
            return fb
        expected = causal_mask(T)[0, 0]  # (T, T)
        if got.dtype != torch.bool:
            _wrong_dtype(fb, got, expected)
            return fb
        if torch.equal(got, expected):
            continue
        fb.fail(
            f"T={T}: wrong pattern; row t should be True in columns 0..t (the past and t "
            "itself), False after"
        )
        ones = torch.ones(T, T, dtype=torch.bool)
        mistakes = {
            "an upper triangle (torch.triu): it blocks the past instead of the future; "
            "use torch.tril": torch.triu(ones),
            "the opposite boolean convention, True = blocked (nn.MultiheadAttention's); here "
            "True = may attend: use torch.tril, or invert with ~": ~expected,
            "the diagonal is missing: position t must attend to itself (row 0 would attend to "
            "nothing)": torch.tril(ones, diagonal=-1),
            "nothing is masked: every position sees the whole target": ones,
        }
        message = first_match(got, mistakes)
        if message:
            fb.fail(f"looks like: {message}")
        return fb
    fb.ok("lower-triangular bool mask, True = may attend, for T = 5, 1, 8")
    return fb


def _wrong_dtype(fb: Feedback, got: Tensor, expected: Tensor) -> None:
    if got.is_floating_point() and torch.isinf(got).any():
        fb.fail(
            "an additive float mask (0 and -inf): here masks are bool with True = may "
            "attend, as in scaled_dot_product_attention"
        )
    else:
        fb.fail(
            f"dtype {got.dtype}: masks are bool (True = may attend); "
            "e.g. torch.tril(torch.ones(T, T, dtype=torch.bool))"
        )
    if not got.is_floating_point() and torch.equal(got.bool(), expected):
        fb.notes.append("    (the pattern itself is right: convert it with .bool())")


# Exercise 2 --------------------------------------------------------------------------
@keeps_rng
def check_cross_attention(fn: Callable) -> Feedback:
    """Exercise 2: ``fn(y, memory, w_q, w_k, w_v)`` -> (output (B, T, d_k), weights (B, T, S)),
    one head of cross-attention: queries from the decoder ``y``, keys/values from ``memory``."""
    fb = Feedback("Exercise 2 (cross-attention, §3.2.3)")
    g = torch.Generator().manual_seed(5)
    B, T, S, D, d_k = 2, 3, 5, 8, 4
    y = torch.randn(B, T, D, generator=g)  # decoder (B, T, D)
    memory = torch.randn(B, S, D, generator=g)  # encoder (B, S, D)
    w_q, w_k, w_v = (torch.randn(D, d_k, generator=g) for _ in range(3))
    result = run_learner_code(fb, fn, y, memory, w_q, w_k, w_v)
    if result is None:
        if fb.notes and "RuntimeError" in fb.notes[-1]:
            fb.fail(
                "the shapes do not fit together: queries come from y (T positions), "
                "keys and values both from memory (S positions)"
            )
        return fb
    out, weights = result if isinstance(result, tuple) and len(result) == 2 else (result, None)
    q, k, v = y @ w_q, memory @ w_k, memory @ w_v  # (B, T|S, d_k)
    scores = q @ k.transpose(1, 2)  # (B, T, S)
    expected_w = (scores / math.sqrt(d_k)).softmax(-1)  # (B, T, S)
    if isinstance(out, Tensor) and out.shape == (B, S, d_k):
        fb.fail(
            f"the output has one row per source position ({S}), not per target position "
            f"({T}): queries and keys/values are swapped. Queries come from the decoder "
            "(y), keys and values from the encoder's memory"
        )
        return fb
    mistakes = {
        "no scaling: divide the scores by sqrt(d_k) (§3.2.1)": scores.softmax(-1),
        "scaled by sqrt(d_model); the paper scales by sqrt(d_k), the size of one head": (
            scores / math.sqrt(D)
        ).softmax(-1),
        "softmax over the queries (dim=-2); each query's weights over the keys must sum to 1 "
        "(dim=-1)": (scores / math.sqrt(d_k)).softmax(-2),
    }
    if weights is not None and not check_tensor(fb, "weights", weights, expected_w):
        message = first_match(weights, mistakes)
        if message:
            fb.fail(f"looks like: {message}")
        return fb
    if not check_tensor(fb, "output", out, expected_w @ v):
        message = first_match(out, {m: w @ v for m, w in mistakes.items()})
        if message:
            fb.fail(f"looks like: {message}")
    return fb


# Exercise 3 --------------------------------------------------------------------------
def transformer_size(V: int, N: int, D: int, d_ff: int) -> int:
    """Parameters of a tied Transformer, counted on the module itself (shared ones once)."""
    config = TransformerConfig.tiny(V, N=N, d_model=D, d_ff=d_ff, h=2)
    with torch.device("meta"):  # shapes only
        model = Transformer(config)
    return sum(p.numel() for p in model.parameters())


def _right(V, N, D, F_):
    return (
        V * D
        + N * (4 * D * D + 4 * D + 2 * D * F_ + F_ + D + 4 * D)
        + N * (8 * D * D + 8 * D + 2 * D * F_ + F_ + D + 6 * D)
    )


TRANSFORMER_MISTAKES = {
    "the shared embedding counted three times (source, target, output): with tying (§3.4) "
    "it is one V x D matrix": lambda V, N, D, F_: _right(V, N, D, F_) + 2 * V * D,
    "the shared embedding counted twice: with tying (§3.4) it is one V x D matrix": lambda V,
    N,
    D,
    F_: _right(V, N, D, F_) + V * D,
    "a bias on the output projection: the tied projection is the embedding matrix, no bias": lambda V,
    N,
    D,
    F_: _right(V, N, D, F_) + V,
    "no biases anywhere: every MHA has 4 D of biases, every FFN d_ff + D": lambda V,
    N,
    D,
    F_: _right(V, N, D, F_) - N * (12 * D + 2 * (F_ + D)),
    "the decoder's cross-attention (4 D^2 + 4 D per layer) is missing": lambda V, N, D, F_: _right(
        V, N, D, F_
    )
    - N * (4 * D * D + 4 * D),
    "the decoder's cross-attention and its LayerNorm are missing": lambda V, N, D, F_: _right(
        V, N, D, F_
    )
    - N * (4 * D * D + 6 * D),
    "the decoder layer counted like an encoder layer: it has 3 LayerNorms, not 2": lambda V,
    N,
    D,
    F_: _right(V, N, D, F_) - N * 2 * D,
    "no biases and no LayerNorms": lambda V, N, D, F_: _right(V, N, D, F_)
    - N * (12 * D + 2 * (F_ + D))
    - N * 10 * D,
    "no LayerNorms (5 per encoder-decoder layer pair, 2 D each)": lambda V, N, D, F_: _right(
        V, N, D, F_
    )
    - N * 10 * D,
}


@refuses(
    formula_counts,
    count_parameters,
    Transformer,
    rule="to write a formula, without building the model or calling the library's counts",
)
@keeps_rng
def check_transformer_params(fn: Callable[[int, int, int, int], int]) -> Feedback:
    """Exercise 3: ``fn(V, N, d_model, d_ff)`` -> parameters of the complete Transformer with a
    shared vocabulary of V tokens and tied embeddings (§3.4)."""
    fb = Feedback("Exercise 3 (parameters of the whole model)")
    check_count(
        fb,
        fn,
        [(100, 2, 32, 64), (50, 3, 48, 200), (37000, 6, 512, 2048)],
        transformer_size,
        TRANSFORMER_MISTAKES,
    )
    return fb
