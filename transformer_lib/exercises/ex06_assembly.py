"""Checker for notebook 06's exercise 4: a decoder layer built from the library's blocks
(the whole model's constructor, exercise 5, is checked in :mod:`.ex06_model_init`)."""

from __future__ import annotations

from typing import Callable, Dict, Optional

import torch
from torch import nn

from ..config import TransformerConfig
from ..decoder import DecoderLayer
from ..masks import padding_mask, to_blocked
from . import Feedback, built_a_module, first_match, keeps_rng, run_learner_code

Tensor = torch.Tensor
LAYER_NAMES = "self_attn, cross_attn, feed_forward, self_block, cross_block, ff_block"


# Exercise 4: a decoder layer ----------------------------------------------------------
def _random_weights(module: nn.Module, seed: int) -> None:
    """Weights far from their initial values, so that a misplaced block shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "norm.weight" in name:
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))


def _decoder_variants(r: DecoderLayer, x: Tensor, memory: Tensor, mm: Tensor) -> Dict[str, Tensor]:
    """The typical wrong layers, written with the reference layer's own blocks."""
    sa = lambda y: r.self_attn(y, is_causal=True)[0]  # noqa: E731
    ca = lambda y: r.cross_attn(y, memory, mask=mm)[0]  # noqa: E731
    ff = r.feed_forward
    S, C, F_ = r.self_block, r.cross_block, r.ff_block
    return {
        "the causal mask is missing: each position sees the target's future (pass "
        "is_causal=True, or mask=causal_mask(T), to the self-attention)": F_(
            C(S(x, lambda y: r.self_attn(y)[0]), ca), ff
        ),
        "cross-attention takes its keys and values from the decoder (x) instead of the "
        "encoder's memory: call self.cross_attn(y, memory, ...)": F_(
            C(S(x, sa), lambda y: r.cross_attn(y, is_causal=True)[0]), ff
        ),
        "cross-attention takes its keys and values from the decoder (x), without a mask, "
        "instead of the encoder's memory: call self.cross_attn(y, memory, ...)": F_(
            C(S(x, sa), lambda y: r.cross_attn(y)[0]), ff
        ),
        "cross-attention ignores memory_mask: the padded source positions are attended to": F_(
            C(S(x, sa), lambda y: r.cross_attn(y, memory)[0]), ff
        ),
        "the sub-layers are in the wrong order: cross-attention comes before "
        "self-attention (the order is self-attention, cross-attention, feed-forward)": F_(
            S(C(x, ca), sa), ff
        ),
        "the sub-layers are in the wrong order: cross-attention comes before "
        "self-attention (each ResidualNorm stays with its own sub-layer)": F_(C(S(x, ca), sa), ff),
        "the feed-forward network comes before cross-attention (the order is "
        "self-attention, cross-attention, feed-forward)": C(F_(S(x, sa), ff), ca),
    }


def torch_decoder_layer(layer: DecoderLayer, config: TransformerConfig) -> nn.Module:
    """``nn.TransformerDecoderLayer`` holding ``layer``'s weights, in eval mode."""
    theirs = nn.TransformerDecoderLayer(
        config.d_model,
        config.h,
        config.d_ff,
        dropout=0.0,
        batch_first=True,
        norm_first=config.norm_first,
        layer_norm_eps=config.layer_norm_eps,
    )
    with torch.no_grad():
        theirs.self_attn.load_state_dict(layer.self_attn.to_torch().state_dict())
        theirs.multihead_attn.load_state_dict(layer.cross_attn.to_torch().state_dict())
        for mine, other in (
            (layer.feed_forward.w_1, theirs.linear1),
            (layer.feed_forward.w_2, theirs.linear2),
            (layer.self_block.norm, theirs.norm1),
            (layer.cross_block.norm, theirs.norm2),
            (layer.ff_block.norm, theirs.norm3),
        ):
            other.load_state_dict(mine.state_dict())
    return theirs.eval()


def load_weights(fb: Feedback, module: nn.Module, state: dict, names: str) -> bool:
    """Copy the reference weights into the learner's module; say which names differ."""
    try:
        module.load_state_dict(state)
    except RuntimeError as err:
        detail = " ".join(str(err).split())[:400]
        fb.fail(
            f"the reference weights cannot be copied into your module (use the names "
            f"{names}): {detail}"
        )
        return False
    return True


