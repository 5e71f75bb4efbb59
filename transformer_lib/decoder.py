"""The decoder: a stack of N identical layers with masked self-attention and
cross-attention over the encoder's output (§3.1), and the key/value cache of decoding."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import torch
from torch import nn

from .attention import MultiHeadAttention
from .checks import check_int
from .config import TransformerConfig
from .feedforward import PositionwiseFeedForward
from .residual import ResidualNorm

Tensor = torch.Tensor


class KVCache:
    """Keys and values of the positions decoded so far, one dict per decoder layer.

    At every step each layer's self-attention appends the new position's key and value
    (``self_attn[i]["k"]``: (B, H, past + 1, d_k)), so the earlier positions are never
    projected again; its cross-attention projects the encoder's memory at the first step and
    keeps it (``cross_attn[i]["k"]``: (B, H, S, d_k)). :class:`MultiHeadAttention` fills the
    dicts; ``length`` is the number of target positions decoded.
    """

    def __init__(self, n_layers: int):
        check_int(n_layers, "n_layers", 1)
        self.self_attn: List[Dict[str, Tensor]] = [{} for _ in range(n_layers)]
        self.cross_attn: List[Dict[str, Tensor]] = [{} for _ in range(n_layers)]

    @property
    def length(self) -> int:
        return self.self_attn[0]["k"].shape[2] if self.self_attn[0] else 0

    @property
    def batch_size(self) -> Optional[int]:
        """Rows of the cached keys and values; None while the cache is empty."""
        return self.self_attn[0]["k"].shape[0] if self.self_attn[0] else None

    def nbytes(self) -> int:
        """Bytes held by the cached keys and values."""
        return sum(t.numel() * t.element_size()
                   for part in self.self_attn + self.cross_attn for t in part.values())

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (beam search: each hypothesis follows its parent)."""
        rows = self.batch_size
        if not isinstance(index, Tensor) or index.dim() != 1 or index.dtype != torch.long:
            raise TypeError("index must be a 1-D torch.long tensor of batch rows")
        if rows is not None and index.numel() and not 0 <= int(index.min()) <= int(
                index.max()) < rows:
            raise ValueError(f"index holds rows outside [0, {rows}): min {int(index.min())}, "
                             f"max {int(index.max())}")
        for part in self.self_attn + self.cross_attn:
            for name in list(part):
                part[name] = part[name].index_select(0, index)


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention, feed-forward; each in :class:`ResidualNorm`.

    Shape:
        x: (B, T, D); memory: (B, S, D); tgt_mask: broadcastable to (B, H, T, T);
        memory_mask: broadcastable to (B, H, T, S). Returns (B, T, D) and a dict of the
        "self" (B, H, T, T) and "cross" (B, H, T, S) weights (None unless requested).
        ``self_cache``/``cross_cache``: this layer's dicts of a :class:`KVCache`.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        c = config
        self.self_attn = MultiHeadAttention(c.d_model, c.h, c.attn_drop, c.d_k)
        self.cross_attn = MultiHeadAttention(c.d_model, c.h, c.attn_drop, c.d_k)
        self.feed_forward = PositionwiseFeedForward(c.d_model, c.d_ff, c.P_drop)
        self.self_block, self.cross_block, self.ff_block = (
            ResidualNorm(c.d_model, c.P_drop, c.norm_first, c.layer_norm_eps) for _ in range(3))

    def forward(self, x: Tensor, memory: Tensor, tgt_mask: Optional[Tensor] = None,
                memory_mask: Optional[Tensor] = None, need_weights: bool = False,
                self_cache: Optional[dict] = None, cross_cache: Optional[dict] = None
                ) -> Tuple[Tensor, Dict[str, Optional[Tensor]]]:
        x, self_weights = self.self_block(x, self.self_attn, mask=tgt_mask,
                                          need_weights=need_weights, cache=self_cache)
        x, cross_weights = self.cross_block(x, self.cross_attn, memory, mask=memory_mask,
                                            need_weights=need_weights, cache=cross_cache)
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

    def forward(self, x: Tensor, memory: Tensor, tgt_mask: Optional[Tensor] = None,
                memory_mask: Optional[Tensor] = None, need_weights: bool = False,
                cache: Optional[KVCache] = None
                ) -> Tuple[Tensor, List[Dict[str, Optional[Tensor]]]]:
        weights = []
        for i, layer in enumerate(self.layers):
            self_cache = None if cache is None else cache.self_attn[i]
            cross_cache = None if cache is None else cache.cross_attn[i]
            x, w = layer(x, memory, tgt_mask, memory_mask, need_weights, self_cache,
                         cross_cache)
            weights.append(w)
        return self.norm(x), weights
