"""Residual connection around a sub-layer, with layer normalisation (§3.1, §5.4)."""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn


class ResidualNorm(nn.Module):
    """Wrap a sub-layer with dropout, a residual connection and LayerNorm.

    * post-norm (the paper, default): ``LayerNorm(x + Dropout(Sublayer(x)))``
    * pre-norm (``norm_first=True``, most modern code): ``x + Dropout(Sublayer(LayerNorm(x)))``

    Shape:
        x: (B, L, D) -> (B, L, D)
    """

    def __init__(self, d_model: int, dropout: float = 0.1, norm_first: bool = False,
                 eps: float = 1e-5):
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: torch.Tensor,
                sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))
