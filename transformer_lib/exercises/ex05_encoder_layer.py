"""Checker for notebook 05's exercise 4: an encoder layer assembled by the learner from the
library's MultiHeadAttention and PositionwiseFeedForward, with residual connections,
LayerNorm and dropout (§3.1, §5.4). Compared, given the same weights, with the library's
EncoderLayer and with torch.nn.TransformerEncoderLayer in eval mode, then with the
library's layer in training mode under the same random seed (where the dropout sits)."""

from __future__ import annotations

import math
from typing import Callable, List, Optional, Tuple

import torch
from torch import nn

from ..attention import MultiHeadAttention
from ..encoder import EncoderLayer
from ..feedforward import PositionwiseFeedForward
from ..masks import padding_mask, to_blocked
from . import Feedback, built_a_module, check_tensor, keeps_rng, run_learner_code
from .ex05_layer_mistakes import (
    B,
    D,
    D_FF,
    DROPOUT_RULE,
    H,
    P,
    S,
    dropout_mistakes,
    eval_mistakes,
    reference_layer,
)
from .own_work import refuses

Tensor = torch.Tensor


def _parts(fb: Feedback, module: nn.Module) -> Optional[Tuple[nn.Module, nn.Module, List]]:
    """The learner's attention, feed-forward network and two LayerNorms, or None."""
    found = {
        kind: [m for m in module.modules() if isinstance(m, kind)]
        for kind in (MultiHeadAttention, PositionwiseFeedForward, nn.LayerNorm)
    }
    attns, ffns, norms = found.values()
    if len(attns) != 1 or len(ffns) != 1:
        fb.fail(
            f"build the layer from the library's blocks: one MultiHeadAttention(d_model, "
            f"h) and one PositionwiseFeedForward(d_model, d_ff, dropout); found "
            f"{len(attns)} and {len(ffns)}"
        )
        return None
    if len(norms) != 2:
        extra = (
            " (a pre-norm stack's final LayerNorm belongs to the Encoder, not to each layer)"
            if len(norms) > 2
            else ""
        )
        fb.fail(f"one LayerNorm per sub-layer, two in all (§3.1); found {len(norms)}{extra}")
        return None
    attn, ffn = attns[0], ffns[0]
    sizes = (
        attn.d_model,
        attn.h,
        ffn.w_1.in_features,
        ffn.w_1.out_features,
        *(n.normalized_shape for n in norms),
    )
    if sizes != (D, H, D, D_FF, (D,), (D,)):
        fb.fail(
            f"with d_model={D}, h={H}, d_ff={D_FF} the blocks should be "
            f"MultiHeadAttention({D}, {H}), PositionwiseFeedForward({D}, {D_FF}, dropout) "
            f"and nn.LayerNorm({D}); yours have sizes {sizes}"
        )
        return None
    fb.ok(f"self-attention, feed-forward network and two LayerNorms of width {D}")
    return attn, ffn, norms


def _randomise(attn: nn.Module, ffn: nn.Module, norms: List[nn.LayerNorm]) -> None:
    """Seeded weights in the learner's blocks (every LayerNorm its own gain and bias)."""
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for block in (attn, ffn):
            for p in block.parameters():
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[-1]))
        for norm in norms:
            norm.weight.copy_(1 + 0.3 * torch.randn(D, generator=g))
            norm.bias.copy_(0.3 * torch.randn(D, generator=g))


def _inputs() -> Tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(9)
    x = torch.randn(B, S, D, generator=g)  # (B, S, D)
    src = torch.tensor([[5, 6, 7, 8, 0, 0], [1, 2, 3, 4, 5, 6]])  # (B, S), 0 = pad
    return x, padding_mask(src, 0)  # (B, 1, 1, S)


def _output(fb: Feedback, module: nn.Module, x: Tensor, mask: Optional[Tensor]):
    got = run_learner_code(fb, module, x, mask=mask)
    if isinstance(got, tuple) and got and isinstance(got[0], Tensor):
        got = got[0]  # (output, weights)
    return got


def _name_mistake(fb: Feedback, got: Tensor, candidates: dict) -> bool:
    for message, wrong in candidates.items():
        if got.shape == wrong.shape and torch.allclose(got.detach(), wrong, atol=1e-5):
            fb.fail(f"looks like: {message}")
            return True
    return False


