"""Count a Transformer's parameters per component, and the closed-form formulas (Table 3).

:func:`count_parameters` walks ``model.named_parameters()``, which lists a shared tensor
once: with tied embeddings (§3.4) the (V, D) matrix is counted a single time, under
"embeddings (shared)". The formulas below give the same numbers from the config alone.
"""

from __future__ import annotations

from typing import Dict, Optional

from torch import nn

from .config import TransformerConfig

# (name fragment, component) in the order they are tested; first match wins.
_COMPONENTS = (
    ("encoder.layers.", "self_attn.", "encoder self-attention"),
    ("encoder.layers.", "feed_forward.", "encoder feed-forward"),
    ("encoder.layers.", "_block.norm.", "encoder layer norms"),
    ("decoder.layers.", "self_attn.", "decoder self-attention"),
    ("decoder.layers.", "cross_attn.", "decoder cross-attention"),
    ("decoder.layers.", "feed_forward.", "decoder feed-forward"),
    ("decoder.layers.", "_block.norm.", "decoder layer norms"),
    ("encoder.norm.", "", "encoder final norm"),
    ("decoder.norm.", "", "decoder final norm"),
    ("positions.", "", "learned positions"),
    ("src_embed.", "", "source embedding"),
    ("tgt_embed.", "", "target embedding"),
    ("generator.", "", "output projection"),
)


def _component(name: str) -> str:
    for prefix, part, component in _COMPONENTS:
        if name.startswith(prefix) and part in name:
            return component
    return "other"


def count_parameters(model: nn.Module) -> Dict[str, int]:
    """Parameters per component of a :class:`~transformer_lib.Transformer`, shared ones once.

    Keys: "encoder self-attention", "encoder feed-forward", "encoder layer norms",
    "decoder self-attention", "decoder cross-attention", "decoder feed-forward",
    "decoder layer norms", the final norms (pre-norm only), and the embeddings. With tied
    embeddings the source, target and output matrices are one entry, "embeddings (shared)";
    otherwise "source embedding", "target embedding" and "output projection".
    The values sum to ``sum(p.numel() for p in model.parameters())``.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    tied = getattr(getattr(model, "config", None), "tie_embeddings", False)
    counts: Dict[str, int] = {}
    for name, p in model.named_parameters():  # a shared tensor is listed once
        component = _component(name)
        if tied and component in ("source embedding", "target embedding", "output projection"):
            component = "embeddings (shared)"
        counts[component] = counts.get(component, 0) + p.numel()
    return counts


def mha_params(d_model: int, qk_width: Optional[int] = None) -> int:
    """W^Q, W^K, W^V, W^O and their biases: 4 D^2 + 4 D (§3.2.2). With queries and keys of
    ``qk_width`` = h * d_k (Table 3, row B), W^Q and W^K are (h d_k) x D."""
    qk = d_model if qk_width is None else qk_width
    return 2 * (qk * d_model + qk) + 2 * (d_model * d_model + d_model)


def ffn_params(d_model: int, d_ff: int) -> int:
    """W_1 (D x d_ff), b_1 (d_ff), W_2 (d_ff x D), b_2 (D) (§3.3, Eq. 2)."""
    return 2 * d_model * d_ff + d_ff + d_model


def layer_norm_params(d_model: int) -> int:
    """Gain and bias, D each."""
    return 2 * d_model


def formula_counts(config: TransformerConfig) -> Dict[str, int]:
    """The keys and values of :func:`count_parameters`, from the config alone."""
    if not isinstance(config, TransformerConfig):
        raise TypeError(f"config must be a TransformerConfig, got {type(config).__name__}")
    c = config
    D, N = c.d_model, c.N
    attn = mha_params(D, None if c.d_k is None else c.h * c.d_k)
    counts = {
        "encoder self-attention": N * attn,
        "encoder feed-forward": N * ffn_params(D, c.d_ff),
        "encoder layer norms": N * 2 * layer_norm_params(D),
        "decoder self-attention": N * attn,
        "decoder cross-attention": N * attn,
        "decoder feed-forward": N * ffn_params(D, c.d_ff),
        "decoder layer norms": N * 3 * layer_norm_params(D),
    }
    if c.norm_first:
        counts["encoder final norm"] = counts["decoder final norm"] = layer_norm_params(D)
    if c.positions == "learned":
        counts["learned positions"] = c.max_len * D
    if c.tie_embeddings:
        counts["embeddings (shared)"] = c.src_vocab_size * D
    else:
        counts["source embedding"] = c.src_vocab_size * D
        counts["target embedding"] = c.tgt_vocab_size * D
        counts["output projection"] = c.tgt_vocab_size * D  # no bias
    return counts
