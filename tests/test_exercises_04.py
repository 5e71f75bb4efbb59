"""Notebook 04's exercise checkers: right answers pass, typical mistakes are refused by name,
the library's MultiHeadAttention is refused where the exercise says "without", and no answer
makes a checker raise."""

import torch
from torch import nn

from transformer_lib.attention import MultiHeadAttention, attention
from transformer_lib.exercises import ex04_multi_head as ex04
from transformer_lib.params import mha_params


def refused(feedback, *words):
    return not feedback.passed and all(w in str(feedback) for w in words)


def test_every_right_answer_passes():
    for name, (checker, right) in ex04.CHECKS.items():
        assert checker(right()), name


def test_mqa_params_formula_counts_the_module_and_reports_the_saving():
    for d_model, h in [(512, 8), (64, 4)]:
        module = ex04.CHECKS["multi_query_attention"][1]()(d_model, h)
        assert ex04.mqa_params_reference(d_model, h) == sum(p.numel() for p in module.parameters())
    saved = mha_params(512) - ex04.mqa_params_reference(512, 8)
    assert f"saves {saved:,}" in str(ex04.check_mqa_params(ex04.mqa_params_reference))


class MultiQuery(nn.Module):
    """The right answer, with one mistake switched on by name."""

    mistake = {}
    kv_width = None

    def __init__(self, d_model, h):
        super().__init__()
        width = self.kv_width or d_model // h
        self.w_q, self.w_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.w_k, self.w_v = nn.Linear(d_model, width), nn.Linear(d_model, width)

    def forward(self, x, mask=None):
        return ex04.mqa_reference((self.w_q, self.w_k, self.w_v, self.w_o), x, mask, **self.mistake)


def mqa_with(kv_width=None, **mistake):
    return type("Wrong", (MultiQuery,), {"mistake": mistake, "kv_width": kv_width})


def test_multi_query_mistakes_are_named():
    check = ex04.check_multi_query_attention
    assert refused(check(mqa_with(kv_width=16)), "multi-head attention's projection")
    assert refused(check(mqa_with(scale=1.0)), "1/sqrt(d_k)")
    assert refused(check(mqa_with(merge_t=False)), "merged in the wrong order")
    assert refused(check(mqa_with(mask_mode="inverted")), "inverted")
    assert refused(check(mqa_with(out=False)), "w_o")


def test_multi_query_refuses_the_library_module():
    class Tied(MultiQuery):
        def forward(self, x, mask=None):
            mha = MultiHeadAttention(16, 4)
            mha.in_proj.weight.data = torch.cat(
                (self.w_q.weight, self.w_k.weight.repeat(4, 1), self.w_v.weight.repeat(4, 1))
            )
            mha.in_proj.bias.data = torch.cat(
                (self.w_q.bias, self.w_k.bias.repeat(4), self.w_v.bias.repeat(4))
            )
            mha.out_proj = self.w_o
            return mha(x, mask=mask)[0]

    assert refused(ex04.check_multi_query_attention(Tied), "without the library's")


def test_mqa_params_mistakes_are_named():
    check = ex04.check_mqa_params
    assert refused(check(lambda d, h: 4 * d * d + 4 * d), "as in multi-head attention")
    assert refused(check(lambda d, h: 2 * d * d + 2 * d * (d // h)), "forgot the biases")
    assert refused(check(lambda d, h: float(ex04.mqa_params_reference(d, h))), "Python int")


def test_head_importance_mistakes_are_named():
    check = ex04.check_head_importance

    def after_out_proj(mha, x, mask=None):
        out, d_v = mha(x, mask=mask)[0], mha.d_v
        return torch.stack(
            [out[..., i * d_v : (i + 1) * d_v].norm(dim=-1).mean() for i in range(4)]
        )

    assert refused(check(after_out_proj), "after W^O")

    def no_out_proj(mha, x, mask=None):
        heads = attention(*mha.project(x, None, None), mask)[0]  # (B, H, T, d_v)
        return heads.norm(dim=-1).mean(dim=(0, 2))

    assert refused(check(no_out_proj), "head's own output")

    def zeroes_weights(mha, x, mask=None):
        result = ex04.head_importance_reference(mha, x, mask)
        mha.out_proj.weight.data[:, :4] = 0.0
        return result

    assert refused(check(zeroes_weights), "changed mha's weights")


def test_checkers_answer_bad_answers_without_raising():
    assert refused(ex04.check_multi_query_attention(lambda d, h: 1 / 0), "ZeroDivisionError")
    assert refused(ex04.check_multi_query_attention(nn.Linear), "nn.Linear named w_q")
    assert refused(ex04.check_mqa_params(None), "function")
    importance = lambda mha, x, mask=None: ex04.head_importance_reference(mha, x, mask)
    assert ex04.check_head_importance(lambda *a: importance(*a).double())
    assert refused(ex04.check_head_importance(lambda *a: importance(*a)[:3]), "shape")
    assert refused(ex04.check_head_importance(lambda *a: importance(*a).tolist()), "Tensor")

    class Float64(MultiQuery):
        def forward(self, x, mask=None):
            return super().forward(x, mask).double()

    assert ex04.check_multi_query_attention(Float64)
