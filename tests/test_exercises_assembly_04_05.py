"""The assembly exercises of notebooks 04 and 05 (a multi-head attention module, an encoder
layer from the library's blocks): right answers pass, every typical wrong answer fails with
its diagnosis, and nothing the learner hands in makes a checker raise."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_lib import MultiHeadAttention, PositionwiseFeedForward, ResidualNorm, attention
from transformer_lib.exercises.ex04_multi_head import check_multi_head_attention
from transformer_lib.exercises.ex05_encoder import check_encoder_layer


def make_mha(
    split="right",
    merge="right",
    scale="d_k",
    mask_mode="right",
    apply_w_o=True,
    has_w_o=True,
    bias=True,
    softmax_dim=-1,
    returns="output",
):
    """A learner's multi-head attention, right or with one typical mistake."""

    class MyMultiHeadAttention(nn.Module):
        def __init__(self, d_model, h):
            super().__init__()
            self.h, self.d_k = h, d_model // h
            self.w_q = nn.Linear(d_model, d_model, bias=bias)
            self.w_k = nn.Linear(d_model, d_model, bias=bias)
            self.w_v = nn.Linear(d_model, d_model, bias=bias)
            if has_w_o:
                self.w_o = nn.Linear(d_model, d_model, bias=bias)

        def split(self, t):
            B, L, _ = t.shape
            if split == "view only":
                return t.view(B, self.h, L, self.d_k)
            return t.view(B, L, self.h, self.d_k).transpose(1, 2)

        def forward(self, query, key, value, mask=None):
            B, T, D = query.shape
            q, k, v = (
                self.split(self.w_q(query)),
                self.split(self.w_k(key)),
                self.split(self.w_v(value)),
            )
            scores = (
                q
                @ k.transpose(-2, -1)
                / {"d_k": math.sqrt(self.d_k), "none": 1.0, "d_model": math.sqrt(D)}[scale]
            )
            if mask_mode == "unguarded" or (mask is not None and mask_mode != "ignored"):
                keep = mask if mask_mode in ("right", "unguarded") else ~mask
                scores = scores.masked_fill(~keep, float("-inf"))
            weights = scores.softmax(dim=softmax_dim)
            heads = weights @ v  # (B, H, T, d_k)
            if merge == "none":
                return heads
            if merge == "view":
                merged = heads.transpose(1, 2).view(B, T, D)
            elif merge == "no transpose":
                merged = heads.reshape(B, T, D)
            else:
                merged = heads.transpose(1, 2).contiguous().view(B, T, D)
            out = self.w_o(merged) if apply_w_o else merged
            return (out, weights) if returns == "pair" else out

    return MyMultiHeadAttention


