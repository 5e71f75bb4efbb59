"""Draw images/transformer_architecture.svg: the encoder-decoder of §3 (Figure 1's content).

Run from the repository root: ``python images/make_architecture.py``. The script checks, before
it writes the file, that every label fits inside its box. The figure is landscape and its text
14 pt, so that on a 1280 x 720 slide (where it is drawn at about its own size) every label reads
at 18 px or more; the output head sits beside the decoder rather than above it to keep it low.
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
INK, GREY = "#333333", "#555555"
TEXT = 14  # points: 18.7 px at the slide's scale; nothing in the figure is smaller
SIZE = (12.0, 5.7)  # inches, and the axes' units: one unit is one inch
ENC_X, DEC_X, HEAD_X = 3.3, 7.6, 10.95  # the centres of the columns
WIDTH = 2.7  # width of a sub-layer box
SIDE = 1.55  # distance of a residual line from its column's centre
FRAME = 1.75  # half-width of the grey frame of a stack
SUB_H, NORM_H = 0.62, 0.38  # heights of a sub-layer box and of an Add & Norm box
BOXES = []  # (patch, text) of every box: their fit is checked before saving


def box(ax, x, y, w, h, text, kind):
    patch = FancyBboxPatch(
        (x - w / 2, y - h / 2),
        w,
        h,
        boxstyle="round,pad=0,rounding_size=0.08",
        fc=COLOURS[kind],
        ec=INK,
        lw=1,
    )
    ax.add_patch(patch)
    label = ax.text(x, y, text, ha="center", va="center", fontsize=TEXT, linespacing=1.1)
    BOXES.append((patch, label))


def arrow(ax, xy0, xy1):
    ax.add_patch(
        FancyArrowPatch(
            xy0, xy1, arrowstyle="-|>", mutation_scale=11, lw=1, color=INK, shrinkA=0, shrinkB=0
        )
    )


def line(ax, xs, ys):
    ax.plot(xs, ys, color=INK, lw=1, solid_capstyle="butt")


def frame(ax, x, y0, y1):
    """The grey frame of a stack of N identical layers."""
    ax.add_patch(
        FancyBboxPatch(
            (x - FRAME, y0),
            2 * FRAME,
            y1 - y0,
            boxstyle="round,pad=0,rounding_size=0.12",
            fc="#f2f2f2",
            ec="#777777",
            lw=1,
            zorder=-1,
        )
    )


def sublayers(ax, x, y, names, side):
    """(sub-layer, Add & Norm) pairs from y upwards, each with its residual connection on
    ``side`` (-1 left, +1 right). Returns the y of each sub-layer's centre and the top."""
    centres, start = [], y
    for text, kind in names:
        low = y + 0.12  # the sub-layer's bottom edge
        arrow(ax, (x, start), (x, low))  # into the sub-layer
        box(ax, x, low + SUB_H / 2, WIDTH, SUB_H, text, kind)
        norm = low + SUB_H + 0.14 + NORM_H / 2
        arrow(ax, (x, low + SUB_H), (x, norm - NORM_H / 2))  # into Add & Norm
        box(ax, x, norm, WIDTH, NORM_H, "Add & Norm", "norm")
        xs = x + side * SIDE  # the residual: around the sub-layer, into Add & Norm's side
        line(ax, [x, xs, xs], [y + 0.05, y + 0.05, norm])
        arrow(ax, (xs, norm), (x + side * WIDTH / 2, norm))
        centres.append(low + SUB_H / 2)
        start, y = norm + NORM_H / 2, norm + NORM_H / 2 + 0.08
    return centres, start


