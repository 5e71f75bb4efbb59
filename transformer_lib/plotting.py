"""Matplotlib figures reused by the notebooks: positional encodings, attention, masks, and
per-layer quantities of whole models (gradient norms).

Every function returns the ``matplotlib.figure.Figure`` it drew and never calls
``plt.show()``; pass ``ax=`` to draw into an existing axes instead of a new figure.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

Tensor = torch.Tensor
MIN_TICK_POINTS = 8.0        # the smallest tick label attention_heads draws: legible at 100 dpi


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
    table = _as_2d(table, "table")                                           # (L, D)
    fig, ax = _axes(ax, (7, 3.5))
    im = ax.imshow(table.numpy(), aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1,
                   interpolation="nearest")
    ax.set_xlabel("dimension")
    ax.set_ylabel("position")
    ax.set_title(title)
    fig.colorbar(im, ax=ax, label="value")
    return fig


def positional_curves(table, dims: Sequence[int], ax=None,
                      title: str = "Positional encoding of chosen dimensions",
                      positions: Optional[Sequence[float]] = None) -> Figure:
    """One curve per chosen dimension, value against position; the legend sits outside the
    axes, to the right, so that it never hides a curve.

    ``positions``: the position of each row of ``table`` (default 0, 1, ..., L - 1), e.g. the
    fractional positions of the formula sampled between the integers.
    """
    table = _as_2d(table, "table")                                           # (L, D)
    bad = [d for d in dims if not 0 <= d < table.shape[1]]
    if bad:
        raise ValueError(f"dims must lie in [0, {table.shape[1]}), got {bad}")
    x = torch.arange(table.shape[0]) if positions is None else torch.as_tensor(positions)
    if x.dim() != 1 or len(x) != table.shape[0]:
        raise ValueError(f"positions must hold one position per row of table "
                         f"({table.shape[0]}), got shape {tuple(x.shape)}")
    fig, ax = _axes(ax, (7, 3))
    for d in dims:
        ax.plot(x.numpy(), table[:, d].numpy(), label=f"dim {d}")
    ax.set_xlabel("position")
    ax.set_ylabel("value")
    ax.set_title(title, fontsize="medium")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
              fontsize="small")
    return fig


def positional_similarity(table, position: int, ax=None,
                          title: Optional[str] = None) -> Figure:
    """Dot product of one position's encoding with every other's, against their distance k.

    For the sinusoidal table ``PE[p] . PE[p + k] = sum_i cos(k w_i)``: the curve has the same
    shape for every ``position``, only the range of distances shown moves.
    """
    table = _as_2d(table, "table")                                           # (L, D)
    if isinstance(position, bool) or not isinstance(position, int) \
            or not 0 <= position < table.shape[0]:
        raise ValueError(f"position must be an int in [0, {table.shape[0]}), got {position!r}")
    fig, ax = _axes(ax, (6, 2.8))
    sims = table @ table[position]                                           # (L,)
    distance = torch.arange(table.shape[0]) - position                       # (L,)
    ax.plot(distance.numpy(), sims.numpy(), label=f"PE[{position}] · PE[{position} + k]")
    ax.axhline(table.shape[1] / 2, color="grey", linestyle=":", label="D / 2 (at k = 0)")
    ax.set_xlabel("distance k (positions)")
    ax.set_ylabel("dot product")
    ax.set_title(title or "Similarity against distance", fontsize="medium")
    ax.legend(loc="upper right", fontsize="small")
    return fig


def _label_axes(ax, tokens_q, tokens_k, left: bool, bottom: bool,
                fontsize: Optional[float] = None) -> None:
    ax.set_xticks(range(len(tokens_k)))
    ax.set_xticklabels(tokens_k if bottom else [""] * len(tokens_k), rotation=90,
                       fontsize=fontsize)
    ax.set_yticks(range(len(tokens_q)))
    ax.set_yticklabels(tokens_q if left else [""] * len(tokens_q), fontsize=fontsize)


def _stack_heads(weights) -> Tensor:
    """Accept (H, T_q, T_k), (L, H, T_q, T_k), or a list of per-layer (H, T_q, T_k) or
    (1, H, T_q, T_k) (one sentence of a model's ``need_weights`` output)."""
    if isinstance(weights, (list, tuple)):
        layers = [torch.as_tensor(w).detach().cpu() for w in weights]
        layers = [w[0] if w.dim() == 4 and w.shape[0] == 1 else w for w in layers]
        weights = torch.stack(layers)                                        # (L, H, T_q, T_k)
    weights = torch.as_tensor(weights).detach().cpu().float()
    if weights.dim() == 3:
        weights = weights[None]                                              # (1, H, T_q, T_k)
    if weights.dim() != 4:
        raise ValueError("weights must be (H, T_q, T_k), (L, H, T_q, T_k) or a list of "
                         f"per-layer (H, T_q, T_k); got shape {tuple(weights.shape)}")
    return weights


def attention_heads(weights, tokens_q: Sequence[str], tokens_k: Optional[Sequence[str]] = None,
                    row_labels: Optional[Sequence[str]] = None,
                    title: Optional[str] = None, vmax: Optional[float] = 1.0,
                    cell: float = 0.3, *, columns: Optional[int] = None,
                    per_row: bool = False, query_label: Optional[str] = None,
                    key_label: Optional[str] = None) -> Figure:
    """A grid of attention heatmaps: one row per layer, one column per head.

    Rows are queries (``tokens_q``), columns keys (``tokens_k``, default ``tokens_q``); all
    panels share one colour scale, [0, vmax] (``vmax=None``: the largest weight), and one
    colour bar. ``columns``: wrap the L*H panels into rows of that many, each titled with
    its layer (``row_labels``) and head. ``cell``: inches per token, raised where needed so
    that every panel is at least 1.8 inches and every tick label ``MIN_TICK_POINTS`` points
    (fit a long sequence with fewer panels a row, not smaller ones). ``per_row``: divide
    each query's weights by their maximum, so that every row spans the whole scale and a
    row with one dominant key does not wash out the others. ``query_label``/``key_label``:
    axis titles of the figure.
    """
    w = _stack_heads(weights)                                                # (L, H, T_q, T_k)
    tokens_k = list(tokens_q if tokens_k is None else tokens_k)
    tokens_q = list(tokens_q)
    n_layers, n_heads, t_q, t_k = w.shape
    if (t_q, t_k) != (len(tokens_q), len(tokens_k)):
        raise ValueError(f"weights are {t_q} x {t_k} but got {len(tokens_q)} query and "
                         f"{len(tokens_k)} key tokens")
    if columns is not None and (isinstance(columns, bool) or not isinstance(columns, int)
                                or columns < 1):
        raise ValueError(f"columns must be a positive int or None, got {columns!r}")
    if per_row:
        w = w / w.amax(dim=-1, keepdim=True).clamp_min(1e-12)               # (L, H, T_q, T_k)
        vmax = 1.0
    vmax = float(w.max()) if vmax is None else vmax
    n_cols = n_heads if columns is None else min(columns, n_layers * n_heads)
    n_rows = -(-n_layers * n_heads // n_cols)
    scale = max(cell, 1.8 / max(t_q, t_k),                     # inches per token, panels >= 1.8"
                MIN_TICK_POINTS / (0.8 * 72))                  # and tick labels readable
    size = (scale * t_k * n_cols + 1.8 + 0.3 * bool(query_label),
            scale * t_q * n_rows + 1.2 + 0.3 * bool(title) + 0.3 * bool(key_label))
    fig, axes = plt.subplots(n_rows, n_cols, figsize=size, squeeze=False, layout="constrained")
    fontsize = min(10.0, 0.8 * 72 * scale)                     # a tick label fits its cell
    for i in range(n_layers * n_heads):
        layer, head = divmod(i, n_heads)
        r, c = divmod(i, n_cols)
        ax = axes[r, c]
        im = ax.imshow(w[layer, head].numpy(), cmap="viridis", vmin=0.0, vmax=vmax)
        _label_axes(ax, tokens_q, tokens_k, left=c == 0,
                    bottom=i + n_cols >= n_layers * n_heads, fontsize=fontsize)
        if columns is not None:
            name = row_labels[layer] if row_labels is not None else f"layer {layer}"
            ax.set_title(f"{name}, head {head}" if n_layers > 1 else f"head {head}",
                         fontsize="medium")
        elif r == 0:
            ax.set_title(f"head {c}", fontsize="medium")
        if columns is None and c == 0 and row_labels is not None:
            ax.set_ylabel(row_labels[r])
    for ax in axes.flat[n_layers * n_heads:]:
        ax.axis("off")
    fig.colorbar(im, ax=axes, shrink=0.8,
                 label="weight / its row's maximum" if per_row else "attention weight")
    if query_label:
        fig.supylabel(query_label)
    if key_label:
        fig.supxlabel(key_label)
    if title:
        fig.suptitle(title)
    return fig


def mask_grid(mask, tokens_q: Optional[Sequence[str]] = None,
              tokens_k: Optional[Sequence[str]] = None, ax=None,
              title: str = "mask (True = may attend)") -> Figure:
    """Draw a boolean (T_q, T_k) mask: filled cells may attend, white cells are blocked.

    Leading size-1 dimensions (as in (1, 1, T, T) masks) are dropped; ``tokens_k`` defaults
    to ``tokens_q`` for a square mask.
    """
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
    _label_axes(ax, tokens_q, list(tokens_k), left=True, bottom=True)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_title(title, fontsize="medium")
    return fig


def per_layer_lines(series: Dict[str, Sequence[float]], ax=None,
                    title: str = "gradient norm per layer",
                    ylabel: str = "gradient norm", log: bool = False,
                    layer_label: Optional[str] = "layer (1 = nearest the input)") -> Figure:
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
