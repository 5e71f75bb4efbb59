"""Explorers that need no model: the positional encoding (notebook 02) and the masks (03)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import torch

from .. import plotting
from ..checks import check_int
from ..masks import causal_mask, combine, padding_mask
from ..positional import sinusoidal_table
from .base import Explorer, slider


# ----------------------------------------------------------------------------------------
# Positional encoding (notebook 02)


def positional_encoding(
    d_model: int = 64, position: int = 20, dimension: int = 6, max_len: int = 128
) -> Explorer:
    """Sliders for d_model, a position and a dimension: the table's heatmap, the chosen
    dimension's (sin, cos) pair against position, and the chosen position's similarity to
    every other against their distance, all redrawn together."""
    check_int(max_len, "max_len", 1, 10_000)
    check_int(d_model, "d_model", 8, 512)
    if d_model % 8:
        raise ValueError(f"d_model must be a multiple of 8 (the slider's step), got {d_model}")
    check_int(position, "position", 0, max_len - 1)
    check_int(dimension, "dimension", 0, d_model - 1)
    controls = {
        "d_model": slider(d_model, 8, 512, "d_model", step=8),
        "position": slider(position, 0, max_len - 1, "position"),
        "dimension": slider(dimension, 0, d_model - 1, "dimension"),
    }

    def draw(d_model, position, dimension):
        controls["dimension"].max = d_model - 1  # may lower the dimension
        return _positional_figure(max_len, d_model, position, controls["dimension"].value), ""

    return Explorer("Positional-encoding", controls, draw)


def _positional_figure(max_len: int, d_model: int, position: int, dimension: int):
    """The table's heatmap, the chosen dimension's (sin, cos) pair against position, and the
    chosen position's similarity to every other (§3.5)."""
    table = sinusoidal_table(max_len, d_model)  # (L, D)
    fig = plt.figure(figsize=(10, 6.4), layout="constrained")
    grid = fig.add_gridspec(2, 2, height_ratios=(1.1, 1))
    heat, curves, sims = (
        fig.add_subplot(grid[0, :]),
        fig.add_subplot(grid[1, 0]),
        fig.add_subplot(grid[1, 1]),
    )
    plotting.positional_heatmap(
        table,
        ax=heat,
        title=f"PE table, d_model = {d_model} (lines: the chosen position and dimension)",
    )
    heat.axhline(position, color="black", linewidth=1)
    heat.axvline(dimension, color="black", linewidth=1, linestyle="--")
    pair = dimension - dimension % 2  # the pair's sin column
    wavelength = 2 * math.pi * 10000 ** (pair / d_model)
    plotting.positional_curves(
        table,
        [pair, pair + 1],
        ax=curves,
        title=(f"dims {pair}, {pair + 1} (pair i = {pair // 2}): wavelength {wavelength:,.1f}"),
    )
    curves.axvline(position, color="black", linewidth=1)
    plotting.positional_similarity(table, position, ax=sims)
    return fig


# ----------------------------------------------------------------------------------------
# Masks (notebook 03, 06)


def masks(
    src_len: int = 6, tgt_len: int = 5, src_pad: int = 2, tgt_pad: int = 1, longest: int = 12
) -> Explorer:
    """Sliders for the source and target lengths and how many of their positions are
    padding: the source padding mask, the causal mask, the two combined (decoder
    self-attention) and the cross-attention mask, queries down, keys across."""
    check_int(longest, "longest", 1, 64)
    check_int(src_len, "src_len", 1, longest)
    check_int(tgt_len, "tgt_len", 1, longest)
    check_int(src_pad, "src_pad", 0, src_len - 1)
    check_int(tgt_pad, "tgt_pad", 0, tgt_len - 1)
    controls = {
        "src_len": slider(src_len, 1, longest, "source length"),
        "src_pad": slider(src_pad, 0, src_len - 1, "source padding"),
        "tgt_len": slider(tgt_len, 1, longest, "target length"),
        "tgt_pad": slider(tgt_pad, 0, tgt_len - 1, "target padding"),
    }

    def draw(src_len, src_pad, tgt_len, tgt_pad):
        controls["src_pad"].max, controls["tgt_pad"].max = src_len - 1, tgt_len - 1
        src_pad, tgt_pad = controls["src_pad"].value, controls["tgt_pad"].value
        return _masks_figure(*_mask_panels(src_len, src_pad, tgt_len, tgt_pad)), ""

    return Explorer("Mask", controls, draw)


def _mask_panels(src_len: int, src_pad: int, tgt_len: int, tgt_pad: int):
    """(title, mask, query labels, key labels) of the four masks of the model (§3.2.3), and
    the source's labels."""
    src, s_tokens = _padded(src_len, src_pad, "s")  # (1, S)
    tgt, t_tokens = _padded(tgt_len, tgt_pad, "t")  # (1, T)
    src_keys = padding_mask(src, 0)  # (1, 1, 1, S)
    panels = [
        (
            "source padding\n(encoder self-attention)",
            src_keys.expand(1, 1, src_len, src_len),
            s_tokens,
            s_tokens,
        ),
        ("causal", causal_mask(tgt_len), t_tokens, t_tokens),
        (
            "causal & target padding\n(decoder self-attention)",
            combine(padding_mask(tgt, 0), causal_mask(tgt_len)),
            t_tokens,
            t_tokens,
        ),
        (
            "source padding\n(cross-attention)",
            src_keys.expand(1, 1, tgt_len, src_len),
            t_tokens,
            s_tokens,
        ),
    ]
    return panels, s_tokens


def _masks_figure(panels: list, s_tokens: list):
    """The masks side by side, queries down, keys across."""
    fig, axes = plt.subplots(1, 4, figsize=(10, 3.6), layout="constrained")
    for ax, (title, mask, rows, cols) in zip(axes, panels):
        plotting.mask_grid(mask, rows, cols, ax=ax, title=title)
        ax.set_ylabel(f"query ({'source' if rows is s_tokens else 'target'})")
        ax.set_xlabel(f"key ({'source' if cols is s_tokens else 'target'})")
    fig.suptitle("Masks, True = may attend (filled); white = blocked", fontsize="medium")
    return fig


def _padded(length: int, pad: int, prefix: str):
    """Ids (1, length) whose last ``pad`` positions are padding (id 0), and their labels."""
    ids = torch.tensor([[4] * (length - pad) + [0] * pad])  # (1, L)
    return ids, [f"{prefix}{i}" for i in range(length - pad)] + ["pad"] * pad
