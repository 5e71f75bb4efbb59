"""Mark the notebooks' cells as slides: the ``slideshow.slide_type`` cell metadata that
nbconvert's slides exporter and JupyterLab's RISE extension both read.

    python -m tools.mark_slides                  # every notebooks/NN_*.ipynb, in place
    python -m tools.mark_slides notebooks/03_attention.ipynb
    python -m tools.mark_slides --check          # exit 1 if a notebook is not marked as the rules say

Each cell's type comes from the rules on its content and the per-notebook overrides of
``course/slide_overrides.json`` (``tools/slide_rules.py``), then from the screen budget
(here): a shown cell that does not fit on the current 1280 x 720 screen (heights of
``tools/slide_screen.py``) opens a new subslide, a short lead-in moves with the code it
introduces, a short caption stays with its figure, a grid of attention weights has a screen
of its own (in the decks every figure does, with its lead-in). ``tools/slide_deck.py`` does
at build time what cell metadata cannot say (sections that start mid-cell, screens taller
than a slide, explorers, speaker notes).

The marking depends only on the cells' sources, outputs and tags, never on the metadata it
writes, so running it again changes nothing; and it changes nothing but each cell's
``metadata.slideshow`` (the notebooks stay byte-for-byte the same otherwise, so nbval is
unaffected).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from tools.slide_rules import (  # noqa: F401
    CAPTION_CHARS,
    LEAD_IN_CHARS,
    MAX_CODE_LINES,
    OVERRIDES,
    SLIDE_TYPES,
    announces,
    headings,
    hides_source,
    introduced,
    is_heatmap,
    is_import_cell,
    load_overrides,
    rule,
    ruled_types,
)
from tools.slide_screen import (  # noqa: F401
    CODE_WRAP,
    HEADING,
    SCREEN,
    code_lines,
    figure_height,
    figure_size,
    has_figure,
    height,
    markdown_height,
    output_lines,
    source,
)

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


def with_forced(ruled: List[str], forced: Optional[Dict[int, str]]) -> List[str]:
    """``ruled`` with the continuation pieces' ``forced`` types: a piece is shown where the
    piece before it is, so a piece after a skipped or noted one is skipped or noted with it."""
    for i, kind in sorted((forced or {}).items()):
        ruled[i] = ruled[i - 1] if i and ruled[i - 1] in ("skip", "notes") else kind
    return ruled


def lead_in_target(cells: List[dict], ruled: List[str], index: int) -> Optional[int]:
    """The index of the code cell that cell ``index`` leads into (short shown prose right
    before code), or None."""
    cell, nxt = cells[index], index + 1
    if (
        cell["cell_type"] == "markdown"
        and len(source(cell).strip()) <= LEAD_IN_CHARS
        and ruled[index] == "-"
        and nxt < len(cells)
        and cells[nxt]["cell_type"] == "code"
    ):
        return nxt
    return None


def screen_height(cell: dict) -> float:
    """A cell's height on the slide, its source left out when the deck shows only its output."""
    return height(cell, show_source=not hides_source(cell))


def fit(
    kind: str,
    h: float,
    needed: float,
    caption: bool,
    used: float,
    heatmap: bool,
    heading: float = 0.0,
) -> Tuple[str, float]:
    """A cell's type on the screen budget and the screen height used after it: ``h`` is its
    own height, ``needed`` with the code it leads into, ``used`` the screen's so far;
    ``heading``: the height of the heading a screen it opens gets (the decks' "continued")."""
    if kind in ("-", "fragment") and heatmap and used > 0:
        kind = "subslide"  # a heatmap has the screen to itself
    if kind in ("slide", "subslide"):
        return kind, h + heading
    if kind not in ("-", "fragment"):
        return kind, used
    if (not caption or used + needed > SCREEN * 1.1) and used > 0 and used + needed > SCREEN:
        return "subslide", h + heading  # the screen is full: continue on a new one
    return kind, used + h


def slide_types(
    nb: dict,
    overrides: Sequence[dict] = (),
    forced: Optional[Dict[int, str]] = None,
    own_screens: bool = False,
) -> List[str]:
    """The slide type of every cell of ``nb``: rules, then overrides, then screen budget.

    ``forced`` maps the indices of continuation pieces (cut by the deck's build) to their
    type; a piece after a skipped or noted one is skipped or noted with it. A grid of
    heatmaps has a screen of its own; with ``own_screens`` (the decks), every figure does, opened
    by the short lead-in that introduces it."""
    cells = nb["cells"]
    ruled = with_forced(ruled_types(nb, overrides), forced)
    types: List[str] = []
    after_figure, used, led = False, 0.0, -1
    for index, cell in enumerate(cells):
        text = source(cell).strip()
        kind, nxt = ruled[index], lead_in_target(cells, ruled, index)
        fixed = any(text.startswith(o["starts_with"]) for o in overrides)
        if nxt is not None and ruled[nxt] == "skip" and text.endswith(":") and not fixed:
            kind = "skip"  # it introduces a cell that is not shown
        # with own_screens, a figure's screen opens with the lead-in that introduces it
        leads = own_screens and nxt is not None and ruled[nxt] != "skip" and has_figure(cells[nxt])
        h = screen_height(cell)
        caption = after_figure and cell["cell_type"] == "markdown" and len(text) <= CAPTION_CHARS
        # a short lead-in stays on the screen of the code it introduces
        needed = h + (
            screen_height(cells[nxt])
            if nxt is not None and ruled[nxt] != "skip" and not caption
            else 0
        )
        alone = (has_figure(cell) and led != index - 1) if own_screens else is_heatmap(cell)
        opens = cell["cell_type"] == "markdown" and text.startswith("#")
        extra = HEADING[3] if own_screens and not opens else 0.0
        kind, used = fit(kind, h, needed, caption, used, alone or leads, extra)
        led = index if leads and kind not in ("skip", "notes") else led
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
    return [
        o["starts_with"] for o in rules if not any(t.startswith(o["starts_with"]) for t in texts)
    ]


def count_slides(nb: dict) -> int:
    """Screens of the deck: slides and subslides."""
    return sum(
        1
        for c in nb["cells"]
        if c.get("metadata", {}).get("slideshow", {}).get("slide_type") in ("slide", "subslide")
    )


def dumps(nb: dict) -> str:
    """The notebook as nbformat writes it: indent 1, sorted keys, a trailing newline."""
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def mark_file(path: Path, overrides: Dict[str, List[dict]], check: bool = False) -> bool:
    """Mark one notebook file in place; return whether it changed (or would, with ``check``)."""
    before = path.read_text(encoding="utf-8")
    nb = json.loads(before)
    for stale in unmatched_overrides(nb, overrides.get(path.stem, ())):
        print(
            f"warning: {OVERRIDES.name}: the override for {path.stem} starting "
            f"{stale!r} matches no cell",
            file=sys.stderr,
        )
    after = dumps(mark(nb, path.stem, overrides))
    if after != before and not check:
        path.write_text(after, encoding="utf-8")
    return after != before


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.mark_slides", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "notebooks", nargs="*", type=Path, help="notebooks to mark (default: notebooks/NN_*.ipynb)"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 1 if a notebook is not marked as the rules say",
    )
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
        print(
            f"{path.name}: {count_slides(shown)} slides"
            + (
                " (would change)"
                if args.check and path in changed
                else " (marked)"
                if path in changed
                else " (unchanged)"
            )
        )
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
