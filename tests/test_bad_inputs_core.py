"""Bad inputs to the teaching modules: each gets one TypeError or ValueError that names the
argument, what was given and what was expected (never a message from deep inside PyTorch,
never a silently wrong result).

Token ids must be ``torch.long``: every other integer dtype is refused with a message naming
the argument and ``torch.long`` (``nn.Embedding`` takes nothing else; a silent cast would hide
a wrong tensor).
"""

import pytest
import torch

from transformer_lib import (
    KVCache,
    MultiHeadAttention,
    PositionalEncoding,
    TokenEmbedding,
    Transformer,
    TransformerConfig,
    attention,
    causal_mask,
    combine,
    fused_attention,
    padding_mask,
    sinusoidal_table,
    to_blocked,
)
from transformer_lib.checks import check_token_ids

V = 20
TINY = TransformerConfig.tiny(V, N=2, d_model=16, d_ff=32, h=2)


def ids(*shape, dtype=torch.long):
    return torch.randint(1, V, shape).to(dtype)


def qkv(dtype=torch.float32):
    return (torch.randn(2, 2, 4, 8, dtype=dtype), torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8))


def model_call(src, tgt):
    return lambda: Transformer(TINY)(src, tgt)


def decode_with(cache):
    model = Transformer(TINY).eval()
    memory = model.encode(ids(2, 5))
    return lambda: model.decode(ids(2, 1), memory, cache=cache)


INT_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32]

