"""The notebooks as an nbgrader course: solution regions, graded tests with points, hidden tests.

``bash dev.sh course`` (``python -m tools.build_course``) calls :func:`build`, which writes
``grading/`` into the kit:

- ``source/NN_name/NN_name.ipynb``: one assignment per notebook, in nbgrader's "source" form.
  Each exercise's stub cell holds the worked solution between ``### BEGIN SOLUTION`` and
  ``### END SOLUTION`` (an autograded answer cell: ``generate_assignment`` puts the stub back);
  its check cell becomes an autograded test cell worth points, which asserts the project's
  checker (a "not yet" fails the test with the checker's message) and then runs the hidden tests
  of ``tools/grading_hidden.py`` between ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS``
  (both cells are made by ``tools/grading_cells.py``). The worked solution cells are left out,
  and the cells that show an exercise's answer above it are blanked as in the student copies
  (``tools/student_copy.py``).
- ``nbgrader_config.py`` (course id, a cell time-out long enough for the training notebook, the
  shipped checkpoints), ``checkpoints/`` when a notebook loads them, and ``README.md`` for
  instructors: the commands, and the points of every exercise.

An exercise is a markdown statement (``### Exercise K`` or ``**Exercise K.**``) after the
notebook's ``## Exercises`` heading, a stub cell (``raise NotImplementedError``), a check cell
(a call of a ``check_...`` function) and solution cells tagged ``solution``. Points: 2 for an
exercise whose stub is a class (a module to assemble), 1 for a function.
"""
from __future__ import annotations

import ast
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from tools.grading_cells import (BEGIN, BEGIN_HIDDEN, END, END_HIDDEN, FUNCTIONS,  # noqa: F401
                                 RELEASE_STUB, GradingError, answer_source, checker_name,
                                 solution_definitions, test_source)
from tools.student_copy import hide_shown

ROOT = Path(__file__).resolve().parent.parent
COURSE_ID = "transformer-series"
STUB = "raise NotImplementedError"
SOLUTION_TAG = "solution"
EXERCISES = re.compile(r"^##\s+Exercises\b", re.M | re.I)
STATEMENT = re.compile(r"(?:^#{2,4}\s*Exercise\s+(\d+)|\*\*Exercise\s+(\d+))", re.M)
SCHEMA_VERSION = 3
GRADED_NOTE = ("Your answers are graded: each check cell is a test, worth 2 points for a class "
               "and 1 for a function, and the grader runs further tests of its own.")
# the notebooks show the repository's images/ from ../images; an assignment holds its own copy
IMAGE = re.compile(r"\.\./images/([\w.-]+)")


@dataclass
class Exercise:
    number: int
    stub: Optional[int] = None                # cell indices
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
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)
            and checker_name(node).startswith("check_")]


def find_exercises(cells: List[dict]) -> List[Exercise]:
    """The exercises after the ``## Exercises`` heading that have a stub, a check and a solution."""
    start = next((i for i, c in enumerate(cells) if c["cell_type"] == "markdown"
                  and EXERCISES.search(cell_text(c))), len(cells))
    found: Dict[int, Exercise] = {}
    current = None
    for i in range(start, len(cells)):
        cell, text = cells[i], cell_text(cells[i])
        if cell["cell_type"] == "markdown":
            for match in STATEMENT.finditer(text):
                current = found.setdefault(int(match.group(1) or match.group(2)),
                                           Exercise(int(match.group(1) or match.group(2))))
        elif current is None or cell["cell_type"] != "code":
            continue
        elif is_solution(cell):
            current.solutions.append(i)
        elif current.stub is None and STUB in text:
            current.stub = i
        elif current.stub is not None and current.check is None and check_calls(text):
            current.check = i
    return [ex for _, ex in sorted(found.items())
            if ex.stub is not None and ex.check is not None and ex.solutions]


# --- the notebook ------------------------------------------------------------------------

