import pytest
import torch
from torch import nn

from transformer_lib import Encoder, TransformerConfig, padding_mask, to_blocked


def torch_encoder_from(ours: Encoder, c: TransformerConfig) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(
        c.d_model,
        c.h,
        c.d_ff,
        dropout=0.0,
        batch_first=True,
        norm_first=c.norm_first,
        layer_norm_eps=c.layer_norm_eps,
    )
    final = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps) if c.norm_first else None
    ref = nn.TransformerEncoder(layer, c.N, norm=final, enable_nested_tensor=False)
    with torch.no_grad():
        for mine, theirs in zip(ours.layers, ref.layers):
            copy_attention(mine.self_attn, theirs.self_attn)
            copy_linear(mine.feed_forward.w_1, theirs.linear1)
            copy_linear(mine.feed_forward.w_2, theirs.linear2)
            copy_linear(mine.attn_block.norm, theirs.norm1)
            copy_linear(mine.ff_block.norm, theirs.norm2)
        if final is not None:
            copy_linear(ours.norm, ref.norm)
    return ref.eval()


def copy_linear(src, dst):
    dst.weight.copy_(src.weight)
    dst.bias.copy_(src.bias)


def copy_attention(src, dst):
    dst.in_proj_weight.copy_(src.in_proj.weight)
    dst.in_proj_bias.copy_(src.in_proj.bias)
    copy_linear(src.out_proj, dst.out_proj)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("padded", [False, True])
def test_encoder_equals_torch_transformer_encoder(norm_first, padded):
    c = TransformerConfig.tiny(P_drop=0.0, N=3, norm_first=norm_first)
    ours = Encoder(c).eval()
    for p in ours.parameters():  # non-trivial norms and biases
        nn.init.normal_(p, std=0.3)
    ref = torch_encoder_from(ours, c)
    x = torch.randn(3, 6, c.d_model)
    ids = torch.ones(3, 6, dtype=torch.long)
    if padded:
        ids[0, 4:] = 0
        ids[2, 1:] = 0
    out, weights = ours(x, padding_mask(ids, 0))
    expected = ref(x, src_key_padding_mask=to_blocked(ids != 0))
    keep = ids != 0  # PyTorch leaves padded rows unspecified
    torch.testing.assert_close(out[keep], expected[keep], atol=1e-5, rtol=1e-4)
    assert weights == [None] * c.N


def test_encoder_returns_weights_per_layer():
    c = TransformerConfig.tiny(P_drop=0.0, N=3)
    _, weights = Encoder(c).eval()(torch.randn(2, 5, c.d_model), need_weights=True)
    assert len(weights) == 3 and all(w.shape == (2, c.h, 5, 5) for w in weights)
