"""The kit's nbgrader course, and the students' version of every notebook made by it.

:func:`build` writes ``grading/`` into the kit and runs ``nbgrader generate_assignment`` on it:

- ``source/NN_name/NN_name.ipynb``: one assignment per notebook, the repository's notebook as
  it is (its nbgrader cells mark the solutions and hidden tests), the outputs of its exercise
  cells cleared (a check's "correct", an answer's printout);
- ``nbgrader_config.py`` (``course/templates/grading/``): the course, the lesson's outputs kept
  in the students' version, cells tagged ``autograde-skip`` not run when grading, a submission
  that cannot be graded refused with a message, ``zip_collect``'s file names, the checkpoints;
- ``gradebook.db``: nbgrader's database with every assignment, its cells and points;
- ``requirements.txt`` (nbgrader, pinned; with ``-r ../student/requirements.txt``) and
  ``README.md`` (``course/templates/grading/README.md``): set up, collect, autograde, export.

It returns nbgrader's students' version of each notebook (``release/``, then removed from
``grading/``): the bundle, the decks and the handouts use exactly those files.
"""

from __future__ import annotations

import contextlib
import copy
import os
import shutil
import sys
from pathlib import Path
from typing import Callable, Dict, Iterator, List

from tools.kit_base import COURSE, BuildError, Exercise, exercises, nbgrader
from tools.mark_slides import dumps
from tools.student_bundle import pins

TEMPLATES = COURSE / "templates" / "grading"
SKIP_TAG = "autograde-skip"
# nbgrader and what it needs pinned as the series is tested (constraints.txt)
GRADING = (
    "nbgrader",
    "notebook",
    "sqlalchemy",
    "alembic",
    "mako",
    "rapidfuzz",
    "nbconvert",
    "nbclient",
    "nbformat",
    "jupyter_client",
)


def source_notebook(nb: dict) -> dict:
    """The assignment's source: the notebook, the outputs of its exercise cells cleared."""
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:
        if nbgrader(cell) and cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    return nb


def requirements() -> str:
    pinned = pins()
    return (
        "\n".join(
            [
                "# nbgrader and the notebooks' runtime, pinned as the series is tested",
                "-r ../student/requirements.txt",
                *(pinned[name] for name in GRADING),
            ]
        )
        + "\n"
    )


def readme(rows: Dict[str, List[Exercise]]) -> str:
    table = "\n".join(
        f"| `{name}` | {ex.number} | {ex.title} | `{'`, `'.join(ex.names)}` | {ex.points:g} |"
        for name, found in rows.items()
        for ex in found
    )
    total = sum(ex.points for found in rows.values() for ex in found)
    text = (TEMPLATES / "README.md").read_text(encoding="utf-8")
    return text.replace("{TABLE}", table).replace("{TOTAL}", f"{total:g}")


@contextlib.contextmanager
def quiet_nbgrader(course: Path) -> Iterator[None]:
    """nbgrader's ``alembic`` found on the PATH (it makes the database), no user
    configuration read, its log kept to warnings."""
    saved = {k: os.environ.get(k) for k in ("PATH", "JUPYTER_CONFIG_DIR")}
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{saved['PATH'] or ''}"
    os.environ["JUPYTER_CONFIG_DIR"] = str(course / ".jupyter")
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(course / ".jupyter", ignore_errors=True)


def load_config(course: Path):
    """The course's ``nbgrader_config.py``, read as nbgrader reads it."""
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()


def generate(course: Path, names: List[str]) -> Dict[str, Path]:
    """``nbgrader generate_assignment`` of every assignment (in this process); returns each
    notebook's students' version in ``release/``."""
    from nbgrader.converters import GenerateAssignment
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.utils import capture_log

    with quiet_nbgrader(course):
        config = load_config(course)
        for name in names:
            coursedir = CourseDirectory(config=config)
            coursedir.assignment_id = name
            app = GenerateAssignment(coursedir=coursedir, config=config)
            app.force = True
            result = capture_log(app)
            if not result["success"]:
                why = (result.get("error") or result.get("log") or "").strip().splitlines()
                raise BuildError(
                    f"nbgrader generate_assignment {name} failed: "
                    f"{why[-1] if why else 'no message'}"
                )
    return {name: course / "release" / name / f"{name}.ipynb" for name in names}


def build(nbs: Dict[str, dict], out: Path, log: Callable[[str], None] = print) -> Dict[str, Path]:
    """Write the nbgrader course into ``out`` (made) and return each notebook's students'
    version (files in ``out/release``: the caller copies them, then removes the folder)."""
    rows = {name: exercises(nb, name) for name, nb in nbs.items()}
    for name, nb in nbs.items():
        folder = out / "source" / name
        folder.mkdir(parents=True)
        (folder / f"{name}.ipynb").write_text(dumps(source_notebook(nb)), encoding="utf-8")
    shutil.copy2(TEMPLATES / "nbgrader_config.py", out / "nbgrader_config.py")
    (out / "requirements.txt").write_text(requirements(), encoding="utf-8")
    (out / "README.md").write_text(readme(rows), encoding="utf-8")
    released = generate(out, list(nbs))
    points = sum(ex.points for found in rows.values() for ex in found)
    log(
        f"grading/: nbgrader course of {len(nbs)} notebooks, "
        f"{sum(map(len, rows.values()))} exercises, {points:g} points"
    )
    return released
