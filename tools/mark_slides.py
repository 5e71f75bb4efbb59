"""Mark the notebooks' cells as slides: the ``slideshow.slide_type`` cell metadata that
nbconvert's slides exporter and JupyterLab's RISE extension both read.

    python tools/mark_slides.py                  # every notebooks/NN_*.ipynb, in place
    python tools/mark_slides.py notebooks/03_attention.ipynb
    python tools/mark_slides.py --check          # exit 1 if a notebook is not marked as the rules say

A deck should be a talk (about one slide a minute), not the whole notebook, so the marking
comes from rules on each cell's content, then per-notebook overrides from
``course/slide_overrides.json``:

- the first cell (title, what you will learn) and every markdown cell with a ``## `` heading
  line open a **slide**; a ``### `` heading, or a bold lead naming a pitfall, a trap or an
  exercise (``**Pitfall ...``, ``**Trap ...``, ``**Exercise ...``) opens a **subslide**;
- a code cell that draws a figure is a **fragment** (it appears on the next key press), or
  a subslide of its own when the screen it would join is already full; short prose right
  after a figure is its caption and stays with it;
- shown as part of the current screen (``-``): short prose, short code and its output;
  a screen that is full continues on a new subslide (a short lead-in sentence moves with
  the code it introduces);
- **notes** (the speaker view, key S): long prose without a heading;
- **skip**: imports, cells printing a module's source or other long output, long code
  without a figure (and a one-line lead-in ending in ":" before such a cell), the
  exercises' check cells and every worked solution (tag ``solution``).

The marking depends only on the cells' sources, outputs and tags, never on the metadata it
writes, so running it again changes nothing; and it changes nothing but each cell's
``metadata.slideshow`` (the notebooks stay byte-for-byte the same otherwise, so nbval is
unaffected).
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
OVERRIDES = ROOT / "course" / "slide_overrides.json"
SLIDE_TYPES = ("slide", "subslide", "fragment", "-", "skip", "notes")

SCREEN = 26             # lines of text that fit on one screen of a 960 x 700 slide
FIGURE = 13             # the height of a figure, in lines of text
MAX_CODE_LINES = 12     # longer code without a figure is skipped
MAX_OUTPUT_LINES = 24   # longer text output is skipped (e.g. a printed module source)
MAX_PROSE_CHARS = 650   # longer prose without a heading goes to the speaker notes
CAPTION_CHARS = 400     # short prose right after a figure is its caption: same screen
LEAD_IN_CHARS = 300     # short prose right before code introduces it: same screen
WRAP = 90               # characters per line of prose on a slide

BOLD_SUBSLIDE = re.compile(r"^\*\*(Pitfall|Trap|Exercise)\b")
IMPORT_LINE = re.compile(r"^\s*(import |from \S+ import |#|$)")


def source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def has_figure(cell: dict) -> bool:
    return any(key in out.get("data", {}) for out in cell.get("outputs", [])
               for key in ("image/png", "image/svg+xml", "image/jpeg"))


def output_lines(cell: dict) -> int:
    """Lines of text the cell's outputs print (figures not counted)."""
    lines = 0
    for out in cell.get("outputs", []):
        if "text" in out:
            text = out["text"]
        elif "image/png" in out.get("data", {}) or "image/svg+xml" in out.get("data", {}):
            continue
        else:
            text = out.get("data", {}).get("text/plain", out.get("traceback", ""))
        text = "".join(text) if isinstance(text, list) else text
        lines += len(text.rstrip("\n").splitlines())
    return lines


def height(cell: dict) -> float:
    """How much of a screen the cell takes, in lines of text."""
    text = source(cell)
    if cell["cell_type"] == "markdown":
        return sum(max(1, math.ceil(len(line) / WRAP)) if line.strip() else 0.4
                   for line in text.splitlines())
    lines = len(text.splitlines()) + min(output_lines(cell), MAX_OUTPUT_LINES)
    return lines + (FIGURE if has_figure(cell) else 0)


def is_import_cell(text: str) -> bool:
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return True
    imports = sum(1 for line in lines if IMPORT_LINE.match(line))
    return imports / len(lines) >= 0.75


def headings(text: str, level: int) -> List[str]:
    mark = "#" * level + " "
    return [line[len(mark):] for line in text.splitlines() if line.startswith(mark)]


def rule(cell: dict, index: int, in_exercises: bool) -> str:
    """The slide type the rules give one cell (before overrides and screen budget)."""
    text = source(cell).strip()
    if "solution" in cell.get("metadata", {}).get("tags", []):
        return "skip"
    if cell["cell_type"] == "markdown":
        if index == 0 or headings(text, 1) or headings(text, 2):
            return "slide"
        if text.startswith("### ") or BOLD_SUBSLIDE.match(text):
            return "subslide"
        return "notes" if len(text) > MAX_PROSE_CHARS else "-"
    if cell["cell_type"] != "code":
        return "skip"
    if in_exercises:
        stub = "raise NotImplementedError" in text
        return "-" if stub else "skip"       # the stub is shown; its check cell is not
    if has_figure(cell):
        return "fragment"
    if is_import_cell(text) or "getsource(" in text:
        return "skip"
    if len(text.splitlines()) > MAX_CODE_LINES or output_lines(cell) > MAX_OUTPUT_LINES:
        return "skip"
    return "-"


