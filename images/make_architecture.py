"""Draw images/transformer_architecture.svg: the encoder-decoder of §3 (Figure 1's content).

Run from the repository root: ``python images/make_architecture.py``. Each box names the
transformer_lib module that implements it.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

plt.rcParams["svg.hashsalt"] = "transformer"  # stable ids: the file only changes with the figure
plt.rcParams["svg.fonttype"] = "none"  # text stays text

COLOURS = {
    "attn": "#f9d7a0",
    "ff": "#b9dcf2",
    "norm": "#f3f1b0",
    "embed": "#f6c4c4",
    "pos": "#ffffff",
    "out": "#cfe8c6",
}


def box(ax, x, y, w, h, text, kind, fontsize=9):
    ax.add_patch(
        FancyBboxPatch(
            (x - w / 2, y - h / 2),
            w,
            h,
            boxstyle="round,pad=0.02,rounding_size=0.12",
            fc=COLOURS[kind],
            ec="#333333",
            lw=1,
        )
    )
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)


def arrow(ax, xy0, xy1, style="-|>", rad=0.0):
    ax.add_patch(
        FancyArrowPatch(
            xy0,
            xy1,
            arrowstyle=style,
            mutation_scale=10,
            lw=1,
            color="#333333",
            connectionstyle=f"arc3,rad={rad}",
        )
    )


def residual(ax, x, y_from, y_to, side):
    """A skip connection drawn beside a sub-layer, from its input to its Add & Norm."""
    xs = x + side
    ax.plot([x, xs, xs], [y_from, y_from, y_to], color="#333333", lw=1)
    arrow(ax, (xs, y_to), (x + 0.9 * (1 if side > 0 else -1), y_to))


def sublayers(ax, x, y0, names, side):
    """Stack of (sub-layer, Add & Norm) pairs from y0 upwards; returns the top y."""
    y = y0
    for text, kind in names:
        arrow(ax, (x, y), (x, y + 0.35))
        box(ax, x, y + 0.65, 1.9, 0.6, text, kind, 8)
        box(ax, x, y + 1.35, 1.8, 0.4, "Add & Norm", "norm", 8)
        arrow(ax, (x, y + 0.95), (x, y + 1.15))
        residual(ax, x, y + 0.2, y + 1.35, side)
        y += 1.55
    return y


def main(path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 8.5))
    ax.set_xlim(0, 10)
    ax.set_ylim(-0.6, 12.4)
    ax.axis("off")
    enc_x, dec_x = 2.8, 7.2
    for x, label in ((enc_x, "inputs (source ids)"), (dec_x, "outputs shifted right (target ids)")):
        ax.text(x, -0.35, label, ha="center", fontsize=9)
        box(ax, x, 0.5, 1.8, 0.5, "Embedding × √d_model\nembedding.py", "embed", 8)
        box(ax, x, 1.35, 0.7, 0.5, "+", "pos", 12)
        ax.text(
            x + (-1.0 if x == enc_x else 1.0),
            1.35,
            "positional\nencoding\npositional.py",
            ha="right" if x == enc_x else "left",
            va="center",
            fontsize=7.5,
        )
        arrow(ax, (x, -0.2), (x, 0.25))
        arrow(ax, (x, 0.75), (x, 1.1))
    # encoder: self-attention + feed-forward, N times
    ax.add_patch(
        FancyBboxPatch(
            (enc_x - 1.3, 1.75),
            2.6,
            3.4,
            boxstyle="round,pad=0.05",
            fc="#f2f2f2",
            ec="#777777",
            lw=1,
            zorder=-1,
        )
    )
    ax.text(enc_x - 1.45, 3.4, "N ×", ha="right", fontsize=11)
    top_e = sublayers(
        ax, enc_x, 1.6, [("Multi-Head\nSelf-Attention", "attn"), ("Feed Forward", "ff")], side=-1.1
    )
    ax.text(enc_x - 0.6, 5.35, "encoder.py", ha="center", fontsize=7.5, color="#555555")
    # decoder: masked self-attention, cross-attention, feed-forward, N times
    ax.add_patch(
        FancyBboxPatch(
            (dec_x - 1.3, 1.75),
            2.6,
            4.95,
            boxstyle="round,pad=0.05",
            fc="#f2f2f2",
            ec="#777777",
            lw=1,
            zorder=-1,
        )
    )
    ax.text(dec_x + 1.45, 4.2, "× N", ha="left", fontsize=11)
    top_d = sublayers(
        ax,
        dec_x,
        1.6,
        [
            ("Masked Multi-Head\nSelf-Attention", "attn"),
            ("Multi-Head\nCross-Attention", "attn"),
            ("Feed Forward", "ff"),
        ],
        side=1.1,
    )
    ax.text(dec_x, 6.9, "decoder.py", ha="center", fontsize=7.5, color="#555555")
    # memory: encoder output into every decoder cross-attention (keys and values)
    ax.plot([enc_x, enc_x, 5.0, 5.0], [top_e - 0.2, 5.8, 5.8, 3.8], color="#333333", lw=1)
    arrow(ax, (5.0, 3.8), (dec_x - 0.95, 3.8))
    ax.text(5.1, 5.6, "memory\n(keys and\nvalues)", fontsize=7.5, ha="left", va="top")
    # output head
    box(ax, dec_x, 8.0, 1.8, 0.5, "Linear (tied to\nthe embedding)", "out", 8)
    box(ax, dec_x, 9.0, 1.8, 0.5, "Softmax", "out", 9)
    arrow(ax, (dec_x, top_d - 0.2), (dec_x, 7.75))
    arrow(ax, (dec_x, 8.25), (dec_x, 8.75))
    arrow(ax, (dec_x, 9.25), (dec_x, 9.75))
    ax.text(dec_x, 9.95, "next-token probabilities", ha="center", fontsize=9)
    ax.text(5.0, 11.6, "The Transformer (Vaswani et al., 2017, §3)", ha="center", fontsize=12)
    ax.text(
        5.0,
        11.0,
        "masks (masks.py): padding in every attention; causal in the decoder's self-attention",
        ha="center",
        fontsize=8,
        color="#555555",
    )
    fig.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


if __name__ == "__main__":
    main(Path(__file__).with_name("transformer_architecture.svg"))
