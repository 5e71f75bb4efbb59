import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_lib import (
    MultiHeadAttention,
    attention,
    causal_mask,
    decoder_mask,
    fused_attention,
    padding_mask,
    to_blocked,
)

B, H, T, S, D = 3, 4, 5, 7, 32


def qkv(t=T, s=S, d_k=8):
    return torch.randn(B, H, t, d_k), torch.randn(B, H, s, d_k), torch.randn(B, H, s, d_k)


def test_explicit_attention_is_the_formula():
    q, k, v = qkv()
    out, w = attention(q, k, v)
    expected_w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8), dim=-1)
    torch.testing.assert_close(w, expected_w)
    torch.testing.assert_close(out, expected_w @ v)
    torch.testing.assert_close(w.sum(-1), torch.ones(B, H, T))


@pytest.mark.parametrize("kind", ["none", "padding", "causal", "both"])
def test_explicit_equals_fused(kind):
    q, k, v = qkv(t=S)
    keep = torch.ones(B, S, dtype=torch.long)
    keep[0, 4:] = 0
    masks = {
        "none": None,
        "padding": padding_mask(keep, 0),
        "causal": causal_mask(S),
        "both": padding_mask(keep, 0) & causal_mask(S),
    }
    mask = masks[kind]
    torch.testing.assert_close(fused_attention(q, k, v, mask), attention(q, k, v, mask)[0])


def test_is_causal_flag_equals_causal_mask():
    q, k, v = qkv(t=S)
    torch.testing.assert_close(
        fused_attention(q, k, v, is_causal=True), attention(q, k, v, causal_mask(S))[0]
    )


def test_masked_keys_get_zero_weight_and_change_nothing():
    q, k, v = qkv()
    mask = torch.ones(1, 1, 1, S, dtype=torch.bool)
    mask[..., -2:] = False
    out, w = attention(q, k, v, mask)
    assert torch.all(w[..., -2:] == 0)
    k2, v2 = k.clone(), v.clone()
    k2[..., -2:, :] += 100.0
    v2[..., -2:, :] -= 100.0
    torch.testing.assert_close(attention(q, k2, v2, mask)[0], out)
    torch.testing.assert_close(fused_attention(q, k2, v2, mask), out)


def test_fully_masked_rows_give_zeros_not_nan_in_both_paths():
    q, k, v = (t.requires_grad_() for t in qkv())
    mask = torch.ones(B, 1, T, S, dtype=torch.bool)
    mask[1, :, 2] = False  # query 2 of item 1 sees nothing
    mask[2] = False  # item 2 sees nothing at all
    out, w = attention(q, k, v, mask)
    fused = fused_attention(q, k, v, mask)
    for result in (out, w, fused):
        assert not torch.isnan(result).any()
    assert torch.all(out[1, :, 2] == 0) and torch.all(fused[2] == 0) and torch.all(w[2] == 0)
    torch.testing.assert_close(fused, out)
    (out.sum() + fused.sum()).backward()
    assert not any(torch.isnan(t.grad).any() for t in (q, k, v))


@pytest.mark.parametrize("use_padding", [False, True])
@pytest.mark.parametrize("use_causal", [False, True])
@pytest.mark.parametrize("need_weights", [False, True])
def test_self_attention_equals_torch_multihead_attention(use_padding, use_causal, need_weights):
    mha = MultiHeadAttention(D, H).eval()
    nn.init.normal_(mha.in_proj.bias)  # non-zero biases are copied too
    ref = mha.to_torch()
    x = torch.randn(B, T, D)
    ids = torch.ones(B, T, dtype=torch.long)
    ids[0, 3:] = 0
    ids[2, 4:] = 0
    keep_keys = padding_mask(ids, 0) if use_padding else None  # (B, 1, 1, T)
    keep = keep_keys
    if use_causal:
        keep = causal_mask(T) if keep is None else keep & causal_mask(T)
    out, w = mha(x, mask=keep, need_weights=need_weights)
    # nn.MultiheadAttention: True = *blocked*, masks as (T, T) and (B, T)
    ref_out, ref_w = ref(
        x,
        x,
        x,
        need_weights=True,
        average_attn_weights=False,
        key_padding_mask=to_blocked(ids != 0) if use_padding else None,
        attn_mask=to_blocked(causal_mask(T)[0, 0]) if use_causal else None,
    )
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-4)
    if need_weights:
        torch.testing.assert_close(w, ref_w, atol=1e-6, rtol=1e-4)
    else:
        assert w is None