def bottom(ax, x, label, pe_x):
    """Input label, embedding, and the sum with the positional encoding (⊕) from the box at
    ``pe_x``. Returns the y where the stack begins."""
    ax.text(x, 0.12, label, ha="center", va="center", fontsize=TEXT)
    arrow(ax, (x, 0.27), (x, 0.45))
    box(ax, x, 0.66, WIDTH, 0.42, "Embedding × √d_model", "embed")
    arrow(ax, (x, 0.87), (x, 1.04))
    ax.add_patch(Circle((x, 1.17), 0.13, fc="white", ec=INK, lw=1))  # ⊕, drawn
    line(ax, [x - 0.08, x + 0.08], [1.17, 1.17])
    line(ax, [x, x], [1.09, 1.25])
    side = 1 if pe_x > x else -1
    box(ax, pe_x, 1.17, 1.5, 0.62, "Positional\nencoding", "pos")
    arrow(ax, (pe_x - side * 0.75, 1.17), (x + side * 0.13, 1.17))  # PE -> ⊕
    line(ax, [x, x], [1.3, 1.42])  # on into the stack
    return 1.42


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
    fig, ax = plt.subplots(figsize=SIZE)
    ax.set_xlim(0, SIZE[0])
    ax.set_ylim(0, SIZE[1])
    ax.set_aspect("equal")
    fig.subplots_adjust(0, 0, 1, 1)
    ax.axis("off")

    y0 = bottom(ax, ENC_X, "inputs (source ids)", pe_x=0.8)
    bottom(ax, DEC_X, "outputs, shifted right (target ids)", pe_x=HEAD_X)

    # encoder: self-attention and feed-forward, N times
    _, top_e = sublayers(
        ax, ENC_X, y0, [("Multi-Head\nSelf-Attention", "attn"), ("Feed Forward", "ff")], -1
    )
    frame(ax, ENC_X, y0 - 0.04, top_e + 0.1)
    ax.text(ENC_X - FRAME - 0.1, y0 + 0.3, "N ×", ha="right", va="center", fontsize=TEXT)
    # decoder: masked self-attention, cross-attention, feed-forward, N times
    (_, cross_y, _), top_d = sublayers(
        ax,
        DEC_X,
        y0,
        [
            ("Masked Multi-Head\nSelf-Attention", "attn"),
            ("Multi-Head\nCross-Attention", "attn"),
            ("Feed Forward", "ff"),
        ],
        1,
    )
    frame(ax, DEC_X, y0 - 0.04, top_d + 0.1)
    ax.text(DEC_X + FRAME + 0.1, y0 + 0.3, "× N", ha="left", va="center", fontsize=TEXT)

    # the encoder's output (memory): keys and values of every cross-attention
    mid = (ENC_X + FRAME + DEC_X - FRAME) / 2
    rise = top_e + 0.27
    line(ax, [ENC_X, ENC_X, mid, mid], [top_e, rise, rise, cross_y])
    arrow(ax, (mid, cross_y), (DEC_X - WIDTH / 2, cross_y))
    ax.text(ENC_X, rise + 0.06, "encoder output:\nkeys and values", ha="center", va="bottom",
            fontsize=TEXT, linespacing=1.1)  # fmt: skip

    # output head, beside the decoder: Linear, then softmax, downwards
    over = top_d + 0.25
    line(ax, [DEC_X, DEC_X, HEAD_X], [top_d, over, over])
    arrow(ax, (HEAD_X, over), (HEAD_X, over - 0.3))
    box(ax, HEAD_X, over - 0.51, 1.7, 0.42, "Linear", "out")
    arrow(ax, (HEAD_X, over - 0.72), (HEAD_X, over - 0.95))
    box(ax, HEAD_X, over - 1.16, 1.7, 0.42, "Softmax", "out")
    arrow(ax, (HEAD_X, over - 1.37), (HEAD_X, over - 1.6))
    ax.text(HEAD_X, over - 1.65, "next-token\nprobabilities", ha="center", va="top",
            fontsize=TEXT, linespacing=1.1)  # fmt: skip
    ax.text(HEAD_X, 1.75, "Linear shares\nits weights with\nthe embeddings\n(§3.4)",
            ha="center", va="bottom", fontsize=TEXT, color=GREY, linespacing=1.1)  # fmt: skip

    ax.text(0.1, SIZE[1] - 0.05, "The Transformer (Vaswani et al., 2017, §3)", ha="left",
            va="top", fontsize=TEXT + 2)  # fmt: skip
    ax.text(0.1, SIZE[1] - 0.4, "masks: padding in every attention,\ncausal in the decoder's "
            "self-attention", ha="left", va="top", fontsize=TEXT, color=GREY,
            linespacing=1.1)  # fmt: skip
    fig.canvas.draw()
    check_fit(fig)
    fig.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


if __name__ == "__main__":
    main(Path(__file__).with_name("transformer_architecture.svg"))
