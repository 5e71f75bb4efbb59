"""Checkers of notebooks 05-06: correct answers pass, typical wrong answers fail with the
right diagnosis."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_lib.exercises.ex05_encoder import (
    check_encoder_layer_params,
    check_feed_forward,
    check_sublayer_connection,
)
from transformer_lib.exercises.ex06_decoder import (
    check_causal_mask,
    check_cross_attention,
    check_transformer_params,
)


def text(feedback):
    return str(feedback)


def not_implemented(*args):
    raise NotImplementedError


# 05, exercise 1: feed-forward ---------------------------------------------------------
def make_ffn(order="right", act=torch.relu, bias=True):
    class FFN(nn.Module):
        def __init__(self, d_model, d_ff):
            super().__init__()
            if order == "swapped":
                d_model, d_ff = d_ff, d_model
            if order == "reversed_registration":  # w_2 defined first: still correct
                self.w_2 = nn.Linear(d_ff, d_model, bias=bias)
                self.w_1 = nn.Linear(d_model, d_ff, bias=bias)
            else:
                self.w_1 = nn.Linear(d_model, d_ff, bias=bias)
                self.w_2 = nn.Linear(d_ff, d_model, bias=bias)

        def forward(self, x):
            if order == "relu_after":
                return torch.relu(self.w_2(self.w_1(x)))
            return self.w_2(act(self.w_1(x)))

    return FFN


@pytest.mark.parametrize("order", ["right", "reversed_registration"])
def test_ffn_correct(order):
    fb = check_feed_forward(make_ffn(order))
    assert fb.passed, text(fb)


def test_ffn_sequential_with_dropout_passes():
    fb = check_feed_forward(
        lambda d, f: nn.Sequential(nn.Linear(d, f), nn.ReLU(), nn.Dropout(0.5), nn.Linear(f, d))
    )
    assert fb.passed, text(fb)  # evaluated in eval mode: dropout is off


@pytest.mark.parametrize(
    "kwargs, diagnosis",
    [
        ({"act": lambda t: t}, "ReLU is missing"),
        ({"order": "swapped"}, "d_model and d_ff are swapped"),
        ({"order": "relu_after"}, "after the second layer instead"),
        ({"act": F.gelu}, "GELU"),
        ({"bias": False}, "biases b_1 and b_2"),
    ],
)
def test_ffn_wrong(kwargs, diagnosis):
    fb = check_feed_forward(make_ffn(**kwargs))
    assert not fb.passed
    assert diagnosis in text(fb)


def test_ffn_stub():
    fb = check_feed_forward(not_implemented)
    assert not fb.passed and "not implemented" in text(fb)


# 05, exercise 2: residual connection --------------------------------------------------
def right_block(x, sublayer, norm, dropout, norm_first):
    if norm_first:
        return x + dropout(sublayer(norm(x)))
    return norm(x + dropout(sublayer(x)))


def test_block_correct():
    fb = check_sublayer_connection(right_block)
    assert fb.passed, text(fb)
    assert "post-norm" in text(fb) and "pre-norm" in text(fb)


def test_block_library_residual_norm_is_refused():
    from transformer_lib import ResidualNorm

    def via_library(x, sublayer, norm, dropout, norm_first):
        block = ResidualNorm(x.shape[-1], 0.0, norm_first)
        block.norm, block.dropout = norm, dropout
        return block(x, sublayer)

    fb = check_sublayer_connection(via_library)  # right values, not the learner's own
    assert not fb.passed and "values match" in text(fb)
    assert "your code calls the library's `ResidualNorm`" in text(fb)


@pytest.mark.parametrize(
    "wrong, diagnosis",
    [
        (
            lambda x, f, n, d, nf: x + d(f(n(x))),
            "pre-norm, x + Dropout(Sublayer(LayerNorm(x))), where post-norm was asked",
        ),
        (
            lambda x, f, n, d, nf: n(x + d(f(x))),
            "post-norm, LayerNorm(x + Dropout(Sublayer(x))), where pre-norm was asked",
        ),
        (lambda x, f, n, d, nf: n(d(x) + f(x)) if not nf else d(x) + f(n(x)), "residual branch"),
        (lambda x, f, n, d, nf: n(d(x + f(x))) if not nf else d(x + f(n(x))), "dropout on the sum"),
        (lambda x, f, n, d, nf: n(x + f(x)) if not nf else x + f(n(x)), "never applied"),
        (lambda x, f, n, d, nf: n(d(f(x))) if not nf else d(f(n(x))), "no residual"),
        (
            lambda x, f, n, d, nf: n(x + d(f(x))) if not nf else n(x) + d(f(n(x))),
            "the residual adds LayerNorm(x)",
        ),
        (
            lambda x, f, n, d, nf: n(x + d(f(x))) if not nf else n(x + d(f(n(x)))),
            "a LayerNorm after the add as well",
        ),
    ],
)
def test_block_wrong(wrong, diagnosis):
    fb = check_sublayer_connection(wrong)
    assert not fb.passed
    assert diagnosis in text(fb)


def test_block_identity_as_add_names_the_pitfall():
    add = nn.Identity()

    def wrong(x, sublayer, norm, dropout, norm_first):
        return norm(add(x, dropout(sublayer(x))))

    fb = check_sublayer_connection(wrong)
    assert not fb.passed
    assert "pitfall \"nn.Identity as an 'add' layer\"" in text(fb) and "TypeError" in text(fb)


def test_block_dropout_twice():
    fb = check_sublayer_connection(  # right values, dropout called twice
        lambda x, f, n, d, nf: right_block(x, f, n, d, nf) + 0 * d(x)
    )
    assert not fb.passed and "2 times" in text(fb)


# 05, exercise 3: parameters of an encoder layer ----------------------------------------
def test_encoder_params_correct():
    fb = check_encoder_layer_params(
        lambda D, F_: (4 * D * D + 4 * D) + (2 * D * F_ + F_ + D) + 2 * (2 * D)
    )
    assert fb.passed, text(fb)
    assert "3,152,384" in text(fb)  # base: 1,050,624 + 2,099,712 + 2,048


@pytest.mark.parametrize(
    "wrong, diagnosis",
    [
        (lambda D, F_: 4 * D * D + 2 * D * F_ + 4 * D, "no biases anywhere"),
        (lambda D, F_: 4 * D * D + 2 * D * F_, "no biases and no LayerNorms"),
        (lambda D, F_: 4 * D * D + 4 * D + 2 * D * F_ + F_ + D, "the two LayerNorms"),
        (lambda D, F_: 4 * D * D + 4 * D + 2 * D * F_ + F_ + D + 2 * D, "one LayerNorm short"),
        (lambda D, F_: 3 * D * D + 3 * D + 2 * D * F_ + F_ + D + 4 * D, "W^O"),
        (lambda D, F_: 4 * D * D + 4 * D + 2 * D * F_ + 4 * D, "no feed-forward biases"),
    ],
)
def test_encoder_params_wrong(wrong, diagnosis):
    fb = check_encoder_layer_params(wrong)
    assert not fb.passed
    assert diagnosis in text(fb)


def test_encoder_params_not_int():
    fb = check_encoder_layer_params(lambda D, F_: float(4 * D * D))
    assert not fb.passed and "Python int" in text(fb)


# 06, exercise 1: causal mask -----------------------------------------------------------
def test_causal_correct():
    assert check_causal_mask(lambda T: torch.tril(torch.ones(T, T, dtype=torch.bool))).passed
    fb = check_causal_mask(lambda T: torch.ones(T, T).tril().bool()[None, None])
    assert fb.passed, text(fb)  # (1, 1, T, T) is accepted


@pytest.mark.parametrize(
    "wrong, diagnosis",
    [
        (lambda T: torch.triu(torch.ones(T, T, dtype=torch.bool)), "blocks the past"),
        (
            lambda T: torch.triu(torch.ones(T, T, dtype=torch.bool), 1),
            "opposite boolean convention",
        ),
        (lambda T: torch.tril(torch.ones(T, T, dtype=torch.bool), -1), "diagonal is missing"),
        (lambda T: torch.ones(T, T, dtype=torch.bool), "nothing is masked"),
        (
            lambda T: torch.zeros(T, T).masked_fill(torch.ones(T, T).triu(1).bool(), float("-inf")),
            "additive float mask",
        ),
        (lambda T: torch.tril(torch.ones(T, T, dtype=torch.long)), "convert it with .bool()"),
        (lambda T: torch.tril(torch.ones(5, 5, dtype=torch.bool)), "for T=1"),
    ],
)
def test_causal_wrong(wrong, diagnosis):
    fb = check_causal_mask(wrong)
    assert not fb.passed
    assert diagnosis in text(fb)


def test_causal_not_a_tensor():
    fb = check_causal_mask(lambda T: [[j <= i for j in range(T)] for i in range(T)])
    assert not fb.passed and "should return a torch.Tensor, got list" in text(fb)


# 06, exercise 2: cross-attention -------------------------------------------------------
def cross(y, memory, w_q, w_k, w_v, q_from="y", kv_from="memory", scale="d_k", dim=-1):
    src = {"y": y, "memory": memory}
    q, k, v = src[q_from] @ w_q, src[kv_from] @ w_k, src[kv_from] @ w_v
    s = q @ k.transpose(1, 2)
    s = s / math.sqrt({"d_k": q.shape[-1], "D": y.shape[-1], "none": 1}[scale])
    w = s.softmax(dim)
    return w @ v, w


def test_cross_correct():
    fb = check_cross_attention(cross)
    assert fb.passed, text(fb)
    assert check_cross_attention(lambda *a: cross(*a)[0]).passed  # output alone is accepted


def test_cross_library_mha_passes():
    from transformer_lib import attention

    def via_library(y, memory, w_q, w_k, w_v):
        return attention(y @ w_q, memory @ w_k, memory @ w_v)

    assert check_cross_attention(via_library).passed


@pytest.mark.parametrize(
    "kwargs, diagnosis",
    [
        ({"q_from": "memory", "kv_from": "y"}, "queries and keys/values are swapped"),
        ({"scale": "none"}, "no scaling"),
        ({"scale": "D"}, "sqrt(d_model)"),
        ({"dim": -2}, "softmax over the queries"),
    ],
)
def test_cross_wrong(kwargs, diagnosis):
    fb = check_cross_attention(lambda *a: cross(*a, **kwargs))
    assert not fb.passed
    assert diagnosis in text(fb)


def test_cross_wrong_scaling_output_only():
    fb = check_cross_attention(lambda *a: cross(*a, scale="none")[0])
    assert not fb.passed and "no scaling" in text(fb)


def test_cross_keys_from_decoder_shape_error():
    def wrong(y, memory, w_q, w_k, w_v):
        w = (y @ w_q @ (y @ w_k).transpose(1, 2)).softmax(-1)  # (B, T, T)
        return w @ (memory @ w_v)  # T != S: error

    fb = check_cross_attention(wrong)
    assert not fb.passed and "keys and values both from memory" in text(fb)


# 06, exercise 3: parameters of the whole model -----------------------------------------
def right_total(V, N, D, F_):
    mha, ffn, ln = 4 * D * D + 4 * D, 2 * D * F_ + F_ + D, 2 * D
    return V * D + N * (mha + ffn + 2 * ln) + N * (2 * mha + ffn + 3 * ln)


def test_total_correct():
    fb = check_transformer_params(right_total)
    assert fb.passed, text(fb)
    assert "63,082,496" in text(fb)


@pytest.mark.parametrize(
    "wrong, diagnosis",
    [
        (lambda V, N, D, F_: right_total(V, N, D, F_) + 2 * V * D, "three times"),
        (lambda V, N, D, F_: right_total(V, N, D, F_) + V * D, "counted twice"),
        (lambda V, N, D, F_: right_total(V, N, D, F_) + V, "a bias on the output projection"),
        (lambda V, N, D, F_: right_total(V, N, D, F_) - N * (4 * D * D + 4 * D), "cross-attention"),
        (lambda V, N, D, F_: right_total(V, N, D, F_) - N * 2 * D, "3 LayerNorms"),
        (
            lambda V, N, D, F_: V * D + N * (3 * 4 * D * D + 2 * 2 * D * F_),
            "no biases and no Layer",
        ),
        (lambda V, N, D, F_: V * D + N * (12 * D * D + 4 * D * F_ + 10 * D), "no biases anywhere"),
    ],
)
def test_total_wrong(wrong, diagnosis):
    fb = check_transformer_params(wrong)
    assert not fb.passed
    assert diagnosis in text(fb)


def test_checkers_leave_global_rng_alone():
    torch.manual_seed(0)
    state = torch.get_rng_state()
    check_feed_forward(make_ffn())
    assert torch.equal(state, torch.get_rng_state())


@pytest.mark.parametrize(
    "checker, answer",
    [
        (check_sublayer_connection, right_block),
        (check_causal_mask, not_implemented),
        (check_cross_attention, cross),
        (check_encoder_layer_params, not_implemented),
    ],
)
def test_other_checkers_leave_global_rng_alone(checker, answer):
    state = torch.get_rng_state()
    checker(answer)
    assert torch.equal(state, torch.get_rng_state())
