"""The rules that give each notebook cell a slide type (``tools/mark_slides.py`` applies them,
then the screen budget).

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
  introduces cannot be shown), and the exercises' answer and check cells (nbgrader's cells).

An override fixes a cell's type; the screen budget may still move a shown cell to a new screen.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Dict, List, Sequence

from tools.slide_screen import CODE_WRAP, has_figure, output_lines, source

ROOT = Path(__file__).resolve().parent.parent
OVERRIDES = ROOT / "course" / "slide_overrides.json"
SLIDE_TYPES = ("slide", "subslide", "fragment", "-", "skip", "notes")

MAX_CODE_LINES = 12  # longer code without a figure is skipped
MAX_SHOWN_CODE_LINES = 24  # code that a lead-in ending in ":" introduces is shown up to this
MAX_SHOWN_OUTPUT_LINES = 27  # and a printout it introduces (a screen of its own at most)
MAX_OUTPUT_LINES = 24  # longer text output is skipped (e.g. a printed module source)
MAX_PROSE_CHARS = 650  # longer prose without a heading goes to the speaker notes
CAPTION_CHARS = 400  # short prose right after a figure is its caption: same screen
LEAD_IN_CHARS = 300  # short prose right before code introduces it: same screen

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
    return [line[len(mark) :] for line in text.splitlines() if line.startswith(mark)]


def rule(cell: dict, index: int, in_exercises: bool) -> str:
    """The slide type the rules give one cell (before overrides and screen budget)."""
    text = source(cell).strip()
    if cell["cell_type"] == "code" and cell.get("metadata", {}).get("nbgrader"):
        return "skip"  # an exercise's answer or check: done in the notebook
    if cell["cell_type"] == "markdown":
        if index == 0 or headings(text, 1) or headings(text, 2):
            return "slide"
        if text.startswith("**Exercise"):
            return "subslide"  # a statement is shown, however long
        if (text.startswith("### ") or BOLD_SUBSLIDE.match(text)) and not in_exercises:
            return "subslide"
        return "notes" if len(text) > MAX_PROSE_CHARS else "-"
    if cell["cell_type"] != "code":
        return "skip"
    if in_exercises:
        return "skip"  # stubs and checks: the slides state the exercises, the notebook has them
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
                raise ValueError(
                    f"{path}: override {item!r} of {name} must have exactly the "
                    f"keys starts_with and slide_type, with slide_type one of "
                    f"{SLIDE_TYPES}"
                )
    return overrides


def hides_source(cell: dict) -> bool:
    """Whether a shown code cell is shown by its outputs only: a figure's long code, a
    heatmap's code, or long code (or a printed source) that a lead-in introduces."""
    if cell["cell_type"] != "code" or not cell.get("outputs"):
        return False
    if cell.get("metadata", {}).get("transient", {}).get("remove_source"):
        return True  # set by the deck's build
    text = source(cell)
    lines = len(text.splitlines())
    if has_figure(cell):
        return lines > MAX_CODE_LINES // 2 or "attention_heads(" in text
    return lines > MAX_CODE_LINES or "getsource(" in text


def is_heatmap(cell: dict) -> bool:
    """A grid of attention weights: on a screen of its own, as wide as the slide."""
    return cell["cell_type"] == "code" and has_figure(cell) and "attention_heads(" in source(cell)


ANNOUNCES = re.compile(
    r"(:\s*\Z)|((\A|\n\n)(Here (is|are)|Below|For each)\b[^\n]*(\n[^\n]+)*\s*\Z)"
)


def announces(text: str) -> bool:
    """Whether prose ends by announcing what follows: a final ":", or a last paragraph that
    starts "Here is", "Here are", "Below" or "For each"."""
    return bool(ANNOUNCES.search(text.strip()))


def introduced(cell: dict, follower: dict, in_exercises: bool) -> bool:
    """Whether markdown ``cell`` announces ``follower`` (see ``announces``), a code cell the
    rules skip but whose table, figure or short code the slide needs."""
    if (
        in_exercises
        or cell["cell_type"] != "markdown"
        or follower["cell_type"] != "code"
        or not announces(source(cell))
        or follower.get("metadata", {}).get("nbgrader")
    ):
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
                title.strip().lower().startswith("exercises") for title in headings(text, 2)
            )
        fixed = next(
            (o["slide_type"] for o in overrides if text.startswith(o["starts_with"])), None
        )
        kind = fixed or rule(cell, index, in_exercises)
        if (
            index
            and ruled[-1] not in ("skip", "notes")
            and kind == "skip"
            and not fixed
            and introduced(cells[index - 1], cell, in_exercises)
        ):
            kind = "-"  # the slide says "...:", so it shows what follows
        ruled.append(kind)
    return ruled
