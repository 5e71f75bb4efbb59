"""Checkers for notebook 05 (the encoder): feed-forward, residual connection, parameter count."""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ..config import TransformerConfig
from ..encoder import EncoderLayer
from ..feedforward import PositionwiseFeedForward
from ..params import count_parameters, ffn_params, layer_norm_params, mha_params
from ..residual import ResidualNorm
from . import Feedback, check_count, check_tensor, first_match, keeps_rng, run_learner_code
from .own_work import refuses

Tensor = torch.Tensor

PITFALL_11 = (
    "nn.Identity was called with two arguments, as if it were an 'add' layer "
    "(notebook 05's pitfall \"nn.Identity as an 'add' layer\"): nn.Identity returns "
    "its one input unchanged. Write the residual as a plain sum, x + ..."
)


# Exercise 1 --------------------------------------------------------------------------
SWAPPED = (
    "d_model and d_ff are swapped: the first layer expands to the inner width, "
    "nn.Linear(d_model, d_ff), the second projects back, nn.Linear(d_ff, d_model)"
)


@refuses(
    PositionwiseFeedForward,
    rule="to write the module yourself, not the library's `PositionwiseFeedForward`",
)
@keeps_rng
def check_feed_forward(ffn_class: Callable[[int, int], nn.Module]) -> Feedback:
    """Exercise 1: ``ffn_class(d_model, d_ff)`` builds FFN(x) = max(0, x W_1 + b_1) W_2 + b_2."""
    fb = Feedback("Exercise 1 (position-wise feed-forward, §3.3)")
    D, d_ff = 8, 24
    torch.manual_seed(0)
    module = run_learner_code(fb, ffn_class, D, d_ff)
    if module is None:
        return fb
    if not isinstance(module, nn.Module):
        fb.fail(f"ffn_class(d_model, d_ff) should return an nn.Module, got {type(module).__name__}")
        return fb
    linears = [m for m in module.modules() if isinstance(m, nn.Linear)]
    shapes = [tuple(m.weight.shape) for m in linears]  # (out, in)
    module.eval()
    x = torch.randn(2, 5, D)  # (B, L, D)
    got = run_learner_code(fb, module, x)
    if got is None:
        if shapes == [(D, d_ff), (d_ff, D)]:
            fb.fail(SWAPPED)
        return fb
    w1, w2 = _check_linears(fb, linears, D, d_ff)
    if w1 is None:
        return fb
    ref = PositionwiseFeedForward(D, d_ff, dropout=0.0)
    with torch.no_grad():
        for mine, theirs in ((ref.w_1, w1), (ref.w_2, w2)):
            mine.weight.copy_(theirs.weight)
            mine.bias.copy_(theirs.bias)
        expected = ref(x)
        mistakes = {
            "the ReLU is missing: without it the two layers collapse into one linear map": w2(
                w1(x)
            ),
            "a ReLU after the second layer too: Eq. 2 ends with the linear layer W_2": torch.relu(
                w2(torch.relu(w1(x)))
            ),
            "the ReLU is after the second layer instead of between the two": torch.relu(w2(w1(x))),
            "GELU instead of the paper's ReLU, max(0, .)": w2(F.gelu(w1(x))),
        }
    if check_tensor(fb, "FFN(x)", got, expected):
        return fb
    message = first_match(got, mistakes)
    if message:
        fb.fail(f"looks like: {message}")
    return fb


def _check_linears(
    fb: Feedback, linears: List[nn.Linear], D: int, d_ff: int
) -> Tuple[Optional[nn.Linear], Optional[nn.Linear]]:
    """W_1 (D -> d_ff) and W_2 (d_ff -> D) among the learner's layers, or (None, None)."""
    if len(linears) != 2:
        fb.fail(f"expected two nn.Linear layers (W_1 and W_2), found {len(linears)}")
        return None, None
    by_shape = {tuple(m.weight.shape): m for m in linears}
    w1, w2 = by_shape.get((d_ff, D)), by_shape.get((D, d_ff))
    if w1 is None or w2 is None:
        fb.fail(
            f"with d_model={D}, d_ff={d_ff} the layers should be nn.Linear({D}, {d_ff}) "
            f"then nn.Linear({d_ff}, {D}); yours map "
            + ", ".join(f"{m.in_features} -> {m.out_features}" for m in linears)
        )
        return None, None
    if w1.bias is None or w2.bias is None:
        fb.fail("Eq. 2 has biases b_1 and b_2: keep bias=True (the default) in both layers")
        return None, None
    fb.ok(f"two linear layers {D} -> {d_ff} -> {D}, with biases")
    return w1, w2


# Exercise 2 --------------------------------------------------------------------------
class _MarkedDropout(nn.Module):
    """A dropout with a fixed mask, so that the checker can tell where it was applied."""

    def __init__(self, mask: Tensor):
        super().__init__()
        self.mask, self.calls = mask, 0

    def forward(self, x: Tensor) -> Tensor:
        self.calls += 1
        return x * self.mask


