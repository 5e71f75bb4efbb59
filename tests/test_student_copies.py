"""The students' version of the notebooks: made by ``nbgrader generate_assignment`` from the
repository's notebooks (tools/grading.py), and exactly what the student bundle holds.

In each: every answer cell reads nbgrader's stub instead of the worked solution, no check
cell holds its hidden tests, the exercise cells show no output while every other cell keeps
the outputs of the repository's notebook, each answer cell still defines the names its check
calls (so *Run All* goes past an unanswered exercise), and every file or notebook the
notebook points to is in the bundle.
"""

from __future__ import annotations

import ast
import re
import shutil

import pytest

from kit_build import NOTEBOOKS, kit
from tools import grading
from tools.kit_base import (
    BEGIN_HIDDEN,
    course_notebooks,
    exercises,
    nbgrader,
    read_notebook,
    solution_region,
    source,
)

NAMES = [p.stem for p in course_notebooks(NOTEBOOKS)]
STUB = "raise NotImplementedError()"


def student(name: str) -> dict:
    return read_notebook(kit() / "student" / "notebooks" / f"{name}.ipynb")


def test_the_bundle_holds_exactly_nbgraders_students_version(tmp_path):
    course = tmp_path / "grading"
    shutil.copytree(kit() / "grading", course)
    released = grading.generate(course, NAMES)  # nbgrader generate_assignment, again
    for name, path in released.items():
        bundle = kit() / "student" / "notebooks" / f"{name}.ipynb"
        assert path.read_bytes() == bundle.read_bytes(), f"{name}: not nbgrader's release"
    listed = sorted(p.name for p in (kit() / "student" / "notebooks").glob("*.ipynb"))
    appendices = sorted(p.name for p in NOTEBOOKS.glob("[0-9][0-9]_*appendix*.ipynb"))
    assert listed == sorted([f"{n}.ipynb" for n in NAMES] + appendices)


@pytest.mark.parametrize("name", NAMES)
def test_answers_are_stubs_and_hidden_tests_are_gone(name):
    full, nb = read_notebook(NOTEBOOKS / f"{name}.ipynb"), student(name)
    assert [c.get("id") for c in nb["cells"]] == [c.get("id") for c in full["cells"]]
    for ex in exercises(full, name):
        answer = source(nb["cells"][ex.answer_cell])
        assert STUB in answer, f"{name} Exercise {ex.number}: no stub"
        worked = [
            ln.strip()
            for ln in solution_region(source(full["cells"][ex.answer_cell])).splitlines()
            if len(ln.strip()) > 3
        ]
        shown = [ln for ln in worked if ln in {a.strip() for a in answer.splitlines()}]
        assert not shown, f"{name} Exercise {ex.number}: the answer cell shows {shown}"
    text = "\n".join(source(c) for c in nb["cells"])
    assert BEGIN_HIDDEN not in text and "BEGIN SOLUTION" not in text


@pytest.mark.parametrize("name", NAMES)
def test_exercise_cells_show_no_output_and_the_lesson_keeps_its_outputs(name):
    full, nb = read_notebook(NOTEBOOKS / f"{name}.ipynb"), student(name)
    for theirs, ours in zip(full["cells"], nb["cells"]):
        if ours["cell_type"] != "code":
            continue
        if nbgrader(ours):
            assert ours["outputs"] == [], f"{name}: {nbgrader(ours)['grade_id']} has outputs"
        else:
            assert ours["outputs"] == theirs["outputs"], f"{name}: {source(ours)[:60]!r}"


@pytest.mark.parametrize("name", NAMES)
def test_an_unanswered_exercise_still_defines_its_names(name):
    """A stub that raises while its cell runs (a class whose whole body is the solution)
    stops *Run All* there and leaves the check with a NameError instead of "not yet"."""
    nb = student(name)
    for ex in exercises(read_notebook(NOTEBOOKS / f"{name}.ipynb"), name):
        tree = ast.parse(source(nb["cells"][ex.answer_cell]))
        bodies = [tree.body] + [n.body for n in tree.body if isinstance(n, ast.ClassDef)]
        raising = [s for body in bodies for s in body if isinstance(s, ast.Raise)]
        assert not raising, (
            f"{name} Exercise {ex.number}: the stub raises when its cell runs; keep the "
            "def lines outside the solution region, e.g. `def forward(self, x):` then "
            "`### BEGIN SOLUTION` inside it"
        )
        defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        assert set(ex.names) <= defined, f"{name} Exercise {ex.number}: defines {defined}"


LINK = re.compile(
    r"\]\((?!https?:|#|mailto:)([^)\s]+)\)"  # a Markdown link or image
    r"|(?<![\w/])((?:\.\./)?[A-Za-z][\w-]*/[\w./-]+\.(?:md|ipynb|pt|svg|png|txt|py))\b"  # a path
)
NOTEBOOK_NUMBER = re.compile(r"\bnotebooks? (\d\d)\b")


@pytest.mark.parametrize("name", NAMES)
def test_what_a_notebook_points_to_is_in_the_bundle(name):
    folder = kit() / "student" / "notebooks"
    text = "\n".join(source(c) for c in student(name)["cells"] if c["cell_type"] == "markdown")
    missing = [
        target
        for pair in LINK.findall(text)
        for target in pair
        if target and not (folder / target).exists() and not (folder.parent / target).exists()
    ]
    numbers = {p.name[:2] for p in folder.glob("*.ipynb")}
    missing += [f"notebook {n}" for n in NOTEBOOK_NUMBER.findall(text) if n not in numbers]
    assert not missing, f"{name} points to what the bundle lacks: {missing}"
