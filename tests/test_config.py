import dataclasses

import pytest

from transformer_lib import TransformerConfig


def test_presets_match_table_3():
    base, big = TransformerConfig.base(), TransformerConfig.big()
    assert (base.N, base.d_model, base.d_ff, base.h, base.d_k, base.P_drop) == (
        6,
        512,
        2048,
        8,
        64,
        0.1,
    )
    assert (big.N, big.d_model, big.d_ff, big.h, big.d_k, big.P_drop) == (
        6,
        1024,
        4096,
        16,
        64,
        0.3,
    )
    assert base.src_vocab_size == base.tgt_vocab_size == 37000 and base.tie_embeddings


def test_config_is_frozen_and_replace_revalidates():
    c = TransformerConfig.tiny()
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.d_model = 64
    assert c.replace(d_model=64).d_model == 64
    with pytest.raises(ValueError, match="divisible"):
        c.replace(d_model=30, h=4)


def test_different_vocabularies_untie_by_default():
    c = TransformerConfig.tiny(src_vocab_size=40, tgt_vocab_size=30)
    assert not c.tie_embeddings
    with pytest.raises(ValueError, match="tie_embeddings"):
        TransformerConfig.tiny(src_vocab_size=40, tgt_vocab_size=30, tie_embeddings=True)


@pytest.mark.parametrize(
    "changes, argument",
    [
        (dict(d_model=30, h=4), "d_model"),  # not divisible by heads
        (dict(d_model=33, h=1), "even"),  # odd d_model for sinusoids
        (dict(N=0), "N"),
        (dict(d_ff=-1), "d_ff"),
        (dict(h=0), "h"),
        (dict(max_len=0), "max_len"),
        (dict(src_vocab_size=0), "src_vocab_size"),
        (dict(P_drop=1.0), "P_drop"),
        (dict(P_drop=-0.1), "P_drop"),
        (dict(attn_drop=1.5), "attn_drop"),
        (dict(pad_id=64), "pad_id"),
        (dict(pe_layout="rotary"), "pe_layout"),
    ],
)
def test_invalid_configs_name_the_argument(changes, argument):
    with pytest.raises(ValueError, match=argument):
        TransformerConfig.tiny(**changes)


def test_a_float_size_is_a_type_error():
    with pytest.raises(TypeError, match=r"N must be an integer, got 2.0 \(float\)"):
        TransformerConfig.tiny(N=2.0)