def _residual_mistakes(x: Tensor, f, norm, drop, norm_first: bool) -> Tuple[Tensor, Dict]:
    """The right answer and the classic wrong ones, for one value of ``norm_first``."""
    post = norm(x + drop(f(x)))
    pre = x + drop(f(norm(x)))
    if not norm_first:
        return post, {
            "pre-norm, x + Dropout(Sublayer(LayerNorm(x))), where post-norm was asked: "
            "norm_first=False is the paper's LayerNorm(x + Dropout(Sublayer(x)))": pre,
            "dropout on the residual branch (x) instead of on the sub-layer's output (§5.4)": norm(
                drop(x) + f(x)
            ),
            "dropout on the sum: it belongs on the sub-layer's output, before the add (§5.4)": norm(
                drop(x + f(x))
            ),
            "no residual: the input x is never added back": norm(drop(f(x))),
            "the dropout module is never applied": norm(x + f(x)),
        }
    return pre, {
        "post-norm, LayerNorm(x + Dropout(Sublayer(x))), where pre-norm was asked: "
        "norm_first=True is x + Dropout(Sublayer(LayerNorm(x)))": post,
        "dropout on the residual branch (x) instead of on the sub-layer's output": drop(x)
        + f(norm(x)),
        "dropout on the sum: it belongs on the sub-layer's output, before the add": drop(
            x + f(norm(x))
        ),
        "the residual adds LayerNorm(x); pre-norm adds the un-normalised x": norm(x)
        + drop(f(norm(x))),
        "a LayerNorm after the add as well: pre-norm normalises only the sub-layer's input": norm(
            x + drop(f(norm(x)))
        ),
        "no residual: the input x is never added back": drop(f(norm(x))),
        "the dropout module is never applied": x + f(norm(x)),
    }


@refuses(
    ResidualNorm, rule="to write the connection yourself, not with the library's `ResidualNorm`"
)
@keeps_rng
def check_sublayer_connection(fn: Callable) -> Feedback:
    """Exercise 2: ``fn(x, sublayer, norm, dropout, norm_first)``, post-norm and pre-norm."""
    fb = Feedback("Exercise 2 (residual connection and LayerNorm, §3.1)")
    g = torch.Generator().manual_seed(4)
    B, L, D = 2, 3, 6
    x = torch.randn(B, L, D, generator=g)  # (B, L, D)
    w = torch.randn(D, D, generator=g)
    norm = nn.LayerNorm(D)
    with torch.no_grad():
        norm.weight.copy_(1 + 0.5 * torch.randn(D, generator=g))
        norm.bias.copy_(0.5 * torch.randn(D, generator=g))
    mask = (torch.rand(B, L, D, generator=g) > 0.3).float() / 0.7

    def sublayer(y: Tensor) -> Tensor:
        return torch.tanh(y @ w)  # (B, L, D)

    for norm_first, name in ((False, "post-norm"), (True, "pre-norm")):
        drop = _MarkedDropout(mask)
        got = run_learner_code(fb, fn, x, sublayer, norm, drop, norm_first)
        if got is None:
            if fb.notes and "Identity.forward()" in fb.notes[-1]:
                fb.fail(PITFALL_11)
            return fb
        with torch.no_grad():
            expected, mistakes = _residual_mistakes(
                x, sublayer, norm, _MarkedDropout(mask), norm_first
            )
        if not check_tensor(fb, f"{name} (norm_first={norm_first})", got, expected):
            message = first_match(got, mistakes)
            if message:
                fb.fail(f"looks like: {message}")
        elif drop.calls != 1:
            fb.fail(f"dropout was applied {drop.calls} times; once is right")
    return fb


# Exercise 3 --------------------------------------------------------------------------
def encoder_layer_size(d_model: int, d_ff: int) -> int:
    """Parameters of one EncoderLayer, counted on the module itself."""
    config = TransformerConfig.tiny(d_model=d_model, d_ff=d_ff, h=2)
    with torch.device("meta"):  # shapes only
        layer = EncoderLayer(config)
    return sum(p.numel() for p in layer.parameters())


ENCODER_LAYER_MISTAKES = {
    "no biases anywhere (4 D^2 + 2 D d_ff + 4 D): attention has four bias vectors of D, "
    "the FFN has b_1 (d_ff) and b_2 (D)": lambda D, F_: 4 * D * D + 2 * D * F_ + 4 * D,
    "no feed-forward biases (b_1 has d_ff entries, b_2 has D)": lambda D, F_: 4 * D * D
    + 4 * D
    + 2 * D * F_
    + 4 * D,
    "no biases and no LayerNorms (4 D^2 + 2 D d_ff)": lambda D, F_: 4 * D * D + 2 * D * F_,
    "4 D missing: the two LayerNorms (a gain and a bias of D each), or the four attention "
    "biases (b^Q, b^K, b^V, b^O, D each)": lambda D, F_: 4 * D * D + 4 * D + 2 * D * F_ + F_ + D,
    "one LayerNorm short, or LayerNorms without their bias (2 D missing)": lambda D, F_: 4 * D * D
    + 4 * D
    + 2 * D * F_
    + F_
    + D
    + 2 * D,
    "the output projection W^O (D^2 + D) is missing": lambda D, F_: 3 * D * D
    + 3 * D
    + 2 * D * F_
    + F_
    + D
    + 4 * D,
    "the FFN's weights counted once (D d_ff); W_1 and W_2 have D d_ff each": lambda D, F_: 4 * D * D
    + 4 * D
    + D * F_
    + F_
    + D
    + 4 * D,
}


@refuses(
    EncoderLayer,
    mha_params,
    ffn_params,
    layer_norm_params,
    count_parameters,
    rule="to write a formula, without building the layer or calling the library's counts",
)
@keeps_rng
def check_encoder_layer_params(fn: Callable[[int, int], int]) -> Feedback:
    """Exercise 3: ``fn(d_model, d_ff)`` returns the parameter count of one encoder layer."""
    fb = Feedback("Exercise 3 (parameters of one encoder layer)")
    check_count(
        fb, fn, [(32, 64), (48, 200), (512, 2048)], encoder_layer_size, ENCODER_LAYER_MISTAKES
    )
    return fb


# Exercise 4 (an encoder layer assembled by the learner) has its own module.
from .ex05_encoder_layer import check_encoder_layer  # noqa: E402,F401