def _check_eval(fb: Feedback, module: nn.Module, refs: List[EncoderLayer]):
    """Eval mode (dropout off): equal to the library's layer; returns the matching
    reference (LayerNorms in either registration order) or None."""
    x, pad = _inputs()
    for label, mask in (("output, mask=None", None), ("output with a padding mask", pad)):
        got = _output(fb, module, x, mask)
        if got is None:
            return None
        with torch.no_grad():
            matching = [
                r
                for r in refs
                if isinstance(got, Tensor)
                and got.shape == (B, S, D)
                and torch.allclose(got.detach(), r(x, mask)[0], atol=1e-5)
            ]
            expected = refs[0](x, mask)[0]
        if matching:
            refs[:] = matching[:1]
            fb.ok(f"{label}: shape {(B, S, D)} and values match EncoderLayer (eval mode)")
            continue
        check_tensor(fb, f"{label} (eval mode)", got, expected)
        if isinstance(got, Tensor) and got.shape == (B, S, D):
            again = _output(fb, module, x, mask)
            if isinstance(again, Tensor) and not torch.allclose(got, again):
                fb.fail(
                    "in eval mode two calls differ: dropout is still on. F.dropout(x, p) "
                    "defaults to training=True; use nn.Dropout modules"
                )
            elif not _name_mistake(fb, got, eval_mistakes(refs[0], x, mask)):
                _name_mistake(fb, got, eval_mistakes(refs[-1], x, mask))
        return None
    return refs[0]


def _check_torch(fb: Feedback, module: nn.Module, ref: EncoderLayer) -> None:
    """torch.nn.TransformerEncoderLayer with the same weights; its padding mask is (B, S),
    True = blocked."""
    theirs = nn.TransformerEncoderLayer(D, H, D_FF, dropout=P, batch_first=True).eval()
    with torch.no_grad():
        theirs.self_attn.load_state_dict(ref.self_attn.to_torch().state_dict())
        for mine, other in (
            (ref.feed_forward.w_1, theirs.linear1),
            (ref.feed_forward.w_2, theirs.linear2),
            (ref.attn_block.norm, theirs.norm1),
            (ref.ff_block.norm, theirs.norm2),
        ):
            other.load_state_dict(mine.state_dict())
    x, pad = _inputs()
    got = _output(fb, module, x, pad)
    check_tensor(
        fb,
        "nn.TransformerEncoderLayer, same weights, to_blocked(mask)",
        got,
        theirs(x, src_key_padding_mask=to_blocked(pad)[:, 0, 0, :]).detach(),
    )


def _check_dropout(
    fb: Feedback, module: nn.Module, ref: EncoderLayer, ffn: nn.Module, attn: nn.Module
) -> None:
    """Training mode under a fixed seed: the same dropout draws as the library's layer."""
    x, pad = _inputs()
    module.train()
    ref.train()
    torch.manual_seed(11)
    got = _output(fb, module, x, pad)
    if got is None:
        return
    torch.manual_seed(11)
    with torch.no_grad():
        expected = ref(x, pad)[0]
    if (
        isinstance(got, Tensor)
        and got.shape == expected.shape
        and torch.allclose(got.detach(), expected, atol=1e-5)
    ):
        fb.ok(
            "training mode: the same dropout as EncoderLayer, on each sub-layer's output "
            "before the add and inside the feed-forward network"
        )
        return
    fb.fail(
        "in training mode your layer differs from EncoderLayer under the same random "
        "seed: the dropout is not where the library puts it"
    )
    if not isinstance(got, Tensor) or got.shape != expected.shape:
        return
    torch.manual_seed(12)
    if torch.equal(got, _output(fb, module, x, pad)):
        fb.fail("no dropout at all in training mode: " + DROPOUT_RULE)
    elif ffn.dropout.p != P:
        fb.fail(
            f"the feed-forward network's dropout is {ffn.dropout.p}, the layer's is {P}: "
            "build it as PositionwiseFeedForward(d_model, d_ff, dropout)"
        )
    elif attn.dropout:
        fb.fail(
            "dropout on the attention weights as well: build MultiHeadAttention(d_model, "
            "h) without dropout (the paper drops sub-layer outputs, not weights)"
        )
    else:
        _name_mistake(fb, got, dropout_mistakes(ref, x, pad))


@refuses(
    EncoderLayer,
    rule="to assemble the layer from its blocks, not with the library's `EncoderLayer`",
)
@keeps_rng
def check_encoder_layer(layer_class: Callable[..., nn.Module]) -> Feedback:
    """Exercise 4: ``layer_class(d_model, h, d_ff, dropout)`` builds the paper's post-norm
    encoder layer from the library's blocks; ``layer(x, mask=None)`` returns (B, S, D)."""
    fb = Feedback("Exercise 4 (an encoder layer from the library's blocks, §3.1)")
    torch.manual_seed(0)
    module = run_learner_code(fb, layer_class, D, H, D_FF, P)
    if module is None or not built_a_module(fb, module):
        return fb
    parts = _parts(fb, module)
    if parts is None:
        return fb
    attn, ffn, norms = parts
    _randomise(attn, ffn, norms)
    refs = [reference_layer(attn, ffn, *norms), reference_layer(attn, ffn, *norms[::-1])]
    module.eval()
    ref = _check_eval(fb, module, refs)
    if ref is None:
        return fb
    _check_torch(fb, module, ref)
    if fb.passed:
        _check_dropout(fb, module, ref, ffn, attn)
    return fb
