"""nbgrader's source version of one notebook (``tools/grading.py`` writes the course folder).

An exercise is a markdown statement (``### Exercise K`` or ``**Exercise K.**``) after the
notebook's ``## Exercises`` heading, a stub cell (``raise NotImplementedError``), a check cell
(a call of a ``check_...`` function) and solution cells tagged ``solution``. Its stub cell
becomes an autograded answer cell holding the worked solution between ``### BEGIN SOLUTION``
and ``### END SOLUTION``, its check cell an autograded test cell worth points (both made by
``tools/grading_cells.py``); the worked solution cells are left out, and the cells that show
an exercise's answer above it are blanked as in the student copies
(``tools/student_copy.py``). Points: 2 for an exercise whose stub is a class (a module to
assemble), 1 for a function.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from tools.grading_cells import (
    BEGIN_HIDDEN,
    FUNCTIONS,
    GradingError,
    answer_source,
    checker_name,
    solution_definitions,
    test_source,
)
from tools.student_copy import hide_shown

STUB = "raise NotImplementedError"
SOLUTION_TAG = "solution"
EXERCISES = re.compile(r"^##\s+Exercises\b", re.M | re.I)
STATEMENT = re.compile(r"(?:^#{2,4}\s*Exercise\s+(\d+)|\*\*Exercise\s+(\d+))", re.M)
SCHEMA_VERSION = 3
GRADED_NOTE = (
    "Your answers are graded: each check cell is a test, worth 2 points for a class "
    "and 1 for a function, and the grader runs further tests of its own."
)
# the notebooks show the repository's images/ from ../images; an assignment holds its own copy
IMAGE = re.compile(r"\.\./images/([\w.-]+)")


@dataclass
class Exercise:
    number: int
    stub: Optional[int] = None  # cell indices
    check: Optional[int] = None
    solutions: List[int] = field(default_factory=list)


def cell_text(cell: dict) -> str:
    src = cell.get("source", "")
    return src if isinstance(src, str) else "".join(src)


def is_solution(cell: dict) -> bool:
    return SOLUTION_TAG in cell.get("metadata", {}).get("tags", [])


def check_calls(code: str) -> List[ast.Call]:
    """The calls of ``check_...`` functions in a cell, outermost first."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and checker_name(node).startswith("check_")
    ]


def exercises_start(cells: List[dict]) -> int:
    """The index of the markdown cell with the ``## Exercises`` heading (``len(cells)``: none)."""
    return next(
        (
            i
            for i, c in enumerate(cells)
            if c["cell_type"] == "markdown" and EXERCISES.search(cell_text(c))
        ),
        len(cells),
    )


def find_exercises(cells: List[dict]) -> List[Exercise]:
    """The exercises after the ``## Exercises`` heading that have a stub, a check and a solution."""
    start = exercises_start(cells)
    found: Dict[int, Exercise] = {}
    current = None
    for i in range(start, len(cells)):
        cell, text = cells[i], cell_text(cells[i])
        if cell["cell_type"] == "markdown":
            for match in STATEMENT.finditer(text):
                current = found.setdefault(
                    int(match.group(1) or match.group(2)),
                    Exercise(int(match.group(1) or match.group(2))),
                )
        elif current is None or cell["cell_type"] != "code":
            continue
        elif is_solution(cell):
            current.solutions.append(i)
        elif current.stub is None and STUB in text:
            current.stub = i
        elif current.stub is not None and current.check is None and check_calls(text):
            current.check = i
    return [
        ex
        for _, ex in sorted(found.items())
        if ex.stub is not None and ex.check is not None and ex.solutions
    ]


def nbgrader_metadata(grade_id: str, solution: bool, points: Optional[int] = None) -> dict:
    """An autograded answer cell (``solution``) or an autograded test cell (``points``)."""
    meta = {
        "grade": points is not None,
        "grade_id": grade_id,
        "locked": points is not None,
        "schema_version": SCHEMA_VERSION,
        "solution": solution,
        "task": False,
    }
    if points is not None:
        meta["points"] = points
    return meta


def code_cell(old: dict, text: str, nbgrader: dict) -> dict:
    """A new code cell in place of ``old`` (its id and metadata kept), no outputs."""
    cell = {
        "cell_type": "code",
        "execution_count": None,
        "metadata": {**old.get("metadata", {}), "nbgrader": nbgrader},
        "outputs": [],
        "source": text,
    }
    return {"id": old["id"], **cell} if "id" in old else cell


def graded_intro(text: str) -> str:
    """The exercises' introduction with its sentences about worked solutions replaced."""
    first = STATEMENT.search(text)
    head, tail = (text[: first.start()], text[first.start() :]) if first else (text, "")
    paragraphs = []
    for para in head.split("\n\n"):
        sentences = re.split(r"(?<=[.!?])\s+", para)
        kept = [s for s in sentences if "solution" not in s.lower()]
        paragraphs.append(para if len(kept) == len(sentences) else " ".join(kept + [GRADED_NOTE]))
    return "\n\n".join(paragraphs) + tail


@dataclass
class Graded:
    """One graded exercise, for the instructors' table."""

    number: int
    names: List[str]
    checkers: List[str]
    points: int
    hidden: bool
    stub_kept: bool


def exercise_cells(cells: List[dict], ex: Exercise, name: str) -> Tuple[dict, dict, Graded]:
    """The answer cell and the test cell of one exercise."""
    stub = cell_text(cells[ex.stub])
    try:
        solution = "\n\n\n".join(solution_definitions(cell_text(cells[i])) for i in ex.solutions)
        answer, kept = answer_source(stub, solution)
        test, checkers = test_source(cell_text(cells[ex.check]))
    except SyntaxError as err:
        raise GradingError(f"{name}, exercise {ex.number}: a cell does not parse ({err})") from None
    tree = ast.parse(stub)
    points = 2 if any(isinstance(n, ast.ClassDef) for n in tree.body) else 1
    names = [n.name for n in tree.body if isinstance(n, FUNCTIONS + (ast.ClassDef,))]
    graded = Graded(ex.number, names, checkers, points, BEGIN_HIDDEN in test, kept)
    answer_cell = code_cell(
        cells[ex.stub], answer, nbgrader_metadata(f"exercise-{ex.number}-answer", True)
    )
    test_cell = code_cell(
        cells[ex.check], test, nbgrader_metadata(f"exercise-{ex.number}-tests", False, points)
    )
    return answer_cell, test_cell, graded


def source_notebook(nb: dict, name: str) -> Tuple[dict, List[Graded]]:
    """nbgrader's source version of one notebook, and its graded exercises (none: no exercise)."""
    nb = hide_shown(nb, name, GradingError)  # no answer shown above its question
    cells = nb["cells"]
    found = find_exercises(cells)
    replaced: Dict[int, dict] = {}
    graded = []
    for ex in found:
        replaced[ex.stub], replaced[ex.check], row = exercise_cells(cells, ex, name)
        graded.append(row)
    start = exercises_start(cells)
    out = []
    for i, cell in enumerate(cells):
        if i in replaced:
            out.append(replaced[i])
        elif not is_solution(cell):
            if i == start:
                cell["source"] = graded_intro(cell_text(cell))
            out.append(cell)
    for cell in out:
        cell["source"] = IMAGE.sub(r"images/\1", cell_text(cell))
    nb["cells"] = out
    return nb, graded


def images(nb: dict) -> List[str]:
    """The files of the repository's images/ that a notebook shows."""
    return sorted({m for cell in nb["cells"] for m in IMAGE.findall(cell_text(cell))})
