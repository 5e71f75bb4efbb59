"""Checker for notebook 04's exercise 3: a multi-head attention module written by the
learner (§3.2.2), compared with the library's :class:`MultiHeadAttention` and with
``torch.nn.MultiheadAttention``, both given the same weights. Exercises 1 and 2 are checked in
:mod:`.ex04_heads` and re-exported here, so that the notebook imports one module."""

from __future__ import annotations

import math
from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch import nn

from ..attention import MultiHeadAttention
from ..masks import decoder_mask, padding_mask, to_blocked
from . import Feedback, built_a_module, check_tensor, keeps_rng, run_learner_code
from .own_work import refuses
from .ex04_heads import check_split_merge, check_torch_mha  # noqa: F401

Tensor = torch.Tensor
D, H, B, T, S = 16, 4, 2, 5, 7
NAMES = ("w_q", "w_k", "w_v", "w_o")
NOT_CONTIGUOUS = (
    "after transpose(1, 2) the tensor is not contiguous, so .view cannot merge "
    "the heads: use .reshape(B, T, D) (or .contiguous().view(B, T, D))"
)


def _projections(fb: Feedback, module: nn.Module) -> Optional[List[nn.Linear]]:
    """The learner's W^Q, W^K, W^V, W^O, each nn.Linear(D, D) with a bias, or None."""
    found = {name: getattr(module, name, None) for name in NAMES}
    if all(isinstance(found[n], nn.Linear) for n in NAMES[:3]) and found["w_o"] is None:
        fb.fail(
            "no output projection w_o: MultiHead(Q, K, V) = Concat(head_1, ..., head_h) "
            "W^O (§3.2.2); add self.w_o = nn.Linear(d_model, d_model) and apply it last"
        )
        return None
    missing = [n for n in NAMES if not isinstance(found[n], nn.Linear)]
    if missing:
        fb.fail(
            f"no nn.Linear named {', '.join(missing)}: name the four projections w_q, "
            "w_k, w_v and w_o, nn.Linear(d_model, d_model) each (the check copies its "
            "weights into them)"
        )
        return None
    for name, layer in found.items():
        if (layer.in_features, layer.out_features) != (D, D) or layer.bias is None:
            fb.fail(
                f"{name} maps {layer.in_features} -> {layer.out_features}"
                f"{'' if layer.bias is not None else ' without a bias'}; with "
                f"d_model={D} each projection is nn.Linear({D}, {D}) with its bias"
            )
            return None
    fb.ok(f"four projections w_q, w_k, w_v, w_o: nn.Linear({D}, {D}) each")
    return [found[n] for n in NAMES]


def _reference(linears: List[nn.Linear]) -> MultiHeadAttention:
    """A library MultiHeadAttention with seeded weights, copied into the learner's layers."""
    g = torch.Generator().manual_seed(3)
    ref = MultiHeadAttention(D, H, fused=False).eval()
    with torch.no_grad():
        ref.in_proj.weight.copy_(torch.randn(3 * D, D, generator=g) / math.sqrt(D) * 1.5)
        ref.in_proj.bias.copy_(0.2 * torch.randn(3 * D, generator=g))
        ref.out_proj.weight.copy_(torch.randn(D, D, generator=g) / math.sqrt(D))
        ref.out_proj.bias.copy_(0.2 * torch.randn(D, generator=g))
        for i, layer in enumerate(linears[:3]):
            layer.weight.copy_(ref.in_proj.weight[i * D : (i + 1) * D])
            layer.bias.copy_(ref.in_proj.bias[i * D : (i + 1) * D])
        linears[3].load_state_dict(ref.out_proj.state_dict())
    return ref


