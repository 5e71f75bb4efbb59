"""Checkers for notebook 06's exercises (the decoder and the whole model): a decoder layer
built from the library's blocks (§3.1), the whole model's forward as a module of the learner's
own (§3, §3.4), and the causal mask of T new positions after ``past`` decoded ones (§3.2.3)."""

from __future__ import annotations

from typing import Callable, Dict, Optional

import torch
from torch import nn

from ..attention import MultiHeadAttention
from ..config import TransformerConfig
from ..decoder import Decoder, DecoderLayer
from ..embedding import TokenEmbedding
from ..encoder import Encoder
from ..feedforward import PositionwiseFeedForward
from ..masks import causal_mask, decoder_mask, padding_mask, to_blocked
from ..model import Transformer
from ..positional import PositionalEncoding
from ..residual import ResidualNorm
from . import Feedback, built_a_module, check_tensor, first_match, keeps_rng, run_learner_code
from .own_work import guard, refuses

Tensor = torch.Tensor
LAYER_NAMES = "self_attn, cross_attn, feed_forward, self_block, cross_block and ff_block"
MODEL_NAMES = ("embed", "positions", "encoder", "decoder", "generator")
UPSIDE_DOWN = (
    "the causal mask is upside down (torch.triu for torch.tril): each position sees the "
    "future and is blind to the past (notebook 06's pitfall)"
)


def _random_weights(module: nn.Module, seed: int) -> None:
    """Weights far from their initial values, so that a misplaced block shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "norm.weight" in name:
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))


def _load(fb: Feedback, module: nn.Module, state: dict, names: str) -> bool:
    try:
        module.load_state_dict(state)
    except Exception as err:  # the learner's module decides what loading does
        detail = " ".join(str(err).split())[:300]
        fb.fail(f"the reference weights do not fit your module (name its blocks {names}): "
                f"{detail}")
        return False
    return True


def _first_tensor(fb: Feedback, got) -> Optional[Tensor]:
    if isinstance(got, tuple) and got and isinstance(got[0], Tensor):
        got = got[0]  # (output, weights) is fine too
    if got is not None and not isinstance(got, Tensor):
        fb.fail(f"forward should return a tensor, got {type(got).__name__}")
        return None
    return None if got is None else got.detach()


# ---------------------------------------------------------------- Exercise 1: a decoder layer
def _layer_variants(r: DecoderLayer, x: Tensor, memory: Tensor, tm: Tensor,
                    mm: Tensor) -> Dict[str, Tensor]:
    """The typical wrong layers, written with the reference layer's own blocks."""
    sa = lambda y: r.self_attn(y, mask=tm)[0]  # noqa: E731
    ca = lambda y: r.cross_attn(y, memory, mask=mm)[0]  # noqa: E731
    ff = r.feed_forward
    S, C, F_ = r.self_block, r.cross_block, r.ff_block
    return {
        "the target mask is not passed to the self-attention: each position sees the "
        "target's future": F_(C(S(x, lambda y: r.self_attn(y)[0]), ca), ff),
        "cross-attention takes its keys and values from the decoder instead of the encoder's "
        "memory: cross_attn(y, memory, mask=memory_mask)": F_(
            C(S(x, sa), lambda y: r.cross_attn(y, mask=tm)[0]), ff),
        "cross-attention without memory_mask: the padded source positions are attended to": F_(
            C(S(x, sa), lambda y: r.cross_attn(y, memory)[0]), ff),
        "self_attn serves as cross-attention too: the layer has two attention modules, "
        "each with its own W^Q, W^K, W^V, W^O": F_(
            C(S(x, sa), lambda y: r.self_attn(y, memory, mask=mm)[0]), ff),
        "cross-attention comes before self-attention (the order is self-attention, "
        "cross-attention, feed-forward)": F_(S(C(x, ca), sa), ff),
        "cross-attention comes before self-attention, each block kept in its place": F_(
            C(S(x, ca), sa), ff),
        "the feed-forward network comes before cross-attention": C(F_(S(x, sa), ff), ca),
        "no cross-attention: the decoder never reads the encoder's memory": F_(S(x, sa), ff),
    }


@refuses(DecoderLayer, Decoder, rule="to build the layer from its blocks, not with the "
         "library's `DecoderLayer`")
