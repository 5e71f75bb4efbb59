"""Draw images/transformer_architecture.svg: the encoder-decoder of §3 (Figure 1's content).

Run from the repository root: ``python images/make_architecture.py``. The script checks, before
it writes the file, that every label fits inside its box.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch  # noqa: E402

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
INK = "#333333"
ENC_X, DEC_X = 3.0, 7.0  # the centres of the two columns
WIDTH = 2.5  # width of a sub-layer box
SIDE = 1.45  # distance of a residual line from its column's centre
FRAME = 1.65  # half-width of the grey frame of a stack
STEP = 1.6  # height of one (sub-layer, Add & Norm) pair
BOXES = []  # (patch, text) of every box: their fit is checked before saving


def box(ax, x, y, w, h, text, kind, fontsize=8.5):
    patch = FancyBboxPatch(
        (x - w / 2, y - h / 2),
        w,
        h,
        boxstyle="round,pad=0,rounding_size=0.1",
        fc=COLOURS[kind],
        ec=INK,
        lw=1,
    )
    ax.add_patch(patch)
    label = ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, linespacing=1.15)
    BOXES.append((patch, label))


def arrow(ax, xy0, xy1):
    ax.add_patch(
        FancyArrowPatch(
            xy0, xy1, arrowstyle="-|>", mutation_scale=10, lw=1, color=INK, shrinkA=0, shrinkB=0
        )
    )


def line(ax, xs, ys):
    ax.plot(xs, ys, color=INK, lw=1, solid_capstyle="butt")


def frame(ax, x, y0, y1, label, label_x, ha):
    """The grey frame of a stack of N identical layers, with its "N ×"."""
    ax.add_patch(
        FancyBboxPatch(
            (x - FRAME, y0),
            2 * FRAME,
            y1 - y0,
            boxstyle="round,pad=0,rounding_size=0.15",
            fc="#f2f2f2",
            ec="#777777",
            lw=1,
            zorder=-1,
        )
    )
    ax.text(label_x, (y0 + y1) / 2, label, ha=ha, va="center", fontsize=12)


def sublayers(ax, x, y, names, side):
    """(sub-layer, Add & Norm) pairs from y upwards, each with its residual connection on
    ``side`` (-1 left, +1 right). Returns the y of each sub-layer's centre and the top."""
    centres, start = [], y
    for text, kind in names:
        centre = y + 0.55
        arrow(ax, (x, start), (x, y + 0.275))  # into the sub-layer
        box(ax, x, centre, WIDTH, 0.55, text, kind)
        arrow(ax, (x, y + 0.825), (x, y + 1.05))  # into Add & Norm
        box(ax, x, y + 1.25, WIDTH, 0.4, "Add & Norm", "norm")
        xs = x + side * SIDE  # the residual: around the sub-layer, into Add & Norm's side
        line(ax, [x, xs, xs], [y + 0.12, y + 0.12, y + 1.25])
        arrow(ax, (xs, y + 1.25), (x + side * WIDTH / 2, y + 1.25))
        centres.append(centre)
        start, y = y + 1.45, y + STEP
    return centres, start


def bottom(ax, x, label, side):
    """Input label, embedding, and the sum with the positional encoding (⊕)."""
    ax.text(x, 0.3, label, ha="center", va="center", fontsize=9)
    arrow(ax, (x, 0.45), (x, 0.85))
    box(ax, x, 1.1, WIDTH, 0.5, "Embedding × √d_model", "embed")
    arrow(ax, (x, 1.35), (x, 1.77))
    ax.add_patch(Circle((x, 1.95), 0.18, fc="white", ec=INK, lw=1))  # ⊕, drawn
    line(ax, [x - 0.1, x + 0.1], [1.95, 1.95])
    line(ax, [x, x], [1.85, 2.05])
    pe_x = x + side * 2.05
    box(ax, pe_x, 1.95, 1.35, 0.55, "Positional\nencoding", "pos")
    arrow(ax, (pe_x - side * 0.675, 1.95), (x + side * 0.18, 1.95))  # PE -> ⊕
    line(ax, [x, x], [2.13, 2.5])  # on into the stack


