"""Checkers for notebook 05's exercises (the encoder): RMSNorm in place of LayerNorm, a
pre-norm encoder layer written out (§3.1, §5.4), and the parameter count of an encoder layer
whose queries and keys have d_k != d_model / h (Table 3, row B)."""

from __future__ import annotations

import math
from typing import Callable, Dict, Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..attention import MultiHeadAttention
from ..config import TransformerConfig
from ..encoder import Encoder, EncoderLayer
from ..feedforward import PositionwiseFeedForward
from ..masks import padding_mask, to_blocked
from ..params import count_parameters, ffn_params, formula_counts, layer_norm_params, mha_params
from ..residual import ResidualNorm
from . import (
    Feedback,
    built_a_module,
    check_count,
    check_tensor,
    first_match,
    keeps_rng,
    run_learner_code,
)
from .own_work import guard, refuses

Tensor = torch.Tensor
D, H, D_FF, P, B, S = 16, 4, 32, 0.25, 2, 6
IDENTITY_PITFALL = (
    "nn.Identity was called with two arguments, as if it were an 'add' layer (notebook 05's "
    "pitfall): nn.Identity returns its one input unchanged; the residual is a plain sum, x + ..."
)


def _identity_pitfall(fb: Feedback) -> None:
    if fb.notes and "Identity.forward()" in fb.notes[-1]:
        fb.fail(IDENTITY_PITFALL)


# ----------------------------------------------------------------------------- RMSNorm
def rms_norm_reference(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """x / sqrt(mean(x^2) + eps) * g over the last dimension (Zhang and Sennrich, 2019)."""
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _rms_mistakes(x: Tensor, g: Tensor, eps: float) -> Dict[str, Tensor]:
    ms = x.pow(2).mean(-1, keepdim=True)
    centred = x - x.mean(-1, keepdim=True)
    var = centred.pow(2).mean(-1, keepdim=True)
    return {
        "the mean is subtracted first: that is LayerNorm (without its bias); RMSNorm divides "
        "x itself by its root mean square, sqrt(mean(x^2))": centred / torch.sqrt(var + eps) * g,
        "divided by the standard deviation: the root mean square is sqrt(mean(x^2)), with "
        "no mean taken out": x / torch.sqrt(var + eps) * g,
        "eps added outside the square root: sqrt(mean(x^2) + eps)": x / (ms.sqrt() + eps) * g,
        "eps is ignored: use the eps given to the constructor, inside the square root": x
        / ms.sqrt()
        * g,
        "the sum of squares where the mean was meant: mean(x^2) over the d_model features": x
        / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + eps)
        * g,
        "the mean over the positions (dim=1): each position is normalised over its own "
        "features, the last dimension": x / torch.sqrt(x.pow(2).mean(1, keepdim=True) + eps) * g,
        "the gain is never applied: multiply by self.weight": x / torch.sqrt(ms + eps),
        "the gain divides instead of multiplying": x / torch.sqrt(ms + eps) / g,
    }


def _rms_input() -> Tensor:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(B, S, D, generator=g) + 1.5  # (B, S, D): means away from 0
    x[0, 1] *= 50.0  # a large position
    x[1, 2] *= 0.02  # a small one: eps matters there
    return x