def _layer_output(fb: Feedback, layer: nn.Module, x, memory, mm) -> Optional[Tensor]:
    got = run_learner_code(fb, layer, x, memory, mm)
    if isinstance(got, tuple) and got:
        got = got[0]  # (output, weights) is fine too
    if got is not None and not isinstance(got, Tensor):
        fb.fail(f"forward should return the (B, T, D) tensor, got {type(got).__name__}")
        return None
    if got is not None and got.shape == memory.shape and got.shape != x.shape:
        fb.fail(
            f"the output has one row per source position ({memory.shape[1]}), not per "
            f"target position ({x.shape[1]}): queries come from the decoder, keys and "
            "values from memory"
        )
        return None
    return got


@keeps_rng
def check_decoder_layer(layer_class: Callable[[TransformerConfig], nn.Module]) -> Feedback:
    """Exercise 4: ``layer_class(config)`` builds a decoder layer whose
    ``forward(x, memory, memory_mask)`` returns (B, T, D) (§3.1, §3.2.3)."""
    fb = Feedback("Exercise 4 (a decoder layer, §3.1)")
    B, T, S = 2, 5, 7
    g = torch.Generator().manual_seed(4)
    src = torch.tensor([[4, 5, 6, 7, 8, 0, 0], [4, 5, 6, 7, 8, 9, 3]])  # (B, S), 0 = pad
    mm = padding_mask(src, 0)  # (B, 1, 1, S)
    for norm_first in (False, True):
        config = TransformerConfig.tiny(P_drop=0.0, norm_first=norm_first)
        x = torch.randn(B, T, config.d_model, generator=g)  # (B, T, D)
        memory = torch.randn(B, S, config.d_model, generator=g)  # (B, S, D)
        layer = run_learner_code(fb, layer_class, config)
        if layer is None or not built_a_module(fb, layer):
            return fb
        if any(isinstance(m, DecoderLayer) for m in layer.modules()):
            fb.fail(
                "this is the library's DecoderLayer: build the layer from "
                "MultiHeadAttention, PositionwiseFeedForward and ResidualNorm"
            )
            return fb
        ref = DecoderLayer(config).eval()
        _random_weights(ref, seed=7)
        if not load_weights(fb, layer, ref.state_dict(), LAYER_NAMES):
            return fb
        layer.eval()
        with torch.no_grad():
            got = _layer_output(fb, layer, x, memory, mm)
            if got is None:
                return fb
            expected = ref(x, memory, memory_mask=mm, is_causal=True)[0]  # (B, T, D)
            torch_out = torch_decoder_layer(ref, config)(
                x,
                memory,
                tgt_is_causal=True,
                tgt_mask=nn.Transformer.generate_square_subsequent_mask(T),
                memory_key_padding_mask=to_blocked(mm)[:, 0, 0, :],
            )
            torch.testing.assert_close(torch_out, expected)  # the references agree
            if got.shape == expected.shape and torch.allclose(got, expected, atol=1e-5):
                continue
            _name_layer_mistake(fb, got, expected, ref, config, x, memory, mm)
            return fb
    fb.ok(
        "equal to transformer_lib's DecoderLayer and to torch.nn.TransformerDecoderLayer "
        "with copied weights, post-norm and pre-norm"
    )
    fb.ok(
        "causal self-attention, cross-attention over the memory with its padding mask, "
        "feed-forward, in that order"
    )
    return fb


def _name_layer_mistake(fb, got, expected, ref, config, x, memory, mm) -> None:
    if got.shape != expected.shape:
        fb.fail(f"the output has shape {tuple(got.shape)}, expected {tuple(expected.shape)}")
        return
    err = (got - expected).abs().max().item()
    fb.fail(
        f"norm_first={config.norm_first}: the output differs from the library's layer "
        f"(max error {err:.3g})"
    )
    other = DecoderLayer(config.replace(norm_first=not config.norm_first)).eval()
    other.load_state_dict(ref.state_dict())
    mistakes = _decoder_variants(ref, x, memory, mm)
    mistakes[
        "ResidualNorm ignores config.norm_first: pass it on, "
        "ResidualNorm(d_model, P_drop, norm_first, layer_norm_eps)"
    ] = other(x, memory, memory_mask=mm, is_causal=True)[0]
    message = first_match(got, mistakes)
    if message:
        fb.fail(f"looks like: {message}")
