"""What the parts of the instructor kit share: where the repository's pieces are, the build's
one error, and reading a notebook with its slide marks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List

from tools import mark_slides

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
COURSE = ROOT / "course"
SOLUTION_TAG = "solution"


class BuildError(RuntimeError):
    """The kit cannot be built from these notebooks; the message says which cell and why."""


def source(cell: dict) -> str:
    return mark_slides.source(cell)


def is_solution(cell: dict) -> bool:
    return SOLUTION_TAG in cell.get("metadata", {}).get("tags", [])


def read_notebook(path: Path) -> dict:
    """A notebook, with slide metadata added by the rules if it has none."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    return nb if mark_slides.is_marked(nb) else mark_slides.mark(nb, path.stem)


def course_notebooks() -> List[Path]:
    """The notebooks a course teaches: the series, without its appendices (engineering
    material for the curious, with no exercises)."""
    return [p for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")) if "appendix" not in p.stem]
