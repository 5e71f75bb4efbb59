"""Grids of attention heatmaps (§3.2.2, Figures 3-5): one panel per layer and head.

:func:`attention_heads` is reached as ``plotting.attention_heads``, beside the other
figures of :mod:`transformer_lib.plotting`.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from .checks import check_int

Tensor = torch.Tensor
MIN_TICK_POINTS = 8.0  # the smallest tick label attention_heads draws: legible at 100 dpi


def label_axes(
    ax, tokens_q, tokens_k, left: bool, bottom: bool, fontsize: Optional[float] = None
) -> None:
    """Key tokens under the columns (if ``bottom``), query tokens beside the rows (if ``left``)."""
    ax.set_xticks(range(len(tokens_k)))
    ax.set_xticklabels(tokens_k if bottom else [""] * len(tokens_k), rotation=90, fontsize=fontsize)
    ax.set_yticks(range(len(tokens_q)))
    ax.set_yticklabels(tokens_q if left else [""] * len(tokens_q), fontsize=fontsize)


def _stack_heads(weights) -> Tensor:
    """Accept (H, T_q, T_k), (L, H, T_q, T_k), or a list of per-layer (H, T_q, T_k) or
    (1, H, T_q, T_k) (one sentence of a model's ``need_weights`` output)."""
    if isinstance(weights, (list, tuple)):
        layers = [torch.as_tensor(w).detach().cpu() for w in weights]
        layers = [w[0] if w.dim() == 4 and w.shape[0] == 1 else w for w in layers]
        weights = torch.stack(layers)  # (L, H, T_q, T_k)
    weights = torch.as_tensor(weights).detach().cpu().float()
    if weights.dim() == 3:
        weights = weights[None]  # (1, H, T_q, T_k)
    if weights.dim() != 4:
        raise ValueError(
            "weights must be (H, T_q, T_k), (L, H, T_q, T_k) or a list of "
            f"per-layer (H, T_q, T_k); got shape {tuple(weights.shape)}"
        )
    return weights


def attention_heads(
    weights,
    tokens_q: Sequence[str],
    tokens_k: Optional[Sequence[str]] = None,
    row_labels: Optional[Sequence[str]] = None,
    title: Optional[str] = None,
    vmax: Optional[float] = 1.0,
    cell: float = 0.3,
    *,
    columns: Optional[int] = None,
    per_row: bool = False,
    query_label: Optional[str] = None,
    key_label: Optional[str] = None,
) -> Figure:
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
    w, tokens_q, tokens_k = _heads_and_tokens(weights, tokens_q, tokens_k)  # (L, H, T_q, T_k)
    w, vmax = _colour_scale(w, vmax, per_row)  # (L, H, T_q, T_k)
    n_rows, n_cols, scale = _grid(w.shape, columns, cell)
    size = (
        scale * w.shape[3] * n_cols + 1.8 + 0.3 * bool(query_label),
        scale * w.shape[2] * n_rows + 1.2 + 0.3 * bool(title) + 0.3 * bool(key_label),
    )
    fig, axes = plt.subplots(n_rows, n_cols, figsize=size, squeeze=False, layout="constrained")
    fontsize = min(10.0, 0.8 * 72 * scale)  # a tick label fits its cell
    im = _draw_heads(axes, w, tokens_q, tokens_k, vmax, fontsize, columns is not None, row_labels)
    colour_label = "weight / its row's maximum" if per_row else "attention weight"
    _finish(fig, axes, im, w.shape[0] * w.shape[1], colour_label, title, query_label, key_label)
    return fig


def _colour_scale(w: Tensor, vmax: Optional[float], per_row: bool) -> Tuple[Tensor, float]:
    """The weights to draw and the top of their colour scale: each query's row divided by
    its maximum with ``per_row`` (scale [0, 1]), else ``vmax`` or the largest weight."""
    if per_row:
        w = w / w.amax(dim=-1, keepdim=True).clamp_min(1e-12)  # (L, H, T_q, T_k)
        vmax = 1.0
    return w, float(w.max()) if vmax is None else vmax


def _finish(fig, axes, im, n_panels: int, colour_label: str, title, query_label, key_label):
    """Blank the panels after the first ``n_panels``; one colour bar for all; the figure's
    axis titles and title, where given."""
    for ax in axes.flat[n_panels:]:
        ax.axis("off")
    fig.colorbar(im, ax=axes, shrink=0.8, label=colour_label)
    for text, put in (
        (query_label, fig.supylabel),
        (key_label, fig.supxlabel),
        (title, fig.suptitle),
    ):
        if text:
            put(text)


def _heads_and_tokens(
    weights, tokens_q: Sequence[str], tokens_k: Optional[Sequence[str]]
) -> Tuple[Tensor, List[str], List[str]]:
    """The weights as (L, H, T_q, T_k) and the token lists, checked to match them."""
    w = _stack_heads(weights)  # (L, H, T_q, T_k)
    tokens_k = list(tokens_q if tokens_k is None else tokens_k)
    tokens_q = list(tokens_q)
    t_q, t_k = w.shape[2:]
    if (t_q, t_k) != (len(tokens_q), len(tokens_k)):
        raise ValueError(
            f"weights are {t_q} x {t_k} but got {len(tokens_q)} query and "
            f"{len(tokens_k)} key tokens"
        )
    return w, tokens_q, tokens_k


def _grid(shape, columns: Optional[int], cell: float) -> Tuple[int, int, float]:
    """Rows and columns of panels for weights of ``shape`` (L, H, T_q, T_k), ``columns`` a
    row (checked; default: one per head), and the inches per token: ``cell``, raised so
    that panels are >= 1.8" and tick labels readable."""
    if columns is not None:
        check_int(columns, "columns", 1)
    n_layers, n_heads, t_q, t_k = shape
    n_cols = n_heads if columns is None else min(columns, n_layers * n_heads)
    n_rows = -(-n_layers * n_heads // n_cols)
    return n_rows, n_cols, max(cell, 1.8 / max(t_q, t_k), MIN_TICK_POINTS / (0.8 * 72))


def _draw_heads(
    axes,
    w: Tensor,
    tokens_q: List[str],
    tokens_k: List[str],
    vmax: float,
    fontsize: float,
    wrapped: bool,
    row_labels: Optional[Sequence[str]],
):
    """One heatmap per (layer, head) of ``w`` (L, H, T_q, T_k) into the grid ``axes``, row
    by row; returns the last image (for the colour bar). ``wrapped``: titles name layer and
    head; else the first row names the heads and ``row_labels`` the layers."""
    n_layers, n_heads = w.shape[:2]
    n_cols = axes.shape[1]
    for i in range(n_layers * n_heads):
        layer, head = divmod(i, n_heads)
        r, c = divmod(i, n_cols)
        ax = axes[r, c]
        im = ax.imshow(w[layer, head].numpy(), cmap="viridis", vmin=0.0, vmax=vmax)
        label_axes(
            ax,
            tokens_q,
            tokens_k,
            left=c == 0,
            bottom=i + n_cols >= n_layers * n_heads,
            fontsize=fontsize,
        )
        if wrapped:
            name = row_labels[layer] if row_labels is not None else f"layer {layer}"
            ax.set_title(
                f"{name}, head {head}" if n_layers > 1 else f"head {head}", fontsize="medium"
            )
        elif r == 0:
            ax.set_title(f"head {c}", fontsize="medium")
        if not wrapped and c == 0 and row_labels is not None:
            ax.set_ylabel(row_labels[r])
    return im
