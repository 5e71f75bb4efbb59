"""What the parts of the instructor kit share: where the repository's pieces are, the build's
one error, reading a notebook, and its exercises as nbgrader marks them.

An exercise of a notebook ``NN_name`` is, in nbgrader's cell metadata, an answer cell
(``"solution": true``, ``grade_id`` ``NN-exK-answer``) whose worked solution sits between
``### BEGIN SOLUTION`` and ``### END SOLUTION``, and a graded check cell (``"grade": true``,
``grade_id`` ``NN-exK-check``, with its points) whose hidden tests sit between ``### BEGIN
HIDDEN TESTS`` and ``### END HIDDEN TESTS``; a markdown cell above them states it, starting
``**Exercise K — title.**``. ``nbgrader generate_assignment`` (``tools/grading.py``) makes the
student version from exactly that.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
COURSE = ROOT / "course"
# what notebooks 12 and 13 read and run beside them, in ../benchmarks: the results and scripts
BENCHMARK_FILES = ("table3.json", "table3.py", "modern.json", "modern.py", "common.py")
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
GRADE_ID = re.compile(r"^(\d\d)-ex(\d+)-(answer|check)$")
STATEMENT = re.compile(r"\*\*Exercise (\d+)\s*[—–-]\s*(.+?)\.?\*\*")


class BuildError(RuntimeError):
    """The kit cannot be built from these notebooks; the message says which cell and why."""


def source(cell: dict) -> str:
    text = cell.get("source", "")
    return text if isinstance(text, str) else "".join(text)


def nbgrader(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def read_notebook(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def course_notebooks(folder: Path = NOTEBOOKS) -> List[Path]:
    """The notebooks a course teaches: the series, without its appendices (engineering
    material for the curious, with no exercises)."""
    return [p for p in sorted(folder.glob("[0-9][0-9]_*.ipynb")) if "appendix" not in p.stem]


def copy_benchmark_files(folder: Path) -> None:
    """``folder/benchmarks/``: the files of :data:`BENCHMARK_FILES`, for notebooks run in place."""
    import shutil

    (folder / "benchmarks").mkdir(parents=True, exist_ok=True)
    for name in BENCHMARK_FILES:
        shutil.copy2(ROOT / "benchmarks" / name, folder / "benchmarks" / name)


def appendices(folder: Path = NOTEBOOKS) -> List[Path]:
    return [p for p in sorted(folder.glob("[0-9][0-9]_*.ipynb")) if "appendix" in p.stem]


def without_markers(code: str) -> str:
    """An answer cell's worked solution as a learner would write it: the marker lines gone."""
    lines = [ln for ln in code.split("\n") if ln.strip() not in (BEGIN, END)]
    return "\n".join(lines)


def solution_region(code: str) -> str:
    """The lines between the markers (what the student version replaces by a stub)."""
    out, inside = [], False
    for line in code.split("\n"):
        if line.strip() == BEGIN:
            inside = True
        elif line.strip() == END:
            inside = False
        elif inside:
            out.append(line)
    return "\n".join(out)


@dataclass
class Exercise:
    notebook: str  # "03_attention"
    number: int
    title: str  # "a prefix-LM mask"
    statement: str  # the markdown cell that states it
    statement_cell: int
    answer_cell: int
    check_cell: int
    points: float
    solution: str  # the answer cell without the marker lines

    @property
    def names(self) -> List[str]:
        """What the answer cell defines (its top-level ``def`` and ``class`` names)."""
        return re.findall(r"^(?:def|class) (\w+)", self.solution, re.M)


def exercises(nb: dict, name: str) -> List[Exercise]:
    """The exercises of a notebook, in order, from its nbgrader cells; ``BuildError`` naming the
    notebook and cell when an answer has no check cell or no statement above it."""
    cells = nb["cells"]
    found: Dict[int, dict] = {}
    for i, cell in enumerate(cells):
        match = GRADE_ID.match(str(nbgrader(cell).get("grade_id", "")))
        if not match:
            said = [m for m in MARKERS if m in source(cell)]
            if said:  # nbgrader reads any line holding one as a marker, prose too
                raise BuildError(
                    f"{name}, cell {i}: holds {said[0]!r} but is no answer or check "
                    "cell; nbgrader would cut it there (reword it)"
                )
            continue
        if match.group(1) != name[:2]:
            raise BuildError(
                f"{name}, cell {i}: grade_id {match.group(0)!r} names notebook {match.group(1)}"
            )
        found.setdefault(int(match.group(2)), {})[match.group(3)] = i
        markers = (BEGIN, END) if match.group(3) == "answer" else (BEGIN_HIDDEN, END_HIDDEN)
        marks = [ln.strip() for ln in source(cell).split("\n") if ln.strip() in markers]
        if not marks or marks != list(markers) * (len(marks) // 2):
            raise BuildError(
                f"{name}, cell {i} ({match.group(0)}): each line {markers[0]!r} "
                f"needs a line {markers[1]!r} below it"
            )
    out = []
    for number, where in sorted(found.items()):
        if set(where) != {"answer", "check"} or where["check"] < where["answer"]:
            raise BuildError(
                f"{name}, exercise {number}: needs an answer cell and, after it, a "
                f"check cell (grade_ids {name[:2]}-ex{number}-answer/-check)"
            )
        statement: Optional[int] = next(
            (
                j
                for j in range(where["answer"] - 1, -1, -1)
                if cells[j]["cell_type"] == "markdown"
                and any(int(m.group(1)) == number for m in STATEMENT.finditer(source(cells[j])))
            ),
            None,
        )
        if statement is None:
            raise BuildError(
                f"{name}, exercise {number}: no markdown cell above its answer "
                f"states it ('**Exercise {number} — title.**')"
            )
        text = source(cells[statement])
        match = next(m for m in STATEMENT.finditer(text) if int(m.group(1)) == number)
        out.append(
            Exercise(
                name,
                number,
                match.group(2).strip(),
                text[match.start() :].strip(),
                statement,
                where["answer"],
                where["check"],
                float(nbgrader(cells[where["check"]])["points"]),
                without_markers(source(cells[where["answer"]])),
            )
        )
    return out
