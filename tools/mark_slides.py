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
  exercise (``**Pitfall ...``, ``**Trap ...``, ``**Exercise ...``) opens a **subslide**
  (in the exercises, the statements follow each other and the budget cuts them: the
  slides state the exercises, their stubs and checks are done in the notebook);
- a code cell that draws a figure is a **fragment** (it appears on the next key press), or
  a subslide of its own when the screen it would join is already full; a grid of attention
  weights (``attention_heads``) always has a screen of its own; short prose right after a
  figure is its caption and stays with it;
- shown as part of the current screen (``-``): short prose, short code and its output;
  a screen that is full continues on a new subslide (a short lead-in sentence moves with
  the code it introduces). The screen is the deck's 1280 x 720 slide, heights estimated in
  pixels (a little generously);
- what shown prose announces (a final ":", or a last paragraph starting "Here is/are",
  "Below", "For each") is shown even when the rules would skip it (a table, a figure, a
  short printout: the slide must not end on a colon); the deck then shows it by its output
  only when its code is long;
- **notes** (the speaker view, key S): long prose without a heading;
- **skip**: imports, cells printing a module's source or other long output, long code
  without a figure (and a short lead-in ending in ":" before such a cell when what it
  introduces cannot be shown), the exercises' stub and check cells and every worked
  solution (tag ``solution``).

An override fixes a cell's type; the screen budget may still move a shown cell to a new screen.
``tools/slide_deck.py`` does at build time what cell metadata cannot say (sections that
start mid-cell, screens taller than a slide, explorers, speaker notes).

The marking depends only on the cells' sources, outputs and tags, never on the metadata it
writes, so running it again changes nothing; and it changes nothing but each cell's
``metadata.slideshow`` (the notebooks stay byte-for-byte the same otherwise, so nbval is
unaffected).
"""
from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

try:
    from tools.slide_screen import (CODE_WRAP, SCREEN, code_lines,  # noqa: F401
                                    figure_height, figure_size, has_figure, height,
                                    markdown_height, output_lines, source)
except ModuleNotFoundError:   # run as a file, python tools/mark_slides.py: no package 'tools'
    from slide_screen import (CODE_WRAP, SCREEN, code_lines,  # noqa: F401
                              figure_height, figure_size, has_figure, height,
                              markdown_height, output_lines, source)

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
OVERRIDES = ROOT / "course" / "slide_overrides.json"
SLIDE_TYPES = ("slide", "subslide", "fragment", "-", "skip", "notes")

MAX_CODE_LINES = 12     # longer code without a figure is skipped
MAX_SHOWN_CODE_LINES = 24  # code that a lead-in ending in ":" introduces is shown up to this
MAX_SHOWN_OUTPUT_LINES = 27  # and a printout it introduces (a screen of its own at most)
MAX_OUTPUT_LINES = 24   # longer text output is skipped (e.g. a printed module source)
MAX_PROSE_CHARS = 650   # longer prose without a heading goes to the speaker notes
CAPTION_CHARS = 400     # short prose right after a figure is its caption: same screen
LEAD_IN_CHARS = 300     # short prose right before code introduces it: same screen

BOLD_SUBSLIDE = re.compile(r"^\*\*(Pitfall|Trap|Exercise)\b")
IMPORT_LINE = re.compile(r"^\s*(import |from \S+ import |#|$)")


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
        if (text.startswith("### ") or BOLD_SUBSLIDE.match(text)) and not in_exercises:
            return "subslide"
        return "notes" if len(text) > MAX_PROSE_CHARS else "-"
    if cell["cell_type"] != "code":
        return "skip"
    if in_exercises:
        return "skip"       # stubs and checks: the slides state the exercises, the notebook has them
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


def hides_source(cell: dict) -> bool:
    """Whether a shown code cell is shown by its outputs only: a figure's long code, a
    heatmap's code, or long code (or a printed source) that a lead-in introduces."""
    if cell["cell_type"] != "code" or not cell.get("outputs"):
        return False
    if cell.get("metadata", {}).get("transient", {}).get("remove_source"):
        return True                             # set by the deck's build
    text = source(cell)
    lines = len(text.splitlines())
    if has_figure(cell):
        return lines > MAX_CODE_LINES // 2 or "attention_heads(" in text
    return lines > MAX_CODE_LINES or "getsource(" in text


def is_heatmap(cell: dict) -> bool:
    """A grid of attention weights: on a screen of its own, as wide as the slide."""
    return cell["cell_type"] == "code" and has_figure(cell) and "attention_heads(" in source(cell)


ANNOUNCES = re.compile(r"(:\s*\Z)|((\A|\n\n)(Here (is|are)|Below|For each)\b[^\n]*(\n[^\n]+)*\s*\Z)")


def announces(text: str) -> bool:
    """Whether prose ends by announcing what follows: a final ":", or a last paragraph that
    starts "Here is", "Here are", "Below" or "For each"."""
    return bool(ANNOUNCES.search(text.strip()))


def introduced(cell: dict, follower: dict, in_exercises: bool) -> bool:
    """Whether markdown ``cell`` announces ``follower`` (see ``announces``), a code cell the
    rules skip but whose table, figure or short code the slide needs."""
    if (in_exercises or cell["cell_type"] != "markdown" or follower["cell_type"] != "code"
            or not announces(source(cell))
            or "solution" in follower.get("metadata", {}).get("tags", [])):
        return False
    text = source(follower)
    if is_import_cell(text) and not follower.get("outputs"):
        return False
    if has_figure(follower) or 0 < output_lines(follower, CODE_WRAP) <= MAX_SHOWN_OUTPUT_LINES:
        return True
    return output_lines(follower) == 0 and len(text.splitlines()) <= MAX_SHOWN_CODE_LINES


def ruled_types(nb: dict, overrides: Sequence[dict] = ()) -> List[str]:
    """The slide type of every cell by the rules and the overrides (no screen budget)."""
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
        kind = fixed or rule(cell, index, in_exercises)
        if (index and ruled[-1] not in ("skip", "notes") and kind == "skip" and not fixed
                and introduced(cells[index - 1], cell, in_exercises)):
            kind = "-"                          # the slide says "...:", so it shows what follows
        ruled.append(kind)
    return ruled


def slide_types(nb: dict, overrides: Sequence[dict] = (),
                forced: Optional[Dict[int, str]] = None) -> List[str]:
    """The slide type of every cell of ``nb``: rules, then overrides, then screen budget.

    ``forced`` maps the indices of continuation pieces (cut by the deck's build) to their
    type; a piece after a skipped or noted one is skipped or noted with it."""
    cells = nb["cells"]
    ruled = ruled_types(nb, overrides)
    for i, kind in sorted((forced or {}).items()):
        # a continuation is shown where the piece before it is (forced types follow it)
        ruled[i] = ruled[i - 1] if i and ruled[i - 1] in ("skip", "notes") else kind
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
        h = height(cell, show_source=not hides_source(cell))
        caption = after_figure and cell["cell_type"] == "markdown" and len(text) <= CAPTION_CHARS
        # a short lead-in stays on the screen of the code it introduces
        needed = h + (height(cells[nxt], not hides_source(cells[nxt]))
                      if lead_in and ruled[nxt] != "skip" and not caption else 0)
        if kind in ("-", "fragment") and is_heatmap(cell) and used > 0:
            kind = "subslide"                   # a heatmap has the screen to itself
        if kind in ("slide", "subslide"):
            used = h
        elif kind in ("-", "fragment"):
            if (not caption or used + needed > SCREEN * 1.1) and used > 0 \
                    and used + needed > SCREEN:
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
