"""The lesson's layers against their formulas and against PyTorch's own modules with copied
weights: embeddings, positions, masks, attention (explicit == fused), multi-head attention,
the feed-forward network, the residual blocks, and the encoder and decoder layers."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_lib.attention import MultiHeadAttention, attention, fused_attention
from transformer_lib.config import TransformerConfig
from transformer_lib.decoder import Decoder
from transformer_lib.embedding import TokenEmbedding
from transformer_lib.encoder import Encoder
from transformer_lib.feedforward import PositionwiseFeedForward
from transformer_lib.masks import causal_mask, decoder_mask, padding_mask, to_blocked
from transformer_lib.positional import PositionalEncoding, sinusoidal_table
from transformer_lib.residual import ResidualNorm

B, H, T, S, D = 3, 4, 5, 7, 32


def close(a, b, **kw):
    torch.testing.assert_close(a, b, **({"atol": 1e-5, "rtol": 1e-4} | kw))


# embeddings and positions ---------------------------------------------------------------
def test_embedding_is_one_hot_times_the_matrix_times_sqrt_d_model():
    emb = TokenEmbedding(10, 8, pad_id=0)
    ids = torch.tensor([[4, 7, 0, 1]])
    close(emb(ids), F.one_hot(ids, 10).float() @ emb.weight * math.sqrt(8))
    assert torch.all(emb.weight[0] == 0)  # the padding row
    emb(ids).sum().backward()
    assert torch.all(emb.weight.grad[0] == 0) and emb.weight.grad[4].abs().sum() > 0


def test_scaled_embeddings_have_unit_variance():
    emb = TokenEmbedding(4000, 256, pad_id=None)
    assert abs(emb(torch.arange(4000)[None]).var().item() - 1.0) < 0.05


def test_sinusoidal_table_is_the_formula_of_section_3_5():
    d = 16
    pe = torch.zeros(60, d, dtype=torch.float64)
    for pos in range(60):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            pe[pos, 2 * i], pe[pos, 2 * i + 1] = math.sin(angle), math.cos(angle)
    close(sinusoidal_table(60, d, dtype=torch.float64), pe, atol=1e-12, rtol=0)
    perm = list(range(0, d, 2)) + list(range(1, d, 2))  # [sin | cos]
    close(sinusoidal_table(60, d, layout="concat", dtype=torch.float64), pe[:, perm])


def test_a_fixed_offset_is_a_linear_map_of_the_positions():
    """PE[pos + k] = M_k PE[pos] with M_k a rotation per sin/cos pair (§3.5)."""
    d, k = 16, 7
    pe = sinusoidal_table(100, d, dtype=torch.float64)
    blocks = []
    for i in range(d // 2):
        w = k / 10000 ** (2 * i / d)
        c, s = math.cos(w), math.sin(w)
        blocks.append(torch.tensor([[c, s], [-s, c]], dtype=torch.float64))
    close(pe[:-k] @ torch.block_diag(*blocks).T, pe[k:], atol=1e-10, rtol=0)


def test_positional_encoding_adds_the_table_from_an_offset_with_dropout_in_training_only():
    pe = PositionalEncoding(8, max_len=20, dropout=0.5)
    assert "pe" in pe.state_dict() and not list(pe.parameters())  # a buffer
    x = torch.ones(2, 5, 8)
    close(pe.eval()(x), x + pe.pe[:5])
    close(pe(x[:, :1], offset=4), x[:, :1] + pe.pe[4:5])
    assert (pe.train()(x) == 0).any()
    learned = PositionalEncoding(8, max_len=20, dropout=0.0, learned=True)
    assert [n for n, _ in learned.named_parameters()] == ["pe"]
    close(learned(x), x + learned.pe[:5])


# masks ------------------------------------------------------------------------------------
def test_masks_true_means_may_attend():
    ids = torch.tensor([[5, 6, 0], [7, 0, 0]])
    assert padding_mask(ids, 0).tolist() == [[[[True, True, False]]], [[[True, False, False]]]]
    assert torch.equal(causal_mask(3)[0, 0], torch.ones(3, 3, dtype=torch.bool).tril())
    assert causal_mask(2, past=3)[0, 0].tolist() == [[True] * 4 + [False], [True] * 5]
    assert torch.equal(decoder_mask(ids, 0), padding_mask(ids, 0) & causal_mask(3))
    assert torch.equal(to_blocked(causal_mask(3)), ~causal_mask(3))


# attention ----------------------------------------------------------------------------------
def qkv(t=T, s=S, d_k=8, grad=False):
    return tuple(torch.randn(B, H, n, d_k, requires_grad=grad) for n in (t, s, s))


def test_explicit_attention_is_equation_1():
    q, k, v = qkv()
    out, w = attention(q, k, v)
    expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8), dim=-1)
    close(w, expected)
    close(out, expected @ v)


def some_masks():
    keep = torch.ones(B, S, dtype=torch.long)
    keep[0, 4:] = 0
    fully = torch.ones(B, 1, S, S, dtype=torch.bool)
    fully[1, :, 2] = False  # query 2 of item 1 sees nothing
    fully[2] = False  # item 2 sees nothing at all
    return {
        "none": None,
        "padding": padding_mask(keep, 0),
        "causal": causal_mask(S),
        "both": decoder_mask(keep, 0),
        "fully masked rows": fully,
    }


@pytest.mark.parametrize("kind", list(some_masks()))
def test_explicit_and_fused_attention_agree_in_values_and_gradients(kind):
    mask = some_masks()[kind]
    q, k, v = qkv(t=S, grad=True)
    explicit, weights = attention(q, k, v, mask)
    grads = torch.autograd.grad(explicit.pow(2).sum(), (q, k, v))
    fused = fused_attention(q, k, v, mask)
    close(fused, explicit)
    for got, expected in zip(torch.autograd.grad(fused.pow(2).sum(), (q, k, v)), grads):
        assert not got.isnan().any()
        close(got, expected)
    if kind == "fully masked rows":  # zeros, not NaN
        assert torch.all(explicit[2] == 0) and torch.all(weights[2] == 0)
        assert torch.all(fused[1, :, 2] == 0) and torch.all(fused[2] == 0)


def test_masked_keys_get_zero_weight_and_their_values_change_nothing():
    q, k, v = qkv()
    mask = torch.ones(1, 1, 1, S, dtype=torch.bool)
    mask[..., -2:] = False
    out, w = attention(q, k, v, mask)
    assert torch.all(w[..., -2:] == 0)
    k2, v2 = k.clone(), v.clone()
    k2[..., -2:, :] += 100.0
    v2[..., -2:, :] -= 100.0
    close(attention(q, k2, v2, mask)[0], out)
    close(fused_attention(q, k2, v2, mask), out)


def mha(d_k=None, bias=True):
    layer = MultiHeadAttention(D, H, d_k=d_k)
    if bias:
        nn.init.normal_(layer.in_proj.bias)  # non-zero biases are copied too
        nn.init.normal_(layer.out_proj.bias)
    return layer


@pytest.mark.parametrize("masks", ["none", "padding", "causal", "both"])
@pytest.mark.parametrize("need_weights", [False, True])
def test_self_attention_equals_torch_multihead_attention(masks, need_weights):
    layer = mha().eval()
    ref = layer.to_torch()
    x = torch.randn(B, T, D)
    ids = torch.ones(B, T, dtype=torch.long)
    ids[0, 3:] = 0
    ids[2, 4:] = 0
    pad = masks in ("padding", "both")
    causal = masks in ("causal", "both")
    keep = decoder_mask(ids, 0) if pad and causal else padding_mask(ids, 0) if pad else None
    keep = causal_mask(T) if causal and not pad else keep
    out, w = layer(x, mask=keep, need_weights=need_weights)
    ref_out, ref_w = ref(  # nn.MultiheadAttention: True = *blocked*, (B, T) and (T, T) masks
        x,
        x,
        x,
        average_attn_weights=False,
        key_padding_mask=to_blocked(ids != 0) if pad else None,
        attn_mask=to_blocked(causal_mask(T)[0, 0]) if causal else None,
    )
    close(out, ref_out)
    if need_weights:
        close(w, ref_w)
    else:
        assert w is None


def test_cross_attention_and_its_gradients_equal_torch_multihead_attention():
    layer = mha()
    ref = layer.to_torch()
    x, memory = torch.randn(B, T, D), torch.randn(B, S, D)
    src = torch.ones(B, S, dtype=torch.long)
    src[1, 5:] = 0
    out, _ = layer(x, memory, mask=padding_mask(src, 0))  # the fused path, in training mode
    ref_out, _ = ref(x, memory, memory, key_padding_mask=to_blocked(src != 0))
    close(out, ref_out)
    g = torch.randn_like(out)
    out.backward(g)
    ref_out.backward(g)
    close(layer.in_proj.weight.grad, ref.in_proj_weight.grad)
    close(layer.in_proj.bias.grad, ref.in_proj_bias.grad)
    close(layer.out_proj.weight.grad, ref.out_proj.weight.grad)


def test_our_mask_given_unconverted_to_pytorch_blocks_the_wrong_keys():
    layer = mha().eval()
    x = torch.randn(B, T, D)
    ours, _ = layer(x, mask=causal_mask(T))
    wrong, _ = layer.to_torch()(x, x, x, attn_mask=causal_mask(T)[0, 0])
    assert not torch.allclose(ours, wrong, atol=1e-3)


@pytest.mark.parametrize("d_k", [None, 4, 12])
def test_incremental_self_attention_with_a_cache_equals_the_full_pass(d_k):
    layer = mha(d_k).eval()
    x = torch.randn(B, T, D)
    full, _ = layer(x, mask=causal_mask(T))
    cache = {}
    steps = [layer(x[:, t : t + 1], cache=cache)[0] for t in range(T)]
    close(torch.cat(steps, dim=1), full)
    assert cache["k"].shape == (B, H, T, d_k or D // H) and cache["v"].shape == (B, H, T, D // H)


def test_d_k_other_than_d_model_over_h_sizes_queries_and_keys_only():
    layer = mha(d_k=12)
    assert layer.in_proj.weight.shape == (2 * H * 12 + D, D)
    x = torch.randn(B, T, D)
    out, w = layer.eval()(x, mask=causal_mask(T), need_weights=True)
    assert out.shape == (B, T, D) and w.shape == (B, H, T, T)
    close(layer(x, mask=causal_mask(T))[0], out)  # fused == explicit
    with pytest.raises(ValueError, match="d_k"):
        layer.to_torch()


def test_weights_are_returned_per_call_not_kept():
    layer = mha().eval()
    _, w1 = layer(torch.randn(1, 3, D), need_weights=True)
    _, w2 = layer(torch.randn(1, 4, D), need_weights=True)
    assert w1.shape == (1, H, 3, 3) and w2.shape == (1, H, 4, 4)
    assert not any(isinstance(v, torch.Tensor) for v in vars(layer).values())


# feed-forward and residual blocks ------------------------------------------------------------
def test_feed_forward_is_equation_2_at_each_position():
    ffn = PositionwiseFeedForward(8, 32, dropout=0.0)
    x = torch.randn(2, 5, 8)
    w1, b1, w2, b2 = ffn.w_1.weight, ffn.w_1.bias, ffn.w_2.weight, ffn.w_2.bias
    close(ffn(x), torch.clamp(x @ w1.T + b1, min=0) @ w2.T + b2)
    close(ffn(x)[:, 2], ffn(x[:, 2:3])[:, 0])


def test_post_norm_and_pre_norm_residual_blocks():
    x, sublayer = torch.randn(2, 4, 6), lambda x: 3.0 * x + 1.0
    post, pre = ResidualNorm(6, dropout=0.0), ResidualNorm(6, dropout=0.0, norm_first=True)
    close(post(x, sublayer), post.norm(x + sublayer(x)))  # LayerNorm(x + Sublayer(x))
    close(pre(x, sublayer), x + sublayer(pre.norm(x)))  # x + Sublayer(LayerNorm(x))
    dropped = ResidualNorm(6, dropout=0.999, norm_first=True).train()
    close(dropped(x, sublayer), x)  # dropout on the branch only
    attn = MultiHeadAttention(6, 2).eval()
    out, weights = pre(x, attn, need_weights=True)
    expected, expected_weights = attn(pre.norm(x), need_weights=True)
    close(out, x + expected)
    close(weights, expected_weights)


# the encoder and decoder against nn.TransformerEncoder / nn.TransformerDecoder --------------
def copy_linear(src, dst):
    dst.weight.copy_(src.weight)
    dst.bias.copy_(src.bias)


def copy_attention(src, dst):
    dst.in_proj_weight.copy_(src.in_proj.weight)
    dst.in_proj_bias.copy_(src.in_proj.bias)
    copy_linear(src.out_proj, dst.out_proj)


def torch_stack(ours, c, decoder):
    kind = nn.TransformerDecoderLayer if decoder else nn.TransformerEncoderLayer
    layer = kind(c.d_model, c.h, c.d_ff, dropout=0.0, batch_first=True, norm_first=c.norm_first)
    final = nn.LayerNorm(c.d_model) if c.norm_first else None
    if decoder:
        ref = nn.TransformerDecoder(layer, c.N, norm=final)
    else:
        ref = nn.TransformerEncoder(layer, c.N, norm=final, enable_nested_tensor=False)
    with torch.no_grad():
        for mine, theirs in zip(ours.layers, ref.layers):
            copy_attention(mine.self_attn, theirs.self_attn)
            copy_linear(mine.feed_forward.w_1, theirs.linear1)
            copy_linear(mine.feed_forward.w_2, theirs.linear2)
            norms = (
                ("self_block", "cross_block", "ff_block") if decoder else ("attn_block", "ff_block")
            )
            for i, name in enumerate(norms, start=1):
                copy_linear(getattr(mine, name).norm, getattr(theirs, f"norm{i}"))
            if decoder:
                copy_attention(mine.cross_attn, theirs.multihead_attn)
        if final is not None:
            copy_linear(ours.norm, ref.norm)
    return ref.eval()


def random_weights(module):
    for p in module.parameters():  # non-trivial norms and biases
        nn.init.normal_(p, std=0.3)
    return module.eval()


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_encoder_equals_torch_transformer_encoder(norm_first):
    c = TransformerConfig.tiny(P_drop=0.0, N=2, norm_first=norm_first)
    ours = random_weights(Encoder(c))
    ref = torch_stack(ours, c, decoder=False)
    x = torch.randn(3, 6, c.d_model)
    ids = torch.ones(3, 6, dtype=torch.long)
    ids[0, 4:] = 0
    ids[2, 1:] = 0
    out, weights = ours(x, padding_mask(ids, 0))
    expected = ref(x, src_key_padding_mask=to_blocked(ids != 0))
    keep = ids != 0  # PyTorch leaves padded rows unspecified
    close(out[keep], expected[keep])
    assert weights == [None] * c.N
    _, weights = ours(x, need_weights=True)
    assert [w.shape for w in weights] == [(3, c.h, 6, 6)] * c.N


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_decoder_equals_torch_transformer_decoder(norm_first):
    c = TransformerConfig.tiny(P_drop=0.0, N=2, norm_first=norm_first)
    ours = random_weights(Decoder(c))
    ref = torch_stack(ours, c, decoder=True)
    y, memory = torch.randn(2, 5, c.d_model), torch.randn(2, 7, c.d_model)
    src, tgt = torch.ones(2, 7, dtype=torch.long), torch.ones(2, 5, dtype=torch.long)
    src[1, 3:] = 0
    tgt[0, 3:] = 0
    out, weights = ours(y, memory, decoder_mask(tgt, 0), padding_mask(src, 0), need_weights=True)
    expected = ref(
        y,
        memory,
        tgt_mask=to_blocked(causal_mask(5)[0, 0]),
        tgt_key_padding_mask=to_blocked(tgt != 0),
        memory_key_padding_mask=to_blocked(src != 0),
    )
    close(out, expected)
    assert weights[0]["self"].shape == (2, c.h, 5, 5)
    assert weights[0]["cross"].shape == (2, c.h, 5, 7)
    assert torch.all(weights[0]["self"].triu(1) == 0)  # no weight on the future
