"""Checkers for notebook 01 (token embeddings, §3.4)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..embedding import TokenEmbedding
from . import Feedback, built_a_module, check_tensor, keeps_rng, run_learner_code
from .own_work import refuses

#: The tiny vocabulary the checkers use (the notebook builds the same kind of table).
VOCAB = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3, "the": 4, "cat": 5, "sat": 6, "on": 7,
         "mat": 8, "a": 9, "dog": 10}
PAD, BOS, EOS, UNK = 0, 1, 2, 3


def reference_encode(sentence: str, vocab: dict, length: int) -> torch.Tensor:
    """<s> word ids </s>, unknown words -> <unk>, right-padded with <pad> to ``length``."""
    ids = [vocab["<s>"]] + [vocab.get(w, vocab["<unk>"]) for w in sentence.lower().split()]
    ids = (ids + [vocab["</s>"]])[:length]
    return torch.tensor(ids + [vocab["<pad>"]] * (length - len(ids)), dtype=torch.long)


def _diagnose_encode(fb: Feedback, got: torch.Tensor, sentence: str) -> None:
    words = [VOCAB.get(w, UNK) for w in sentence.lower().split()]
    ids = got.tolist()
    if ids[:1] != [BOS]:
        fb.fail(f"the sequence should start with <s> (id {BOS}), got id {ids[0]}")
    if EOS not in ids:
        fb.fail(f"the sequence should end with </s> (id {EOS}) before the padding")
    if ids and ids[0] == PAD:
        fb.fail("padding comes first: pad on the right, after </s>")
    known = [t for t in sentence.lower().split() if t in VOCAB]
    if len(known) < len(words) and UNK not in ids:
        fb.fail("an unknown word should map to <unk>, not be dropped or given another id")


@keeps_rng
def check_text_to_ids(encode) -> Feedback:
    """``encode(sentence, vocab, length)`` -> (length,) long tensor: <s> ... </s> <pad>..."""
    fb = Feedback("Exercise 1 (text to ids)")
    for sentence, length in (("the cat sat", 7), ("a dog sat on the mat", 8),
                             ("the zebra sat", 6)):
        expected = reference_encode(sentence, VOCAB, length)
        got = run_learner_code(fb, encode, sentence, VOCAB, length)
        if got is None:
            return fb
        if isinstance(got, (list, tuple)):
            got = torch.tensor(got)
        if not check_tensor(fb, f"ids of {sentence!r}", got, expected):
            if isinstance(got, torch.Tensor) and got.dim() == 1 and len(got):
                _diagnose_encode(fb, got, sentence)
            return fb
        if got.dtype != torch.long:
            fb.fail(f"ids should be torch.long (nn.Embedding needs integers), got {got.dtype}")
            return fb
    return fb


@keeps_rng
def check_one_hot_lookup(lookup) -> Feedback:
    """``lookup(ids, weight)`` -> one_hot(ids) @ weight, without nn.Embedding."""
    fb = Feedback("Exercise 2 (embedding as one-hot @ matrix)")
    g = torch.Generator().manual_seed(0)
    weight = torch.randn(11, 6, generator=g)                                 # (V, D)
    ids = torch.tensor([[1, 4, 5, 2, 0], [1, 9, 10, 6, 2]])                 # (B, L)
    got = run_learner_code(fb, lookup, ids, weight)
    if got is None:
        return fb
    expected = F.one_hot(ids, weight.shape[0]).float() @ weight              # (B, L, D)
    if isinstance(got, torch.Tensor) and got.shape == (2, 5, 11):
        fb.fail("the last dimension is the vocabulary size: you returned the one-hot "
                "vectors themselves; multiply them by the (V, D) weight matrix")
        return fb
    if check_tensor(fb, "lookup(ids, weight)", got, expected):
        fb.ok("one-hot @ weight picks row ids[b, l] of the table, exactly as nn.Embedding")
    return fb


def _find_embedding(module: nn.Module):
    return next((m for m in module.modules() if isinstance(m, nn.Embedding)), None)


def _diagnose_scale(fb: Feedback, got: torch.Tensor, rows: torch.Tensor, d: int) -> bool:
    """Compare got with rows * c for the usual wrong constants c."""
    for factor, message in ((1.0, "forgot the sqrt(d_model) scale: multiply the looked-up "
                                  "vectors by math.sqrt(d_model)"),
                            (float(d), "scaled by d_model instead of sqrt(d_model)"),
                            (1 / math.sqrt(d), "divided by sqrt(d_model) instead of "
                                               "multiplying")):
        if torch.allclose(got, rows * factor, atol=1e-5):
            fb.fail(message)
            return True
    return False


def _attribute_hint(fb: Feedback) -> Feedback:
    if any("AttributeError" in n for n in fb.notes):
        fb.fail("hint: an attribute used before it is assigned in __init__ "
                "(e.g. self.embedding_dim where only d_model was stored)")
    return fb


def _check_init(fb: Feedback, module_cls) -> None:
    """The weights (pad row aside) should start at N(0, 1/d_model), as TokenEmbedding's do:
    then the scaled vectors have RMS 1, next to the positional encoding's sqrt(1/2)."""
    V, d, pad = 1000, 64, 0
    module = run_learner_code(fb, module_cls, V, d, pad)
    emb = None if module is None else _find_embedding(module)
    if emb is None:
        return
    rms = emb.weight.detach()[pad + 1:].pow(2).mean().sqrt().item()
    want = 1 / math.sqrt(d)
    if abs(rms / want - 1) <= 0.1:
        fb.ok(f"weights start at N(0, 1/d_model): RMS {rms:.3f} for d_model = {d}")
        return
    fb.fail(f"for d_model = {d} the weights have RMS {rms:.3f}, expected about "
            f"1/sqrt(d_model) = {want:.3f}: initialise them with "
            "nn.init.normal_(weight, std=d_model ** -0.5), then zero the pad row")
    if abs(rms - 1) <= 0.1:
        fb.fail("that is PyTorch's default N(0, 1): times sqrt(d_model) the vectors would be "
                "sqrt(2 d_model) times larger than the positional encoding (32x at 512)")


