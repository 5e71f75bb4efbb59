"""Checkers for notebook 01's exercises (token embeddings, §3.4): a scaled embedding with
padding, written before the notebook's worked version; text to ids at a fixed length, cut so
that ``</s>`` still fits; and the embedding's gradient as the matrix product
``one_hot(ids)ᵀ @ grad_out``."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..embedding import TokenEmbedding
from . import Feedback, built_a_module, check_tensor, first_match, keeps_rng, run_learner_code
from .own_work import guard, refuses

Tensor = torch.Tensor

# --- Exercise 1: a scaled embedding with padding ------------------------------------------


def _find_embedding(module: nn.Module):
    return next((m for m in module.modules() if isinstance(m, nn.Embedding)), None)


def _hints(fb: Feedback) -> Feedback:
    """Name the pitfalls behind two errors a learner's module raises."""
    if any("AttributeError" in n for n in fb.notes):
        fb.fail(
            "an attribute used before it exists: forward reads an attribute that __init__ "
            "never assigned (e.g. self.embedding_dim where only d_model was stored)"
        )
    if any("TypeError" in n and "sqrt" in n for n in fb.notes):
        fb.fail("torch.sqrt wants a tensor: the scale is a number, use math.sqrt(d_model)")
    return fb


def _check_init(fb: Feedback, module_cls) -> None:
    """The weights (pad row aside) start at N(0, 1/d_model): the scaled vectors then have
    RMS 1, next to the positional encoding's sqrt(1/2)."""
    V, d, pad = 1000, 64, 0
    module = run_learner_code(fb, module_cls, V, d, pad)
    emb = _find_embedding(module) if isinstance(module, nn.Module) else None
    if emb is None:
        return
    rms = emb.weight.detach().double()[pad + 1 :].pow(2).mean().sqrt().item()
    want = 1 / math.sqrt(d)
    if abs(rms / want - 1) <= 0.1:
        fb.ok(f"weights start at N(0, 1/d_model): RMS {rms:.3f} for d_model = {d}")
        return
    fb.fail(
        f"for d_model = {d} the weights have RMS {rms:.3f}, expected about 1/sqrt(d_model) = "
        f"{want:.3f}: draw them with nn.init.normal_(weight, std=d_model ** -0.5), then zero "
        "the pad row"
    )
    if abs(rms - 1) <= 0.1:
        fb.fail(
            "that is PyTorch's default N(0, 1): times sqrt(d_model) the vectors would be "
            "sqrt(2 d_model) times larger than the positional encoding (32 times at 512)"
        )


@refuses(TokenEmbedding, rule="to write the module yourself, not the library's `TokenEmbedding`")
@keeps_rng
def check_scaled_embedding(module_cls) -> Feedback:
    """``module_cls(vocab_size, d_model, pad_id)``: an nn.Embedding lookup times
    sqrt(d_model), weights from N(0, 1/d_model), the pad row zero and without gradient."""
    fb = Feedback("Exercise 1 (a scaled embedding with padding)")
    V, d, pad = 11, 16, 0
    torch.manual_seed(0)
    module = run_learner_code(fb, module_cls, V, d, pad)
    if module is None:
        return _hints(fb)
    if not built_a_module(fb, module):
        return fb
    emb = _find_embedding(module)
    if emb is None:
        fb.fail("no nn.Embedding found inside your module: build the table with nn.Embedding")
        return fb
    ids = torch.tensor([[1, 4, 5, 2, 0, 0]])  # (B, L): two <pad> at the end
    got = run_learner_code(fb, module, ids)
    if got is None:
        return _hints(fb)
    rows = emb.weight.detach().double()[ids]  # (B, L, D)
    wrong = {
        "the sqrt(d_model) factor is missing: multiply the looked-up vectors by "
        "math.sqrt(d_model)": rows,
        "scaled by d_model instead of sqrt(d_model)": rows * d,
        "divided by sqrt(d_model) instead of multiplying": rows / math.sqrt(d),
    }
    found = first_match(got.detach() if isinstance(got, Tensor) else got, wrong)
    if found:
        fb.fail(found)
        return fb
    if not check_tensor(fb, "output", got, rows * math.sqrt(d)):
        return fb
    if emb.padding_idx != pad:
        fb.fail(
            f"pass padding_idx={pad} to nn.Embedding: the pad row must stay zero and get no "
            f"gradient (your padding_idx is {emb.padding_idx})"
        )
        return fb
    if got[0, -1].abs().max() > 0:
        fb.fail("the <pad> vector is not zero: zero the pad row after drawing the weights")
        return fb
    if not got.requires_grad:
        fb.fail(
            "the output carries no gradient: do not detach it or use torch.no_grad() in forward"
        )
        return fb
    try:
        got.sum().backward()
    except Exception as exc:  # a graph of the learner's making
        fb.fail(f"backward through your output raised {type(exc).__name__}: {exc}")
        return fb
    if emb.weight.grad is None or emb.weight.grad[pad].abs().max() > 0:
        fb.fail("the <pad> row receives a gradient: padding_idx keeps it out of training")
        return fb
    fb.ok("<pad> maps to a zero vector and its row gets no gradient")
    _check_init(fb, module_cls)
    return fb