def load_overrides(path: Path = OVERRIDES) -> Dict[str, List[dict]]:
    """Per-notebook overrides: ``{"NN_name": [{"starts_with": TEXT, "slide_type": TYPE}]}``."""
    if not path.exists():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    overrides = {k: v for k, v in data.items() if not k.startswith("_")}
    for name, rules in overrides.items():
        for item in rules:
            if set(item) != {"starts_with", "slide_type"} or item["slide_type"] not in SLIDE_TYPES:
                raise ValueError(f"{path}: override {item!r} of {name} must have exactly the "
                                 f"keys starts_with and slide_type, with slide_type one of "
                                 f"{SLIDE_TYPES}")
    return overrides


def slide_types(nb: dict, overrides: Sequence[dict] = ()) -> List[str]:
    """The slide type of every cell of ``nb``: rules, then overrides, then screen budget."""
    cells = nb["cells"]
    ruled: List[str] = []
    in_exercises = False
    for index, cell in enumerate(cells):
        text = source(cell).strip()
        if cell["cell_type"] == "markdown":
            in_exercises = in_exercises or any(
                title.strip().lower().startswith("exercises") for title in headings(text, 2))
        fixed = next((o["slide_type"] for o in overrides
                      if text.startswith(o["starts_with"])), None)
        ruled.append(fixed or rule(cell, index, in_exercises))
    types: List[str] = []
    after_figure = False
    used = 0.0
    for index, cell in enumerate(cells):
        text = source(cell).strip()
        kind = ruled[index]
        fixed = any(text.startswith(o["starts_with"]) for o in overrides)
        nxt = index + 1 if index + 1 < len(cells) else None
        lead_in = (cell["cell_type"] == "markdown" and len(text) <= LEAD_IN_CHARS
                   and kind == "-" and nxt is not None and cells[nxt]["cell_type"] == "code")
        if lead_in and ruled[nxt] == "skip" and text.endswith(":") and not fixed:
            kind = "skip"                       # it introduces a cell that is not shown
        h = height(cell)
        caption = after_figure and cell["cell_type"] == "markdown" and len(text) <= CAPTION_CHARS
        # a short lead-in stays on the screen of the code it introduces
        needed = h + (height(cells[nxt]) if lead_in and ruled[nxt] != "skip" else 0)
        if kind in ("slide", "subslide"):
            used = h
        elif kind in ("-", "fragment"):
            if not fixed and not caption and used > 0 and used + needed > SCREEN:
                kind, used = "subslide", h      # the screen is full: continue on a new one
            else:
                used += h
        if kind not in ("skip", "notes"):
            after_figure = has_figure(cell)
        types.append(kind)
    return types


def mark(nb: dict, name: str, overrides: Optional[Dict[str, List[dict]]] = None) -> dict:
    """A copy of ``nb`` whose cells carry ``metadata.slideshow.slide_type``; nothing else changes."""
    overrides = load_overrides() if overrides is None else overrides
    marked = copy.deepcopy(nb)
    for cell, kind in zip(marked["cells"], slide_types(nb, overrides.get(name, ()))):
        cell.setdefault("metadata", {})["slideshow"] = {"slide_type": kind}
    return marked


def unmatched_overrides(nb: dict, rules: Sequence[dict]) -> List[str]:
    """The ``starts_with`` texts of ``rules`` that match no cell of ``nb`` (stale overrides)."""
    texts = [source(c).strip() for c in nb["cells"]]
    return [o["starts_with"] for o in rules
            if not any(t.startswith(o["starts_with"]) for t in texts)]


def count_slides(nb: dict) -> int:
    """Screens of the deck: slides and subslides."""
    return sum(1 for c in nb["cells"]
               if c.get("metadata", {}).get("slideshow", {}).get("slide_type")
               in ("slide", "subslide"))


def is_marked(nb: dict) -> bool:
    return any("slideshow" in c.get("metadata", {}) for c in nb["cells"])


def dumps(nb: dict) -> str:
    """The notebook as nbformat writes it: indent 1, sorted keys, a trailing newline."""
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def mark_file(path: Path, overrides: Dict[str, List[dict]], check: bool = False) -> bool:
    """Mark one notebook file in place; return whether it changed (or would, with ``check``)."""
    before = path.read_text(encoding="utf-8")
    nb = json.loads(before)
    for stale in unmatched_overrides(nb, overrides.get(path.stem, ())):
        print(f"warning: {OVERRIDES.name}: the override for {path.stem} starting "
              f"{stale!r} matches no cell", file=sys.stderr)
    after = dumps(mark(nb, path.stem, overrides))
    if after != before and not check:
        path.write_text(after, encoding="utf-8")
    return after != before


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="notebooks to mark (default: notebooks/NN_*.ipynb)")
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if a notebook is not marked as the rules say")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    for path in paths:
        if path.suffix != ".ipynb" or not path.is_file():
            parser.error(f"notebooks: {path} is not an .ipynb file")
    overrides = load_overrides()
    changed = []
    for path in paths:
        if mark_file(path, overrides, check=args.check):
            changed.append(path)
        nb = json.loads(path.read_text(encoding="utf-8"))
        shown = mark(nb, path.stem, overrides)
        print(f"{path.name}: {count_slides(shown)} slides"
              + (" (would change)" if args.check and path in changed else
                 " (marked)" if path in changed else " (unchanged)"))
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
