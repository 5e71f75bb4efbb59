"""Checkers for notebook 04's exercises: multi-query attention (one key and value head shared
by every query head) written as a module, its parameter count, and a head-importance
ablation of the library's :class:`MultiHeadAttention` (§3.2.2)."""

from __future__ import annotations

import math
from typing import Dict, List, Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..attention import MultiHeadAttention, attention
from ..masks import decoder_mask, padding_mask
from ..params import mha_params
from . import (
    Feedback,
    built_a_module,
    check_count,
    check_tensor,
    first_match,
    keeps_rng,
    run_learner_code,
)
from .own_work import guard, refuses

Tensor = torch.Tensor
D, H, B, T = 16, 4, 2, 5
D_K = D // H
NOT_CONTIGUOUS = (
    "after transpose(1, 2) the tensor is not contiguous, so .view cannot merge "
    "the heads: use .reshape(B, T, D) (or .contiguous().view(B, T, D))"
)


# ----------------------------------------------------------------- multi-query attention
def _mqa_layers(fb: Feedback, module: nn.Module) -> Optional[List[nn.Linear]]:
    """The learner's w_q, w_k, w_v, w_o (nn.Linear with biases, of MQA's sizes), or None."""
    sizes = {"w_q": (D, D), "w_k": (D, D_K), "w_v": (D, D_K), "w_o": (D, D)}
    layers = []
    for name, (n_in, n_out) in sizes.items():
        layer = getattr(module, name, None)
        if not isinstance(layer, nn.Linear):
            fb.fail(
                f"no nn.Linear named {name}: name the projections w_q, w_k, w_v and w_o "
                "(the check copies its weights into them)"
            )
            return None
        if name in ("w_k", "w_v") and layer.out_features == D and D != D_K:
            fb.fail(
                f"{name} is nn.Linear({D}, {D}): that is multi-head attention's projection, "
                f"h key (or value) heads; in multi-query attention every query head shares "
                f"one head of d_k = d_model / h = {D_K} numbers: nn.Linear(d_model, d_model // h)"
            )
            return None
        if (layer.in_features, layer.out_features) != (n_in, n_out) or layer.bias is None:
            fb.fail(
                f"{name} is nn.Linear({layer.in_features}, {layer.out_features}, bias="
                f"{layer.bias is not None}); with d_model={D}, h={H} it should be "
                f"nn.Linear({n_in}, {n_out}) with its bias"
            )
            return None
        layers.append(layer)
    fb.ok(f"w_q, w_o: nn.Linear({D}, {D}); w_k, w_v: nn.Linear({D}, {D_K}), one shared head")
    return layers


