"""A notebook made ready to be a reveal.js deck (used by the kit's slides, tools/course_slides.py).

The notebooks carry the slide marks of ``tools/mark_slides.py``; a deck also needs what a
cell's metadata cannot say, so the build changes its own copy of the notebook (never the
notebook itself):

- a markdown cell whose ``## `` or ``### `` heading sits mid-cell is split at the heading, so
  a section opens its own slide instead of with the last paragraph of the section before;
- a figure has a screen of its own, shown without its code (what its cell prints after it
  goes to the next screen), so that it can be drawn large;
- a markdown screen taller than a slide is split at paragraphs into continuation slides, and
  a code cell taller than a slide shows the rest of its output on the next
  (``tools/slide_pieces.py``);
- the opening cell's **Time** paragraph (reading and run times) goes to the speaker notes;
- an explorer (a live widget, blank on a slide) becomes one line pointing to the notebook;
- every screen opens with a heading: one that would not gets its section's, "(continued)";
- every section gets its authored speaker notes from ``course/speaker_notes/NN_name.md``
  (``## heading`` as in the notebook, then the note), shown by the speaker view (key S);
- the cells are marked again by the rules (so that the pieces get their own marks), with
  the 1280 x 720 screen budget of ``mark_slides``.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from tools import mark_slides
from tools.slide_pieces import figure_pieces, output_pieces, piece

ROOT = Path(__file__).resolve().parent.parent
NOTES = ROOT / "course" / "speaker_notes"
SECTION = re.compile(r"^(#{1,3}) (.+?)\s*$")
WIDGET = "application/vnd.jupyter.widget-view+json"
# what every authored note says, each on a line of its own
NOTE_PARTS = ("Time:", "Point at:", "Ask:")


class NotesError(ValueError):
    """The speaker notes do not match the notebook's sections."""


def notes_path(name: str) -> Path:
    return NOTES / f"{name}.md"


def read_notes(path: Path) -> Dict[str, str]:
    """``{heading: note}`` from a notes file: ``## heading`` (or ``# title``) lines, each
    followed by its note; text before the first heading is ignored."""
    notes: Dict[str, str] = {}
    key = None
    for line in path.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^#{1,2} (.+?)\s*$", line)
        if match:
            key = match.group(1)
            if key in notes:
                raise NotesError(f"{path.name}: two notes for the section {key!r}")
            notes[key] = ""
        elif key is not None:
            notes[key] += line + "\n"
    return {k: v.strip() for k, v in notes.items()}


def sections(nb: dict) -> List[str]:
    """The headings that open a section of the deck: the title (``# ``) and every ``## ``."""
    found = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        fence = False
        for line in mark_slides.source(cell).splitlines():
            fence = fence != line.strip().startswith("```")
            match = SECTION.match(line)
            if match and len(match.group(1)) <= 2 and not fence:
                found.append(match.group(2))
    return found


def notes_problems(nb: dict, notes: Dict[str, str]) -> List[str]:
    """What is wrong with ``notes`` for ``nb``: sections without a note, notes naming no
    section, notes without their time, pointer or question."""
    heads = sections(nb)
    problems = [f"no note for the section {h!r}" for h in heads if not notes.get(h)]
    problems += [
        f"a note for {k!r}, which is no section of the notebook" for k in notes if k not in heads
    ]
    problems += [
        f"the note for {k!r} lacks {part!r}"
        for k, text in notes.items()
        for part in NOTE_PARTS
        if part not in text
    ]
    return problems


def split_text(text: str) -> List[str]:
    """``text`` cut before every mid-text ``## ``/``### `` heading (not inside code fences);
    a heading straight above another stays with it (no slide holds a title alone)."""
    pieces, current, fence = [], [], False
    for line in text.split("\n"):
        if line.strip().startswith("```"):
            fence = not fence
        if (
            not fence
            and re.match(r"^#{2,3} ", line)
            and any(x.strip() and not re.match(r"^#{1,3} ", x) for x in current)
        ):
            pieces.append("\n".join(current).strip("\n"))
            current = []
        current.append(line)
    pieces.append("\n".join(current).strip("\n"))
    return [p for p in pieces if p.strip()]


def paragraphs_to_fit(text: str) -> List[str]:
    """``text`` in screens of at most ``mark_slides.SCREEN`` pixels, cut between paragraphs."""
    blocks, current, fence = [], [], False
    for line in text.split("\n"):
        if line.strip().startswith("```"):
            fence = not fence
        if not fence and not line.strip() and current:
            blocks.append("\n".join(current))
            current = []
        elif line.strip() or fence:
            current.append(line)
    if current:
        blocks.append("\n".join(current))
    screens: List[str] = []
    for block in blocks:
        joined = (screens[-1] + "\n\n" + block) if screens else block
        if screens and mark_slides.markdown_height(joined) <= mark_slides.SCREEN:
            screens[-1] = joined
        else:
            screens.append(block)
    return screens


def title_and_reading_time(cell: dict) -> List[dict]:
    """The opening cell without its **Time** paragraph (how long the notebook takes to read
    and run: for the speaker, not the room), then that paragraph as a note."""
    blocks = mark_slides.source(cell).split("\n\n")
    timing = [b for b in blocks if b.lstrip().startswith("**Time**")]
    if not timing:
        return [cell]
    shown = piece(cell, "\n\n".join(b for b in blocks if b not in timing), 0)
    note = piece(cell, "\n\n".join(timing), 1)
    return [shown, note]