def test_cross_attention_equals_torch_multihead_attention():
    mha = MultiHeadAttention(D, H).eval()
    ref = mha.to_torch()
    x, memory = torch.randn(B, T, D), torch.randn(B, S, D)
    src = torch.ones(B, S, dtype=torch.long)
    src[1, 5:] = 0
    out, w = mha(x, memory, mask=padding_mask(src, 0), need_weights=True)
    ref_out, ref_w = ref(
        x, memory, memory, key_padding_mask=to_blocked(src != 0), average_attn_weights=False
    )
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(w, ref_w, atol=1e-6, rtol=1e-4)


def test_cross_attention_fused_path_and_gradients_equal_torch_multihead_attention():
    mha = MultiHeadAttention(D, H)
    nn.init.normal_(mha.in_proj.bias)
    ref = mha.to_torch()
    x, memory = torch.randn(B, T, D), torch.randn(B, S, D)
    src = torch.ones(B, S, dtype=torch.long)
    src[1, 5:] = 0
    out, _ = mha(x, memory, mask=padding_mask(src, 0))  # the fused path
    ref_out, _ = ref(x, memory, memory, key_padding_mask=to_blocked(src != 0))
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-4)
    g = torch.randn_like(out)
    out.backward(g)
    ref_out.backward(g)
    torch.testing.assert_close(
        mha.in_proj.weight.grad, ref.in_proj_weight.grad, atol=1e-5, rtol=1e-4
    )  # W^Q and W^K; W^V
    torch.testing.assert_close(mha.in_proj.bias.grad, ref.in_proj_bias.grad, atol=1e-5, rtol=1e-4)


def test_fused_attention_without_fully_masked_rows_is_the_kernel_output_itself():
    """No extra pass when every query sees a key: same values and same memory layout."""
    q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in qkv())  # head views
    mask = torch.ones(B, 1, 1, S, dtype=torch.bool)
    mask[0, ..., 4:] = False
    out = fused_attention(q, k, v, mask)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.equal(out, ref) and out.stride() == ref.stride()
    assert out.transpose(1, 2).is_contiguous()  # merging the heads needs no copy


def test_opposite_convention_is_caught_by_this_test():
    """Passing our mask (True = attend) straight to PyTorch blocks the wrong keys."""
    mha = MultiHeadAttention(D, H).eval()
    ref = mha.to_torch()
    x = torch.randn(B, T, D)
    ours, _ = mha(x, mask=causal_mask(T))
    wrong, _ = ref(x, x, x, attn_mask=causal_mask(T)[0, 0])
    assert not torch.allclose(ours, wrong, atol=1e-3)


