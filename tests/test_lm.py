"""The decoder-only model and the changes since 2017: each piece against its reference
(torch.nn.RMSNorm, the complex-number rotary embedding, scaled_dot_product_attention with
enable_gqa, the encoder-decoder's decoder layer), and every variant causal and equal with
and without its key/value cache."""

import pytest
import torch
import torch.nn.functional as F

from transformer_lib.attention import MultiHeadAttention
from transformer_lib.config import TransformerConfig
from transformer_lib.decoder import DecoderLayer
from transformer_lib.lm import (
    GroupedQueryAttention,
    LanguageModel,
    LMBlock,
    LMConfig,
    RMSNorm,
    SwiGLU,
    generate,
    rope,
)
from transformer_lib.masks import causal_mask

VARIANTS = {
    "paper": {},
    "pre-norm": {"norm_first": True},
    "rmsnorm": {"norm": "rms", "norm_first": True},
    "swiglu": {"ffn": "swiglu"},
    "rope": {"positions": "rope"},
    "learned": {"positions": "learned"},
    "gqa": {"kv_heads": 2},
    "mqa": {"kv_heads": 1},
    "all": {"norm_first": True, "norm": "rms", "ffn": "swiglu", "positions": "rope", "kv_heads": 2},
}


def small(**changes):
    torch.manual_seed(0)
    config = LMConfig(vocab_size=37, N=2, d_model=32, h=4, d_ff=64, P_drop=0.0, max_len=40)
    return LanguageModel(LMConfig(**{**config.__dict__, **changes})).eval()


def test_rmsnorm_equals_torchs():
    torch.manual_seed(0)
    ours, ref = RMSNorm(16), torch.nn.RMSNorm(16, eps=1e-6)
    with torch.no_grad():
        ours.weight.normal_()
        ref.weight.copy_(ours.weight)
    x = torch.randn(3, 5, 16) * 4 + 1
    torch.testing.assert_close(ours(x), ref(x))


