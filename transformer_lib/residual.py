"""Residual connection around a sub-layer, with layer normalisation (§3.1, §5.4)."""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn


class Dropout(nn.Dropout):
    """``nn.Dropout`` (§5.4) with a cheaper random mask on the CPU; same distribution.

    Each element is kept with probability 1 - p and scaled by 1 / (1 - p). On the CPU the
    keep/drop draw is a random integer in [0, 2^24] (stored as float32, the resolution of
    ``torch.rand``) compared in place with p * 2^24: cheaper per core than ``bernoulli_``,
    the bulk of ``nn.Dropout``'s cost there. Other devices use ``F.dropout``.
    Shape: any -> the same.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        if x.device.type != "cpu" or self.p == 1.0 or self.inplace:
            return F.dropout(x, self.p, True, self.inplace)
        draw = torch.empty(x.shape, dtype=torch.float32).random_()   # integers 0 .. 2^24
        keep = draw.ge_(round(self.p * 2 ** 24)).to(x.dtype)         # 1.0 with prob. 1 - p
        return x * keep.mul_(1.0 / (1.0 - self.p))


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
        self.dropout = Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: torch.Tensor,
                sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))
