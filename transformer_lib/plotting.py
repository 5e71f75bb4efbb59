"""Matplotlib figures reused by the notebooks: positional encodings, attention, masks, and
per-layer quantities of whole models (gradient norms).

Every function returns the ``matplotlib.figure.Figure`` it drew and never calls
``plt.show()``; pass ``ax=`` to draw into an existing axes instead of a new figure.
The grids of attention heatmaps are drawn by :mod:`transformer_lib.heatmaps`.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from .checks import check_int
from .heatmaps import MIN_TICK_POINTS, attention_heads, label_axes

__all__ = [
    "positional_heatmap",
    "positional_curves",
    "positional_similarity",
    "attention_heads",
    "mask_grid",
    "per_layer_lines",
    "MIN_TICK_POINTS",
]

Tensor = torch.Tensor


def _as_2d(x, name: str) -> Tensor:
    """A CPU float tensor with the leading size-1 dimensions removed; must end up 2-D."""
    x = torch.as_tensor(x).detach().cpu()
    while x.dim() > 2 and x.shape[0] == 1:
        x = x[0]
    if x.dim() != 2:
        raise ValueError(f"{name} must be 2-D (after dropping leading 1s), got {tuple(x.shape)}")
    return x.float()


def _axes(ax, figsize) -> tuple:
    if ax is None:
        fig, ax = plt.subplots(figsize=figsize, layout="constrained")
        return fig, ax
    return ax.figure, ax


def positional_heatmap(table, ax=None, title: str = "Sinusoidal positional encoding") -> Figure:
    """Heatmap of a (positions, d_model) table: one row per position, one column per dimension."""
    table = _as_2d(table, "table")  # (L, D)
    fig, ax = _axes(ax, (7, 3.5))
    im = ax.imshow(
        table.numpy(), aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest"
    )
    ax.set_xlabel("dimension")
    ax.set_ylabel("position")
    ax.set_title(title)
    fig.colorbar(im, ax=ax, label="value")
    return fig


def positional_curves(
    table,
    dims: Sequence[int],
    ax=None,
    title: str = "Positional encoding of chosen dimensions",
    positions: Optional[Sequence[float]] = None,
) -> Figure:
    """One curve per chosen dimension, value against position; the legend sits outside the
    axes, to the right, so that it never hides a curve.

    ``positions``: the position of each row of ``table`` (default 0, 1, ..., L - 1), e.g. the
    fractional positions of the formula sampled between the integers.
    """
    table = _as_2d(table, "table")  # (L, D)
    bad = [d for d in dims if not 0 <= d < table.shape[1]]
    if bad:
        raise ValueError(f"dims must lie in [0, {table.shape[1]}), got {bad}")
    x = torch.arange(table.shape[0]) if positions is None else torch.as_tensor(positions)
    if x.dim() != 1 or len(x) != table.shape[0]:
        raise ValueError(
            f"positions must hold one position per row of table "
            f"({table.shape[0]}), got shape {tuple(x.shape)}"
        )
    fig, ax = _axes(ax, (7, 3))
    for d in dims:
        ax.plot(x.numpy(), table[:, d].numpy(), label=f"dim {d}")
    ax.set_xlabel("position")
    ax.set_ylabel("value")
    ax.set_title(title, fontsize="medium")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize="small")
    return fig


def positional_similarity(table, position: int, ax=None, title: Optional[str] = None) -> Figure:
    """Dot product of one position's encoding with every other's, against their distance k.

    For the sinusoidal table ``PE[p] . PE[p + k] = sum_i cos(k w_i)``: the curve has the same
    shape for every ``position``, only the range of distances shown moves.
    """
    table = _as_2d(table, "table")  # (L, D)
    check_int(position, "position", 0, table.shape[0] - 1)
    fig, ax = _axes(ax, (6, 2.8))
    sims = table @ table[position]  # (L,)
    distance = torch.arange(table.shape[0]) - position  # (L,)
    ax.plot(distance.numpy(), sims.numpy(), label=f"PE[{position}] · PE[{position} + k]")
    ax.axhline(table.shape[1] / 2, color="grey", linestyle=":", label="D / 2 (at k = 0)")
    ax.set_xlabel("distance k (positions)")
    ax.set_ylabel("dot product")
    ax.set_title(title or "Similarity against distance", fontsize="medium")
    ax.legend(loc="upper right", fontsize="small")
    return fig


def mask_grid(
    mask,
    tokens_q: Optional[Sequence[str]] = None,
    tokens_k: Optional[Sequence[str]] = None,
    ax=None,
    title: str = "mask (True = may attend)",
) -> Figure:
    """Draw a boolean (T_q, T_k) mask: filled cells may attend, white cells are blocked.

    Leading size-1 dimensions (as in (1, 1, T, T) masks) are dropped; ``tokens_k`` defaults
    to ``tokens_q`` for a square mask.
    """
    mask = torch.as_tensor(mask)
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must have dtype torch.bool, got {mask.dtype}")
    grid = _as_2d(mask, "mask")  # (T_q, T_k)
    t_q, t_k = grid.shape
    fig, ax = _axes(ax, (max(2.5, 0.35 * t_k + 1), max(2.5, 0.35 * t_q + 1)))
    ax.imshow(grid.numpy(), cmap="Blues", vmin=0, vmax=1.25)
    ax.set_xticks([x - 0.5 for x in range(1, t_k)], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, t_q)], minor=True)
    ax.grid(which="minor", color="grey", linewidth=0.5)
    ax.tick_params(which="minor", length=0)
    tokens_q = list(tokens_q) if tokens_q is not None else [str(i) for i in range(t_q)]
    if tokens_k is None:
        tokens_k = tokens_q if t_q == t_k else [str(j) for j in range(t_k)]
    label_axes(ax, tokens_q, list(tokens_k), left=True, bottom=True)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_title(title, fontsize="medium")
    return fig


def per_layer_lines(
    series: Dict[str, Sequence[float]],
    ax=None,
    title: str = "gradient norm per layer",
    ylabel: str = "gradient norm",
    log: bool = False,
    layer_label: Optional[str] = "layer (1 = nearest the input)",
) -> Figure:
    """One line per named series of per-layer values, layers numbered from 1."""
    if not series:
        raise ValueError("series must name at least one sequence of per-layer values")
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 3.2), layout="constrained")
    else:
        fig = ax.figure
    for name, values in series.items():
        values = [float(v) for v in values]
        ax.plot(range(1, len(values) + 1), values, marker="o", label=name)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel(layer_label or "layer")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize="medium")
    ax.legend()
    ax.grid(alpha=0.3)
    return fig
