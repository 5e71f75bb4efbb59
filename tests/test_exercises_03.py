"""Notebook 03's exercise checkers: right answers pass, typical mistakes are refused by name,
and no answer (wrong dtype, shape, type, an exception) makes a checker raise."""

import torch
from torch import nn

from transformer_lib.exercises import ex03_attention as ex03
from transformer_lib.masks import causal_mask


def refused(feedback, *words):
    text = str(feedback)
    return not feedback.passed and all(w in text for w in words)


def test_every_right_answer_passes():
    for name, (checker, right) in ex03.CHECKS.items():
        assert checker(right()), name


def test_length_mask_mistakes_are_named():
    check = ex03.check_length_mask
    le = lambda lengths, L: (torch.arange(L) <= lengths[:, None])[:, None, None, :]
    assert refused(check(le), "not <=")
    flat = lambda lengths, L: torch.arange(L) < lengths[:, None]
    assert refused(check(flat), "(B, 1, 1, L)")
    as_float = lambda lengths, L: ex03.length_mask_reference(lengths, L).float()
    assert refused(check(as_float), "bool")
    inverted = lambda lengths, L: ~ex03.length_mask_reference(lengths, L)
    assert refused(check(inverted), "inverted")


def test_prefix_lm_mask_mistakes_are_named():
    check = ex03.check_prefix_lm_mask
    causal_only = lambda p, T: causal_mask(T).expand(len(p), 1, T, T)
    assert refused(check(causal_only), "plain causal mask")

    def prefix_rows_see_all(p, T):
        i, j = torch.arange(T)[:, None], torch.arange(T)
        return ((j <= i) | (i < p[:, None, None]))[:, None]

    assert refused(check(prefix_rows_see_all), "prefix queries see the whole sequence")
    transposed = lambda p, T: ex03.prefix_lm_reference(p, T).transpose(-2, -1)
    assert refused(check(transposed), "swapped")


class Additive(nn.Module):
    """The right answer, with one mistake switched on by name."""

    mistake = {}

    def __init__(self, d_k, d_a):
        super().__init__()
        self.w_q = nn.Linear(d_k, d_a, bias=False)
        self.w_k = nn.Linear(d_k, d_a, bias=False)
        self.w = nn.Linear(d_a, 1, bias=False)

    def forward(self, q, k, v, mask=None):
        layers = (self.w_q, self.w_k, self.w)
        return ex03.additive_reference(layers, q, k, v, mask, **self.mistake)


def additive_with(**mistake):
    return type("Wrong", (Additive,), {"mistake": mistake})


def test_additive_attention_mistakes_are_named():
    check = ex03.check_additive_attention
    assert refused(check(additive_with(tanh=False)), "no tanh")
    assert refused(check(additive_with(scale=8**-0.5)), "divided by sqrt(d_k)")
    assert refused(check(additive_with(swap=True)), "swapped")
    assert refused(check(additive_with(dim=-2)), "wrong dimension")

    class MinusInfNaN(Additive):
        def forward(self, q, k, v, mask=None):
            h = torch.tanh(self.w_q(q)[..., :, None, :] + self.w_k(k)[..., None, :, :])
            scores = self.w(h).squeeze(-1)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            w = scores.softmax(-1)
            return w @ v, w

    assert refused(check(MinusInfNaN), "NaN on the query with no key")

    class WithBias(Additive):
        def __init__(self, d_k, d_a):
            super().__init__(d_k, d_a)
            self.w_q = nn.Linear(d_k, d_a)

    assert refused(check(WithBias), "bias=False")


def test_checkers_answer_bad_answers_without_raising():
    def raises_later(*args, calls=[]):
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("second call")
        return ex03.length_mask_reference(*args)

    assert refused(ex03.check_length_mask(raises_later), "RuntimeError")
    assert refused(ex03.check_prefix_lm_mask(lambda p, T: None), "return")
    assert refused(ex03.check_prefix_lm_mask(lambda p, T: [[True]]), "torch.Tensor")
    assert refused(ex03.check_additive_attention(lambda d_k, d_a: 1 / 0), "ZeroDivisionError")
    assert refused(ex03.check_additive_attention(lambda d_k, d_a: "a module"), "nn.Module")

    class Float64(Additive):
        def forward(self, q, k, v, mask=None):
            out, w = super().forward(q, k, v, mask)
            return out.double(), w.double()

    assert ex03.check_additive_attention(Float64)
    assert refused(ex03.check_additive_attention(nn.Linear), "nn.Linear named w_q")
