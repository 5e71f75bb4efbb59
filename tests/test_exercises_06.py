"""Notebook 06's exercise checkers: right answers pass, typical mistakes are refused by name,
the library's DecoderLayer, Transformer and causal_mask are refused where the exercise says
"without"."""

import torch
from torch import nn

from transformer_lib.decoder import DecoderLayer
from transformer_lib.exercises import ex06_decoder as ex06
from transformer_lib.masks import causal_mask, padding_mask
from transformer_lib.model import Transformer


def refused(feedback, *words):
    text = str(feedback)
    return not feedback.passed and all(w in text for w in words)


def test_every_right_answer_passes():
    for name, (checker, right) in ex06.CHECKS.items():
        assert checker(right()), name


class KeysFromDecoder(ex06.MyDecoderLayer):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        x, _ = self.self_block(x, self.self_attn, mask=tgt_mask)
        x, _ = self.cross_block(x, self.cross_attn, mask=tgt_mask)
        return self.ff_block(x, self.feed_forward)


class NoMemoryMask(ex06.MyDecoderLayer):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        return super().forward(x, memory, tgt_mask, None)


class LibraryLayer(DecoderLayer):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        return super().forward(x, memory, tgt_mask, memory_mask)[0]


def test_decoder_layer_mistakes_are_named_and_the_library_layer_refused():
    check = ex06.check_decoder_layer
    assert refused(check(KeysFromDecoder), "keys and values from the decoder")
    assert refused(check(NoMemoryMask), "without memory_mask")
    assert refused(check(LibraryLayer), "subclasses the library's `DecoderLayer`")


def forward_with(**mistake):
    class Wrong(ex06.MyTransformer):
        def forward(self, src, tgt):
            T, pad = tgt.shape[1], self.config.pad_id
            ones = torch.ones(T, T, dtype=torch.bool)
            tri = torch.triu(ones) if mistake.get("triu") else torch.tril(ones)
            src_mask = padding_mask(src, pad)
            memory = self.encoder(self.positions(self.embed(src)), src_mask)[0]
            cross = None if mistake.get("no_memory_mask") else src_mask
            y = self.positions(self.embed(tgt))
            h = self.decoder(y, memory, tri & padding_mask(tgt, pad), cross)[0]
            return self.generator(h)

    return Wrong


class Untied(ex06.MyTransformer):
    def __init__(self, config):
        super().__init__(config)
        self.generator = nn.Linear(config.d_model, config.src_vocab_size, bias=False)


class Subclass(Transformer):
    def __init__(self, config):
        super().__init__(config)
        self.embed = self.src_embed


def test_model_mistakes_are_named_and_a_subclass_refused():
    check = ex06.check_model
    assert refused(check(forward_with(triu=True)), "upside down", "sees the future")
    assert refused(check(forward_with(no_memory_mask=True)), "pass it as memory_mask")
    assert refused(check(Untied), "tie them")
    assert refused(check(Subclass), "subclasses the library's `Transformer`")


def test_causal_mask_after_mistakes_are_named_and_the_library_mask_refused():
    check = ex06.check_causal_mask_after
    ones = lambda T, p: torch.ones(T, p + T, dtype=torch.bool)
    assert refused(check(lambda T, p: torch.tril(ones(T, p))), "offset is missing")
    assert refused(check(lambda T, p: torch.triu(ones(T, p), diagonal=p)), "upside down")
    assert refused(check(lambda T, p: torch.tril(torch.ones(T, T, dtype=torch.bool))), "past + T")
    float_mask = lambda T, p: torch.zeros(T, p + T).masked_fill(~ex06.causal_mask_after(T, p), -1e9)
    assert refused(check(float_mask), "bool")
    assert refused(check(lambda T, p: causal_mask(T, past=p)[0, 0]), "calls the library's")