@refuses(TokenEmbedding, rule="to write the module yourself, not the library's `TokenEmbedding`")
@keeps_rng
def check_scaled_embedding(module_cls) -> Feedback:
    """``module_cls(vocab_size, d_model, pad_id)``: nn.Embedding lookup * sqrt(d_model),
    weights from N(0, 1/d_model), padding row zero and without gradient."""
    fb = Feedback("Exercise 3 (scaled embedding with padding)")
    V, d, pad = 11, 16, 0
    torch.manual_seed(0)
    module = run_learner_code(fb, module_cls, V, d, pad)
    if module is None:
        return _attribute_hint(fb)
    if not built_a_module(fb, module):
        return fb
    emb = _find_embedding(module)
    if emb is None:
        fb.fail("no nn.Embedding found inside your module")
        return fb
    ids = torch.tensor([[1, 4, 5, 2, 0, 0]])                                 # (B, L)
    got = run_learner_code(fb, module, ids)
    if got is None:
        return _attribute_hint(fb)
    rows = emb.weight.detach()[ids]                                          # (B, L, D)
    if isinstance(got, torch.Tensor) and got.shape == rows.shape:
        if _diagnose_scale(fb, got.detach(), rows, d):
            return fb
    if not check_tensor(fb, "embedding output", got, rows * math.sqrt(d)):
        return fb
    if emb.padding_idx != pad:
        fb.fail(f"pass padding_idx={pad} to nn.Embedding: the pad row must stay zero and get "
                f"no gradient (padding_idx is {emb.padding_idx})")
        return fb
    if got[0, -1].abs().max() > 0:
        fb.fail("the <pad> vector is not zero: zero the pad row after initialising the weights")
        return fb
    got.sum().backward()
    if emb.weight.grad is not None and emb.weight.grad[pad].abs().max() > 0:
        fb.fail("the <pad> row receives a gradient")
        return fb
    fb.ok("<pad> maps to a zero vector and its row gets no gradient")
    _check_init(fb, module_cls)
    return fb