@keeps_rng
def check_decoder_layer(layer_class: Callable[[TransformerConfig], nn.Module]) -> Feedback:
    """``layer_class(config)`` holds ``self_attn``, ``cross_attn`` (MultiHeadAttention),
    ``feed_forward`` (PositionwiseFeedForward) and ``self_block``, ``cross_block``,
    ``ff_block`` (ResidualNorm); ``layer(x, memory, tgt_mask, memory_mask)`` returns (B, T, D)."""
    fb = Feedback("Exercise 1 (a decoder layer, §3.1)")
    B, T, S = 2, 5, 7
    g = torch.Generator().manual_seed(4)
    src = torch.tensor([[4, 5, 6, 7, 8, 0, 0], [4, 5, 6, 7, 8, 9, 3]])  # (B, S), 0 = pad
    tgt = torch.tensor([[1, 4, 5, 6, 7], [1, 4, 5, 0, 0]])  # (B, T)
    mm = padding_mask(src, 0)  # (B, 1, 1, S)
    cases = ((False, causal_mask(T), "a causal mask"),
             (True, decoder_mask(tgt, 0), "a causal and padding mask, pre-norm"))
    for norm_first, tm, label in cases:
        config = TransformerConfig.tiny(P_drop=0.0, norm_first=norm_first)
        x = torch.randn(B, T, config.d_model, generator=g)  # (B, T, D)
        memory = torch.randn(B, S, config.d_model, generator=g)  # (B, S, D)
        layer = run_learner_code(fb, layer_class, config)
        if layer is None or not built_a_module(fb, layer):
            return fb
        torch.manual_seed(1)
        ref = DecoderLayer(config).eval()
        _random_weights(ref, seed=7)
        if not _load(fb, layer, ref.state_dict(), LAYER_NAMES):
            return fb
        layer.eval()
        with torch.no_grad():
            got = _first_tensor(fb, run_learner_code(fb, layer, x, memory, tm, mm))
            if got is None:
                return fb
            expected = ref(x, memory, tm, mm)[0]  # (B, T, D)
        if got.shape == memory.shape and got.shape != x.shape:
            fb.fail(f"one output row per source position ({S}), not per target position "
                    f"({T}): queries come from the decoder, keys and values from the memory")
            return fb
        if not check_tensor(fb, f"output with {label}", got, expected):
            with torch.no_grad():
                mistakes = _layer_variants(ref, x, memory, tm, mm)
                other = DecoderLayer(config.replace(norm_first=not norm_first)).eval()
                other.load_state_dict(ref.state_dict())
                mistakes["ResidualNorm ignores config.norm_first: ResidualNorm(d_model, P_drop, "
                         "norm_first, layer_norm_eps)"] = other(x, memory, tm, mm)[0]
            message = first_match(got, mistakes) if got.shape == expected.shape else None
            if message:
                fb.fail(f"looks like: {message}")
            return fb
        theirs = nn.TransformerDecoderLayer(config.d_model, config.h, config.d_ff, dropout=0.0,
                                            batch_first=True, norm_first=norm_first)
        with torch.no_grad():
            theirs.self_attn.load_state_dict(ref.self_attn.to_torch().state_dict())
            theirs.multihead_attn.load_state_dict(ref.cross_attn.to_torch().state_dict())
            for mine, other in ((ref.feed_forward.w_1, theirs.linear1),
                                (ref.feed_forward.w_2, theirs.linear2),
                                (ref.self_block.norm, theirs.norm1),
                                (ref.cross_block.norm, theirs.norm2),
                                (ref.ff_block.norm, theirs.norm3)):
                other.load_state_dict(mine.state_dict())
            blocked = to_blocked(tm)  # (B or 1, 1, T, T), True = blocked
            torch_out = theirs.eval()(x, memory, tgt_mask=blocked.expand(B, config.h, T, T)
                                      .reshape(B * config.h, T, T),
                                      memory_key_padding_mask=to_blocked(mm)[:, 0, 0, :])
        check_tensor(fb, f"against nn.TransformerDecoderLayer(norm_first={norm_first})",
                     got, torch_out)
    return fb


