"""Code cells cut for the slides (used by tools/slide_deck.py): one cell per figure, a
printout taller than a slide continued on the next, and a grid of heatmaps too tall for the
slide's width cut in two between rows of panels.
"""

from __future__ import annotations

import base64
import copy
from typing import List, Optional, Tuple

from tools import mark_slides


def piece(cell: dict, text: str, k: int) -> dict:
    new = copy.deepcopy(cell)
    new["source"] = text
    if "id" in new and k:
        new["id"] = f"{new['id'][:60]}-{k}"
    return new


def panel_bands(gray) -> List[Tuple[int, int]]:
    """The rows of a figure's image (a 2-D array, 0 = black) that hold a row of heatmap
    panels: runs of rows that are mostly coloured."""
    dark = (gray < 200).mean(axis=1) > 0.3
    bands, start = [], None
    for y, is_dark in enumerate(list(dark) + [False]):
        if is_dark and start is None:
            start = y
        elif not is_dark and start is not None:
            bands.append((start, y))
            start = None
    return bands


def halves(png: bytes) -> Optional[Tuple[bytes, bytes]]:
    """A grid of heatmaps too tall for the slide's width as its top and bottom halves,
    cut between two rows of panels; the top half gets the axis labels of the bottom."""
    import io

    import numpy as np
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    pixels = np.asarray(image)
    bands = panel_bands(pixels.mean(axis=2))
    if len(bands) < 2:
        return None
    middle = pixels.shape[0] / 2
    k = min(range(len(bands) - 1), key=lambda i: abs(bands[i][1] - middle))
    cut = bands[k][1] + (bands[k + 1][0] - bands[k][1]) // 4  # below the tick marks
    labels = pixels[bands[-1][1] :]
    parts = (np.concatenate((pixels[:cut], labels)), pixels[cut:])

    def encode(array) -> bytes:
        buffer = io.BytesIO()
        Image.fromarray(array).save(buffer, format="PNG")
        return buffer.getvalue()

    return encode(parts[0]), encode(parts[1])


def split_tall_heatmaps(cell: dict) -> dict:
    """A heatmap cell whose grid is taller than 3/4 of its width, each such figure cut into
    two halves (shown on two screens, each as wide as the slide)."""
    if not mark_slides.is_heatmap(cell):
        return cell
    outputs = []
    for out in cell.get("outputs", []):
        size = mark_slides.figure_size(out)
        cut = (
            halves(base64.b64decode(out["data"]["image/png"]))
            if size and size[1] > 0.75 * size[0]
            else None
        )
        for png in cut or [None]:
            new = copy.deepcopy(out)
            if png is not None:
                new["data"]["image/png"] = base64.b64encode(png).decode("ascii")
                new["metadata"] = {}
            outputs.append(new)
    cell = copy.deepcopy(cell)
    cell["outputs"] = outputs
    return cell


def figure_pieces(cell: dict) -> List[dict]:
    """A code cell with several figures as one cell per figure (each with the text printed
    before it); the pieces after the first show no code."""
    groups: List[list] = [[]]
    for out in cell.get("outputs", []):
        if any(
            k in out.get("data", {}) for k in ("image/png", "image/svg+xml", "image/jpeg")
        ) and any(mark_slides.has_figure({"outputs": [o]}) for o in groups[-1]):
            groups.append([])
        groups[-1].append(out)
    if len(groups) == 1:
        return [cell]
    pieces = []
    for k, outputs in enumerate(groups):
        new = piece(cell, mark_slides.source(cell), k)
        new["outputs"] = outputs
        if k:
            new["metadata"]["transient"] = {"remove_source": True}
        pieces.append(new)
    return pieces


def text_of(out: dict) -> Optional[str]:
    """The text a stream or plain-text output prints (None for anything else)."""
    if out.get("output_type") == "stream":
        text = out.get("text", "")
    elif set(out.get("data", {})) == {"text/plain"}:
        text = out["data"]["text/plain"]
    else:
        return None
    return "".join(text) if isinstance(text, list) else text


def with_text(out: dict, text: str) -> dict:
    new = copy.deepcopy(out)
    if new.get("output_type") == "stream":
        new["text"] = text
    else:
        new["data"]["text/plain"] = text
    return new


def output_pieces(cell: dict) -> List[dict]:
    """A code cell taller than a screen as several cells whose outputs fit a screen each
    (a long printout cut between lines); the pieces after the first show no code."""
    show = not mark_slides.hides_source(cell)
    if cell["cell_type"] != "code" or mark_slides.height(cell, show) <= mark_slides.SCREEN:
        return [cell]
    pieces = [piece(cell, mark_slides.source(cell), 0)]
    pieces[0]["outputs"] = []
    for out in cell.get("outputs", []):
        text = text_of(out)
        parts = (
            [out]
            if text is None
            else [with_text(out, line) for line in text.splitlines(keepends=True)]
        )
        for part in parts:
            last = pieces[-1]
            last["outputs"].append(part)
            if (
                len(last["outputs"]) > 1
                and mark_slides.height(last, show and last is pieces[0]) > mark_slides.SCREEN
            ):
                last["outputs"].pop()
                pieces.append(piece(cell, mark_slides.source(cell), len(pieces)))
                pieces[-1]["outputs"] = [part]
                pieces[-1]["metadata"]["transient"] = {"remove_source": True}
    return [merge_streams(p) for p in pieces]


def merge_streams(cell: dict) -> dict:
    """Consecutive pieces of one stream output joined again (one <pre> per stream)."""
    merged: List[dict] = []
    for out in cell["outputs"]:
        prev = merged[-1] if merged else None
        if (
            prev is not None
            and out.get("output_type") == "stream"
            and prev.get("output_type") == "stream"
            and prev.get("name") == out.get("name")
        ):
            prev["text"] = "".join(prev["text"]) + "".join(out["text"])
        else:
            merged.append(copy.deepcopy(out))
    cell["outputs"] = merged
    return cell
