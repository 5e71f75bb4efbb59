import torch

from transformer_lib import causal_mask, combine, decoder_mask, padding_mask, to_blocked


def test_padding_mask_shape_and_meaning():
    ids = torch.tensor([[5, 6, 0, 0], [7, 0, 0, 0]])
    m = padding_mask(ids, pad_id=0)
    assert m.shape == (2, 1, 1, 4) and m.dtype == torch.bool
    assert m[0, 0, 0].tolist() == [True, True, False, False]


def test_causal_mask_is_lower_triangular():
    m = causal_mask(4)
    assert m.shape == (1, 1, 4, 4)
    for q in range(4):
        for k in range(4):
            assert bool(m[0, 0, q, k]) == (k <= q)


def test_causal_mask_with_past_positions():
    m = causal_mask(2, past=3)  # queries at positions 3 and 4
    assert m.shape == (1, 1, 2, 5)
    assert m[0, 0].tolist() == [[True] * 4 + [False], [True] * 5]


def test_decoder_mask_is_causal_and_padding():
    tgt = torch.tensor([[3, 4, 0]])
    m = decoder_mask(tgt, pad_id=0)
    assert m.shape == (1, 1, 3, 3)
    assert m[0, 0].tolist() == [[True, False, False], [True, True, False], [True, True, False]]
    torch.testing.assert_close(m, combine(padding_mask(tgt, 0), causal_mask(3)))


def test_combine_and_to_blocked():
    a = torch.tensor([True, False, True])
    assert combine(None, None) is None
    assert combine(a, None) is a
    assert combine(a, torch.tensor([True, True, False])).tolist() == [True, False, False]
    assert to_blocked(a).tolist() == [False, True, False]