class MyDecoderLayer(nn.Module):
    """A right answer for exercise 1."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        c = config
        self.self_attn = MultiHeadAttention(c.d_model, c.h, c.attn_drop)
        self.cross_attn = MultiHeadAttention(c.d_model, c.h, c.attn_drop)
        self.feed_forward = PositionwiseFeedForward(c.d_model, c.d_ff, c.P_drop)
        self.self_block, self.cross_block, self.ff_block = (
            ResidualNorm(c.d_model, c.P_drop, c.norm_first, c.layer_norm_eps) for _ in range(3))

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        x, _ = self.self_block(x, self.self_attn, mask=tgt_mask)                 # (B, T, D)
        x, _ = self.cross_block(x, self.cross_attn, memory, mask=memory_mask)    # (B, T, D)
        return self.ff_block(x, self.feed_forward)                               # (B, T, D)


# ------------------------------------------------------- Exercise 2: the whole model's forward
def model_variant(ref: Transformer, src: Tensor, tgt: Tensor, *, causal: str = "tril",
                  tgt_padding: bool = True, enc_mask: bool = True, cross_mask: bool = True,
                  src_positions: bool = True, tgt_positions: bool = True, scaled: bool = True,
                  out: str = "logits") -> Tensor:
    """The whole forward with the reference's modules, with one thing changed (a mistake)."""
    pad = ref.config.pad_id
    src_mask = padding_mask(src, pad)  # (B, 1, 1, S)
    embed = ref.src_embed if scaled else ref.src_embed.lookup
    x = embed(src)
    memory = ref.encoder(ref.positions(x) if src_positions else x,
                         src_mask if enc_mask else None)[0]  # (B, S, D)
    T = tgt.shape[1]
    ones = torch.ones(T, T, dtype=torch.bool)
    tri = {"tril": torch.tril(ones), "triu": torch.triu(ones), "none": ones}[causal]
    tgt_mask = tri & padding_mask(tgt, pad) if tgt_padding else tri  # (B, 1, T, T) or (T, T)
    y = embed(tgt)
    h = ref.decoder(ref.positions(y) if tgt_positions else y, memory, tgt_mask,
                    src_mask if cross_mask else None)[0]  # (B, T, D)
    logits = ref.generator(h)  # (B, T, V)
    return {"logits": logits, "softmax": logits.softmax(-1),
            "log_softmax": logits.log_softmax(-1)}[out]


MODEL_MISTAKES = {
    "no causal mask: each target position sees the tokens after it": dict(causal="none"),
    UPSIDE_DOWN: dict(causal="triu"),
    "the source padding mask is missing: the encoder and cross-attention attend to padding":
        dict(enc_mask=False, cross_mask=False),
    "the encoder gets the source padding mask, the decoder's cross-attention does not: pass "
    "it as memory_mask": dict(cross_mask=False),
    "the decoder's cross-attention gets the source padding mask, the encoder does not": dict(
        enc_mask=False),
    "the target's padding is not masked: the target mask is causal AND padding, "
    "decoder_mask(tgt, pad_id)": dict(tgt_padding=False),
    "no positional encoding on the source": dict(src_positions=False),
    "no positional encoding on the target": dict(tgt_positions=False),
    "embed.lookup(ids) skips the √d_model scale: call self.embed(ids)": dict(scaled=False),
    "softmax at the end: the model returns logits (the loss applies the softmax)": dict(
        out="softmax"),
    "log_softmax at the end: the model returns logits (the loss applies the softmax)": dict(
        out="log_softmax"),
}


def _model_inputs(config: TransformerConfig):
    g = torch.Generator().manual_seed(5)
    V, pad = config.src_vocab_size, config.pad_id
    src = torch.randint(4, V, (2, 7), generator=g)  # (B, S)
    src[0, 5:] = pad
    tgt = torch.randint(4, V, (2, 6), generator=g)  # (B, T)
    tgt[:, 0] = 1  # <s>
    tgt[1, 4:] = pad
    return src, tgt


def _model_structure(fb: Feedback, model: nn.Module) -> bool:
    missing = [n for n in MODEL_NAMES if not isinstance(getattr(model, n, None), nn.Module)]
    if missing:
        fb.fail(f"missing module(s) {', '.join(missing)}: build {', '.join(MODEL_NAMES)} "
                "(the check copies the library's weights into them)")
        return False
    if not isinstance(model.embed, TokenEmbedding):
        fb.fail(f"embed should be a TokenEmbedding (it multiplies by √d_model), got "
                f"{type(model.embed).__name__}")
        return False
    if getattr(model.generator, "bias", None) is not None:
        fb.fail("the generator has a bias: nn.Linear(d_model, V, bias=False), its weight is "
                "the embedding matrix")
        return False
    if getattr(model.generator, "weight", None) is not model.embed.weight:
        fb.fail("the generator's weight is not the embedding's: tie them (§3.4), "
                "self.generator.weight = self.embed.weight")
        return False
    fb.ok("embed, positions, encoder, decoder and a generator tied to the embedding")
    return True