def _cases() -> List[Tuple[str, Tensor, Tensor, Optional[Tensor]]]:
    """(label, queries (B, T, D), keys and values, mask): self-attention without and with
    a causal-and-padding mask, then cross-attention to a padded memory of S positions."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(B, T, D, generator=g)  # (B, T, D)
    memory = torch.randn(B, S, D, generator=g)  # (B, S, D)
    tgt = torch.tensor([[4, 5, 6, 7, 8], [4, 5, 6, 0, 0]])  # (B, T), 0 = pad
    src = torch.tensor([[3] * S, [3] * (S - 3) + [0] * 3])  # (B, S)
    return [
        ("self-attention, mask=None", x, x, None),
        ("self-attention with a causal and padding mask", x, x, decoder_mask(tgt, 0)),
        (f"cross-attention to a memory of {S} positions, padded", x, memory, padding_mask(src, 0)),
    ]


def _variant(
    w: List[nn.Linear],
    x: Tensor,
    kv: Tensor,
    mask: Optional[Tensor],
    *,
    scale: Optional[float] = None,
    split_t: bool = True,
    merge_t: bool = True,
    out: bool = True,
    mask_mode: str = "right",
    dim: int = -1,
) -> Tensor:
    """Multi-head attention written out, with one thing changed (a typical mistake)."""
    Bq, Tq, _ = x.shape

    def split(t: Tensor) -> Tensor:
        if split_t:
            return t.view(Bq, t.shape[1], H, D // H).transpose(1, 2)  # (B, H, L, d_k)
        return t.view(Bq, H, t.shape[1], D // H)  # wrong: no transpose

    q, k, v = split(w[0](x)), split(w[1](kv)), split(w[2](kv))
    scores = q @ k.transpose(-2, -1) * (scale or 1 / math.sqrt(D // H))  # (B, H, T, S)
    keep = {"right": mask, "inverted": None if mask is None else ~mask, "ignored": None}[mask_mode]
    if keep is not None:
        scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim)
    if keep is not None:
        weights = weights.masked_fill(~keep, 0.0)
    heads = weights @ v  # (B, H, T, d_k)
    merged = (heads.transpose(1, 2) if merge_t else heads).reshape(Bq, Tq, D)  # (B, T, D)
    return w[3](merged) if out else merged


def _mistakes(
    w: List[nn.Linear], x: Tensor, kv: Tensor, mask: Optional[Tensor]
) -> Dict[str, Tensor]:
    """The outputs of the classic mistakes, each with its diagnosis."""
    found = {
        "no output projection: the merged heads must go through w_o (W^O, §3.2.2)": _variant(
            w, x, kv, mask, out=False
        ),
        "heads merged in the wrong order: (B, H, T, d_k).reshape(B, T, D) mixes positions; "
        "transpose(1, 2) back to (B, T, H, d_k) first, then reshape": _variant(
            w, x, kv, mask, merge_t=False
        ),
        "heads split with a plain view to (B, H, T, d_k): view to (B, T, H, d_k), then "
        "transpose(1, 2)": _variant(w, x, kv, mask, split_t=False),
        "heads split and merged without the transposes: each 'head' holds pieces of "
        "several positions": _variant(w, x, kv, mask, split_t=False, merge_t=False),
        "forgot the 1/sqrt(d_k) scale of Eq. 1": _variant(w, x, kv, mask, scale=1.0),
        f"divided by sqrt(d_model) = {math.sqrt(D):.0f}; each head compares vectors of "
        f"d_k = d_model / h = {D // H} numbers: divide by sqrt(d_k)": _variant(
            w, x, kv, mask, scale=1 / math.sqrt(D)
        ),
        "softmax over the wrong dimension: over the keys (dim=-1), so that each query's "
        "weights sum to 1": _variant(w, x, kv, mask, dim=-2),
    }
    if mask is not None:
        found[
            "mask convention inverted: here True means 'may attend' (masked_fill(~mask, "
            "...)); True = blocked is nn.MultiheadAttention's convention"
        ] = _variant(w, x, kv, mask, mask_mode="inverted")
        found["the mask is ignored: pass it to the attention"] = _variant(
            w, x, kv, mask, mask_mode="ignored"
        )
    return found


def _diagnose(
    fb: Feedback, got: Tensor, w: List[nn.Linear], x: Tensor, kv: Tensor, mask: Optional[Tensor]
) -> None:
    """Name the first classic mistake that ``got`` equals (where it is defined)."""
    if got.shape == (B, H, T, D // H):
        fb.fail("you returned the heads (B, H, T, d_k): merge them back to (B, T, D) and apply w_o")
        return
    if got.shape != (B, T, D):
        return
    got = got.detach()
    with torch.no_grad():
        for message, wrong in _mistakes(w, x, kv, mask).items():
            rows = ~got.isnan().any(-1)  # (B, T)
            if "inverted" in message:  # queries left with a key
                rows &= (~mask).expand(B, 1, T, kv.shape[1]).any(-1)[:, 0]
            if rows.any() and torch.allclose(got[rows], wrong[rows], atol=1e-5):
                fb.fail(f"looks like: {message}")
                return


def _torch_output(ref: MultiHeadAttention, x: Tensor, kv: Tensor, mask: Optional[Tensor]) -> Tensor:
    """torch.nn.MultiheadAttention with the same weights; its masks mean True = blocked."""
    theirs = ref.to_torch(batch_first=True)
    kwargs = {}
    if mask is not None and mask.shape[-2] == 1:  # (B, 1, 1, S)
        kwargs["key_padding_mask"] = to_blocked(mask[:, 0, 0, :])  # (B, S)
    elif mask is not None:  # (B, 1, T, S)
        full = mask.expand(B, H, x.shape[1], kv.shape[1])
        kwargs["attn_mask"] = to_blocked(full.reshape(B * H, x.shape[1], kv.shape[1]))
    with torch.no_grad():
        return theirs(x, kv, kv, need_weights=False, **kwargs)[0]  # (B, T, D)


@refuses(
    MultiHeadAttention,
    rule="to assemble the module yourself, not with the library's `MultiHeadAttention`",
)
@keeps_rng
def check_multi_head_attention(mha_class: Callable[[int, int], nn.Module]) -> Feedback:
    """Exercise 3: ``mha_class(d_model, h)`` builds multi-head attention with projections
    ``w_q, w_k, w_v, w_o``; ``module(query, key, value, mask=None)`` returns (B, T, D)."""
    fb = Feedback("Exercise 3 (multi-head attention, §3.2.2)")
    module = run_learner_code(fb, mha_class, D, H)
    if module is None or not built_a_module(fb, module):
        return fb
    linears = _projections(fb, module)
    if linears is None:
        return fb
    ref = _reference(linears)
    module.eval()
    for label, x, kv, mask in _cases():
        got = run_learner_code(fb, module, x, kv, kv, mask=mask)
        if got is None:
            if any("view size is not compatible" in n for n in fb.notes):
                fb.fail(NOT_CONTIGUOUS)
            elif mask is None and any("NoneType" in n for n in fb.notes):
                fb.fail("mask=None means no mask: apply the mask only when one is given")
            return fb
        if isinstance(got, tuple) and got and isinstance(got[0], Tensor):
            got = got[0]  # (output, weights)
        with torch.no_grad():
            expected = ref(x, memory=None if kv is x else kv, mask=mask)[0]  # (B, T, D)
        if not check_tensor(fb, label, got, expected):
            if isinstance(got, Tensor):
                _diagnose(fb, got, linears, x, kv, mask)
            return fb
        check_tensor(
            fb,
            "torch.nn.MultiheadAttention, same weights, to_blocked(mask)",
            got,
            _torch_output(ref, x, kv, mask),
        )
    return fb