class LibraryAttentionInside(nn.Module):
    """Multi-head attention from the library's `attention` and a stacked projection."""

    def __init__(self, d_model, h):
        super().__init__()
        self.h = h
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, query, key, value, mask=None):
        B, T, D = query.shape
        split = lambda t: t.view(B, -1, self.h, D // self.h).transpose(1, 2)  # noqa: E731
        out, _ = attention(
            split(self.w_q(query)), split(self.w_k(key)), split(self.w_v(value)), mask
        )
        return self.w_o(out.transpose(1, 2).reshape(B, T, D))


@pytest.mark.parametrize(
    "learner",
    [make_mha(), make_mha(returns="pair"), LibraryAttentionInside],
    ids=["own softmax", "returns (output, weights)", "library attention()"],
)
def test_multi_head_attention_right_answers_pass_both_parities(learner):
    fb = check_multi_head_attention(learner)
    assert fb.passed, str(fb)
    assert str(fb).count("torch.nn.MultiheadAttention") == 3  # self, masked, cross


@pytest.mark.parametrize(
    "kwargs, diagnosis",
    [
        (dict(apply_w_o=False), "no output projection: the merged heads must go through w_o"),
        (dict(has_w_o=False), "no output projection w_o"),
        (dict(merge="no transpose"), "heads merged in the wrong order"),
        (dict(merge="view"), "not contiguous"),
        (dict(split="view only"), "heads split with a plain view"),
        (dict(split="view only", merge="no transpose"), "split and merged without the transposes"),
        (dict(merge="none"), "you returned the heads (B, H, T, d_k)"),
        (dict(scale="none"), "forgot the 1/sqrt(d_k) scale"),
        (dict(scale="d_model"), "divided by sqrt(d_model)"),
        (dict(softmax_dim=-2), "softmax over the wrong dimension"),
        (dict(mask_mode="inverted"), "mask convention inverted"),
        (dict(mask_mode="ignored"), "the mask is ignored"),
        (dict(mask_mode="unguarded"), "mask=None means no mask"),
        (dict(bias=False), "with its bias"),
    ],
)
def test_multi_head_attention_typical_mistakes_are_named(kwargs, diagnosis):
    fb = check_multi_head_attention(make_mha(**kwargs))
    assert not fb.passed and "not yet" in str(fb)
    assert diagnosis in str(fb), str(fb)


def wrong_width(d_model, h):
    class Narrow(make_mha()):
        def forward(self, query, key, value, mask=None):
            return super().forward(query, key, value, mask)[..., : d_model // 2]

    return Narrow(d_model, h)


def stub(d_model, h):
    raise NotImplementedError


@pytest.mark.parametrize(
    "learner, reason",
    [
        (lambda d, h: None, "returned None"),
        (lambda d, h: {"w_q": nn.Linear(d, d)}, "should build an nn.Module"),
        (lambda d, h: 1 / 0, "raised ZeroDivisionError"),
        (stub, "not implemented yet"),
        ("MultiHeadAttention", "pass your function itself"),
        (wrong_width, "has shape (2, 5, 8), expected (2, 5, 16)"),
        (lambda d, h: MultiHeadAttention(d, h), "no nn.Linear named w_q, w_k, w_v, w_o"),
    ],
)
def test_multi_head_attention_says_not_yet_and_never_raises(learner, reason):
    fb = check_multi_head_attention(learner)
    assert not fb.passed and reason in str(fb), str(fb)


def test_multi_head_attention_checker_keeps_the_global_random_state():
    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    check_multi_head_attention(make_mha())
    assert torch.equal(torch.rand(3), before)


# --- notebook 05: the encoder layer ------------------------------------------------------
def make_layer(
    kind="right",
    attn_dropout=False,
    ffn_dropout=None,
    norms="in order",
    n_norms=2,
    eval_dropout=False,
):
    """A learner's encoder layer from the library's blocks, right or with one mistake."""

    class MyEncoderLayer(nn.Module):
        def __init__(self, d_model, h, d_ff, dropout):
            super().__init__()
            self.self_attn = MultiHeadAttention(d_model, h, dropout if attn_dropout else 0.0)
            self.feed_forward = PositionwiseFeedForward(
                d_model, d_ff, dropout if ffn_dropout is None else ffn_dropout
            )
            if norms == "reversed":  # registered in the other order: still right
                self.norm_2, self.norm_1 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
            else:
                self.norm_1, self.norm_2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
            if n_norms == 3:
                self.final = nn.LayerNorm(d_model)
            self.dropout, self.p = nn.Dropout(dropout), dropout

        def forward(self, x, mask=None):
            attn = lambda y: self.self_attn(y, mask=None if kind == "no mask" else mask)[0]  # noqa: E731
            ffn, n1, n2 = self.feed_forward, self.norm_1, self.norm_2
            drop = (lambda t: F.dropout(t, self.p)) if eval_dropout else self.dropout  # noqa: E731
            if kind in ("right", "no mask"):
                x = n1(x + drop(attn(x)))
                return n2(x + drop(ffn(x)))
            if kind == "pre-norm":
                x = x + drop(attn(n1(x)))
                return x + drop(ffn(n2(x)))
            if kind == "no residual":
                x = n1(drop(attn(x)))
                return n2(drop(ffn(x)))
            if kind == "no dropout":
                x = n1(x + attn(x))
                return n2(x + ffn(x))
            if kind == "dropout on the sum":
                x = n1(drop(x + attn(x)))
                return n2(drop(x + ffn(x)))
            if kind == "dropout on x":
                x = n1(drop(x) + attn(x))
                return n2(drop(x) + ffn(x))
            if kind == "dropout after norm":
                x = drop(n1(x + attn(x)))
                return drop(n2(x + ffn(x)))
            if kind == "ffn first":
                x = n1(x + drop(ffn(x)))
                return n2(x + drop(attn(x)))
            if kind == "one norm":
                x = n1(x + drop(attn(x)))
                return n1(x + drop(ffn(x)))
            raise ValueError(kind)

    return MyEncoderLayer


class WithResidualNorm(nn.Module):
    """The same layer from the library's ResidualNorm blocks."""

    def __init__(self, d_model, h, d_ff, dropout):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.attn_block = ResidualNorm(d_model, dropout)
        self.ff_block = ResidualNorm(d_model, dropout)

    def forward(self, x, mask=None):
        x = self.attn_block(x, lambda y: self.self_attn(y, mask=mask)[0])
        return self.ff_block(x, self.feed_forward)


@pytest.mark.parametrize(
    "learner",
    [make_layer(), make_layer(norms="reversed"), WithResidualNorm],
    ids=["own norms", "norms registered in reverse", "ResidualNorm"],
)
def test_encoder_layer_right_answers_pass_eval_torch_and_training(learner):
    fb = check_encoder_layer(learner)
    assert fb.passed, str(fb)
    text = str(fb)
    assert "nn.TransformerEncoderLayer" in text and "training mode: the same dropout" in text


@pytest.mark.parametrize(
    "kwargs, diagnosis",
    [
        (dict(kind="pre-norm"), "pre-norm, x + Sublayer(LayerNorm(x))"),
        (dict(kind="no residual"), "no residual connections"),
        (dict(kind="ffn first"), "the feed-forward network comes before the self-attention"),
        (dict(kind="one norm"), "the same LayerNorm for both sub-layers"),
        (dict(kind="no mask"), "the mask is not passed to the self-attention"),
        (dict(eval_dropout=True), "in eval mode two calls differ"),
        (dict(kind="no dropout"), "no dropout on the sub-layers' outputs"),
        (dict(kind="dropout on the sum"), "dropout on the sum"),
        (dict(kind="dropout on x"), "dropout on the residual x"),
        (dict(kind="dropout after norm"), "dropout after the LayerNorm"),
        (dict(attn_dropout=True), "dropout on the attention weights as well"),
        (dict(ffn_dropout=0.0), "the feed-forward network's dropout is 0.0"),
        (dict(n_norms=3), "one LayerNorm per sub-layer, two in all"),
    ],
)
def test_encoder_layer_typical_mistakes_are_named(kwargs, diagnosis):
    fb = check_encoder_layer(make_layer(**kwargs))
    assert not fb.passed and "not yet" in str(fb)
    assert diagnosis in str(fb), str(fb)


def test_encoder_layer_with_dropout_in_the_wrong_place_still_passes_eval_mode_first():
    text = str(check_encoder_layer(make_layer(kind="dropout on the sum")))
    assert "values match EncoderLayer (eval mode)" in text  # eval mode: dropout is off
    assert "in training mode your layer differs" in text


class OwnAttention(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, h, batch_first=True)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)

    def forward(self, x, mask=None):
        return x


def three_dims_short(d_model, h, d_ff, dropout):
    layer = make_layer()(d_model, h, d_ff, dropout)
    forward = layer.forward
    layer.forward = lambda x, mask=None: forward(x, mask)[..., :3]
    return layer


@pytest.mark.parametrize(
    "learner, reason",
    [
        (lambda *a: None, "returned None"),
        (lambda *a: [nn.Linear(2, 2)], "should build an nn.Module"),
        (lambda *a: {}["missing"], "raised KeyError"),
        (42, "pass your function itself"),
        (OwnAttention, "build the layer from the library's blocks"),
        (three_dims_short, "has shape (2, 6, 3), expected (2, 6, 16)"),
    ],
)
def test_encoder_layer_says_not_yet_and_never_raises(learner, reason):
    fb = check_encoder_layer(learner)
    assert not fb.passed and reason in str(fb), str(fb)