def nbgrader_metadata(grade_id: str, solution: bool, points: Optional[int] = None) -> dict:
    """An autograded answer cell (``solution``) or an autograded test cell (``points``)."""
    meta = {"grade": points is not None, "grade_id": grade_id, "locked": points is not None,
            "schema_version": SCHEMA_VERSION, "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return meta


def code_cell(old: dict, text: str, nbgrader: dict) -> dict:
    """A new code cell in place of ``old`` (its id and metadata kept), no outputs."""
    cell = {"cell_type": "code", "execution_count": None,
            "metadata": {**old.get("metadata", {}), "nbgrader": nbgrader},
            "outputs": [], "source": text}
    return {"id": old["id"], **cell} if "id" in old else cell


def graded_intro(text: str) -> str:
    """The exercises' introduction with its sentences about worked solutions replaced."""
    first = STATEMENT.search(text)
    head, tail = (text[:first.start()], text[first.start():]) if first else (text, "")
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
    answer_cell = code_cell(cells[ex.stub], answer,
                            nbgrader_metadata(f"exercise-{ex.number}-answer", True))
    test_cell = code_cell(cells[ex.check], test,
                          nbgrader_metadata(f"exercise-{ex.number}-tests", False, points))
    return answer_cell, test_cell, graded


def source_notebook(nb: dict, name: str) -> Tuple[dict, List[Graded]]:
    """nbgrader's source version of one notebook, and its graded exercises (none: no exercise)."""
    nb = hide_shown(nb, name, GradingError)      # no answer shown above its question
    cells = nb["cells"]
    found = find_exercises(cells)
    replaced: Dict[int, dict] = {}
    graded = []
    for ex in found:
        replaced[ex.stub], replaced[ex.check], row = exercise_cells(cells, ex, name)
        graded.append(row)
    start = next((i for i, c in enumerate(cells) if c["cell_type"] == "markdown"
                  and EXERCISES.search(cell_text(c))), len(cells))
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


# --- the course folder -------------------------------------------------------------------

CONFIG = '''\
"""nbgrader's configuration of the course (written by bash dev.sh course; see README.md)."""
import os

c = get_config()  # noqa: F821 (nbgrader defines it)
here = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.root = here
c.CourseDirectory.course_id = "{course_id}"
# every cell may run as long as nbval lets it (the training notebook trains in one cell)
c.Execute.timeout = 900
c.ClearSolutions.code_stub = {{"python": "{stub}"}}
# notebooks that load the shipped models find them here (transformer_lib.training.shipped_checkpoint)
os.environ.setdefault("TRANSFORMER_CHECKPOINTS", os.path.join(here, "checkpoints"))
'''

CHECKPOINT_USE = re.compile(r"shipped_checkpoint|checkpoints/")


README = """# Grading with nbgrader

An nbgrader course made from the notebooks by `bash dev.sh course` (`tools/grading.py`):
one assignment per notebook, in `source/`. nbgrader is in the project's `grading` extra
(`pip install -c constraints.txt -e ".[grading]"`; `bash dev.sh` installs it).

In each notebook, an exercise's stub cell holds the worked solution between
`### BEGIN SOLUTION` and `### END SOLUTION` (an autograded answer cell), and its check cell is
an autograded test cell: it asserts the exercise's checker, so a "not yet" fails the test with
the checker's message, and then runs hidden tests (`### BEGIN HIDDEN TESTS`) that students do
not see. The worked solution cells are left out, and the cells that would show an answer above
its exercise are blanked as in the student copies. Points: 2 for a class to assemble, 1 for a
function.

From this folder, in the environment where nbgrader is installed (activate it: nbgrader runs
its `alembic` command from the `PATH`); `nbgrader_config.py` sets the course and a 900 s cell
time-out:

```bash
{shell}
```

Autograding runs the whole notebook (the training notebook trains for about three minutes),
on the machine that runs nbgrader: it needs `transformer_lib` installed there.
`nbgrader formgrader` (in JupyterLab) shows the same as web pages.

| assignment | exercise | defines | points | hidden tests |
|---|---|---|---|---|
{table}
"""


def readme(rows: Dict[str, List[Graded]]) -> str:
    """The instructors' page: the commands, then every graded exercise with its points."""
    table = [f"| `{name}` | {g.number} | `{'`, `'.join(g.names)}` | {g.points} | "
             f"{'yes' if g.hidden else 'no'} |" for name, graded in rows.items() for g in graded]
    first = next(iter(rows), "01_embedding")
    commands = [(f"nbgrader generate_assignment {first}", f"release/{first}/: the students' version"),
                (f"# collect each student's notebook as submitted/STUDENT/{first}/{first}.ipynb", ""),
                (f"nbgrader autograde {first}", "runs them, with the hidden tests put back"),
                ("nbgrader export", "grades.csv: every student's score"),
                (f"nbgrader generate_feedback {first}", "feedback/: each graded notebook, as HTML")]
    width = max(len(c) for c, note in commands if note) + 2
    shell = "\n".join(c.ljust(width) + f"# {note}" if note else c for c, note in commands)
    return README.format(shell=shell, table="\n".join(table))


def build(nbs: Dict[str, dict], out: Path, log: Callable[[str], None] = print) -> Dict[str, int]:
    """Write the nbgrader course into ``out`` (made; it must not exist or be empty): one
    assignment per notebook with exercises. Returns each assignment's points."""
    if out.exists() and any(out.iterdir()):
        raise GradingError(f"{out} is not empty; the graded version is written into a new folder")
    rows: Dict[str, List[Graded]] = {}
    for name, nb in nbs.items():
        source, graded = source_notebook(nb, name)
        if not graded:
            continue
        folder = out / "source" / name
        folder.mkdir(parents=True)
        for image in images(nb):
            (folder / "images").mkdir(exist_ok=True)
            shutil.copy2(ROOT / "images" / image, folder / "images" / image)
        (folder / f"{name}.ipynb").write_text(json.dumps(source, indent=1, ensure_ascii=False)
                                              + "\n", encoding="utf-8")
        rows[name] = graded
        shown = [g.number for g in graded if not g.stub_kept]
        if shown:
            log(f"grading: {name} exercise(s) {shown}: the solution does not have the stub's "
                "shape; the stub is shown as a comment above one solution region")
    out.mkdir(parents=True, exist_ok=True)
    stub = "\\n".join(RELEASE_STUB)
    (out / "nbgrader_config.py").write_text(CONFIG.format(course_id=COURSE_ID, stub=stub),
                                            encoding="utf-8")
    (out / "README.md").write_text(readme(rows), encoding="utf-8")
    if any(CHECKPOINT_USE.search(cell_text(c)) for name in rows for c in nbs[name]["cells"]
           if c["cell_type"] == "code"):
        (out / "checkpoints").mkdir()
        for ckpt in (ROOT / "checkpoints").glob("*.pt"):
            shutil.copy2(ckpt, out / "checkpoints" / ckpt.name)
    points = {name: sum(g.points for g in graded) for name, graded in rows.items()}
    log(f"grading/: nbgrader source of {len(rows)} notebooks, "
        f"{sum(len(g) for g in rows.values())} graded exercises, {sum(points.values())} points")
    return points
