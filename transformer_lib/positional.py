"""Positions: the sinusoidal encoding of §3.5, and learned position embeddings (Table 3,
row E)."""
from __future__ import annotations

import math

import torch
from torch import nn

from .checks import check_choice, check_float, check_int, check_sequence


def sinusoidal_table(max_len: int, d_model: int, layout: str = "interleaved",
                     dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The (max_len, d_model) table of §3.5:

        PE[pos, 2i] = sin(pos / 10000^(2i/d_model)),  PE[pos, 2i+1] = cos(pos / 10000^(2i/d_model)).

    ``layout="interleaved"`` is the paper's (sin, cos, sin, cos, ...); ``"concat"`` puts all
    sines first, then all cosines (``[sin | cos]``), a fixed permutation of the columns.
    Computed in float64 and cast to ``dtype``.
    """
    check_int(max_len, "max_len", 1)
    check_int(d_model, "d_model", 2)
    if d_model % 2:
        raise ValueError(f"d_model must be even for sin/cos pairs, got {d_model}")
    check_choice(layout, "layout", ("interleaved", "concat"))
    pos = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)            # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)                 # (D/2,)
    inv_freq = torch.exp(-math.log(10000.0) * two_i / d_model)               # 1 / 10000^(2i/D)
    angles = pos * inv_freq                                                  # (max_len, D/2)
    if layout == "interleaved":
        table = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1)  # (max_len, D)
    else:
        table = torch.cat((angles.sin(), angles.cos()), dim=-1)              # (max_len, D)
    return table.to(dtype)


class PositionalEncoding(nn.Module):
    """Add the sinusoidal table to the embeddings, then apply dropout (§3.5, §5.4).

    The table is a registered buffer: it moves with ``.to(device)`` and is saved in the
    ``state_dict``, but it is not a parameter and is never trained. With ``learned=True``
    the rows are parameters instead (Table 3, row E: "learned positional embeddings"),
    started at N(0, 1/d_model) as in fairseq: small beside the unit-variance embeddings.

    Shape:
        x: (B, L, D)  ->  (B, L, D); ``offset`` shifts the positions (incremental decoding).
    """

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.1,
                 layout: str = "interleaved", learned: bool = False):
        super().__init__()
        check_float(dropout, "dropout", 0.0, 1.0, max_open=True)
        self.d_model = check_int(d_model, "d_model", 1)
        if learned:
            self.pe = nn.Parameter(torch.randn(check_int(max_len, "max_len", 1), d_model)
                                   * d_model ** -0.5)
        else:
            self.register_buffer("pe", sinusoidal_table(max_len, d_model, layout))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        check_sequence(x, "x", self.d_model)
        check_int(offset, "offset", 0)
        length = x.shape[1]
        if offset + length > self.pe.shape[0]:
            raise ValueError(f"positions up to {offset + length} do not fit the table of "
                             f"max_len={self.pe.shape[0]}: build the model with a larger max_len")
        return self.dropout(x + self.pe[offset:offset + length].to(x.dtype))  # (B, L, D)