@refuses(nn.RMSNorm, F.rms_norm, rule="to write RMSNorm yourself, not with PyTorch's")
@keeps_rng
def check_rms_norm(norm_class: Callable[..., nn.Module]) -> Feedback:
    """``norm_class(d_model, eps=1e-6)`` builds a gain ``weight`` of d_model ones and no bias;
    ``norm(x)`` returns x / sqrt(mean(x^2, last dim) + eps) * weight, shape unchanged."""
    fb = Feedback("Exercise 1 (RMSNorm)")
    eps = 0.01
    norm = run_learner_code(fb, norm_class, D, eps=eps)
    if norm is None or not built_a_module(fb, norm):
        return fb
    weight = getattr(norm, "weight", None)
    if not isinstance(weight, nn.Parameter) or tuple(weight.shape) != (D,):
        fb.fail(
            f"no gain: store nn.Parameter(torch.ones(d_model)) as self.weight (shape ({D},)), "
            f"got {type(weight).__name__}"
            + (f" of shape {tuple(weight.shape)}" if isinstance(weight, Tensor) else "")
        )
        return fb
    extra = [n for n, p in norm.named_parameters() if p is not weight]
    if extra:
        fb.fail(
            f"RMSNorm has one parameter, the gain; yours also has {', '.join(extra)}: no bias "
            "(beta), RMSNorm neither centres nor shifts"
        )
        return fb
    if not torch.equal(weight.detach(), torch.ones(D, dtype=weight.dtype)):
        fb.fail("the gain should start at ones, as LayerNorm's gamma does")
        return fb
    fb.ok(f"one learned gain `weight` of {D} ones, no bias")
    g = torch.Generator().manual_seed(4)
    with torch.no_grad():
        weight.copy_(1 + 0.3 * torch.randn(D, generator=g))
    gain = weight.detach().float().clone()
    x = _rms_input()
    got = run_learner_code(fb, norm, x)
    if got is None:
        return fb
    got = got.detach() if isinstance(got, Tensor) else got
    expected = rms_norm_reference(x, gain, eps)
    if not check_tensor(fb, "RMSNorm(x)", got, expected):
        message = first_match(got, _rms_mistakes(x, gain, eps))
        if message:
            fb.fail(f"looks like: {message}")
        return fb
    theirs = nn.RMSNorm(D, eps=eps)
    with torch.no_grad():
        theirs.weight.copy_(gain)
        check_tensor(fb, "against torch.nn.RMSNorm with the same gain", got, theirs(x))
    return fb


# ------------------------------------------------------------- a pre-norm encoder layer
PRE_NORM_NAMES = "self_attn, feed_forward, norm_1, norm_2 and dropout"
DROPOUT_RULE = (
    "§5.4: dropout on each sub-layer's output, before it is added to the input: "
    "x + Dropout(Sublayer(LayerNorm(x)))"
)


def pre_norm_reference() -> EncoderLayer:
    """The library's pre-norm layer with seeded weights far from their starting values."""
    torch.manual_seed(0)
    ref = EncoderLayer(TransformerConfig.tiny(d_model=D, h=H, d_ff=D_FF, P_drop=P,
                                              norm_first=True))
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name, p in ref.named_parameters():
            if "norm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0)
                        + 0.3 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[-1]))
    return ref.eval()


def written_out(ref: EncoderLayer, x: Tensor, mask: Optional[Tensor], form=("pre", "pre"),
                residual=(True, True), swap: bool = False, one_norm: bool = False,
                mask_mode: str = "right") -> Tensor:
    """The layer written out with the reference's blocks, with one thing changed (a typical
    mistake). ``form``: where the norm and the dropout sit in each sub-layer."""
    keep = {"right": mask, "inverted": None if mask is None else ~mask, "ignored": None}[mask_mode]
    n_1, n_2 = ref.attn_block.norm, ref.ff_block.norm
    blocks = [(lambda y: ref.self_attn(y, mask=keep)[0], n_1),
              (ref.feed_forward, n_1 if one_norm else n_2)]
    if swap:
        blocks = [(blocks[1][0], n_1), (blocks[0][0], n_2)]
    drop = (lambda t: F.dropout(t, P, training=True)) if ref.training else (lambda t: t)
    for (f, norm), where, res in zip(blocks, form, residual):
        r = x if res else 0.0
        x = {
            "pre": lambda: r + drop(f(norm(x))),
            "post": lambda: norm(r + drop(f(x))),
            "pre and post": lambda: norm(r + drop(f(norm(x)))),
            "normed residual": lambda: norm(x) + drop(f(norm(x))),
            "no dropout": lambda: r + f(norm(x)),
            "dropout on the sum": lambda: drop(r + f(norm(x))),
            "dropout on the residual": lambda: drop(x) + f(norm(x)),
        }[where]()  # (B, S, D)
    return x


def _eval_mistakes(ref: EncoderLayer, x: Tensor, mask: Optional[Tensor]) -> Dict[str, Tensor]:
    cases = {
        "post-norm, LayerNorm(x + Sublayer(x)) (the paper's, and the library's default): "
        "pre-norm normalises the sub-layer's input, x + Sublayer(LayerNorm(x))": dict(
            form=("post", "post")),
        "a LayerNorm after the add as well: pre-norm normalises only the sub-layer's input "
        "and leaves the sum alone": dict(form=("pre and post",) * 2),
        "the residual adds LayerNorm(x); pre-norm adds the un-normalised x back: "
        "x + Sublayer(LayerNorm(x))": dict(form=("normed residual",) * 2),
        "no residual connection around the self-attention": dict(residual=(False, True)),
        "no residual connection around the feed-forward network": dict(residual=(True, False)),
        "no residual connections: x + Sublayer(LayerNorm(x)), not Sublayer(LayerNorm(x))": dict(
            residual=(False, False)),
        "the feed-forward network comes before the self-attention; §3.1: attention first":
            dict(swap=True),
        "norm_1 serves both sub-layers: the feed-forward network has its own, norm_2": dict(
            one_norm=True),
    }
    if mask is not None:
        cases["mask convention inverted: True means 'may attend', pass the mask unchanged"] = (
            dict(mask_mode="inverted"))
        cases["the mask is not passed on: self_attn(y, mask=mask)"] = dict(mask_mode="ignored")
    with torch.no_grad():
        return {m: written_out(ref, x, mask, **kw) for m, kw in cases.items()}


