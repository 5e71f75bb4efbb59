"""Checkers of notebook 06's assembly exercises (a decoder layer, the whole model's
constructor) and of notebook 07's exercise 3 (the plain cross-entropy): right answers pass,
typical wrong ones fail with the right diagnosis, non-answers say "not yet"."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_lib import MultiHeadAttention, Transformer
from transformer_lib.decoder import Decoder, DecoderLayer
from transformer_lib.embedding import TokenEmbedding
from transformer_lib.encoder import Encoder
from transformer_lib.exercises.ex06_decoder import check_decoder_layer, check_transformer_init
from transformer_lib.exercises.ex07_training import check_validation_cross_entropy
from transformer_lib.feedforward import PositionwiseFeedForward
from transformer_lib.masks import causal_mask
from transformer_lib.positional import PositionalEncoding
from transformer_lib.residual import ResidualNorm
from transformer_lib.training import LabelSmoothingLoss


def not_implemented(*args):
    raise NotImplementedError


def forgot_return(*args):
    pass


@pytest.mark.parametrize(
    "checker", [check_decoder_layer, check_transformer_init, check_validation_cross_entropy]
)
@pytest.mark.parametrize(
    "learner, reason",
    [
        (not_implemented, "not implemented yet"),
        (forgot_return, "returned None"),
        (lambda *a: 1 / 0, "raised ZeroDivisionError"),
        ("MyLayer", "pass your function"),
    ],
)
def test_non_answers_say_not_yet_with_the_reason(checker, learner, reason):
    fb = checker(learner)
    assert not fb.passed and reason in str(fb)


@pytest.mark.parametrize("checker", [check_decoder_layer, check_transformer_init])
def test_a_class_that_builds_no_module_is_not_yet(checker):
    fb = checker(lambda config: "a layer")
    assert not fb.passed and "should build an nn.Module" in str(fb)


# 06, exercise 4: a decoder layer -------------------------------------------------------
def make_layer(mistake=None):
    class Layer(nn.Module):
        def __init__(self, config):
            super().__init__()
            c = config
            norm_first = (not c.norm_first) if mistake == "norm_first" else c.norm_first
            self.self_attn = MultiHeadAttention(c.d_model, c.h, c.attn_drop)
            self.cross_attn = MultiHeadAttention(c.d_model, c.h, c.attn_drop)
            self.feed_forward = PositionwiseFeedForward(c.d_model, c.d_ff, c.P_drop)
            for name in ("self_block", "cross_block", "ff_block"):
                setattr(self, name, ResidualNorm(c.d_model, c.P_drop, norm_first, c.layer_norm_eps))

        def forward(self, x, memory, memory_mask=None):
            causal = mistake != "no_causal"
            sa = lambda y: self.self_attn(y, is_causal=causal)[0]  # noqa: E731
            ca = lambda y: self.cross_attn(y, memory, mask=memory_mask)[0]  # noqa: E731
            if mistake == "keys_from_decoder":
                ca = lambda y: self.cross_attn(y, is_causal=True)[0]  # noqa: E731
            if mistake == "no_memory_mask":
                ca = lambda y: self.cross_attn(y, memory)[0]  # noqa: E731
            if mistake == "cross_first":
                x = self.cross_block(x, ca)
                return self.ff_block(self.self_block(x, sa), self.feed_forward)
            if mistake == "ffn_second":
                x = self.ff_block(self.self_block(x, sa), self.feed_forward)
                return self.cross_block(x, ca)
            if mistake == "queries_from_memory":
                x = self.self_block(x, sa)
                return self.cross_attn(memory, x)[0]
            x = self.self_block(x, sa)
            x = self.cross_block(x, ca)
            out = self.ff_block(x, self.feed_forward)
            return (out, {}) if mistake == "tuple" else out

    return Layer


@pytest.mark.parametrize("variant", [None, "tuple"])
def test_decoder_layer_right(variant):
    fb = check_decoder_layer(make_layer(variant))
    assert fb.passed, str(fb)
    assert "torch.nn.TransformerDecoderLayer" in str(fb) and "pre-norm" in str(fb)


def test_decoder_layer_with_an_explicit_causal_mask_passes():
    class Explicit(make_layer()):
        def forward(self, x, memory, memory_mask=None):
            mask = causal_mask(x.shape[1])
            x = self.self_block(x, lambda y: self.self_attn(y, mask=mask)[0])
            x = self.cross_block(x, lambda y: self.cross_attn(y, memory, mask=memory_mask)[0])
            return self.ff_block(x, self.feed_forward)

    assert check_decoder_layer(Explicit).passed


@pytest.mark.parametrize(
    "mistake, diagnosis",
    [
        ("no_causal", "the causal mask is missing"),
        ("keys_from_decoder", "keys and values from the decoder (x) instead of the encoder's"),
        ("no_memory_mask", "cross-attention ignores memory_mask"),
        ("cross_first", "cross-attention comes before self-attention"),
        ("ffn_second", "the feed-forward network comes before cross-attention"),
        ("norm_first", "ResidualNorm ignores config.norm_first"),
        ("queries_from_memory", "one row per source position"),
    ],
)
def test_decoder_layer_wrong(mistake, diagnosis):
    fb = check_decoder_layer(make_layer(mistake))
    assert not fb.passed and diagnosis in str(fb), str(fb)


def test_decoder_layer_with_other_names_says_which():
    class Renamed(make_layer()):
        def __init__(self, config):
            super().__init__(config)
            self.mha = self.cross_attn
            del self.cross_attn

    fb = check_decoder_layer(Renamed)
    assert not fb.passed and "use the names self_attn, cross_attn" in str(fb)
    assert "cross_attn.in_proj.weight" in str(fb)


def test_the_library_layer_itself_is_not_the_answer():
    fb = check_decoder_layer(DecoderLayer)
    assert not fb.passed and "this is the library's DecoderLayer" in str(fb)


# 06, exercise 5: the whole model's constructor ------------------------------------------
def make_model(mistake=None):
    class Model(Transformer):
        def __init__(self, config):
            nn.Module.__init__(self)
            c = self.config = config
            self.src_embed = TokenEmbedding(c.src_vocab_size, c.d_model, c.pad_id)
            self.tgt_embed = (
                TokenEmbedding(c.tgt_vocab_size, c.d_model, c.pad_id)
                if mistake == "untied"
                else self.src_embed
            )
            p_drop = 0.1 if mistake == "dropout" else c.P_drop
            self.positions = PositionalEncoding(c.d_model, c.max_len, p_drop, c.pe_layout)
            self.encoder, self.decoder = Encoder(c), Decoder(c)
            self.generator = nn.Linear(c.d_model, c.tgt_vocab_size, bias=mistake == "bias")
            stacks = list(self.encoder.parameters()) + list(self.decoder.parameters())
            if mistake == "xavier_everywhere":
                stacks = list(self.parameters())
            if mistake != "no_xavier":
                for p in stacks:
                    if p.dim() > 1:
                        nn.init.xavier_uniform_(p)
            if mistake == "data":
                self.generator.weight.data = self.tgt_embed.weight.data
            elif mistake == "copy":
                self.generator.weight = nn.Parameter(self.tgt_embed.weight.detach().clone())
                del self.generator.bias  # same count, separate storage
                self.generator.register_parameter("bias", None)
            elif mistake not in ("untied", "untied_output", "bias"):
                self.generator.weight = self.tgt_embed.weight
            if mistake == "bias":
                self.generator.weight = self.tgt_embed.weight

    return Model


def test_model_constructor_right():
    fb = check_transformer_init(make_model())
    assert fb.passed, str(fb)
    for fact in ("share one storage", "Xavier-uniform", "same logits", "parameters, as the"):
        assert fact in str(fb)


@pytest.mark.parametrize(
    "mistake, diagnosis",
    [
        ("untied", "3 separate V x D matrices"),
        ("untied_output", "2 separate V x D matrices"),
        ("data", "is a Parameter of its own"),
        ("copy", "2 separate V x D matrices"),
        ("bias", "a bias on the output projection"),
        ("no_xavier", "is not Xavier-uniform"),
        ("xavier_everywhere", "padding row of the embedding is not zero"),
        ("dropout", "dropout rate of positions.dropout is 0.1, expected config.P_drop = 0.2"),
    ],
)
def test_model_constructor_wrong(mistake, diagnosis):
    fb = check_transformer_init(make_model(mistake))
    assert not fb.passed and diagnosis in str(fb), str(fb)


def test_model_constructor_missing_module_is_named():
    class NoDecoder(make_model()):
        def __init__(self, config):
            super().__init__(config)
            del self.decoder

    fb = check_transformer_init(NoDecoder)
    assert not fb.passed and "missing module(s) decoder" in str(fb)


def test_the_library_constructor_itself_is_not_the_answer():
    class Lazy(Transformer):
        def __init__(self, config):
            super().__init__(config)

    fb = check_transformer_init(Lazy)
    assert not fb.passed and "calls the library's Transformer.__init__" in str(fb)
    assert Transformer.__init__.__name__ == "__init__"  # the spy is removed again


# 07, exercise 3: the plain cross-entropy ---------------------------------------------------
def per_batch(model, batches, pad_id, criterion, train=False):
    model.train(train)
    total, tokens, means = 0.0, 0, []
    with torch.no_grad():
        for b in batches:
            logits = model(b.src, b.tgt_in)
            mean = criterion(logits, b.tgt_out)
            total += mean.item() * b.n_tokens
            tokens += b.n_tokens
            means.append(mean.item())
    return total, tokens, means


def right_nll(model, batches, pad_id):
    model.eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for b in batches:
            logits = model(b.src, b.tgt_in)  # (B, T, V)
            total += F.cross_entropy(
                logits.flatten(0, 1), b.tgt_out.flatten(), ignore_index=pad_id, reduction="sum"
            ).item()
            tokens += int((b.tgt_out != pad_id).sum())
    return total / tokens


def test_plain_cross_entropy_right():
    fb = check_validation_cross_entropy(right_nll)
    assert fb.passed, str(fb)
    assert "nats per target token" in str(fb)


def test_plain_cross_entropy_as_a_tensor_passes():
    assert check_validation_cross_entropy(lambda *a: torch.tensor(right_nll(*a))).passed


@pytest.mark.parametrize(
    "wrong, diagnosis",
    [
        (
            lambda m, b, p: (lambda t, n, _: t / n)(
                *per_batch(m, b, p, LabelSmoothingLoss(0.1, p))
            ),
            "the label-smoothed loss",
        ),
        (
            lambda m, b, p: (lambda t, n, ms: sum(ms) / len(ms))(
                *per_batch(m, b, p, LabelSmoothingLoss(0.0, p))
            ),
            "the mean of the batches' means",
        ),
        (
            lambda m, b, p: (lambda t, n, _: t / n)(
                *per_batch(m, b, p, LabelSmoothingLoss(0.0, None))
            ),
            "padding counted",
        ),
        (lambda m, b, p: math.exp(right_nll(m, b, p)), "this is the perplexity"),
        (lambda m, b, p: right_nll(m, b, p) / math.log(2), "bits (log base 2)"),
        (
            lambda m, b, p: (lambda t, n, _: t / n)(
                *per_batch(m, b, p, LabelSmoothingLoss(0.0, p), train=True)
            ),
            "dropout is on",
        ),
    ],
)
def test_plain_cross_entropy_wrong(wrong, diagnosis):
    fb = check_validation_cross_entropy(wrong)
    assert not fb.passed and diagnosis in str(fb), str(fb)
