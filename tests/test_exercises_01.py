"""Notebook 01's exercise checkers: a right answer passes; the typical wrong answers get "not
yet" with the mistake named; the library's own module is refused where the learner must write it."""

import math

import torch
import torch.nn.functional as F
from torch import nn

from transformer_lib.embedding import TokenEmbedding
from transformer_lib.exercises import ex01_embedding as ex01

RIGHT_EMBEDDING = ex01.CHECKS["scaled_embedding"][1]()


def not_yet(feedback, *words):
    text = str(feedback)
    assert not feedback and "not yet" in text, text
    for word in words:
        assert word in text, text


def test_scaled_embedding_passes_a_right_module():
    assert ex01.check_scaled_embedding(RIGHT_EMBEDDING)


def test_scaled_embedding_names_the_missing_scale_and_the_default_init():
    class Unscaled(RIGHT_EMBEDDING):
        def forward(self, ids):
            return self.lookup(ids)

    class DefaultInit(nn.Module):
        def __init__(self, vocab_size, d_model, pad_id=0):
            super().__init__()
            self.d_model = d_model
            self.lookup = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)

        def forward(self, ids):
            return self.lookup(ids) * math.sqrt(self.d_model)

    not_yet(ex01.check_scaled_embedding(Unscaled), "sqrt(d_model) factor is missing")
    not_yet(ex01.check_scaled_embedding(DefaultInit), "N(0, 1)")


def test_scaled_embedding_names_the_attribute_and_sqrt_pitfalls_and_padding():
    class Attribute(RIGHT_EMBEDDING):
        def forward(self, ids):
            return self.lookup(ids) * math.sqrt(self.embedding_dim)

    class TorchSqrt(RIGHT_EMBEDDING):
        def forward(self, ids):
            return self.lookup(ids) * torch.sqrt(self.lookup.embedding_dim)

    class NoPadding(RIGHT_EMBEDDING):
        def __init__(self, vocab_size, d_model, pad_id=0):
            super().__init__(vocab_size, d_model, pad_id)
            self.lookup.padding_idx = None

    not_yet(ex01.check_scaled_embedding(Attribute), "used before it exists")
    not_yet(ex01.check_scaled_embedding(TorchSqrt), "math.sqrt")
    not_yet(ex01.check_scaled_embedding(NoPadding), "padding_idx=0")


def test_scaled_embedding_refuses_the_library_module():
    not_yet(ex01.check_scaled_embedding(TokenEmbedding), "TokenEmbedding")


def test_scaled_embedding_takes_a_float64_module_without_crashing():
    assert ex01.check_scaled_embedding(lambda *a: RIGHT_EMBEDDING(*a).double())


def test_text_to_ids_passes_the_reference_and_names_typical_mistakes():
    assert ex01.check_text_to_ids(ex01.encode_fixed_reference)

    def cuts_eos(sentence, vocab, length):
        ids = [1] + [vocab.get(w, 3) for w in sentence.lower().split()] + [2]
        return torch.tensor((ids + [0] * length)[:length])

    def left_padded(sentence, vocab, length):
        ids = ex01.encode_fixed_reference(sentence, vocab, length)
        n = int((ids != 0).sum())
        return torch.cat((ids[n:], ids[:n]))

    def not_lowered(sentence, vocab, length):
        return ex01.encode_fixed_reference(sentence.replace("The", "zebra"), vocab, length)

    not_yet(ex01.check_text_to_ids(cuts_eos), "</s> was cut off")
    not_yet(ex01.check_text_to_ids(not_lowered), "not lower-cased")
    not_yet(ex01.check_text_to_ids(left_padded), "padding on the left")
    floats = ex01.check_text_to_ids(lambda *a: ex01.encode_fixed_reference(*a).float())
    not_yet(floats, "dtype")


def test_embedding_grad_passes_the_matrix_product_and_names_typical_mistakes():
    right = ex01.CHECKS["embedding_grad"][1]()
    assert ex01.check_embedding_grad(right)

    def transposed(ids, grad_out, V):
        return right(ids, grad_out, V).T

    def assigned(ids, grad_out, V):
        grad = torch.zeros(V, grad_out.shape[-1], dtype=grad_out.dtype)
        grad[ids.flatten()] = grad_out.reshape(-1, grad_out.shape[-1])
        return grad

    not_yet(ex01.check_embedding_grad(transposed), "transposed")
    not_yet(ex01.check_embedding_grad(assigned), "SUM")


def test_embedding_grad_refuses_autograd_and_the_library_lookup():
    def by_autograd(ids, grad_out, V):
        table = torch.zeros(V, grad_out.shape[-1], dtype=grad_out.dtype, requires_grad=True)
        F.embedding(ids, table).backward(grad_out)
        return table.grad

    not_yet(ex01.check_embedding_grad(by_autograd), "without autograd")
