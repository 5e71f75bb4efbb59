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
VOCAB = {
    "<pad>": 0,
    "<s>": 1,
    "</s>": 2,
    "<unk>": 3,
    "the": 4,
    "cat": 5,
    "sat": 6,
    "on": 7,
    "mat": 8,
    "a": 9,
    "dog": 10,
}
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
    for sentence, length in (("the cat sat", 7), ("a dog sat on the mat", 8), ("the zebra sat", 6)):
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


def _autograd_grad(ids: torch.Tensor, grad_out: torch.Tensor, V: int) -> torch.Tensor:
    """The reference: autograd's gradient of nn.Embedding's weight, (V, D)."""
    emb = nn.Embedding(V, grad_out.shape[-1]).to(grad_out.dtype)
    emb(ids).backward(grad_out)
    return emb.weight.grad


def _diagnose_grad(
    fb: Feedback, got, ids: torch.Tensor, grad_out: torch.Tensor, expected: torch.Tensor
) -> bool:
    """Name the usual mistakes of the backward lookup; True when one was named."""
    if not isinstance(got, torch.Tensor):
        return False
    V, D = expected.shape
    if got.shape == (D, V) and torch.allclose(got.T.to(expected.dtype), expected, atol=1e-5):
        fb.fail(
            f"transposed: you returned ({D}, {V}), grad_out^T @ one_hot; the gradient "
            f"of the (V, D) table is one_hot^T @ grad_out, shape ({V}, {D})"
        )
        return True
    if got.shape == (ids.shape[0], V, D) and torch.allclose(
        got.sum(0).to(expected.dtype), expected, atol=1e-5
    ):
        fb.fail(
            "you kept the batch dimension: every sentence adds to the same table, so "
            "sum over the batch too (flatten (B, L) to B·L positions first)"
        )
        return True
    if got.shape != expected.shape or not got.dtype.is_floating_point:
        return False
    counts = torch.bincount(ids.flatten(), minlength=V)
    close = torch.isclose(got.to(expected.dtype), expected, atol=1e-5).all(-1)  # (V,)
    if bool(close[counts <= 1].all()) and not bool(close[counts > 1].all()):
        fb.fail(
            "the rows of tokens that occur once are right, those of repeated tokens are "
            "not: a token used at several positions gets the SUM of their gradients "
            "(an assignment grad[ids] = grad_out keeps only one of them)"
        )
        return True
    return False


@refuses(
    nn.Embedding,
    F.embedding,
    torch.autograd.grad,
    torch.autograd.backward,
    torch.Tensor.backward,
    rule="to compute the gradient as one_hot^T @ grad_out, without autograd or nn.Embedding",
)
@keeps_rng
def check_embedding_grad(embedding_grad) -> Feedback:
    """``embedding_grad(ids, grad_out, V)`` -> the (V, D) gradient of the embedding table,
    one_hot(ids)^T @ grad_out, equal to autograd's on nn.Embedding (§3.4)."""
    fb = Feedback("Exercise 2 (the embedding's gradient as a matrix product)")
    g = torch.Generator().manual_seed(0)
    ids = torch.tensor([[1, 4, 5, 2, 0], [1, 9, 4, 6, 2]])  # (B, L)
    for V, dtype in ((11, torch.float32), (13, torch.float64)):
        grad_out = torch.randn(*ids.shape, 6, generator=g, dtype=dtype)  # (B, L, D)
        expected = _autograd_grad(ids, grad_out, V)  # (V, D)
        got = run_learner_code(fb, embedding_grad, ids, grad_out, V)
        if got is None:
            return fb
        if _diagnose_grad(fb, got, ids, grad_out, expected):
            return fb
        if not check_tensor(fb, f"embedding_grad(ids, grad_out, {V})", got, expected):
            return fb
        if got.dtype != grad_out.dtype:
            fb.fail(
                f"the gradient should have grad_out's dtype ({grad_out.dtype}), got "
                f"{got.dtype}: build the one-hot with .to(grad_out.dtype)"
            )
            return fb
    fb.ok("equal to autograd's gradient of nn.Embedding's weight, in float32 and float64")
    fb.ok(
        "the ids that never occur (3, 7, 8, 10 and up) get zero rows: a rare token learns "
        "only from the batches it is in"
    )
    fb.ok(
        "<s>, 'the' and </s> occur twice: their rows are the sums of both positions' "
        "gradients; <pad> gets one too, unless padding_idx zeroes it"
    )
    return fb


def _find_embedding(module: nn.Module):
    return next((m for m in module.modules() if isinstance(m, nn.Embedding)), None)


def _diagnose_scale(fb: Feedback, got: torch.Tensor, rows: torch.Tensor, d: int) -> bool:
    """Compare got with rows * c for the usual wrong constants c."""
    for factor, message in (
        (
            1.0,
            "forgot the sqrt(d_model) scale: multiply the looked-up vectors by math.sqrt(d_model)",
        ),
        (float(d), "scaled by d_model instead of sqrt(d_model)"),
        (1 / math.sqrt(d), "divided by sqrt(d_model) instead of multiplying"),
    ):
        if torch.allclose(got, rows * factor, atol=1e-5):
            fb.fail(message)
            return True
    return False


def _attribute_hint(fb: Feedback) -> Feedback:
    if any("AttributeError" in n for n in fb.notes):
        fb.fail(
            "hint: an attribute used before it is assigned in __init__ "
            "(e.g. self.embedding_dim where only d_model was stored)"
        )
    return fb


def _check_init(fb: Feedback, module_cls) -> None:
    """The weights (pad row aside) should start at N(0, 1/d_model), as TokenEmbedding's do:
    then the scaled vectors have RMS 1, next to the positional encoding's sqrt(1/2)."""
    V, d, pad = 1000, 64, 0
    module = run_learner_code(fb, module_cls, V, d, pad)
    emb = None if module is None else _find_embedding(module)
    if emb is None:
        return
    rms = emb.weight.detach()[pad + 1 :].pow(2).mean().sqrt().item()
    want = 1 / math.sqrt(d)
    if abs(rms / want - 1) <= 0.1:
        fb.ok(f"weights start at N(0, 1/d_model): RMS {rms:.3f} for d_model = {d}")
        return
    fb.fail(
        f"for d_model = {d} the weights have RMS {rms:.3f}, expected about "
        f"1/sqrt(d_model) = {want:.3f}: initialise them with "
        "nn.init.normal_(weight, std=d_model ** -0.5), then zero the pad row"
    )
    if abs(rms - 1) <= 0.1:
        fb.fail(
            "that is PyTorch's default N(0, 1): times sqrt(d_model) the vectors would be "
            "sqrt(2 d_model) times larger than the positional encoding (32x at 512)"
        )


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
    ids = torch.tensor([[1, 4, 5, 2, 0, 0]])  # (B, L)
    got = run_learner_code(fb, module, ids)
    if got is None:
        return _attribute_hint(fb)
    rows = emb.weight.detach()[ids]  # (B, L, D)
    if isinstance(got, torch.Tensor) and got.shape == rows.shape:
        if _diagnose_scale(fb, got.detach(), rows, d):
            return fb
    if not check_tensor(fb, "embedding output", got, rows * math.sqrt(d)):
        return fb
    if emb.padding_idx != pad:
        fb.fail(
            f"pass padding_idx={pad} to nn.Embedding: the pad row must stay zero and get "
            f"no gradient (padding_idx is {emb.padding_idx})"
        )
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
