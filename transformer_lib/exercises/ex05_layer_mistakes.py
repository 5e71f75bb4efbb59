"""The wrong encoder layers that notebook 05's exercise 4 checker (:mod:`.ex05_encoder_layer`)
compares a learner's layer with: the layer written out with one typical mistake (pre-norm,
a missing residual, the sub-layers swapped, one shared LayerNorm, the mask inverted or
dropped, dropout in the wrong place; §3.1, §5.4), each named by the message to show."""

from __future__ import annotations

from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..config import TransformerConfig
from ..encoder import EncoderLayer

Tensor = torch.Tensor
D, H, D_FF, P, B, S = 16, 4, 32, 0.25, 2, 6
DROPOUT_RULE = (
    "§5.4: dropout on each sub-layer's output, before it is added to the input and "
    "normalised: LayerNorm(x + Dropout(Sublayer(x)))"
)


def reference_layer(
    attn: nn.Module, ffn: nn.Module, norm_1: nn.LayerNorm, norm_2: nn.LayerNorm
) -> EncoderLayer:
    """A library EncoderLayer with the learner's weights, in eval mode."""
    ref = EncoderLayer(TransformerConfig.tiny(d_model=D, h=H, d_ff=D_FF, P_drop=P))
    ref.self_attn.load_state_dict(attn.state_dict())
    ref.self_attn.fused = attn.fused  # the same attention kernel, the same draws
    ref.feed_forward.load_state_dict(ffn.state_dict())
    ref.attn_block.norm.load_state_dict(norm_1.state_dict())
    ref.ff_block.norm.load_state_dict(norm_2.state_dict())
    return ref.eval()


def sublayer(
    x: Tensor, f: Callable, norm: nn.Module, drop: Callable, place: str, residual: bool
) -> Tensor:
    """One sub-layer with its residual connection, LayerNorm and dropout at ``place``."""
    r = x if residual else 0.0
    return {
        "output": lambda: norm(r + drop(f(x))),
        "none": lambda: norm(r + f(x)),
        "sum": lambda: norm(drop(r + f(x))),
        "residual": lambda: norm(drop(x) + f(x)),
        "after norm": lambda: drop(norm(r + f(x))),
        "pre-norm": lambda: r + drop(f(norm(x))),
    }[place]()


def written_out_layer(
    ref: EncoderLayer,
    x: Tensor,
    mask: Optional[Tensor],
    place=("output", "output"),
    residual=(True, True),
    swap: bool = False,
    one_norm: bool = False,
    mask_mode: str = "right",
) -> Tensor:
    """The encoder layer written out, with one thing changed (a typical mistake)."""
    keep = {"right": mask, "inverted": None if mask is None else ~mask, "ignored": None}[mask_mode]
    norm_2 = ref.attn_block.norm if one_norm else ref.ff_block.norm
    blocks = [
        (lambda y: ref.self_attn(y, mask=keep)[0], ref.attn_block.norm),
        (ref.feed_forward, norm_2),
    ]
    if swap:
        blocks = [(blocks[1][0], blocks[0][1]), (blocks[0][0], blocks[1][1])]
    drop = (lambda t: F.dropout(t, P, training=True)) if ref.training else (lambda t: t)
    for (f, norm), where, res in zip(blocks, place, residual):
        x = sublayer(x, f, norm, drop, where, res)  # (B, S, D)
    return x


def eval_mistakes(ref: EncoderLayer, x: Tensor, mask: Optional[Tensor]) -> dict:
    with torch.no_grad():
        found = {
            "pre-norm, x + Sublayer(LayerNorm(x)), where the paper's post-norm "
            "LayerNorm(x + Sublayer(x)) was asked": written_out_layer(
                ref, x, mask, place=("pre-norm",) * 2
            ),
            "no residual connection around the self-attention: add its input back before "
            "the LayerNorm": written_out_layer(ref, x, mask, residual=(False, True)),
            "no residual connection around the feed-forward network": written_out_layer(
                ref, x, mask, residual=(True, False)
            ),
            "no residual connections: LayerNorm(x + Sublayer(x)), not LayerNorm(Sublayer(x))": written_out_layer(
                ref, x, mask, residual=(False, False)
            ),
            "the feed-forward network comes before the self-attention; §3.1: attention first": written_out_layer(
                ref, x, mask, swap=True
            ),
            "the same LayerNorm for both sub-layers: each has its own (its own gain and bias)": written_out_layer(
                ref, x, mask, one_norm=True
            ),
        }
        if mask is not None:
            found["mask convention inverted: True means 'may attend', pass the mask unchanged"] = (
                written_out_layer(ref, x, mask, mask_mode="inverted")
            )
            found["the mask is not passed to the self-attention: self_attn(x, mask=mask)"] = (
                written_out_layer(ref, x, mask, mask_mode="ignored")
            )
    return found


def dropout_mistakes(ref: EncoderLayer, x: Tensor, mask: Tensor) -> dict:
    """Dropout in the wrong places, each computed under the same seed as the learner's run."""
    places = {
        "no dropout on the sub-layers' outputs: " + DROPOUT_RULE: ("none", "none"),
        "dropout on the sum x + Sublayer(x); " + DROPOUT_RULE: ("sum", "sum"),
        "dropout on the residual x instead of the sub-layer's output; " + DROPOUT_RULE: (
            "residual",
            "residual",
        ),
        "dropout after the LayerNorm; " + DROPOUT_RULE: ("after norm", "after norm"),
        "dropout after the self-attention only: the feed-forward's output needs it too": (
            "output",
            "none",
        ),
        "dropout after the feed-forward network only: the attention's output needs it too": (
            "none",
            "output",
        ),
    }
    found = {}
    with torch.no_grad():
        for message, place in places.items():
            torch.manual_seed(11)
            found[message] = written_out_layer(ref, x, mask, place=place)
    return found
