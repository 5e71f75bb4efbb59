"""The encoder: a stack of N identical layers (§3.1)."""
from __future__ import annotations

from typing import List, Optional, Tuple

import torch
from torch import nn

from .attention import MultiHeadAttention
from .config import TransformerConfig
from .feedforward import PositionwiseFeedForward
from .residual import ResidualNorm

Tensor = torch.Tensor


class EncoderLayer(nn.Module):
    """Self-attention, then the feed-forward network, each wrapped by :class:`ResidualNorm`.

    Shape:
        x: (B, S, D); mask: bool, True = may attend, broadcastable to (B, H, S, S).
        Returns (B, S, D) and the self-attention weights (B, H, S, S) or None.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        c = config
        self.self_attn = MultiHeadAttention(c.d_model, c.h, c.attn_drop, c.d_k)
        self.feed_forward = PositionwiseFeedForward(c.d_model, c.d_ff, c.P_drop)
        self.attn_block = ResidualNorm(c.d_model, c.P_drop, c.norm_first, c.layer_norm_eps)
        self.ff_block = ResidualNorm(c.d_model, c.P_drop, c.norm_first, c.layer_norm_eps)

    def forward(self, x: Tensor, mask: Optional[Tensor] = None,
                need_weights: bool = False) -> Tuple[Tensor, Optional[Tensor]]:
        x, weights = self.attn_block(x, self.self_attn, mask=mask,
                                     need_weights=need_weights)              # (B, S, D)
        x = self.ff_block(x, self.feed_forward)                              # (B, S, D)
        return x, weights


class Encoder(nn.Module):
    """N encoder layers; with pre-norm, a final LayerNorm (the stack's output is otherwise
    never normalised).

    Shape:
        x: (B, S, D) embedded source; returns (B, S, D) and a list of N weight tensors
        (B, H, S, S), or of None when ``need_weights`` is False.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.N))
        self.norm = (nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
                     if config.norm_first else nn.Identity())

    def forward(self, x: Tensor, mask: Optional[Tensor] = None,
                need_weights: bool = False) -> Tuple[Tensor, List[Optional[Tensor]]]:
        weights = []
        for layer in self.layers:
            x, w = layer(x, mask, need_weights)
            weights.append(w)
        return self.norm(x), weights
