import math

import torch

from transformer_lib import TokenEmbedding


def test_lookup_is_scaled_by_sqrt_d_model():
    emb = TokenEmbedding(10, 16, pad_id=0)
    ids = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(emb(ids), emb.weight[ids] * math.sqrt(16))


def test_equals_one_hot_times_matrix():
    emb = TokenEmbedding(10, 8, pad_id=None)
    ids = torch.tensor([[4, 7, 1]])
    one_hot = torch.nn.functional.one_hot(ids, 10).float()
    torch.testing.assert_close(emb(ids), one_hot @ emb.weight * math.sqrt(8))


def test_scaled_embeddings_have_unit_scale():
    emb = TokenEmbedding(5000, 256)
    assert 0.9 < emb(torch.arange(1, 5000)[None]).std().item() < 1.1


def test_padding_row_is_zero_and_gets_no_gradient():
    emb = TokenEmbedding(10, 8, pad_id=0)
    out = emb(torch.tensor([[0, 3, 0]]))
    assert torch.all(out[0, 0] == 0)
    out.sum().backward()
    assert torch.all(emb.weight.grad[0] == 0) and emb.weight.grad[3].abs().sum() > 0