def _copy_model(fb: Feedback, model: nn.Module, ref: Transformer) -> bool:
    theirs = ref.state_dict()
    state = {}
    try:
        keys = list(model.state_dict())
    except Exception as err:  # the learner's module decides what state_dict does
        fb.fail(f"your module's state_dict() raised {type(err).__name__}: {err}")
        return False
    for key in keys:
        source = "src_embed." + key[len("embed."):] if key.startswith("embed.") else key
        if source not in theirs:
            fb.fail(f"your module holds {key!r}, which the library's Transformer has no "
                    f"counterpart for: build only {', '.join(MODEL_NAMES)} as the exercise says")
            return False
        state[key] = theirs[source]
    return _load(fb, model, state, ", ".join(MODEL_NAMES))


def _logits(fb: Feedback, model: nn.Module, src: Tensor, tgt: Tensor) -> Optional[Tensor]:
    with torch.no_grad():
        return _first_tensor(fb, run_learner_code(fb, model, src, tgt))


def _unchanged(a: Tensor, b: Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a.to(b.dtype), b, atol=1e-5, rtol=1e-4)


@refuses(Transformer, rule="to write the model yourself: not a subclass of the library's "
         "`Transformer`, nor calls to it")
@keeps_rng
def check_model(model_class: Callable[[TransformerConfig], nn.Module]) -> Feedback:
    """``model_class(config)`` builds ``embed``, ``positions``, ``encoder``, ``decoder`` and a
    tied ``generator``; ``model(src, tgt)`` returns logits (B, T, V). Compared with the
    library's Transformer on copied weights; checked for causality and source padding."""
    fb = Feedback("Exercise 2 (the whole model's forward, §3 and §3.4)")
    config = TransformerConfig.tiny(40, N=2, d_model=32, d_ff=64, h=4, max_len=32)
    torch.manual_seed(0)
    model = run_learner_code(fb, model_class, config)
    if model is None or not built_a_module(fb, model) or not _model_structure(fb, model):
        return fb
    torch.manual_seed(1)
    ref = Transformer(config).eval()
    if not _copy_model(fb, model, ref):
        return fb
    model.eval()
    src, tgt = _model_inputs(config)
    got = _logits(fb, model, src, tgt)
    if got is None:
        return fb
    with torch.no_grad():
        expected = ref(src, tgt)  # (B, T, V)
    if got.shape != expected.shape:
        fb.fail(f"logits of shape {tuple(got.shape)}, expected (B, T, V) = "
                f"{tuple(expected.shape)}")
        return fb
    later = tgt.clone()
    later[0, 3:] = 7  # sentence 0's positions 3.. changed
    moved = _logits(fb, model, src, later)
    if moved is None:
        return fb
    if _unchanged(moved[0, :3], got[0, :3]):
        fb.ok("changing target tokens 3.. leaves the logits of positions 0-2 alone (causal)")
    else:
        fb.fail("changing target tokens 3.. changed the logits of positions 0-2: the decoder "
                "sees the future")
    padded = torch.cat((src, torch.full((2, 3), config.pad_id)), dim=1)  # 3 more pads
    more = _logits(fb, model, padded, tgt)
    if more is None:
        return fb
    if _unchanged(more, got):
        fb.ok("three more padding tokens on the source change nothing (padding masked)")
    else:
        fb.fail("appending padding to the source changed the logits: padded source positions "
                "are attended to")
    if check_tensor(fb, "logits against the library's Transformer, same weights", got, expected):
        return fb
    with torch.no_grad():
        mistakes = {m: model_variant(ref, src, tgt, **kw) for m, kw in MODEL_MISTAKES.items()}
    message = first_match(got, mistakes)
    if message:
        fb.fail(f"looks like: {message}")
    return fb