def test_rope_equals_the_complex_number_formulation():
    """Pair (2i, 2i+1) as the complex number x_2i + i x_2i+1, times e^(i p theta_i)."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 7, 8, dtype=torch.float64)
    theta = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    for start in (0, 5):
        pos = torch.arange(start, start + 7, dtype=torch.float64)
        turn = torch.polar(torch.ones(7, 4, dtype=torch.float64), pos[:, None] * theta)
        z = torch.view_as_complex(x.reshape(2, 3, 7, 4, 2).contiguous()) * turn
        torch.testing.assert_close(rope(x, start), torch.view_as_real(z).flatten(-2))


def test_rope_scores_depend_on_the_distance_only():
    torch.manual_seed(0)
    q, k = (
        torch.randn(1, 1, 1, 16, dtype=torch.float64),
        torch.randn(1, 1, 1, 16, dtype=torch.float64),
    )
    scores = [(rope(q, p) * rope(k, p + 3)).sum() for p in (0, 7, 20)]
    torch.testing.assert_close(scores[0], scores[1])
    torch.testing.assert_close(scores[0], scores[2])
    assert not torch.allclose((rope(q, 0) * rope(k, 3)).sum(), (q * k).sum())


@pytest.mark.parametrize("kv_heads", [1, 2, 4])
def test_grouped_query_attention_equals_sdpa_with_enable_gqa(kv_heads):
    torch.manual_seed(0)
    layer = GroupedQueryAttention(32, 4, kv_heads).eval()
    x = torch.randn(2, 6, 32)
    out, _ = layer(x, mask=causal_mask(6))
    q = layer.q_proj(x).view(2, 6, 4, 8).transpose(1, 2)
    k, v = layer.kv_proj(x).view(2, 6, 2 * kv_heads, 8).transpose(1, 2).chunk(2, 1)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    torch.testing.assert_close(out, layer.out_proj(ref.transpose(1, 2).reshape(2, 6, 32)))


def test_grouped_query_attention_with_h_kv_heads_is_multi_head_attention():
    torch.manual_seed(0)
    mha, gqa = MultiHeadAttention(32, 4).eval(), GroupedQueryAttention(32, 4, 4).eval()
    w_q, w_k, w_v = mha.in_proj.weight.chunk(3)
    b_q, b_k, b_v = mha.in_proj.bias.chunk(3)
    with torch.no_grad():
        gqa.q_proj.weight.copy_(w_q), gqa.q_proj.bias.copy_(b_q)
        (
            gqa.kv_proj.weight.copy_(torch.cat((w_k, w_v))),
            gqa.kv_proj.bias.copy_(torch.cat((b_k, b_v))),
        )
        gqa.out_proj.load_state_dict(mha.out_proj.state_dict())
    x, mask = torch.randn(2, 5, 32), causal_mask(5)
    torch.testing.assert_close(gqa(x, mask=mask)[0], mha(x, mask=mask)[0])


@pytest.mark.parametrize("norm_first", [False, True])
def test_a_block_is_the_decoder_layer_without_its_cross_attention(norm_first):
    torch.manual_seed(0)
    layer = DecoderLayer(
        TransformerConfig(11, 11, d_model=32, h=4, d_ff=64, P_drop=0.0, norm_first=norm_first)
    ).eval()
    block = LMBlock(LMConfig(11, d_model=32, h=4, d_ff=64, P_drop=0.0, norm_first=norm_first))
    kept = {k: v for k, v in layer.state_dict().items() if not k.startswith("cross_")}
    block.load_state_dict(kept)  # strict: the same names, nothing left over
    x, mask = torch.randn(2, 6, 32), causal_mask(6)
    y, _ = layer.self_block(x, layer.self_attn, mask=mask)
    torch.testing.assert_close(block.eval()(x, mask), layer.ff_block(y, layer.feed_forward))


def test_swiglu_is_the_gated_formula():
    torch.manual_seed(0)
    ffn, x = SwiGLU(16, 24), torch.randn(2, 3, 16)
    W, V, W2 = ffn.w_gate.weight, ffn.w_up.weight, ffn.w_down.weight
    torch.testing.assert_close(ffn(x), (F.silu(x @ W.T) * (x @ V.T)) @ W2.T)


@pytest.mark.parametrize("name", VARIANTS)
def test_every_variant_is_causal(name):
    model = small(**VARIANTS[name])
    ids = torch.randint(1, 37, (2, 12))
    changed = ids.clone()
    changed[:, 7:] = torch.randint(1, 37, (2, 5))
    with torch.no_grad():
        a, b = model(ids), model(changed)
    torch.testing.assert_close(a[:, :7], b[:, :7])
    assert not torch.allclose(a[:, 7:], b[:, 7:])


@pytest.mark.parametrize("name", VARIANTS)
def test_every_variant_gives_the_same_logits_with_and_without_its_cache(name):
    model = small(**VARIANTS[name])
    ids = torch.randint(1, 37, (2, 10))
    with torch.no_grad():
        full = model(ids)
        cache = model.new_cache()
        steps = [model(ids[:, :4], cache)] + [model(ids[:, t : t + 1], cache) for t in range(4, 10)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-4)


def test_grouped_query_attention_caches_fewer_heads():
    sizes = {}
    for kv in (4, 2, 1):
        model, cache = small(kv_heads=kv), None
        cache = model.new_cache()
        with torch.no_grad():
            model(torch.randint(1, 37, (1, 9)), cache)
        sizes[kv] = sum(t.numel() for layer in cache for t in layer.values())
    assert sizes == {4: 2 * 2 * 9 * 32, 2: 2 * 2 * 9 * 16, 1: 2 * 2 * 9 * 8}  # N x (k, v) x T x G d


def test_generate_greedy_is_the_argmax_of_the_full_pass_and_top_1_sampling_is_greedy():
    model = small(positions="rope", kv_heads=2)
    prompt = torch.randint(3, 37, (2, 4))
    out = generate(model, prompt, 6, temperature=0)
    with torch.no_grad():
        logits = model(out[:, :-1])
    assert torch.equal(out[:, 4:], logits[:, 3:].argmax(-1))
    g = torch.Generator().manual_seed(1)
    assert torch.equal(generate(model, prompt, 6, temperature=0.7, top_k=1, generator=g), out)
    sampled = generate(model, prompt, 6, temperature=1.5, generator=g)
    assert sampled.shape == (2, 10) and torch.equal(sampled[:, :4], prompt)


def test_generate_stops_rows_at_eos():
    model = small()
    out = generate(
        model,
        torch.randint(3, 37, (3, 2)),
        20,
        temperature=1.0,
        eos_id=5,
        generator=torch.Generator().manual_seed(0),
    )
    for row in out[:, 2:]:
        hits = (row == 5).nonzero()
        if len(hits):
            assert (row[hits[0, 0] :] == 5).all()


def test_bad_input_names_the_argument():
    model = small()
    with pytest.raises(ValueError, match="kv_heads must divide h"):
        LMConfig(37, h=4, kv_heads=3)
    with pytest.raises(ValueError, match="norm"):
        LMConfig(37, norm="batch")
    with pytest.raises(ValueError, match="temperature"):
        generate(model, torch.ones(1, 2, dtype=torch.long), 3, temperature=-1.0)
    with pytest.raises(ValueError, match="top_k"):
        generate(model, torch.ones(1, 2, dtype=torch.long), 3, top_k=0)
    with pytest.raises(ValueError, match="ids"):
        model(torch.full((1, 3), 99))
    with pytest.raises(ValueError, match="max_len=40"):
        model(torch.ones(1, 41, dtype=torch.long))
