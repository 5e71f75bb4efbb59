"""How tall a notebook cell is on a slide of the course decks: estimates in CSS pixels of the
1280 x 720 slide that course/templates/course_reveal draws (22 px prose, 18 px code), a
little generous so that a screen the estimates fill never overflows. Used by
tools/mark_slides.py (the screen budget) and tools/slide_deck.py (cutting long sections).
"""

from __future__ import annotations

import base64
import math
import re
import struct
from typing import Optional

# The deck is 1280 x 720 CSS pixels (course/templates/course_reveal): 22 px prose, 18 px code.
# Heights are estimated in pixels, a little generously, so that a screen never overflows.
SCREEN = 620  # pixels of content on one screen (720 less the padding and a margin)
PROSE_LINE = 31  # one line of prose (22 px type, line height 1.4)
CODE_LINE = 24  # one line of code or of printed output (18 px type)
HEADING = {1: 64, 2: 56, 3: 46, 4: 40}  # a heading line with its margins
TABLE_ROW = 38  # a row of a markdown table
DISPLAY_MATH = 56  # a line of display maths ($$ ... $$)
PARAGRAPH_GAP = 12  # the space between two paragraphs
CELL_GAP = 30  # the padding around a code cell's input and output
MARKDOWN_GAP = 26  # the margins of a markdown cell
FIGURE = 330  # a figure whose size is unknown
FIGURE_MAX = 600  # the tallest a figure is drawn (course_reveal's CSS)
SLIDE_WIDTH = 1200  # the content's width
WRAP = 112  # characters per line of prose on a slide
CODE_WRAP = 96  # characters per line of code or output (longer lines wrap)
OUTPUT_GAP = 6  # the margin of each output of a cell


def source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def has_figure(cell: dict) -> bool:
    return any(
        key in out.get("data", {})
        for out in cell.get("outputs", [])
        for key in ("image/png", "image/svg+xml", "image/jpeg")
    )


def output_lines(cell: dict, wrap: int = 0) -> int:
    """Lines of text the cell's outputs print (figures not counted); with ``wrap``, the
    lines they take on a slide that wraps them at ``wrap`` characters."""
    lines = 0
    for out in cell.get("outputs", []):
        if "text" in out:
            text = out["text"]
        elif "image/png" in out.get("data", {}) or "image/svg+xml" in out.get("data", {}):
            continue
        else:
            text = out.get("data", {}).get("text/plain", out.get("traceback", ""))
        text = "".join(text) if isinstance(text, list) else text
        rows = text.rstrip("\n").splitlines()
        lines += sum(max(1, math.ceil(len(r) / wrap)) for r in rows) if wrap else len(rows)
    return lines


def figure_size(out: dict) -> Optional[tuple]:
    """(width, height) in pixels of an output's PNG or SVG figure, None if it has none."""
    svg = out.get("data", {}).get("image/svg+xml")
    if svg:
        head = "".join(svg)[:2000]
        size = [re.search(rf'<svg[^>]*\s{a}="([\d.]+)(pt|px)?"', head) for a in ("width", "height")]
        if all(size):
            return tuple(float(m.group(1)) * (4 / 3 if m.group(2) == "pt" else 1) for m in size)
    data = out.get("data", {}).get("image/png")
    if not data:
        return None
    raw = base64.b64decode("".join(data)[:32] if isinstance(data, list) else data[:32])
    return struct.unpack(">II", raw[16:24]) if raw[12:16] == b"IHDR" else None


def figure_height(cell: dict) -> float:
    """Pixels the cell's figures take on a slide (scaled to the width, at most FIGURE_MAX)."""
    total = 0.0
    for out in cell.get("outputs", []):
        size = figure_size(out)
        if size:
            width, high = size
            total += min(FIGURE_MAX, high * min(1.0, SLIDE_WIDTH / max(width, 1)))
        elif "image/jpeg" in out.get("data", {}):
            total += FIGURE
    return total


def markdown_height(text: str) -> float:
    """Pixels a markdown text takes on a slide."""
    total, fence = 0.0, False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = not fence
            total += CODE_LINE / 2
        elif fence:
            total += CODE_LINE
        elif not stripped:
            total += PARAGRAPH_GAP
        elif re.match(r"^#{1,4} ", stripped):
            total += HEADING[len(stripped.split(" ")[0])] * max(1, math.ceil(len(line) / 60))
        elif stripped.startswith("|"):
            total += 0 if set(stripped) <= set("|-: ") else TABLE_ROW
        elif stripped.startswith("$$"):
            total += DISPLAY_MATH
        else:
            total += PROSE_LINE * max(1, math.ceil(len(line) / WRAP))
    return total


def code_lines(text: str) -> int:
    return sum(max(1, math.ceil(len(line) / CODE_WRAP)) for line in text.splitlines())


def height(cell: dict, show_source: bool = True) -> float:
    """How much of a screen the cell takes, in pixels."""
    text = source(cell)
    if cell["cell_type"] == "markdown":
        return markdown_height(text) + MARKDOWN_GAP
    lines = output_lines(cell, CODE_WRAP)
    shown = code_lines(text) if show_source else 0
    return (
        (shown + lines) * CODE_LINE
        + CELL_GAP * ((shown > 0) + (lines > 0))
        + figure_height(cell)
        + OUTPUT_GAP * len(cell.get("outputs", []))
    )