def split_cells(cells: List[dict]) -> Tuple[List[dict], Dict[int, str]]:
    """Markdown cells cut at mid-cell headings and, when a heading's screen is taller than
    a slide, between paragraphs; returns the cells and the continuation pieces' types."""
    out: List[dict] = []
    forced: Dict[int, str] = {}
    for index, cell in enumerate(cells):
        if index == 0 and cell["cell_type"] == "markdown":
            title, *note = title_and_reading_time(cell)
            out.append(title)
            forced.update({len(out): "notes"} if note else {})
            out.extend(note)
            continue
        if cell["cell_type"] != "markdown":
            parts = [p for f in figure_pieces(cell) for p in output_pieces(f)]
            for n, part in enumerate(parts):
                if n:
                    forced[len(out)] = "subslide"
                out.append(part)
            continue
        k = 0
        for part in split_text(mark_slides.source(cell)):
            screens = paragraphs_to_fit(part) if SECTION.match(part.split("\n")[0]) else [part]
            for n, screen in enumerate(screens):
                if n:
                    forced[len(out)] = "subslide"
                out.append(piece(cell, screen, k))
                k += 1
    return out, forced


def explorer_line(cell: dict, name: str) -> Optional[dict]:
    """An explorer cell as one markdown line pointing to the notebook (None: not one)."""
    if not any(WIDGET in out.get("data", {}) for out in cell.get("outputs", [])):
        return None
    call = mark_slides.source(cell).strip().splitlines()[-1].strip()
    text = (
        f"▶ *Live in the notebook:* `{call}` in `{name}.ipynb` "
        "(run it in JupyterLab; a slide shows no live widget)."
    )
    return {
        "cell_type": "markdown",
        "id": f"{cell.get('id', 'explorer')[:50]}-explorer",
        "metadata": {},
        "source": text,
    }


def note_cell(heading: str, text: str, k: int) -> dict:
    return {
        "cell_type": "markdown",
        "id": f"speaker-note-{k}",
        "metadata": {"slideshow": {"slide_type": "notes"}},
        "source": f"**{heading}**\n\n{text}",
    }


def with_notes(cells: List[dict], notes: Dict[str, str]) -> List[dict]:
    """Each section's authored note right after the cell that opens the section."""
    out = []
    for cell in cells:
        out.append(cell)
        if cell["cell_type"] == "markdown":
            match = SECTION.match(mark_slides.source(cell).split("\n")[0])
            if match and match.group(2) in notes:
                out.append(note_cell(match.group(2), notes[match.group(2)], len(out)))
    return out


def deck_name(nb: dict, names: List[str]) -> Optional[str]:
    """The notebook's name (``NN_name``) from the number its title starts with."""
    title = mark_slides.source(nb["cells"][0]).lstrip("# ") if nb["cells"] else ""
    number = title[:2]
    return next((n for n in names if n[:2] == number), None)


def prepare(nb: dict, name: str) -> dict:
    """A copy of ``nb`` ready for the deck: split, explorers replaced, notes attached, marked."""
    nb = copy.deepcopy(nb)
    cells = [explorer_line(c, name) or c for c in nb["cells"]]
    for cell in cells:  # a figure is shown without its code, as large as its screen allows
        if cell["cell_type"] == "code" and mark_slides.has_figure(cell):
            cell["metadata"]["transient"] = {"remove_source": True}
    cells, forced = split_cells(cells)
    seen = set()
    for index, cell in enumerate(cells):  # the pieces' ids unique again
        if "id" in cell and cell["id"] in seen:
            cell["id"] = f"{cell['id'][:50]}-p{index}"
        seen.add(cell.get("id"))
    nb["cells"] = cells
    overrides = mark_slides.load_overrides().get(name, ())
    kinds = mark_slides.slide_types(nb, overrides, forced, own_screens=True)
    for cell, kind in zip(cells, kinds):
        cell.setdefault("metadata", {})["slideshow"] = {"slide_type": kind}
        if mark_slides.hides_source(cell) and kind not in ("skip", "notes"):
            cell["metadata"]["transient"] = {"remove_source": True}
    path = notes_path(name)
    notes = read_notes(path) if path.exists() else {}
    nb["cells"] = with_notes(with_headings(cells), notes)
    return nb


def with_headings(cells: List[dict]) -> List[dict]:
    """Every screen opens with a heading: one that does not (code, a figure, a continued
    paragraph) gets the heading of its section, marked "(continued)"."""
    out: List[dict] = []
    current = ""
    for cell in cells:
        kind = cell.get("metadata", {}).get("slideshow", {}).get("slide_type")
        first = mark_slides.source(cell).lstrip().split("\n")[0]
        heading = SECTION.match(first) if cell["cell_type"] == "markdown" else None
        if kind in ("slide", "subslide") and heading is None and current:
            cell["metadata"]["slideshow"] = {"slide_type": "-"}
            out.append(
                {
                    "cell_type": "markdown",
                    "id": f"{cell.get('id', 'cell')[:50]}-heading",
                    "metadata": {"slideshow": {"slide_type": kind}},
                    "source": f"### {current} (continued)",
                }
            )
        if heading is not None and kind not in ("skip", "notes"):
            current = heading.group(2).removesuffix(" (continued)")
        out.append(cell)
    return out
