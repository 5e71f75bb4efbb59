"""The decoder: a stack of N identical layers with masked self-attention and
cross-attention over the encoder's output (§3.1)."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import torch
from torch import nn

from .attention import MultiHeadAttention
from .checks import check_int, check_mask, check_sequence, checked_inputs, inputs_checked
from .config import TransformerConfig
from .feedforward import PositionwiseFeedForward
from .residual import ResidualNorm

Tensor = torch.Tensor


class KVCache:
    """Keys and values of the positions decoded so far, one entry per decoder layer.

    Self-attention appends the new position's key and value at each step; cross-attention
    projects the encoder's memory once and reuses it. ``length`` is the number of target
    positions already decoded.
    """

    def __init__(self, n_layers: int):
        check_int(n_layers, "n_layers", 1)
        self.layers: List[Dict[str, dict]] = [{"self": {}, "cross": {}} for _ in range(n_layers)]

    @property
    def length(self) -> int:
        first = self.layers[0]["self"]
        return first["k"].shape[2] if "k" in first else 0

    @property
    def batch_size(self) -> Optional[int]:
        """Rows of the cached keys and values; None while the cache is empty."""
        first = self.layers[0]["self"] if self.layers else {}
        return first["k"].shape[0] if "k" in first else None

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (beam search: follow each beam's parent)."""
        for layer in self.layers:
            for part in layer.values():
                for name in list(part):
                    part[name] = part[name].index_select(0, index)


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention, feed-forward; each in :class:`ResidualNorm`.

    Shape:
        x: (B, T, D); memory: (B, S, D); tgt_mask: broadcastable to (B, H, T, T);
        memory_mask: broadcastable to (B, H, T, S). Returns (B, T, D) and a dict of the
        "self" (B, H, T, T) and "cross" (B, H, T, S) weights (None unless requested).
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        c = config
        self.self_attn = MultiHeadAttention(c.d_model, c.h, c.attn_drop)
        self.cross_attn = MultiHeadAttention(c.d_model, c.h, c.attn_drop)
        self.feed_forward = PositionwiseFeedForward(c.d_model, c.d_ff, c.P_drop)
        blocks = [ResidualNorm(c.d_model, c.P_drop, c.norm_first, c.layer_norm_eps)
                  for _ in range(3)]
        self.self_block, self.cross_block, self.ff_block = blocks

    def forward(self, x: Tensor, memory: Tensor, tgt_mask: Optional[Tensor] = None,
                memory_mask: Optional[Tensor] = None, need_weights: bool = False,
                cache: Optional[Dict[str, Optional[dict]]] = None, is_causal: bool = False
                ) -> Tuple[Tensor, Dict[str, Optional[Tensor]]]:
        cache = cache or {"self": None, "cross": None}        # no cache: the whole target
        x, self_weights = self.self_block(x, self.self_attn, mask=tgt_mask,
                                          need_weights=need_weights, cache=cache["self"],
                                          is_causal=is_causal)               # (B, T, D)
        x, cross_weights = self.cross_block(x, self.cross_attn, memory, mask=memory_mask,
                                            need_weights=need_weights,
                                            cache=cache["cross"])            # (B, T, D)
        x = self.ff_block(x, self.feed_forward)                              # (B, T, D)
        return x, {"self": self_weights, "cross": cross_weights}


class Decoder(nn.Module):
    """N decoder layers; with pre-norm, a final LayerNorm.

    Shape:
        x: (B, T, D) embedded target; memory: (B, S, D). Returns (B, T, D) and a list of N
        weight dicts (see :class:`DecoderLayer`).
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.N))
        self.norm = (nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
                     if config.norm_first else nn.Identity())
        self.d_model, self.h = config.d_model, config.h             # for the input checks

    def forward(self, x: Tensor, memory: Tensor, tgt_mask: Optional[Tensor] = None,
                memory_mask: Optional[Tensor] = None, need_weights: bool = False,
                cache: Optional[KVCache] = None, is_causal: bool = False
                ) -> Tuple[Tensor, List[Dict[str, Optional[Tensor]]]]:
        if not inputs_checked():                 # by the Transformer that called this stack
            self.check_inputs(x, memory, tgt_mask, memory_mask, cache)
        weights = []
        with checked_inputs():                   # the layers do not check them again
            for i, layer in enumerate(self.layers):
                layer_cache = None if cache is None else cache.layers[i]
                x, w = layer(x, memory, tgt_mask, memory_mask, need_weights, layer_cache,
                             is_causal)
                weights.append(w)
        return self.norm(x), weights

    def check_inputs(self, x: Tensor, memory: Tensor, tgt_mask: Optional[Tensor],
                     memory_mask: Optional[Tensor], cache: Optional[KVCache]) -> None:
        """Raise unless x (B, T, D) and memory (B, S, D) are floating-point, the masks
        None or bool, broadcastable to (B, H, T, past + T) and (B, H, T, S), and ``cache``
        None or a :class:`KVCache` of this stack."""
        check_sequence(x, "x", self.d_model)
        check_sequence(memory, "memory", self.d_model, batch=x.shape[0])
        if cache is not None:
            check_cache(cache, len(self.layers))
        (B, T, _), S = x.shape, memory.shape[1]
        past = 0 if cache is None else cache.length
        check_mask(tgt_mask, "tgt_mask", (B, self.h, T, past + T))
        check_mask(memory_mask, "memory_mask", (B, self.h, T, S))


def check_cache(cache: KVCache, n_layers: int) -> None:
    """A decoding cache must be a KVCache with one entry per decoder layer."""
    if not isinstance(cache, KVCache):
        raise TypeError(f"cache must be a KVCache (model.new_cache()), got "
                        f"{type(cache).__name__}")
    if len(cache.layers) != n_layers:
        raise ValueError(f"cache holds {len(cache.layers)} layers but the decoder has "
                         f"{n_layers}: make it with model.new_cache()")