class _ScaledEmbedding(nn.Module):
    def __init__(self, vocab_size: int, d_model: int, pad_id: int = 0):
        super().__init__()
        self.scale = math.sqrt(d_model)
        self.lookup = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        nn.init.normal_(self.lookup.weight, std=d_model**-0.5)
        with torch.no_grad():
            self.lookup.weight[pad_id].zero_()

    def forward(self, ids: Tensor) -> Tensor:
        return self.lookup(ids) * self.scale  # (B, L, D)


# --- Exercise 2: text to ids at a fixed length ----------------------------------------------

#: The vocabulary the check uses; its special tokens have the notebook's ids.
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


def encode_fixed_reference(sentence: str, vocab: dict, length: int) -> Tensor:
    """<s>, word ids (unknown -> <unk>), </s>, then <pad> up to ``length``; a sentence too
    long for ``length`` keeps its first ``length - 2`` words, so that </s> still fits."""
    words = [vocab.get(w, vocab["<unk>"]) for w in sentence.lower().split()]
    ids = [vocab["<s>"]] + words[: length - 2] + [vocab["</s>"]]
    return torch.tensor(ids + [vocab["<pad>"]] * (length - len(ids)), dtype=torch.long)


def _wrong_encodings(sentence: str, length: int) -> dict:
    """Each typical mistake's output, under the message that names it."""
    split = sentence.split()
    words = [VOCAB.get(w, UNK) for w in sentence.lower().split()]

    def padded(ids, left=False):
        ids = ids[:length]
        pad = [PAD] * (length - len(ids))
        return torch.tensor(pad + ids if left else ids + pad)

    return {
        "</s> was cut off: keep the first length - 2 words, so that <s> and </s> both fit": (
            padded([BOS] + words + [EOS])
        ),
        "padding on the left: pad on the right, after </s>": padded(
            [BOS] + words[: length - 2] + [EOS], left=True
        ),
        "not lower-cased: 'The' should find 'the' in the vocabulary": padded(
            [BOS] + [VOCAB.get(w, UNK) for w in split][: length - 2] + [EOS]
        ),
        "an unknown word was dropped: it should become <unk> (id 3)": padded(
            [BOS] + [VOCAB[w] for w in sentence.lower().split() if w in VOCAB][: length - 2] + [EOS]
        ),
        "<s> and </s> are missing around the words": padded(words),
    }


@keeps_rng
def check_text_to_ids(encode_fixed) -> Feedback:
    """``encode_fixed(sentence, vocab, length)`` -> (length,) torch.long: <s> ... </s>, then
    <pad>; a sentence too long is cut so that </s> is the last token."""
    fb = Feedback("Exercise 2 (text to ids at a fixed length)")
    cases = (
        ("the cat sat", 7),
        ("The dog sat on the mat", 8),
        ("the zebra sat", 6),
        ("a dog sat on the mat", 5),
        ("the cat", 4),
    )
    for sentence, length in cases:
        got = run_learner_code(fb, encode_fixed, sentence, dict(VOCAB), length)
        if got is None:
            return fb
        expected = encode_fixed_reference(sentence, VOCAB, length)
        label = f"encode_fixed({sentence!r}, vocab, {length})"
        if isinstance(got, Tensor) and got.dim() == 1 and len(got) > length:
            fb.fail(
                f"{label} has {len(got)} ids: the sentence is too long for {length}; keep its "
                f"first {length - 2} words so that <s> and </s> fit"
            )
            return fb
        if isinstance(got, Tensor) and got.dim() == 1 and len(got) < length:
            fb.fail(f"{label} has {len(got)} ids: pad it with <pad> on the right up to {length}")
            return fb
        if not check_tensor(fb, label, got, expected):
            found = first_match(got, _wrong_encodings(sentence, length))
            if found:
                fb.fail(f"looks like: {found}")
            return fb
        if got.dtype != torch.long:
            fb.fail(f"ids should be torch.long (nn.Embedding wants integers), got {got.dtype}")
            return fb
    fb.ok("unknown words become <unk>, capitals are lowered, a long sentence keeps its </s>")
    return fb


