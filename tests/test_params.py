"""Parameter counts per component against closed-form formulas (Table 3)."""

import pytest
import torch

from transformer_lib import Transformer, TransformerConfig
from transformer_lib.params import count_parameters, formula_counts, mha_params, ffn_params


def total(model):
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"norm_first": True},
        {"tie_embeddings": False},
        {"N": 3, "d_model": 48, "d_ff": 80, "h": 6},
    ],
)
def test_counts_match_formulas_and_total(overrides):
    model = Transformer(TransformerConfig.tiny(50, **overrides))
    counts = count_parameters(model)
    assert counts == formula_counts(model.config)
    assert sum(counts.values()) == total(model)
    assert "other" not in counts


def test_untied_vocabularies_differ():
    model = Transformer(TransformerConfig.tiny(50, 70))
    counts = count_parameters(model)
    assert counts["source embedding"] == 50 * 32
    assert counts["target embedding"] == counts["output projection"] == 70 * 32
    assert sum(counts.values()) == total(model)


def test_literal_formulas():
    D, d_ff = 32, 64
    assert mha_params(D) == 4 * D * D + 4 * D
    assert ffn_params(D, d_ff) == D * d_ff + d_ff + d_ff * D + D
    attn = torch.nn.MultiheadAttention(D, 4)  # PyTorch's own module, same layout
    assert mha_params(D) == total(attn)


def test_tying_counts_the_shared_matrix_once():
    tied = Transformer(TransformerConfig.tiny(50))
    untied = Transformer(TransformerConfig.tiny(50, tie_embeddings=False))
    assert total(untied) - total(tied) == 2 * 50 * 32
    assert count_parameters(tied)["embeddings (shared)"] == 50 * 32


@pytest.mark.parametrize("preset, low, high", [("base", 60e6, 66e6), ("big", 205e6, 220e6)])
def test_presets_near_table3(preset, low, high):
    config = getattr(TransformerConfig, preset)()
    with torch.device("meta"):  # shapes only, no memory
        model = Transformer(config)
    counts = count_parameters(model)
    assert counts == formula_counts(config)
    assert low < sum(counts.values()) == total(model) < high


def test_rejects_non_module():
    with pytest.raises(TypeError, match="model"):
        count_parameters("not a model")
