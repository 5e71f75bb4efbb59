"""The notebooks as an nbgrader course: solution regions, graded tests with points, hidden tests.

``bash dev.sh course`` (``python -m tools.build_course``) calls :func:`build`, which writes
``grading/`` into the kit:

- ``source/NN_name/NN_name.ipynb``: one assignment per notebook, in nbgrader's "source" form.
  Each exercise's stub cell holds the worked solution between ``### BEGIN SOLUTION`` and
  ``### END SOLUTION`` (an autograded answer cell: ``generate_assignment`` puts the stub back);
  its check cell becomes an autograded test cell worth points, which asserts the project's
  checker (a "not yet" fails the test with the checker's message) and then runs the hidden tests
  of ``tools/grading_hidden.py`` between ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS``
  (both cells are made by ``tools/grading_cells.py``, the notebook by
  ``tools/grading_source.py``). The worked solution cells are left out, and the cells that
  show an exercise's answer above it are blanked as in the student copies
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

import json
import re
import shutil
from pathlib import Path
from typing import Callable, Dict, List

from tools.grading_cells import (  # noqa: F401
    BEGIN,
    BEGIN_HIDDEN,
    END,
    END_HIDDEN,
    FUNCTIONS,
    RELEASE_STUB,
    GradingError,
    answer_source,
    checker_name,
    solution_definitions,
    test_source,
)
from tools.grading_source import (  # noqa: F401
    EXERCISES,
    IMAGE,
    STATEMENT,
    STUB,
    Exercise,
    Graded,
    cell_text,
    check_calls,
    code_cell,
    exercise_cells,
    find_exercises,
    graded_intro,
    images,
    is_solution,
    nbgrader_metadata,
    source_notebook,
)

ROOT = Path(__file__).resolve().parent.parent
COURSE_ID = "transformer-series"

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
    table = [
        f"| `{name}` | {g.number} | `{'`, `'.join(g.names)}` | {g.points} | "
        f"{'yes' if g.hidden else 'no'} |"
        for name, graded in rows.items()
        for g in graded
    ]
    first = next(iter(rows), "01_embedding")
    commands = [
        (f"nbgrader generate_assignment {first}", f"release/{first}/: the students' version"),
        (f"# collect each student's notebook as submitted/STUDENT/{first}/{first}.ipynb", ""),
        (f"nbgrader autograde {first}", "runs them, with the hidden tests put back"),
        ("nbgrader export", "grades.csv: every student's score"),
        (f"nbgrader generate_feedback {first}", "feedback/: each graded notebook, as HTML"),
    ]
    width = max(len(c) for c, note in commands if note) + 2
    shell = "\n".join(c.ljust(width) + f"# {note}" if note else c for c, note in commands)
    return README.format(shell=shell, table="\n".join(table))


def write_source(folder: Path, name: str, nb: dict, source: dict) -> None:
    """An assignment's source notebook (``source``, made from ``nb``) and the images it
    shows, in ``folder`` (made)."""
    folder.mkdir(parents=True)
    for image in images(nb):
        (folder / "images").mkdir(exist_ok=True)
        shutil.copy2(ROOT / "images" / image, folder / "images" / image)
    (folder / f"{name}.ipynb").write_text(
        json.dumps(source, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )


def uses_checkpoints(nbs: List[dict]) -> bool:
    """Whether a code cell of these notebooks loads a shipped checkpoint."""
    return any(
        CHECKPOINT_USE.search(cell_text(c))
        for nb in nbs
        for c in nb["cells"]
        if c["cell_type"] == "code"
    )


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
        write_source(out / "source" / name, name, nb, source)
        rows[name] = graded
        shown = [g.number for g in graded if not g.stub_kept]
        if shown:
            log(
                f"grading: {name} exercise(s) {shown}: the solution does not have the stub's "
                "shape; the stub is shown as a comment above one solution region"
            )
    out.mkdir(parents=True, exist_ok=True)
    stub = "\\n".join(RELEASE_STUB)
    (out / "nbgrader_config.py").write_text(
        CONFIG.format(course_id=COURSE_ID, stub=stub), encoding="utf-8"
    )
    (out / "README.md").write_text(readme(rows), encoding="utf-8")
    if uses_checkpoints([nbs[name] for name in rows]):
        (out / "checkpoints").mkdir()
        for ckpt in (ROOT / "checkpoints").glob("*.pt"):
            shutil.copy2(ckpt, out / "checkpoints" / ckpt.name)
    points = {name: sum(g.points for g in graded) for name, graded in rows.items()}
    log(
        f"grading/: nbgrader source of {len(rows)} notebooks, "
        f"{sum(len(g) for g in rows.values())} graded exercises, {sum(points.values())} points"
    )
    return points
