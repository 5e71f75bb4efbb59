"""Matplotlib figures about whole models: per-layer quantities such as gradient norms.

Like :mod:`transformer_lib.plotting`, every function returns the ``Figure`` it drew, never
calls ``plt.show()``, and accepts ``ax=`` to draw into an existing axes.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence

import matplotlib.pyplot as plt
from matplotlib.figure import Figure


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
