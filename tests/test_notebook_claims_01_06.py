"""The numbers that the prose of notebooks 01 and 06 states, computed from the library, and
the Table 2/3 figures they quote (their shape is in test_notebook_structure.py).

When the library changes, these fail before the prose silently goes wrong."""

import math

import pytest
import torch
from torch import nn

from transformer_lib import TokenEmbedding, Transformer, TransformerConfig, sinusoidal_table
from transformer_lib.params import count_parameters, formula_counts


def rms(x: torch.Tensor) -> float:
    return x.detach().pow(2).mean().sqrt().item()


# --- notebook 01, section 3: the sqrt(d_model) factor ----------------------------------
@pytest.mark.parametrize("d", [16, 64, 512, 1024])
def test_positional_encoding_rms_is_sqrt_half_at_every_position(d):
    per_position = sinusoidal_table(200, d).pow(2).mean(dim=1).sqrt()  # (200,)
    torch.testing.assert_close(per_position, torch.full((200,), math.sqrt(0.5)))


@pytest.mark.parametrize("d", [16, 32, 128, 512, 1024])
def test_library_embedding_has_unit_rms_after_the_factor(d):
    emb = TokenEmbedding(1000, d)
    ids = torch.arange(1, 1000)[None]  # every id but <pad>
    assert abs(rms(emb.weight[1:]) * math.sqrt(d) - 1) < 0.03  # N(0, 1/d_model)
    out = rms(emb(ids))
    assert abs(out - 1) < 0.03
    assert abs(out / math.sqrt(0.5) - 1.41) < 0.05  # "1.4 times"


def test_default_init_times_factor_is_32_times_the_encoding_at_512():
    d = 512
    scaled = rms(nn.Embedding(1000, d).weight * math.sqrt(d))
    assert abs(scaled - 22.6) < 0.3  # sqrt(512) = 22.6
    ratio = scaled / rms(sinusoidal_table(1000, d))
    assert abs(ratio - 32) < 0.5  # sqrt(2 * 512) = 32
    assert abs(math.sqrt(d) - 22.6) < 0.05  # the factor alone is 22.6, not the ratio


def test_forgetting_the_factor_leaves_the_embedding_16_times_below_the_encoding():
    unscaled = rms(TokenEmbedding(1000, 512).weight[1:])  # weights, no factor
    assert abs(rms(sinusoidal_table(1000, 512)) / unscaled - 16) < 0.5


def test_tying_saves_two_vocabulary_matrices():
    cfg = TransformerConfig.tiny(12)
    n = lambda m: sum(p.numel() for p in m.parameters())
    assert (
        n(Transformer(cfg.replace(tie_embeddings=False))) - n(Transformer(cfg))
        == 2 * 12 * cfg.d_model
    )


# --- notebook 06, section 7: Tables 2 and 3 ---------------------------------------------
TABLE3 = {
    "base": dict(N=6, d_model=512, d_ff=2048, h=8, d_k=64, P_drop=0.1),
    "big": dict(N=6, d_model=1024, d_ff=4096, h=16, d_k=64, P_drop=0.3),
}


@pytest.fixture(scope="module")
def counts():
    out = {}
    for name in ("base", "big"):
        with torch.device("meta"):
            out[name] = count_parameters(Transformer(getattr(TransformerConfig, name)()))
    return out


@pytest.mark.parametrize("name", ["base", "big"])
def test_presets_match_table3(name):
    config = getattr(TransformerConfig, name)()
    assert {key: getattr(config, key) for key in TABLE3[name]} == TABLE3[name]
    assert config.tie_embeddings and config.src_vocab_size == 37000


def test_totals_next_to_table3(counts):
    base, big = sum(counts["base"].values()), sum(counts["big"].values())
    assert base == 63_082_496 and round(big / 1e5) == 2142  # 63.1M and 214.2M
    assert 0.025 < 1 - base / 65e6 < 0.035  # "3% below"
    assert 0.005 < big / 213e6 - 1 < 0.007  # "0.6% above"
    for name in ("base", "big"):
        assert counts[name] == formula_counts(getattr(TransformerConfig, name)())