CASES = {
    # token ids: torch.long only -------------------------------------------------------
    **{
        f"src {d}": (
            model_call(ids(2, 5, dtype=d), ids(2, 4)),
            TypeError,
            rf"src must hold integer token ids \(torch.long\), got dtype {d}",
        )
        for d in INT_DTYPES
    },
    **{
        f"tgt {d}": (
            model_call(ids(2, 5), ids(2, 4, dtype=d)),
            TypeError,
            rf"tgt must hold integer token ids \(torch.long\), got dtype {d}",
        )
        for d in INT_DTYPES
    },
    "embedding uint8 ids": (
        lambda: TokenEmbedding(V, 8)(ids(2, 3, dtype=torch.uint8)),
        TypeError,
        r"ids must hold .*\(torch.long\), got dtype torch.uint8",
    ),
    "embedding float ids": (
        lambda: TokenEmbedding(V, 8)(ids(2, 3).float()),
        TypeError,
        r"ids must hold integer token ids \(torch.long\), got dtype "
        r"torch.float32",
    ),
    "embedding ids out of range": (
        lambda: TokenEmbedding(V, 8)(ids(2, 3) + V),
        ValueError,
        r"ids holds ids outside the vocabulary \[0, 20\)",
    ),
    "embedding negative ids": (
        lambda: TokenEmbedding(V, 8)(-ids(2, 3)),
        ValueError,
        r"ids holds ids outside the vocabulary \[0, 20\): min -",
    ),
    "embedding vocab 0": (
        lambda: TokenEmbedding(0, 8),
        ValueError,
        "vocab_size must be at least 1, got 0",
    ),
    "embedding d_model 2.0": (
        lambda: TokenEmbedding(V, 2.0),
        TypeError,
        r"d_model must be an integer, got 2.0 \(float\)",
    ),
    "embedding pad_id = V": (
        lambda: TokenEmbedding(V, 8, pad_id=V),
        ValueError,
        "pad_id must be at most 19, got 20",
    ),
    # attention ------------------------------------------------------------------------
    "attention long q": (
        lambda: attention(qkv()[0].long(), *qkv()[1:]),
        TypeError,
        "q must be a floating-point tensor, got dtype torch.int64",
    ),
    "fused long q": (
        lambda: fused_attention(qkv()[0].long(), *qkv()[1:]),
        TypeError,
        "q must be a floating-point tensor, got dtype torch.int64",
    ),
    "attention float64 q, float32 k": (
        lambda: attention(*qkv(torch.float64)),
        TypeError,
        "q, k and v must have the same dtype, got torch.float64, torch.float32 and torch.float32",
    ),
    "fused float64 q, float32 k": (
        lambda: fused_attention(*qkv(torch.float64)),
        TypeError,
        "q, k and v must have the same dtype",
    ),
    "attention dropout_p -0.5": (
        lambda: attention(*qkv(), dropout_p=-0.5),
        ValueError,
        r"dropout_p must be in \[0.0, 1.0\), got -0.5",
    ),
    "fused dropout_p 1.0": (
        lambda: fused_attention(*qkv(), dropout_p=1.0),
        ValueError,
        r"dropout_p must be in \[0.0, 1.0\), got 1.0",
    ),
    "attention dropout_p '0.1'": (
        lambda: attention(*qkv(), dropout_p="0.1"),
        TypeError,
        "dropout_p must be a number, got '0.1'",
    ),
    "MHA h 0": (lambda: MultiHeadAttention(8, 0), ValueError, "h must be at least 1, got 0"),
    "MHA d_model -8": (
        lambda: MultiHeadAttention(-8, 2),
        ValueError,
        "d_model must be at least 1, got -8",
    ),
    "MHA h 2.0": (
        lambda: MultiHeadAttention(8, 2.0),
        TypeError,
        r"h must be an integer, got 2.0 \(float\)",
    ),
    "MHA h True": (
        lambda: MultiHeadAttention(8, True),
        TypeError,
        r"h must be an integer, got True \(bool\)",
    ),
    "MHA dropout 1.5": (
        lambda: MultiHeadAttention(8, 2, dropout=1.5),
        ValueError,
        r"dropout must be in \[0.0, 1.0\), got 1.5",
    ),
    "MHA fused 'yes'": (
        lambda: MultiHeadAttention(8, 2, fused="yes"),
        TypeError,
        "fused must be True or False, got 'yes'",
    ),
    "MHA list input": (
        lambda: MultiHeadAttention(8, 2)([[0.0] * 8]),
        TypeError,
        r"x must be a torch.Tensor of shape \(B, L, 8\), got list",
    ),
    "MHA long input": (
        lambda: MultiHeadAttention(8, 2)(torch.ones(1, 3, 8, dtype=torch.long)),
        TypeError,
        "x must be a floating-point tensor, got dtype torch.int64",
    ),
    "MHA list memory": (
        lambda: MultiHeadAttention(8, 2)(torch.randn(1, 3, 8), [[0.0] * 8]),
        TypeError,
        r"memory must be a torch.Tensor of shape \(B, L, 8\)",
    ),
    # masks ----------------------------------------------------------------------------
    "padding_mask 1-D ids": (
        lambda: padding_mask(ids(5), 0),
        ValueError,
        r"ids must have shape \(batch, length\), got \(5,\)",
    ),
    "padding_mask list": (
        lambda: padding_mask([[3, 4, 0]], 0),
        TypeError,
        "ids must be a torch.Tensor of token ids, got list",
    ),
    "padding_mask pad_id None": (
        lambda: padding_mask(ids(2, 3), None),
        TypeError,
        r"pad_id must be an integer, got None \(NoneType\)",
    ),
    "padding_mask int32 ids": (
        lambda: padding_mask(ids(2, 3, dtype=torch.int32), 0),
        TypeError,
        r"ids must hold integer token ids \(torch.long\)",
    ),
    "causal_mask -1": (lambda: causal_mask(-1), ValueError, "length must be at least 0, got -1"),
    "causal_mask 2.5": (
        lambda: causal_mask(2.5),
        TypeError,
        r"length must be an integer, got 2.5 \(float\)",
    ),
    "causal_mask past -2": (
        lambda: causal_mask(3, past=-2),
        ValueError,
        "past must be at least 0, got -2",
    ),
    "combine bool and float": (
        lambda: combine(causal_mask(3), torch.ones(1, 1, 3, 3)),
        TypeError,
        r"masks\[1\] must have dtype torch.bool \(True = may "
        r"attend\), got torch.float32",
    ),
    "combine no broadcast": (
        lambda: combine(torch.ones(2, 3, dtype=torch.bool), torch.ones(4, dtype=torch.bool)),
        ValueError,
        r"masks of shapes \(2, 3\), \(4,\) do not broadcast",
    ),
    "to_blocked float": (
        lambda: to_blocked(torch.ones(3)),
        TypeError,
        r"mask must have dtype torch.bool \(True = may attend\), got "
        "torch.float32",
    ),
    "to_blocked None": (
        lambda: to_blocked(None),
        TypeError,
        "mask must be a bool torch.Tensor, got NoneType",
    ),
    "to_blocked uint8": (
        lambda: to_blocked(torch.ones(3, dtype=torch.uint8)),
        TypeError,
        "mask must have dtype torch.bool .* got torch.uint8",
    ),
    # positions ------------------------------------------------------------------------
    "table max_len -5": (
        lambda: sinusoidal_table(-5, 8),
        ValueError,
        "max_len must be at least 1, got -5",
    ),
    "table max_len 10.5": (
        lambda: sinusoidal_table(10.5, 8),
        TypeError,
        r"max_len must be an integer, got 10.5 \(float\)",
    ),
    "table d_model 0": (
        lambda: sinusoidal_table(10, 0),
        ValueError,
        "d_model must be at least 2, got 0",
    ),
    "table d_model 7": (
        lambda: sinusoidal_table(10, 7),
        ValueError,
        "d_model must be even for sin/cos pairs, got 7",
    ),
    "table integer dtype": (
        lambda: sinusoidal_table(10, 8, dtype=torch.long),
        TypeError,
        "dtype must be a floating-point torch.dtype, got torch.int64",
    ),
    "table layout": (
        lambda: sinusoidal_table(10, 8, layout="rotary"),
        ValueError,
        "layout must be one of 'interleaved', 'concat', got 'rotary'",
    ),
    "positions wrong width": (
        lambda: PositionalEncoding(8)(torch.randn(2, 5, 6)),
        ValueError,
        r"x must have shape \(B, L, 8\), got \(2, 5, 6\)",
    ),
    "positions 2-D input": (
        lambda: PositionalEncoding(8)(torch.randn(5, 8)),
        ValueError,
        r"x must have shape \(B, L, 8\), got \(5, 8\)",
    ),
    "positions negative offset": (
        lambda: PositionalEncoding(8)(torch.randn(2, 5, 8), offset=-1),
        ValueError,
        "offset must be at least 0, got -1",
    ),
    "positions dropout -0.1": (
        lambda: PositionalEncoding(8, dropout=-0.1),
        ValueError,
        r"dropout must be in \[0.0, 1.0\), got -0.1",
    ),
    # decoding cache -------------------------------------------------------------------
    "cache of 1 layer for N=2": (
        decode_with(KVCache(1)),
        ValueError,
        r"cache holds 1 layers but the decoder has 2: make it with "
        r"model.new_cache\(\)",
    ),
    "cache of 3 layers for N=2": (
        decode_with(KVCache(3)),
        ValueError,
        "cache holds 3 layers but the decoder has 2",
    ),
    "cache a dict": (decode_with({}), TypeError, "cache must be a KVCache"),
    "KVCache(0)": (lambda: KVCache(0), ValueError, "n_layers must be at least 1, got 0"),
    # configuration --------------------------------------------------------------------
    "config pad_id True": (
        lambda: TINY.replace(pad_id=True),
        TypeError,
        r"pad_id must be an integer, got True \(bool\)",
    ),
    "config layer_norm_eps inf": (
        lambda: TINY.replace(layer_norm_eps=float("inf")),
        ValueError,
        "layer_norm_eps must be a finite number, got inf",
    ),
    "config layer_norm_eps 0": (
        lambda: TINY.replace(layer_norm_eps=0.0),
        ValueError,
        r"layer_norm_eps must be in \(0.0, inf\], got 0.0",
    ),
    "config norm_first 'no'": (
        lambda: TINY.replace(norm_first="no"),
        TypeError,
        "norm_first must be True or False, got 'no'",
    ),
    "config tie_embeddings 'False'": (
        lambda: TINY.replace(tie_embeddings="False"),
        TypeError,
        "tie_embeddings must be True or False, got 'False'",
    ),
    "config P_drop nan": (
        lambda: TINY.replace(P_drop=float("nan")),
        ValueError,
        "P_drop must be a finite number, got nan",
    ),
    "config h True": (
        lambda: TINY.replace(h=True),
        TypeError,
        r"h must be an integer, got True \(bool\)",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_gets_one_clear_error(case):
    call, error, match = CASES[case]
    with pytest.raises(error, match=match):
        call()


def test_a_1d_mask_means_the_same_to_both_attention_paths():
    q, k, v = qkv()
    mask = torch.tensor([True, True, False, True, True])  # (T_k,)
    explicit, weights = attention(q, k, v, mask)
    torch.testing.assert_close(fused_attention(q, k, v, mask), explicit)
    assert torch.all(weights[..., 2] == 0)


def test_every_integer_dtype_is_refused_by_the_id_check():
    for dtype in INT_DTYPES + [torch.int64]:
        if dtype == torch.long:
            check_token_ids(ids(2, 3, dtype=dtype), "src", V)
            continue
        with pytest.raises(TypeError, match=rf"src .*torch.long.*{dtype}.*src.long\(\)"):
            check_token_ids(ids(2, 3, dtype=dtype), "src", V)


def test_values_are_read_where_it_costs_no_device_sync():
    bad = torch.full((2, 3), V + 5)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        check_token_ids(bad, "src", V)  # CPU: read, no sync
    check_token_ids(bad.to("meta"), "src", V)  # elsewhere: not read here
    check_token_ids(bad, "src", V, values=False)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        check_token_ids(bad, "src", V, values=True)  # where the data enters


def test_a_forward_pass_reads_no_tensor_value_off_the_cpu():
    """On the meta device every value read (``.item()``, ``bool(tensor)``) raises: a training
    step's forward pass with its checks runs there, so it holds no device-to-host sync."""
    model = Transformer(TINY).train().to("meta")
    src, tgt = ids(2, 5).to("meta"), ids(2, 4).to("meta")
    logits = model(src, tgt)
    assert logits.shape == (2, 4, V) and logits.device.type == "meta"