def check_fit(fig):
    """Every label inside its box, with a margin (the file keeps text as text, so a viewer's
    font may differ a little from matplotlib's)."""
    renderer = fig.canvas.get_renderer()
    for patch, label in BOXES:
        outer = patch.get_window_extent(renderer)
        inner = label.get_window_extent(renderer)
        spare_x = (outer.width - inner.width) / outer.width
        spare_y = (outer.height - inner.height) / outer.height
        if spare_x < 0.12 or spare_y < 0.08:
            raise ValueError(
                f"label {label.get_text()!r} does not fit its box: {spare_x:.2f}, {spare_y:.2f}"
            )


def main(path: Path) -> None:
    BOXES.clear()
    fig, ax = plt.subplots(figsize=(7.5, 8.25))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 11)
    ax.set_aspect("equal")
    fig.subplots_adjust(0, 0, 1, 1)
    ax.axis("off")

    bottom(ax, ENC_X, "inputs (source ids)", side=-1)
    bottom(ax, DEC_X, "outputs, shifted right (target ids)", side=1)

    # encoder: self-attention and feed-forward, N times
    frame(ax, ENC_X, 2.35, 5.7, "N ×", ENC_X - FRAME - 0.15, "right")
    _, top_e = sublayers(
        ax, ENC_X, 2.5, [("Multi-Head\nSelf-Attention", "attn"), ("Feed Forward", "ff")], -1
    )
    # decoder: masked self-attention, cross-attention, feed-forward, N times
    frame(ax, DEC_X, 2.35, 7.3, "× N", DEC_X + FRAME + 0.15, "left")
    (_, cross_y, _), top_d = sublayers(
        ax,
        DEC_X,
        2.5,
        [
            ("Masked Multi-Head\nSelf-Attention", "attn"),
            ("Multi-Head\nCross-Attention", "attn"),
            ("Feed Forward", "ff"),
        ],
        1,
    )
    # the encoder's output (memory): keys and values of every cross-attention
    mid = (ENC_X + FRAME + DEC_X - FRAME) / 2
    line(ax, [ENC_X, ENC_X, mid, mid], [top_e, 6.15, 6.15, cross_y])
    arrow(ax, (mid, cross_y), (DEC_X - WIDTH / 2, cross_y))
    ax.text(
        (ENC_X + mid) / 2,
        6.25,
        "encoder output:\nkeys and values",
        ha="center",
        va="bottom",
        fontsize=8,
    )

    # output head
    arrow(ax, (DEC_X, top_d), (DEC_X, 7.7))
    box(ax, DEC_X, 7.95, WIDTH, 0.5, "Linear", "out")
    arrow(ax, (DEC_X, 8.2), (DEC_X, 8.55))
    box(ax, DEC_X, 8.8, WIDTH, 0.5, "Softmax", "out")
    arrow(ax, (DEC_X, 9.05), (DEC_X, 9.4))
    ax.text(DEC_X, 9.5, "next-token probabilities", ha="center", va="bottom", fontsize=9)
    ax.text(
        DEC_X - WIDTH / 2 - 0.15,
        7.95,
        "weights shared with\nthe embeddings (§3.4)",
        ha="right",
        va="center",
        fontsize=8,
        color="#555555",
    )

    ax.text(5.0, 10.65, "The Transformer (Vaswani et al., 2017, §3)", ha="center", fontsize=12)
    ax.text(
        5.0,
        10.2,
        "masks: padding in every attention; causal in the decoder's self-attention",
        ha="center",
        fontsize=8.5,
        color="#555555",
    )
    fig.canvas.draw()
    check_fit(fig)
    fig.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


if __name__ == "__main__":
    main(Path(__file__).with_name("transformer_architecture.svg"))