class MyTransformer(nn.Module):
    """A right answer for exercise 2."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        c = self.config = config
        self.embed = TokenEmbedding(c.src_vocab_size, c.d_model, c.pad_id)
        self.positions = PositionalEncoding(c.d_model, c.max_len, c.P_drop)
        self.encoder, self.decoder = Encoder(c), Decoder(c)
        self.generator = nn.Linear(c.d_model, c.src_vocab_size, bias=False)
        self.generator.weight = self.embed.weight

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        src_mask = padding_mask(src, self.config.pad_id)                    # (B, 1, 1, S)
        memory, _ = self.encoder(self.positions(self.embed(src)), src_mask)  # (B, S, D)
        tgt_mask = decoder_mask(tgt, self.config.pad_id)                    # (B, 1, T, T)
        y = self.positions(self.embed(tgt))                                 # (B, T, D)
        h, _ = self.decoder(y, memory, tgt_mask, src_mask)                  # (B, T, D)
        return self.generator(h)                                            # (B, T, V)


# --------------------------------------------- Exercise 3: the causal mask after past positions
def _wrong_dtype(fb: Feedback, got: Tensor, expected: Tensor) -> None:
    if got.is_floating_point() and torch.isinf(got).any():
        fb.fail("an additive float mask (0 and -inf): here masks are bool, True = may attend")
    else:
        fb.fail(f"dtype {got.dtype}: masks are bool, True = may attend")
    if not got.is_floating_point() and torch.equal(got.bool(), expected):
        fb.fail("the pattern itself is right: build it as bool (dtype=torch.bool)")


@refuses(causal_mask, decoder_mask, rule="to write the mask without the library's `causal_mask`")
@keeps_rng
def check_causal_mask_after(fn: Callable[[int, int], Tensor]) -> Feedback:
    """``fn(T, past)`` -> (T, past + T) bool: the T new queries sit at positions past ..
    past + T - 1 and may attend to every key up to their own position."""
    fb = Feedback("Exercise 3 (the causal mask after past positions, §3.2.3)")
    for T, past in ((4, 0), (3, 4), (1, 6), (5, 2)):
        got = run_learner_code(fb, fn, T, past)
        if got is None:
            return fb
        if not isinstance(got, Tensor):
            fb.fail(f"return a torch.Tensor, got {type(got).__name__}")
            return fb
        if got.dim() > 2 and all(n == 1 for n in got.shape[:-2]):
            got = got.reshape(got.shape[-2:])
        expected = causal_mask(T, past=past)[0, 0]  # (T, past + T)
        if tuple(got.shape) != (T, past + T):
            hint = (" : the keys are the past positions and the new ones, past + T"
                    if tuple(got.shape) == (T, T) and past else "")
            fb.fail(f"T={T}, past={past}: shape {tuple(got.shape)}, expected "
                    f"(T, past + T) = ({T}, {past + T}){hint}")
            return fb
        if got.dtype != torch.bool:
            _wrong_dtype(fb, got, expected)
            return fb
        if torch.equal(got, expected):
            continue
        fb.fail(f"T={T}, past={past}: wrong pattern; row t (position past + t) may attend to "
                f"columns 0 .. past + t")
        ones = torch.ones(T, past + T, dtype=torch.bool)
        mistakes = {
            UPSIDE_DOWN: torch.triu(ones, diagonal=past),
            UPSIDE_DOWN + ", and without the offset past": torch.triu(ones),
            "the offset is missing: torch.tril(..., diagonal=past), or the new positions "
            "cannot see the past ones": torch.tril(ones),
            "the opposite convention, True = blocked (nn.MultiheadAttention's): here True = "
            "may attend": ~expected,
            "the diagonal is missing: each new position attends to itself too": torch.tril(
                ones, diagonal=past - 1),
            "nothing is masked": ones,
        }
        message = first_match(got, mistakes)
        if message:
            fb.fail(f"looks like: {message}")
        return fb
    fb.ok("(T, past + T) bool masks, True = may attend, for T, past = (4, 0), (3, 4), (1, 6), "
          "(5, 2)")
    return fb


def causal_mask_after(T: int, past: int = 0) -> Tensor:
    """A right answer for exercise 3."""
    return torch.tril(torch.ones(T, past + T, dtype=torch.bool), diagonal=past)


CHECKS = {
    "decoder_layer": (check_decoder_layer, lambda: MyDecoderLayer),
    "model": (check_model, lambda: MyTransformer),
    "causal_mask_after": (check_causal_mask_after, lambda: causal_mask_after),
}


guard(globals())  # an answer that is, or calls, a right answer above is refused
