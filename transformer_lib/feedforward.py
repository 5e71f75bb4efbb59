"""Position-wise feed-forward network (§3.3, Eq. 2)."""
from __future__ import annotations

import torch
from torch import nn


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, applied to each position alike (§3.3).

    Dropout sits between the two layers, as in ``nn.TransformerEncoderLayer``.

    Shape:
        x: (B, L, D) -> (B, L, D), through (B, L, d_ff)
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_2(self.dropout(torch.relu(self.w_1(x))))   # (B, L, d_ff) -> (B, L, D)