def _layer_inputs():
    g = torch.Generator().manual_seed(9)
    x = torch.randn(B, S, D, generator=g)  # (B, S, D)
    src = torch.tensor([[5, 6, 7, 8, 0, 0], [1, 2, 3, 4, 5, 6]])  # (B, S), 0 = pad
    return x, padding_mask(src, 0)  # (B, 1, 1, S)


def _load_blocks(fb: Feedback, module: nn.Module, ref: EncoderLayer) -> bool:
    """Check the learner's five named blocks and copy the reference's weights into them."""
    parts = {n: getattr(module, n, None) for n in ("self_attn", "feed_forward", "norm_1",
                                                    "norm_2", "dropout")}
    kinds = {"self_attn": MultiHeadAttention, "feed_forward": PositionwiseFeedForward,
             "norm_1": nn.LayerNorm, "norm_2": nn.LayerNorm, "dropout": nn.Dropout}
    wrong = [n for n, kind in kinds.items() if not isinstance(parts[n], kind)]
    if wrong:
        fb.fail(f"name the blocks {PRE_NORM_NAMES} (the check copies its weights into them); "
                f"missing or of another kind: {', '.join(wrong)}")
        return False
    if parts["norm_1"] is parts["norm_2"]:
        fb.fail("norm_1 and norm_2 are one module: each sub-layer has its own LayerNorm")
        return False
    attn, ffn = parts["self_attn"], parts["feed_forward"]
    sizes = (attn.d_model, attn.h, attn.d_k, ffn.w_1.in_features, ffn.w_1.out_features,
             parts["norm_1"].normalized_shape, parts["norm_2"].normalized_shape)
    if sizes != (D, H, D // H, D, D_FF, (D,), (D,)):
        fb.fail(f"with d_model={D}, h={H}, d_ff={D_FF}: MultiHeadAttention({D}, {H}), "
                f"PositionwiseFeedForward({D}, {D_FF}, dropout), nn.LayerNorm({D}); yours "
                f"have sizes {sizes}")
        return False
    norms = [m for m in module.modules() if isinstance(m, nn.LayerNorm)]
    if len(norms) > 2:
        fb.fail(f"{len(norms)} LayerNorms: a pre-norm stack's final LayerNorm belongs to the "
                "stack (Encoder.norm), not to each layer")
        return False
    try:
        attn.load_state_dict(ref.self_attn.state_dict())
        ffn.load_state_dict(ref.feed_forward.state_dict())
        parts["norm_1"].load_state_dict(ref.attn_block.norm.state_dict())
        parts["norm_2"].load_state_dict(ref.ff_block.norm.state_dict())
    except Exception as err:  # the learner's blocks decide what loading does
        fb.fail(f"the reference weights do not fit your blocks: {str(err).splitlines()[0]}")
        return False
    fb.ok(f"self_attn, feed_forward and two LayerNorms of width {D}")
    return True


def _output(fb: Feedback, module: nn.Module, x: Tensor, mask: Optional[Tensor]):
    got = run_learner_code(fb, module, x, mask=mask)
    if got is None:
        _identity_pitfall(fb)
    if isinstance(got, tuple) and got and isinstance(got[0], Tensor):
        got = got[0]  # (output, weights)
    return got.detach() if isinstance(got, Tensor) else got


def _check_training(fb: Feedback, module: nn.Module, ref: EncoderLayer) -> None:
    """Training mode under one seed: the dropout draws of the library's layer."""
    x, pad = _layer_inputs()
    module.train(), ref.train()
    torch.manual_seed(11)
    got = _output(fb, module, x, pad)
    if got is None:
        return
    torch.manual_seed(11)
    with torch.no_grad():
        expected = ref(x, pad)[0]
    if isinstance(got, Tensor) and got.shape == expected.shape and torch.allclose(
            got.to(expected.dtype), expected, atol=1e-5):
        fb.ok("training mode: the dropout of the library's layer, on each sub-layer's output "
              "before the add")
        return
    fb.fail("in training mode your layer differs from the library's under the same seed: the "
            "dropout is not where §5.4 puts it")
    if not isinstance(got, Tensor) or got.shape != expected.shape:
        return
    if module.self_attn.dropout:
        fb.fail("dropout on the attention weights as well: build MultiHeadAttention(d_model, h) "
                "without dropout (the paper drops sub-layer outputs)")
        return
    places = {
        "no dropout on the sub-layers' outputs; " + DROPOUT_RULE: ("no dropout",) * 2,
        "dropout on the sum; " + DROPOUT_RULE: ("dropout on the sum",) * 2,
        "dropout on the residual x; " + DROPOUT_RULE: ("dropout on the residual",) * 2,
        "dropout after the self-attention only: the feed-forward's output needs it too": (
            "pre", "no dropout"),
        "dropout after the feed-forward network only: the attention's output needs it too": (
            "no dropout", "pre"),
    }
    found = {}
    with torch.no_grad():
        for message, form in places.items():
            torch.manual_seed(11)
            found[message] = written_out(ref, x, pad, form=form)
    message = first_match(got, found)
    if message:
        fb.fail(f"looks like: {message}")


@refuses(ResidualNorm, EncoderLayer, Encoder,
         rule="to write the layer yourself, without the library's `ResidualNorm` or `EncoderLayer`")
@keeps_rng
def check_pre_norm_layer(layer_class: Callable[..., nn.Module]) -> Feedback:
    """``layer_class(d_model, h, d_ff, dropout)`` holds ``self_attn``
    (MultiHeadAttention(d_model, h)), ``feed_forward`` (PositionwiseFeedForward(d_model, d_ff,
    dropout)), ``norm_1``, ``norm_2`` (nn.LayerNorm(d_model)) and ``dropout``;
    ``layer(x, mask=None)`` returns the pre-norm layer's (B, S, D) output."""
    fb = Feedback("Exercise 2 (a pre-norm encoder layer, §3.1 and §5.4)")
    torch.manual_seed(0)
    module = run_learner_code(fb, layer_class, D, H, D_FF, P)
    if module is None or not built_a_module(fb, module):
        return fb
    ref = pre_norm_reference()
    if not _load_blocks(fb, module, ref):
        return fb
    module.eval()
    x, pad = _layer_inputs()
    for label, mask in (("mask=None", None), ("a padding mask", pad)):
        got = _output(fb, module, x, mask)
        if got is None:
            return fb
        with torch.no_grad():
            expected = ref(x, mask)[0]
        if not check_tensor(fb, f"output with {label} (eval mode)", got, expected):
            if isinstance(got, Tensor) and got.shape == expected.shape:
                message = first_match(got, _eval_mistakes(ref, x, mask))
                if message:
                    fb.fail(f"looks like: {message}")
            return fb
    theirs = nn.TransformerEncoderLayer(D, H, D_FF, dropout=0.0, batch_first=True,
                                        norm_first=True)
    with torch.no_grad():
        theirs.self_attn.load_state_dict(ref.self_attn.to_torch().state_dict())
        for mine, other in ((ref.feed_forward.w_1, theirs.linear1),
                            (ref.feed_forward.w_2, theirs.linear2),
                            (ref.attn_block.norm, theirs.norm1), (ref.ff_block.norm, theirs.norm2)):
            other.load_state_dict(mine.state_dict())
        expected = theirs.eval()(x, src_key_padding_mask=to_blocked(pad)[:, 0, 0, :])
    check_tensor(fb, "against nn.TransformerEncoderLayer(norm_first=True), same weights",
                 _output(fb, module, x, pad), expected)
    if fb.passed:
        _check_training(fb, module, ref)
    return fb


class PreNormLayer(nn.Module):
    """A right answer: the pre-norm encoder layer written out."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm_1, self.norm_2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Optional[Tensor] = None) -> Tensor:
        x = x + self.dropout(self.self_attn(self.norm_1(x), mask=mask)[0])    # (B, S, D)
        return x + self.dropout(self.feed_forward(self.norm_2(x)))            # (B, S, D)


class RMSNorm(nn.Module):
    """A right answer for exercise 1."""

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(d_model)), eps

    def forward(self, x: Tensor) -> Tensor:
        return rms_norm_reference(x, self.weight, self.eps)


# ------------------------------------------------------ parameters with d_k != d_model / h
def encoder_layer_size(d_model: int, d_ff: int, h: int, d_k: int) -> int:
    """Parameters of one EncoderLayer with queries and keys of d_k per head, counted."""
    config = TransformerConfig.tiny(d_model=d_model, d_ff=d_ff, h=h, d_k=d_k)
    with torch.device("meta"):  # shapes only
        layer = EncoderLayer(config)
    return sum(p.numel() for p in layer.parameters())


def _rest(D: int, F_: int) -> int:
    """W^V, W^O, the FFN and two LayerNorms: the part that d_k does not change."""
    return 2 * (D * D + D) + 2 * D * F_ + F_ + D + 4 * D


def layer_params_reference(D: int, F_: int, h: int, k: int) -> int:
    return 2 * (h * k * D + h * k) + _rest(D, F_)


LAYER_PARAM_MISTAKES = {
    "d_k is ignored: with d_k = d_model / h you get 4 D^2 + 4 D for the attention, but row (B) "
    "changes W^Q and W^K to (h d_k) x D": lambda D, F_, h, k: 2 * (D * D + D) + _rest(D, F_),
    "the values are d_k wide too: in row (B) only queries and keys change, d_v = d_model / h "
    "stays (W^V and W^O keep D x D)": lambda D, F_, h, k: 3 * (h * k * D + h * k)
    + (h * k * D + D) + 2 * D * F_ + F_ + D + 4 * D,
    "d_k is per head: the queries and keys of all h heads are h * d_k wide": lambda D, F_, h, k:
    2 * (k * D + k) + _rest(D, F_),
    "the biases of W^Q and W^K are missing (h d_k each)": lambda D, F_, h, k: 2 * h * k * D
    + _rest(D, F_),
    "no attention biases (W^Q and W^K have h d_k each, W^V and W^O D each)": lambda D, F_, h, k:
    2 * h * k * D + 2 * D * D + 2 * D * F_ + F_ + D + 4 * D,
    "the two LayerNorms (a gain and a bias of D each) are missing": lambda D, F_, h, k:
    layer_params_reference(D, F_, h, k) - 4 * D,
    "the feed-forward biases (d_ff + D) are missing": lambda D, F_, h, k:
    layer_params_reference(D, F_, h, k) - F_ - D,
}


@refuses(mha_params, ffn_params, layer_norm_params, count_parameters, formula_counts,
         EncoderLayer, MultiHeadAttention,
         rule="to write a formula, without building a layer or calling the library's counts")
@keeps_rng
def check_layer_params(fn: Callable[[int, int, int, int], int]) -> Feedback:
    """``fn(d_model, d_ff, h, d_k)`` -> parameters of one encoder layer whose queries and keys
    have d_k per head (values d_model / h), a Python int."""
    fb = Feedback("Exercise 3 (parameters of a layer with d_k != d_model / h, Table 3 row B)")
    cases = [(512, 2048, 8, 16), (512, 2048, 8, 32), (512, 2048, 8, 64), (48, 200, 4, 20)]
    check_count(fb, fn, cases, encoder_layer_size, LAYER_PARAM_MISTAKES)
    if fb.passed:
        base = sum(formula_counts(TransformerConfig.base()).values())
        for k, paper, bleu in ((16, 58, 25.1), (32, 60, 25.4)):
            # 18 attention layers in the base model (6 encoder, 6 x 2 decoder), all changed
            size = [encoder_layer_size(512, 2048, 8, d_k) for d_k in (k, 64)]
            delta = 18 * (size[0] - size[1])
            fb.ok(f"row (B), d_k = {k}: {base / 1e6:.1f}M - {-delta / 1e6:.1f}M = "
                  f"{(base + delta) / 1e6:.1f}M for the base model (Table 3: 65M - "
                  f"{65 - paper}M = {paper}M, {bleu} BLEU against the base's 25.8)")
    return fb


CHECKS = {
    "rms_norm": (check_rms_norm, lambda: RMSNorm),
    "pre_norm_layer": (check_pre_norm_layer, lambda: PreNormLayer),
    "layer_params": (check_layer_params, lambda: layer_params_reference),
}


guard(globals())  # an answer that is, or calls, a right answer above is refused
