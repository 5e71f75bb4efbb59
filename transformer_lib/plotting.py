"""Matplotlib figures reused by the notebooks: positional encodings, masks, attention
heatmaps per layer and head (§3.2.2, Figures 3-5), and per-layer curves of whole models.

Every function returns the ``Figure`` it drew and never calls ``plt.show()``; pass ``ax=``
to draw into an existing axes instead of a new figure.

``STYLE``, set by every notebook that draws (``plt.style.use(plotting.STYLE)``): 13-point
text, 18 pixels at 100 dpi, that still reads when a figure is projected; nothing here is smaller.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from .checks import check_int

Tensor = torch.Tensor
STYLE: Dict[str, Any] = {"font.size": 13, "figure.dpi": 100, "axes.titlesize": "medium",
                         "figure.titlesize": "medium"}
LABEL_INCHES = STYLE["font.size"] / 72 / 0.8  # a heatmap cell per token: its label and a gap


def _as_2d(x, name: str) -> Tensor:
    """A CPU float tensor with the leading size-1 dimensions removed; must end up 2-D."""
    x = torch.as_tensor(x).detach().cpu()
    while x.dim() > 2 and x.shape[0] == 1:
        x = x[0]
    if x.dim() != 2:
        raise ValueError(f"{name} must be 2-D (after dropping leading 1s), got {tuple(x.shape)}")
    return x.float()


def _axes(ax, figsize):
    if ax is None:
        return plt.subplots(figsize=figsize, layout="constrained")
    return ax.figure, ax


def label_axes(ax, tokens_q, tokens_k) -> None:
    """Key tokens under the columns, query tokens beside the rows."""
    ax.set_xticks(range(len(tokens_k)), tokens_k, rotation=90)
    ax.set_yticks(range(len(tokens_q)), tokens_q)


def positional_heatmap(table, ax=None, title: str = "Sinusoidal positional encoding") -> Figure:
    """Heatmap of a (positions, d_model) table: one row per position, one column per dimension."""
    table = _as_2d(table, "table")                                           # (L, D)
    fig, ax = _axes(ax, (7, 3.5))
    im = ax.imshow(table.numpy(), aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1,
                   interpolation="nearest")
    ax.set(xlabel="dimension (column)", ylabel="position", title=title)
    fig.colorbar(im, ax=ax, label="PE[position, dimension]")
    return fig


def positional_curves(table, dims: Sequence[int], ax=None,
                      title: str = "Positional encoding of chosen dimensions",
                      positions: Optional[Sequence[float]] = None) -> Figure:
    """One curve per chosen dimension, value against position (``positions``: each row's
    position, default 0, 1, ...); the legend sits outside the axes."""
    table = _as_2d(table, "table")                                           # (L, D)
    if any(not 0 <= d < table.shape[1] for d in dims):
        raise ValueError(f"dims must lie in [0, {table.shape[1]}), got {list(dims)}")
    x = torch.arange(table.shape[0]) if positions is None else torch.as_tensor(positions)
    if x.dim() != 1 or len(x) != table.shape[0]:
        raise ValueError(f"positions must hold one position per row of table ({table.shape[0]})")
    fig, ax = _axes(ax, (7, 3))
    for d in dims:
        ax.plot(x.numpy(), table[:, d].numpy(), label=f"dim {d}")
    ax.set(xlabel="position", ylabel="PE[position, dim]")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return fig


def positional_similarity(table, position: int, ax=None, title: Optional[str] = None) -> Figure:
    """Dot product of one position's encoding with every other's, against their distance k:
    ``PE[p] . PE[p + k] = sum_i cos(k w_i)``, the same curve for every p."""
    table = _as_2d(table, "table")                                           # (L, D)
    check_int(position, "position", 0, table.shape[0] - 1)
    fig, ax = _axes(ax, (6, 2.8))
    sims = table @ table[position]                                           # (L,)
    distance = torch.arange(table.shape[0]) - position
    ax.plot(distance.numpy(), sims.numpy(), label=f"PE[{position}] · PE[{position} + k]")
    ax.axhline(table.shape[1] / 2, color="grey", linestyle=":", label="D / 2 (at k = 0)")
    ax.set(xlabel="distance k (positions)", ylabel="dot product")
    ax.set_title(title or "Similarity against distance")
    ax.legend(loc="upper right")
    return fig


def mask_grid(mask, tokens_q: Optional[Sequence[str]] = None,
              tokens_k: Optional[Sequence[str]] = None, ax=None,
              title: str = "mask (True = may attend)") -> Figure:
    """A boolean (T_q, T_k) mask: filled cells may attend, white cells are blocked. Leading
    size-1 dimensions are dropped; ``tokens_k`` defaults to ``tokens_q`` for a square mask."""
    mask = torch.as_tensor(mask)
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must have dtype torch.bool, got {mask.dtype}")
    grid = _as_2d(mask, "mask")                                              # (T_q, T_k)
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
    label_axes(ax, tokens_q, list(tokens_k))
    ax.set(xlabel="key position", ylabel="query position")
    ax.set_title(title)
    return fig


def attention_heads(weights, tokens_q: Sequence[str], tokens_k: Optional[Sequence[str]] = None,
                    row_labels: Optional[Sequence[str]] = None, title: Optional[str] = None,
                    vmax: Optional[float] = 1.0, cell: float = LABEL_INCHES, *,
                    columns: Optional[int] = None, heads: Optional[Sequence[int]] = None,
                    per_row: bool = False, query_label: str = "query", key_label: str = "key"):
    """A grid of attention heatmaps, one panel per layer and head, each with its tokens.

    ``weights``: (H, T_q, T_k), (L, H, T_q, T_k) or a list of per-layer (1, H, T_q, T_k)
    (a model's ``need_weights`` output for one sentence). Rows are queries (``tokens_q``),
    columns keys (``tokens_k``, default ``tokens_q``); one colour scale [0, vmax] (None: the
    largest weight). ``columns``: panels per row (default: one per head; the layers, named
    by ``row_labels``, below one another). ``heads``: draw only these heads (numbered from
    1, as the panels' titles number them), e.g. one head up close. ``cell``: inches per
    token, raised so that every panel is at least 1.8 inches and every token's label fits
    its row at the style's text size. ``per_row``: divide each query's weights by their
    maximum, so that a row with one dominant key does not wash out the others.
    """
    if isinstance(weights, (list, tuple)):
        weights = torch.stack([torch.as_tensor(w).detach().cpu().reshape(w.shape[-3:])
                               for w in weights])
    w = torch.as_tensor(weights).detach().cpu().float()
    w = w[None] if w.dim() == 3 else w                                       # (L, H, T_q, T_k)
    tokens_q = list(tokens_q)
    tokens_k = list(tokens_q if tokens_k is None else tokens_k)
    if w.dim() != 4 or w.shape[2:] != (len(tokens_q), len(tokens_k)):
        raise ValueError(f"weights of shape {tuple(w.shape)} do not fit {len(tokens_q)} query "
                         f"and {len(tokens_k)} key tokens")
    if per_row:
        w, vmax = w / w.amax(dim=-1, keepdim=True).clamp_min(1e-12), 1.0
    vmax = float(w.max()) if vmax is None else vmax
    numbers = list(range(1, w.shape[1] + 1)) if heads is None else list(heads)
    if not numbers or any(not 1 <= int(n) <= w.shape[1] for n in numbers):
        raise ValueError(f"heads must hold head numbers in [1, {w.shape[1]}], got {heads}")
    w = w[:, [int(n) - 1 for n in numbers]]
    n_layers, n_heads, t_q, t_k = w.shape
    n_cols = n_heads if columns is None else min(check_int(columns, "columns", 1), n_layers * n_heads)
    n_rows = -(-n_layers * n_heads // n_cols)
    scale = max(cell, 1.8 / max(t_q, t_k), LABEL_INCHES)
    char, line = 0.65 * STYLE["font.size"] / 72, 1.6 * STYLE["font.size"] / 72   # inches
    beside = char * max(map(len, tokens_q)) + 0.35              # the query labels of a row
    under = char * max(map(len, tokens_k)) + 0.35               # its key labels
    size = (n_cols * (scale * t_k + 0.3) + beside + 2 * line + 0.8,  # + colour bar, y label
            n_rows * (scale * t_q + under + line) + line * (1 + bool(title)))
    fig, axes = plt.subplots(n_rows, n_cols, figsize=size, squeeze=False, layout="constrained")
    for i in range(n_layers * n_heads):
        layer, head = divmod(i, n_heads)
        ax = axes.flat[i]
        im = ax.imshow(w[layer, head].numpy(), cmap="viridis", vmin=0.0, vmax=vmax)
        label_axes(ax, tokens_q, tokens_k)
        ax.tick_params(labelleft=i % n_cols == 0)               # a row's panels share queries
        name = row_labels[layer] if row_labels is not None else f"layer {layer + 1}"
        number = numbers[head]
        ax.set_title(f"{name}, head {number}" if n_layers > 1 or row_labels else f"head {number}")
    for ax in axes.flat[n_layers * n_heads:]:
        ax.axis("off")
    fig.colorbar(im, ax=axes, shrink=0.8,
                 label="weight / its row's maximum" if per_row else "attention weight")
    fig.supylabel(query_label)
    fig.supxlabel(key_label)
    if title:
        fig.suptitle(title)
    return fig


def per_layer_lines(series: Dict[str, Sequence[float]], ax=None,
                    title: str = "gradient norm per layer", ylabel: str = "gradient norm",
                    log: bool = False, layer_label: str = "layer (1 = nearest the input)") -> Figure:
    """One line per named series of per-layer values, layers numbered from 1."""
    if not series:
        raise ValueError("series must name at least one sequence of per-layer values")
    fig, ax = _axes(ax, (6, 3.2))
    for name, values in series.items():
        values = [float(v) for v in values]
        ax.plot(range(1, len(values) + 1), values, marker="o", label=name)
    if log:
        ax.set_yscale("log")
    ax.set(xlabel=layer_label, ylabel=ylabel)
    ax.set_title(title)
    ax.legend()
    ax.grid(alpha=0.3)
    return fig
