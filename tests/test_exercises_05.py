"""Notebook 05's exercise checkers: right answers pass, typical mistakes are refused by name,
the library's (and PyTorch's) own modules are refused where the exercise says "without"."""

import torch
import torch.nn.functional as F
from torch import nn

from transformer_lib.exercises import ex05_encoder as ex05
from transformer_lib.params import mha_params
from transformer_lib.residual import ResidualNorm


def refused(feedback, *words):
    text = str(feedback)
    return not feedback.passed and all(w in text for w in words)


def test_every_right_answer_passes():
    for name, (checker, right) in ex05.CHECKS.items():
        assert checker(right()), name


class LayerNormLike(ex05.RMSNorm):
    def forward(self, x):
        centred = x - x.mean(-1, keepdim=True)
        return centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class EpsOutside(ex05.RMSNorm):
    def forward(self, x):
        return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + self.eps) * self.weight


class WithBias(ex05.RMSNorm):
    def __init__(self, d_model, eps=1e-6):
        super().__init__(d_model, eps)
        self.bias = nn.Parameter(torch.zeros(d_model))


class CallsTorch(ex05.RMSNorm):
    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def test_rms_norm_mistakes_are_named_and_torch_is_refused():
    check = ex05.check_rms_norm
    assert refused(check(LayerNormLike), "that is LayerNorm")
    assert refused(check(EpsOutside), "outside the square root")
    assert refused(check(WithBias), "no bias")
    assert refused(check(nn.RMSNorm), "is the library's")
    assert refused(check(CallsTorch), "calls the library's `rms_norm`")


class PostNorm(ex05.PreNormLayer):
    def forward(self, x, mask=None):
        x = self.norm_1(x + self.dropout(self.self_attn(x, mask=mask)[0]))
        return self.norm_2(x + self.dropout(self.feed_forward(x)))


class DropoutOnSum(ex05.PreNormLayer):
    def forward(self, x, mask=None):
        x = self.dropout(x + self.self_attn(self.norm_1(x), mask=mask)[0])
        return self.dropout(x + self.feed_forward(self.norm_2(x)))


class IdentityAdd(ex05.PreNormLayer):
    def __init__(self, *args):
        super().__init__(*args)
        self.add = nn.Identity()

    def forward(self, x, mask=None):
        return self.add(x, self.self_attn(self.norm_1(x), mask=mask)[0])


class WithResidualNorm(ex05.PreNormLayer):
    def forward(self, x, mask=None):
        block = ResidualNorm(x.shape[-1], 0.0, norm_first=True)
        block.norm = self.norm_1
        x = block(x, lambda y: self.dropout(self.self_attn(y, mask=mask)[0]))
        return x + self.dropout(self.feed_forward(self.norm_2(x)))


def test_pre_norm_layer_mistakes_are_named_and_residual_norm_is_refused():
    check = ex05.check_pre_norm_layer
    assert refused(check(PostNorm), "looks like: post-norm")
    assert refused(check(DropoutOnSum), "dropout on the sum")
    assert refused(check(IdentityAdd), "nn.Identity", "plain sum")
    assert refused(check(WithResidualNorm), "without the library's", "ResidualNorm")


def test_layer_params_mistakes_are_named_and_library_counts_refused():
    check = ex05.check_layer_params
    rest = lambda D, F_: 2 * (D * D + D) + 2 * D * F_ + F_ + 5 * D
    values_too = lambda D, F_, h, k: 3 * (h * k * D + h * k) + h * k * D + 2 * D * F_ + F_ + 6 * D
    assert refused(check(values_too), "the values are d_k wide too")
    assert refused(check(lambda D, F_, h, k: 2 * (D * D + D) + rest(D, F_)), "d_k is ignored")
    assert refused(check(lambda D, F_, h, k: 2 * (k * D + k) + rest(D, F_)), "per head")
    library = lambda D, F_, h, k: mha_params(D, h * k) + 2 * D * F_ + F_ + 5 * D
    assert refused(check(library), "calls the library's `mha_params`")
    assert refused(check(lambda D, F_, h, k: 1.0 * ex05.layer_params_reference(D, F_, h, k)), "int")


def test_right_answers_of_another_dtype_pass():
    class Float64(ex05.PreNormLayer):
        def forward(self, x, mask=None):
            return super().forward(x, mask).double()

    assert ex05.check_pre_norm_layer(Float64)