# --- Exercise 3: the embedding's gradient as a matrix product ----------------------------


def _autograd_grad(ids: Tensor, grad_out: Tensor, V: int) -> Tensor:
    """The reference: autograd's gradient of nn.Embedding's weight, (V, D)."""
    emb = nn.Embedding(V, grad_out.shape[-1]).to(grad_out.dtype)
    emb(ids).backward(grad_out)
    return emb.weight.grad


def _diagnose_grad(fb: Feedback, got, ids: Tensor, expected: Tensor) -> bool:
    """Name the usual mistakes of the backward lookup; True when one was named."""
    if not isinstance(got, Tensor) or not got.dtype.is_floating_point:
        return False
    V, D = expected.shape
    got = got.detach().to(expected.dtype)
    if got.shape == (D, V) and torch.allclose(got.T, expected, atol=1e-5):
        fb.fail(
            f"transposed: you returned ({D}, {V}), grad_outᵀ @ one_hot; the gradient of the "
            f"(V, D) table is one_hotᵀ @ grad_out, shape ({V}, {D})"
        )
        return True
    if got.shape == (ids.shape[0], V, D) and torch.allclose(got.sum(0), expected, atol=1e-5):
        fb.fail(
            "you kept the batch axis: every sentence adds to the same table, so sum over the "
            "batch too (flatten (B, L) to B·L positions first)"
        )
        return True
    if got.shape != expected.shape:
        return False
    counts = torch.bincount(ids.flatten(), minlength=V)
    close = torch.isclose(got, expected, atol=1e-5).all(-1)  # (V,)
    if bool(close[counts <= 1].all()) and not bool(close[counts > 1].all()):
        fb.fail(
            "the rows of tokens that occur once are right, those of repeated tokens are not: a "
            "token used at several positions gets the SUM of their gradients (an assignment "
            "grad[ids] = grad_out keeps only one of them)"
        )
        return True
    return False


@refuses(
    nn.Embedding,
    F.embedding,
    torch.autograd.grad,
    torch.autograd.backward,
    torch.Tensor.backward,
    rule="to compute the gradient as one_hotᵀ @ grad_out, without autograd or nn.Embedding",
)
@keeps_rng
def check_embedding_grad(embedding_grad) -> Feedback:
    """``embedding_grad(ids, grad_out, V)`` -> the (V, D) gradient of the embedding table,
    one_hot(ids)ᵀ @ grad_out, equal to autograd's on nn.Embedding (§3.4)."""
    fb = Feedback("Exercise 3 (the embedding's gradient as a matrix product)")
    g = torch.Generator().manual_seed(0)
    ids = torch.tensor([[1, 4, 5, 2, 0], [1, 9, 4, 6, 2]])  # (B, L)
    for V, dtype in ((11, torch.float32), (13, torch.float64)):
        grad_out = torch.randn(*ids.shape, 6, generator=g, dtype=dtype)  # (B, L, D)
        expected = _autograd_grad(ids, grad_out, V)  # (V, D)
        got = run_learner_code(fb, embedding_grad, ids.clone(), grad_out.clone(), V)
        if got is None:
            return fb
        if _diagnose_grad(fb, got, ids, expected):
            return fb
        if not check_tensor(fb, f"embedding_grad(ids, grad_out, {V})", got, expected):
            return fb
        if got.dtype != grad_out.dtype:
            fb.fail(
                f"the gradient should have grad_out's dtype ({grad_out.dtype}), got {got.dtype}: "
                "build the one-hot with .to(grad_out.dtype)"
            )
            return fb
    fb.ok("equal to autograd's gradient of nn.Embedding's weight, in float32 and float64")
    fb.ok(
        "the ids that never occur (3, 7, 8, 10 and up) get zero rows: a rare token learns only "
        "from the batches it is in"
    )
    fb.ok(
        "<s>, 'the' and </s> occur twice: their rows are the sums of both positions' gradients; "
        "<pad> gets one too, unless padding_idx zeroes it"
    )
    return fb


def _one_hot_grad(ids: Tensor, grad_out: Tensor, V: int) -> Tensor:
    one_hot = F.one_hot(ids, V).to(grad_out.dtype).reshape(-1, V)  # (B·L, V)
    return one_hot.T @ grad_out.reshape(-1, grad_out.shape[-1])  # (V, D)


CHECKS = {
    "scaled_embedding": (check_scaled_embedding, lambda: _ScaledEmbedding),
    "text_to_ids": (check_text_to_ids, lambda: encode_fixed_reference),
    "embedding_grad": (check_embedding_grad, lambda: _one_hot_grad),
}


guard(globals())  # an answer that is, or calls, a right answer above is refused
