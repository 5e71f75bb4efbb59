import math

import pytest
import torch

from transformer_lib import PositionalEncoding, sinusoidal_table


def formula_float64(max_len, d_model):
    """§3.5 written literally, one entry at a time, in float64."""
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    for pos in range(max_len):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            pe[pos, 2 * i], pe[pos, 2 * i + 1] = math.sin(angle), math.cos(angle)
    return pe


def test_table_matches_the_formula():
    expected = formula_float64(60, 16)
    torch.testing.assert_close(sinusoidal_table(60, 16, dtype=torch.float64), expected)
    torch.testing.assert_close(sinusoidal_table(60, 16), expected.float(), atol=1e-6, rtol=0)


def test_concat_layout_is_a_permutation_of_the_interleaved_one():
    inter, concat = sinusoidal_table(50, 12), sinusoidal_table(50, 12, layout="concat")
    perm = list(range(0, 12, 2)) + list(range(1, 12, 2))
    torch.testing.assert_close(concat, inter[:, perm])
    assert not torch.allclose(concat, inter)


def test_relative_offset_is_a_fixed_linear_map():
    """PE[pos + k] = M_k PE[pos] for one matrix M_k (block-diagonal rotations), all pos."""
    d, k = 16, 7
    pe = sinusoidal_table(100, d, dtype=torch.float64)
    blocks = []
    for i in range(d // 2):
        w = 1 / 10000 ** (2 * i / d)
        c, s = math.cos(k * w), math.sin(k * w)
        blocks.append(torch.tensor([[c, s], [-s, c]], dtype=torch.float64))
    M = torch.block_diag(*blocks)
    torch.testing.assert_close(pe[:-k] @ M.T, pe[k:])
    # M_k is a rotation, so the similarity PE[pos] . PE[pos + k] does not depend on pos
    torch.testing.assert_close(M @ M.T, torch.eye(d, dtype=torch.float64))
    dots = (pe[:-k] * pe[k:]).sum(-1)
    torch.testing.assert_close(dots, dots[0].expand_as(dots))


def test_buffer_sliced_to_input_length_and_saved():
    pe = PositionalEncoding(8, max_len=20, dropout=0.0)
    assert "pe" in pe.state_dict() and not list(pe.parameters())
    x = torch.zeros(2, 5, 8)
    torch.testing.assert_close(pe(x), pe.pe[:5].expand(2, 5, 8))
    torch.testing.assert_close(pe(x[:, :1], offset=4), pe.pe[4:5].expand(2, 1, 8))


def test_dropout_applies_in_training_only():
    pe = PositionalEncoding(8, max_len=20, dropout=0.5)
    x = torch.ones(4, 10, 8)
    assert (pe.train()(x) == 0).any()
    torch.testing.assert_close(pe.eval()(x), x + pe.pe[:10])


def test_too_long_input_raises_clear_error():
    pe = PositionalEncoding(8, max_len=20)
    with pytest.raises(ValueError, match="max_len=20"):
        pe(torch.zeros(1, 21, 8))


def test_odd_d_model_rejected():
    with pytest.raises(ValueError, match="even"):
        sinusoidal_table(10, 7)