def test_incremental_self_attention_with_cache_equals_full():
    mha = MultiHeadAttention(D, H).eval()
    x = torch.randn(B, T, D)
    full, _ = mha(x, is_causal=True)
    cache, steps = {}, []
    for t in range(T):
        out, _ = mha(x[:, t : t + 1], cache=cache, is_causal=True)
        steps.append(out)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-4)
    assert cache["k"].shape == (B, H, T, D // H)


def test_weights_are_returned_per_call_not_stored():
    mha = MultiHeadAttention(D, H).eval()
    _, w1 = mha(torch.randn(1, 3, D), need_weights=True)
    _, w2 = mha(torch.randn(1, 4, D), need_weights=True)
    assert w1.shape == (1, H, 3, 3) and w2.shape == (1, H, 4, 4)
    assert not any("weight" in name and "proj" not in name for name in vars(mha))


@pytest.mark.parametrize(
    "mask, error, match",
    [
        (torch.ones(B, 1, 1, T), TypeError, "torch.bool"),
        (torch.ones(B, 1, T, 9, dtype=torch.bool), ValueError, "broadcast"),
        (torch.ones(2, 1, 1, T, dtype=torch.bool), ValueError, "broadcast"),
        ([[True]], TypeError, "mask"),
    ],
)
def test_bad_masks_are_rejected(mask, error, match):
    with pytest.raises(error, match=match):
        MultiHeadAttention(D, H)(torch.randn(B, T, D), mask=mask)


def test_bad_shapes_are_rejected():
    mha = MultiHeadAttention(D, H)
    with pytest.raises(ValueError, match="x must have shape"):
        mha(torch.randn(B, T, D + 1))
    with pytest.raises(ValueError, match="memory must have shape"):
        mha(torch.randn(B, T, D), torch.randn(B + 1, S, D))
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(30, 4)


def test_fused_attention_under_bf16_autocast_matches_the_explicit_path():
    q, k, v = (torch.randn(2, 3, 7, 8) for _ in range(3))
    ids = torch.tensor([[5, 6, 7, 8, 9, 0, 0], [5, 6, 7, 8, 9, 4, 3]])
    mask = decoder_mask(ids, pad_id=0)  # (B, 1, T, T)
    expected, _ = attention(q.double(), k.double(), v.double(), mask)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = fused_attention(q, k, v, mask)
    assert out.dtype == torch.bfloat16  # what autocast would give
    torch.testing.assert_close(out.double(), expected, atol=2e-2, rtol=2e-2)
    out16 = fused_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), mask)
    assert out16.dtype == torch.bfloat16
    torch.testing.assert_close(out16.double(), expected, atol=3e-2, rtol=3e-2)
    exact = fused_attention(q.double(), k.double(), v.double(), mask)  # fp64 untouched
    torch.testing.assert_close(exact, expected, atol=1e-12, rtol=1e-12)


# bad input: float masks and mismatched shapes are refused, naming the argument ----------
def _qkv(d_k=8, d_k_keys=8, t_k=5, t_v=5):
    return torch.randn(2, 2, 4, d_k), torch.randn(2, 2, t_k, d_k_keys), torch.randn(2, 2, t_v, 8)


@pytest.mark.parametrize("fn", [attention, fused_attention], ids=["explicit", "fused"])
@pytest.mark.parametrize(
    "mask",
    [torch.zeros(4, 5), torch.ones(4, 5).tril(), torch.ones(4, 5, dtype=torch.long)],
    ids=["float-zeros", "float-causal", "long"],
)
def test_non_bool_masks_are_refused(fn, mask):
    q, k, v = _qkv()
    with pytest.raises(TypeError, match=r"mask must have dtype torch.bool \(True = may attend\)"):
        fn(q, k, v, mask)


@pytest.mark.parametrize("fn", [attention, fused_attention], ids=["explicit", "fused"])
def test_mismatched_d_k_names_both_shapes(fn):
    q, k, v = _qkv(d_k=8, d_k_keys=6)
    with pytest.raises(ValueError, match=r"same d_k.*\(2, 2, 4, 8\).*\(2, 2, 5, 6\)"):
        fn(q, k, v)


@pytest.mark.parametrize("fn", [attention, fused_attention], ids=["explicit", "fused"])
def test_keys_and_values_of_different_lengths_are_named(fn):
    q, k, v = _qkv(t_k=5, t_v=6)
    with pytest.raises(ValueError, match=r"k and v must have the same T_k"):
        fn(q, k, v)


def test_fused_refuses_a_mask_with_is_causal():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="either mask or is_causal"):
        fused_attention(q, k, v, torch.ones(4, 5, dtype=torch.bool), is_causal=True)
