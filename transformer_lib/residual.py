"""Residual connection around a sub-layer, with layer normalisation (§3.1, §5.4)."""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn


class ResidualNorm(nn.Module):
    """Wrap a sub-layer with dropout, a residual connection and LayerNorm.

    * post-norm (the paper, default): ``LayerNorm(x + Dropout(Sublayer(x)))``
    * pre-norm (``norm_first=True``, most modern code): ``x + Dropout(Sublayer(LayerNorm(x)))``

    The sub-layer is called as ``sublayer(x, *args, **kwargs)``. An attention sub-layer
    returns ``(output, weights)``; the block then returns ``(x, weights)``.

    Shape:
        x: (B, L, D) -> (B, L, D)
    """

    def __init__(self, d_model: int, dropout: float = 0.1, norm_first: bool = False,
                 eps: float = 1e-5):
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: torch.Tensor, sublayer: Callable[..., Any], *args: Any,
                **kwargs: Any) -> Any:
        out = sublayer(self.norm(x) if self.norm_first else x, *args, **kwargs)
        y, weights = out if isinstance(out, tuple) else (out, None)  # attention: (y, weights)
        if self.norm_first:
            x = x + self.dropout(y)                           # x + Dropout(Sublayer(LayerNorm(x)))
        else:
            x = self.norm(x + self.dropout(y))                # LayerNorm(x + Dropout(Sublayer(x)))
        return (x, weights) if isinstance(out, tuple) else x
