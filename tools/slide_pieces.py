"""Code cells cut for the slides (used by tools/slide_deck.py): one cell per figure and per
run of printed text between figures, and a printout taller than a slide continued on the next.
"""

from __future__ import annotations

import copy
from typing import List, Optional

from tools import mark_slides


def piece(cell: dict, text: str, k: int) -> dict:
    new = copy.deepcopy(cell)
    new["source"] = text
    if "id" in new and k:
        new["id"] = f"{new['id'][:60]}-{k}"
    return new


def figure_pieces(cell: dict) -> List[dict]:
    """A code cell with figures as one cell per figure, and one per run of what it prints
    between them (so that a figure has its screen to itself); the pieces after the first show
    no code."""
    groups: List[list] = [[]]
    for out in cell.get("outputs", []):
        figure = mark_slides.has_figure({"outputs": [out]})
        if groups[-1] and (figure or mark_slides.has_figure({"outputs": groups[-1]})):
            groups.append([])  # a figure starts a piece of its own, and ends it
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