def mqa_reference(layers, x: Tensor, mask: Optional[Tensor], *, scale: Optional[float] = None,
                  split_t: bool = True, merge_t: bool = True, out: bool = True,
                  mask_mode: str = "right", dim: int = -1) -> Tensor:
    """Multi-query attention written out, with one thing changeable (a typical mistake)."""
    w_q, w_k, w_v, w_o = layers
    b, t, d = x.shape
    h = d // w_k.out_features
    q = w_q(x)
    if split_t:
        q = q.view(b, t, h, d // h).transpose(1, 2)  # (B, H, T, d_k)
    else:
        q = q.view(b, h, t, d // h)  # wrong: no transpose
    k, v = w_k(x)[:, None], w_v(x)[:, None]  # (B, 1, T, d_k): one head, shared
    scores = q @ k.transpose(-2, -1) * (scale or 1 / math.sqrt(d // h))  # (B, H, T, T)
    keep = {"right": mask, "inverted": None if mask is None else ~mask, "ignored": None}[mask_mode]
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    heads = scores.softmax(dim).nan_to_num(0.0) @ v  # (B, H, T, d_k)
    merged = (heads.transpose(1, 2) if merge_t else heads).reshape(b, t, d)  # (B, T, D)
    return w_o(merged) if out else merged


def _mqa_mistakes(layers, x: Tensor, mask: Optional[Tensor]) -> Dict[str, Tensor]:
    found = {
        "no output projection: the merged heads go through w_o (W^O)": dict(out=False),
        "heads merged in the wrong order: (B, H, T, d_k).reshape(B, T, D) mixes positions; "
        "transpose(1, 2) back to (B, T, H, d_k) first": dict(merge_t=False),
        "query heads split with a plain view to (B, H, T, d_k): view to (B, T, H, d_k), "
        "then transpose(1, 2)": dict(split_t=False),
        "query heads split and merged without the transposes": dict(split_t=False, merge_t=False),
        "forgot the 1/sqrt(d_k) scale of Eq. 1": dict(scale=1.0),
        f"divided by sqrt(d_model) = {math.sqrt(D):.0f}: each head compares vectors of "
        f"d_k = {D_K} numbers, divide by sqrt(d_k)": dict(scale=1 / math.sqrt(D)),
        "softmax over the wrong dimension: over the keys (dim=-1)": dict(dim=-2),
    }
    if mask is not None:
        found["mask convention inverted: True means 'may attend'"] = dict(mask_mode="inverted")
        found["the mask is ignored: pass it to the attention"] = dict(mask_mode="ignored")
    return {m: mqa_reference(layers, x, mask, **change) for m, change in found.items()}


def _tied_mha(layers) -> MultiHeadAttention:
    """The library's multi-head attention whose h key heads are all w_k and h value heads
    all w_v: multi-query attention written as multi-head attention."""
    w_q, w_k, w_v, w_o = layers
    mha = MultiHeadAttention(D, H).eval()
    with torch.no_grad():
        mha.in_proj.weight.copy_(torch.cat((w_q.weight, w_k.weight.repeat(H, 1),
                                            w_v.weight.repeat(H, 1))))
        mha.in_proj.bias.copy_(torch.cat((w_q.bias, w_k.bias.repeat(H), w_v.bias.repeat(H))))
        mha.out_proj.load_state_dict(w_o.state_dict())
    return mha


def _mqa_cases():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(B, T, D, generator=g)  # (B, T, D)
    tokens = torch.tensor([[4, 5, 6, 7, 8], [4, 5, 6, 0, 0]])  # (B, T), 0 = pad
    return [
        ("mask=None", x, None),
        ("causal and padding mask", x, decoder_mask(tokens, 0)),
        ("padding mask (B, 1, 1, T)", x, padding_mask(tokens, 0)),
    ]


@refuses(
    MultiHeadAttention,
    rule="to write multi-query attention yourself, without the library's `MultiHeadAttention`",
)
@keeps_rng
def check_multi_query_attention(mqa_class) -> Feedback:
    """``mqa_class(d_model, h)`` builds ``w_q``, ``w_o`` (nn.Linear(d_model, d_model)) and
    ``w_k``, ``w_v`` (nn.Linear(d_model, d_model // h)); ``module(x, mask=None)`` returns
    (B, T, D): h query heads attending over one shared key head and value head."""
    fb = Feedback("Exercise 1 (multi-query attention)")
    module = run_learner_code(fb, mqa_class, D, H)
    if module is None or not built_a_module(fb, module):
        return fb
    layers = _mqa_layers(fb, module)
    if layers is None:
        return fb
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for layer in layers:
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=g) / math.sqrt(D) * 1.5)
            layer.bias.copy_(0.2 * torch.randn(layer.bias.shape, generator=g))
    module.eval()
    w_q, w_k, w_v, w_o = layers
    for label, x, mask in _mqa_cases():
        got = run_learner_code(fb, module, x, mask=mask)
        if got is None:
            if any("view size is not compatible" in n for n in fb.notes):
                fb.fail(NOT_CONTIGUOUS)
            elif mask is None and any("NoneType" in n for n in fb.notes):
                fb.fail("mask=None means no mask: apply the mask only when one is given")
            return fb
        if isinstance(got, tuple) and got and isinstance(got[0], Tensor):
            got = got[0]  # (output, weights)
        with torch.no_grad():
            q = w_q(x).view(B, T, H, D_K).transpose(1, 2)  # (B, H, T, d_k)
            k, v = w_k(x)[:, None], w_v(x)[:, None]  # (B, 1, T, d_k)
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
            expected = w_o(heads.transpose(1, 2).reshape(B, T, D))  # (B, T, D)
        if isinstance(got, Tensor):
            got = got.detach()
        if not check_tensor(fb, f"{label}, against scaled_dot_product_attention(enable_gqa=True)",
                            got, expected):
            if isinstance(got, Tensor) and got.shape == (B, H, T, D_K):
                fb.fail("you returned the heads (B, H, T, d_k): merge them to (B, T, D), apply w_o")
            elif isinstance(got, Tensor) and got.shape == expected.shape:
                with torch.no_grad():
                    found = first_match(got, _mqa_mistakes(layers, x, mask))
                if found:
                    fb.fail(f"looks like: {found}")
            return fb
        with torch.no_grad():
            tied = _tied_mha(layers)(x, mask=mask)[0]
        check_tensor(fb, f"{label}, against MultiHeadAttention with every key and value "
                     "head set to w_k and w_v", got, tied)
    return fb


# ---------------------------------------------------------------------- parameter count
def mqa_params_reference(d_model: int, h: int) -> int:
    d_k = d_model // h
    return 2 * (d_model * d_model + d_model) + 2 * (d_model * d_k + d_k)


def check_mqa_params(mqa_params) -> Feedback:
    """``mqa_params(d_model, h)``: the number of parameters of multi-query attention (the
    four projections of exercise 1, with biases), a Python int."""
    fb = Feedback("Exercise 2 (parameters of multi-query attention)")
    cases = [(512, 8), (64, 4), (12, 3)]
    check_count(
        fb,
        mqa_params,
        cases,
        mqa_params_reference,
        {
            "the keys and values counted at full width (h heads each), as in multi-head "
            "attention: 4 d_model^2 + 4 d_model": lambda d, h: 4 * d * d + 4 * d,
            "forgot the biases": lambda d, h: 2 * d * d + 2 * d * (d // h),
            "forgot W^O": lambda d, h: d * d + d + 2 * (d * (d // h) + d // h),
            "counted the shared head once, for the keys or the values, not for both": (
                lambda d, h: 2 * (d * d + d) + d * (d // h) + d // h
            ),
            "the shared head counted with d_model // h inputs instead of d_model": (
                lambda d, h: 2 * (d * d + d) + 2 * ((d // h) ** 2 + d // h)
            ),
        },
    )
    if fb.passed:
        mqa, mha = mqa_params_reference(512, 8), mha_params(512)
        fb.ok(
            f"the base model (d_model=512, h=8): {mqa:,} parameters against multi-head "
            f"attention's {mha:,}; sharing one key and value head saves {mha - mqa:,} "
            f"({(mha - mqa) / mha:.0%})"
        )
    return fb


# ----------------------------------------------------------------- head-importance ablation
def _heads(mha: MultiHeadAttention, x: Tensor, mask: Optional[Tensor]) -> Tensor:
    q, k, v = mha.project(x, None, None)  # (B, H, T, d_k)
    return attention(q, k, v, mask)[0]  # (B, H, T, d_v)


def head_importance_reference(mha: MultiHeadAttention, x: Tensor, mask=None) -> Tensor:
    heads = _heads(mha, x, mask)  # (B, H, T, d_v)
    b, h, t, d_v = heads.shape
    full = mha.out_proj(heads.transpose(1, 2).reshape(b, t, h * d_v))  # (B, T, D)
    scores = []
    for i in range(h):
        ablated = heads.clone()
        ablated[:, i] = 0.0  # head i switched off, before W^O
        out = mha.out_proj(ablated.transpose(1, 2).reshape(b, t, h * d_v))  # (B, T, D)
        scores.append((full - out).norm(dim=-1).mean())
    return torch.stack(scores)  # (H,)


def _importance_mistakes(mha: MultiHeadAttention, x: Tensor, mask) -> Dict[str, Tensor]:
    heads = _heads(mha, x, mask)  # (B, H, T, d_v)
    b, h, t, d_v = heads.shape
    w_o = mha.out_proj.weight.view(-1, h, d_v)  # (D, H, d_v): W^O's columns per head
    delta = torch.einsum("bhtd,ehd->bhte", heads, w_o)  # (B, H, T, D): head i's share
    full = mha(x, mask=mask)[0]  # (B, T, D)
    found = {
        "the head switched off after W^O (its slice of the output features): every output "
        "feature mixes all heads; zero head i before W^O": torch.stack(
            [full[..., i * d_v:(i + 1) * d_v].norm(dim=-1).mean() for i in range(h)]
        ),
        "measured the head's own output, not the change of the layer's output through W^O": (
            heads.norm(dim=-1).mean(dim=(0, 2))
        ),
        "summed the norms over the batch and positions instead of averaging them": (
            delta.norm(dim=-1).sum(dim=(0, 2))
        ),
        "squared norm: use the Euclidean norm of the change, .norm(dim=-1)": (
            delta.pow(2).sum(-1).mean(dim=(0, 2))
        ),
    }
    if mask is not None:
        found["the mask is ignored: pass it to attention"] = head_importance_reference(mha, x)
    return found


@keeps_rng
def check_head_importance(head_importance) -> Feedback:
    """``head_importance(mha, x, mask=None)`` -> (H,): for each head, the mean Euclidean norm
    of the change of the layer's output when that head's output is zeroed before W^O."""
    fb = Feedback("Exercise 3 (head importance by ablation)")
    torch.manual_seed(11)
    mha = MultiHeadAttention(D, H).eval()
    with torch.no_grad():
        mha.out_proj.bias.normal_(0.0, 0.5)
    before = {n: p.detach().clone() for n, p in mha.state_dict().items()}
    x = torch.randn(B, T, D)  # (B, T, D)
    mask = decoder_mask(torch.tensor([[4, 5, 6, 7, 8], [4, 5, 6, 0, 0]]), 0)  # (B, 1, T, T)
    for label, m in (("mask=None", None), ("causal and padding mask", mask)):
        got = run_learner_code(fb, head_importance, mha, x, m)
        if got is None:
            return fb
        if any(not torch.equal(p, before[n]) for n, p in mha.state_dict().items()):
            fb.fail("your function changed mha's weights: work on the heads' outputs (or "
                    "restore the weights before returning)")
            return fb
        with torch.no_grad():
            expected = head_importance_reference(mha, x, m)
            if isinstance(got, Tensor):
                got = got.detach()
            if not check_tensor(fb, f"head importance, {label}", got, expected):
                found = first_match(got, _importance_mistakes(mha, x, m))
                if found:
                    fb.fail(f"looks like: {found}")
                return fb
    return fb


# ------------------------------------------------------------------------ right answers
class _MultiQuery(nn.Module):
    def __init__(self, d_model: int, h: int):
        super().__init__()
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model // h)
        self.w_v = nn.Linear(d_model, d_model // h)
        self.w_o = nn.Linear(d_model, d_model)

    def forward(self, x, mask=None):
        return mqa_reference((self.w_q, self.w_k, self.w_v, self.w_o), x, mask)


CHECKS = {
    "multi_query_attention": (check_multi_query_attention, lambda: _MultiQuery),
    "mqa_params": (check_mqa_params, lambda: mqa_params_reference),
    "head_importance": (check_head_importance, lambda: head_importance_reference),
}


guard(globals())  # an answer that is, or calls, a right answer above is refused