def test_where_the_base_millions_go(counts):
    c = counts["base"]
    total = sum(c.values())
    encoder = sum(v for k, v in c.items() if k.startswith("encoder"))
    decoder = sum(v for k, v in c.items() if k.startswith("decoder"))
    ffn = c["encoder feed-forward"] + c["decoder feed-forward"]
    attn = sum(v for k, v in c.items() if "attention" in k)
    shared = c["embeddings (shared)"]
    assert round(shared / 1e5) == 189 and round(100 * shared / total) == 30  # 18.9M, 30%
    assert round(encoder / 1e5) == 189 and round(decoder / 1e5) == 252
    assert abs(decoder / encoder - 4 / 3) < 0.01  # "a third larger"
    assert round(ffn / 1e5) == 252 and round(attn / 1e5) == 189


def test_big_grows_layers_fourfold_and_embedding_twofold(counts):
    base, big = counts["base"], counts["big"]
    assert big["embeddings (shared)"] == 2 * base["embeddings (shared)"]
    for component in base:
        if component != "embeddings (shared)" and "norms" not in component:
            assert abs(big[component] / base[component] - 4) < 0.01


def test_no_single_vocabulary_explains_both_rounded_counts():
    V = 40_750
    base = sum(formula_counts(TransformerConfig.base(V)).values())
    big = sum(formula_counts(TransformerConfig.big(V)).values())
    assert round(base / 1e6) == 65 and round(big / 1e6) == 218
    # for any V, base rounds to 65M only if big rounds to 217M or more, not 213M
    lowest = math.ceil((64.5e6 - (base - V * 512)) / 512)
    big_at_lowest = sum(formula_counts(TransformerConfig.big(lowest)).values())
    assert big_at_lowest > 213.5e6


def test_untying_adds_38m_at_base_size():
    tied = sum(formula_counts(TransformerConfig.base()).values())
    untied = sum(formula_counts(TransformerConfig.base(tie_embeddings=False)).values())
    assert round((untied - tied) / 1e6) == 38


@pytest.mark.parametrize("hours, flops", [(12, 3.3e18), (3.5 * 24, 2.3e19)])
def test_table2_training_cost_is_time_times_gpus_times_p100_rate(hours, flops):
    assert abs(hours * 3600 * 8 * 9.5e12 / flops - 1) < 0.02


# --- both notebooks: exercises posed before they are checked; figure widths -------------


# --- notebook 06, sections 8 and 9: the date task, one date through the trained model ---
def test_the_date_task_has_29_formats_in_five_languages():
    from transformer_lib.data.dates import DATE_FORMATS, LANGUAGES

    assert len(DATE_FORMATS) == 29
    languages = set(LANGUAGES) | {f.split("_")[0] for f in DATE_FORMATS if f == "ja"}
    assert languages == {"en", "fr", "de", "es", "ja"}  # "five languages"


@pytest.fixture(scope="module")
def walk():
    from pathlib import Path

    from transformer_lib.search import greedy_decode
    from transformer_lib.training import load_model

    root = Path(__file__).resolve().parent.parent
    model, src_tok, tgt_tok = load_model(root / "checkpoints/dates.pt")
    src = torch.tensor([src_tok.encode("5 mars 2021")])
    tgt = torch.tensor([[tgt_tok.bos_id]])
    with torch.no_grad():
        logits, weights = model(src, tgt, need_weights=True)
        greedy = tgt_tok.decode(greedy_decode(model, src, max_len=12)[0].tolist())
    return src, weights["decoder_cross"][0][0, :, 0], logits[0, 0].softmax(-1), tgt_tok, greedy


def test_walk_through_numbers(walk):
    src, cross, probs, tgt_tok, greedy = walk
    assert src.shape == (1, 11)  # "11 ids"
    year = set(range(7, 11))  # "2021"
    assert sum(int(h.argmax()) in year for h in cross) == 3  # "three of the four heads"
    assert tgt_tok.id_to_token(int(probs.argmax())) == "2"  # "the next token `2`"
    assert round(probs.max().item(), 2) == 0.90  # "with probability 0.90"
    assert greedy == "2021-03-05"


def test_walk_through_prose_states_those_numbers():
    from notebook_cells import cells, source

    text = "\n".join(source(c) for c in cells("06_decoder.ipynb"))
    for fact in (
        "three of the four\nheads",
        "with probability 0.90",
        "29 formats and five languages",
        '"5 mars 2021" goes from 11 ids',
    ):
        assert fact in text, fact
