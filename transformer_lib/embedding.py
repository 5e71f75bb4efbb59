"""Token embeddings scaled by sqrt(d_model) (§3.4)."""
from __future__ import annotations

import math

import torch
from torch import nn

from .checks import check_ids, check_int


class TokenEmbedding(nn.Module):
    """Look up a learned vector per token and multiply it by sqrt(d_model) (§3.4).

    The weights start at N(0, 1/d_model), so the scaled vectors have unit variance per
    dimension, the same order of magnitude as the positional encoding they are added to.
    The row of ``pad_id`` is zero and receives no gradient.

    Shape:
        ids: (B, L) integer ids  ->  (B, L, D)
    """

    def __init__(self, vocab_size: int, d_model: int, pad_id: int | None = 0):
        super().__init__()
        check_int(vocab_size, "vocab_size", 1)
        check_int(d_model, "d_model", 1)
        if pad_id is not None:
            check_int(pad_id, "pad_id", 0, vocab_size - 1)
        self.scale = math.sqrt(d_model)
        self.lookup = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        nn.init.normal_(self.lookup.weight, std=d_model ** -0.5)
        if pad_id is not None:
            with torch.no_grad():
                self.lookup.weight[pad_id].zero_()

    @property
    def weight(self) -> torch.Tensor:
        """The (V, D) table; shared with the output projection when tied."""
        return self.lookup.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        check_ids(ids, "ids", self.lookup.num_embeddings)
        return self.lookup(ids) * self.scale                                  # (B, L, D)
