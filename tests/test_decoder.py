import pytest
import torch
from torch import nn

from transformer_lib import Decoder, TransformerConfig, causal_mask, padding_mask, to_blocked
from test_encoder import copy_attention, copy_linear


def torch_decoder_from(ours: Decoder, c: TransformerConfig) -> nn.TransformerDecoder:
    layer = nn.TransformerDecoderLayer(
        c.d_model,
        c.h,
        c.d_ff,
        dropout=0.0,
        batch_first=True,
        norm_first=c.norm_first,
        layer_norm_eps=c.layer_norm_eps,
    )
    final = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps) if c.norm_first else None
    ref = nn.TransformerDecoder(layer, c.N, norm=final)
    with torch.no_grad():
        for mine, theirs in zip(ours.layers, ref.layers):
            copy_attention(mine.self_attn, theirs.self_attn)
            copy_attention(mine.cross_attn, theirs.multihead_attn)
            copy_linear(mine.feed_forward.w_1, theirs.linear1)
            copy_linear(mine.feed_forward.w_2, theirs.linear2)
            copy_linear(mine.self_block.norm, theirs.norm1)
            copy_linear(mine.cross_block.norm, theirs.norm2)
            copy_linear(mine.ff_block.norm, theirs.norm3)
        if final is not None:
            copy_linear(ours.norm, ref.norm)
    return ref.eval()


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("padded", [False, True])
def test_decoder_equals_torch_transformer_decoder(norm_first, padded):
    c = TransformerConfig.tiny(P_drop=0.0, N=3, norm_first=norm_first)
    ours = Decoder(c).eval()
    for p in ours.parameters():
        nn.init.normal_(p, std=0.3)
    ref = torch_decoder_from(ours, c)
    y, memory = torch.randn(2, 5, c.d_model), torch.randn(2, 7, c.d_model)
    src, tgt = torch.ones(2, 7, dtype=torch.long), torch.ones(2, 5, dtype=torch.long)
    if padded:
        src[1, 3:] = 0
        tgt[0, 3:] = 0
    out, _ = ours(y, memory, padding_mask(tgt, 0), padding_mask(src, 0), is_causal=True)
    expected = ref(
        y,
        memory,
        tgt_mask=to_blocked(causal_mask(5)[0, 0]),
        tgt_key_padding_mask=to_blocked(tgt != 0),
        memory_key_padding_mask=to_blocked(src != 0),
    )
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)


def test_decoder_returns_self_and_cross_weights():
    c = TransformerConfig.tiny(P_drop=0.0)
    _, weights = Decoder(c).eval()(
        torch.randn(2, 4, c.d_model),
        torch.randn(2, 6, c.d_model),
        need_weights=True,
        is_causal=True,
    )
    assert len(weights) == c.N
    assert weights[0]["self"].shape == (2, c.h, 4, 4)
    assert weights[0]["cross"].shape == (2, c.h, 4, 6)
    assert torch.all(weights[0]["self"].triu(1) == 0)  # no weight on the future
