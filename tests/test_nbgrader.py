"""Grading the students' notebooks with the kit's nbgrader course (tools/grading.py).

Every notebook of the course, end to end: a student's notebook is the bundle's own
``student/notebooks/NN_name.ipynb`` (nbgrader's students' version) with the worked solution
typed into each answer cell except the first, which keeps its ``raise NotImplementedError()``;
``nbgrader autograde`` runs it with the kit's ``grading/nbgrader_config.py`` and must give each
right answer its points and the unanswered one none (partial marks; the totals of the graded
cells, so a notebook whose answers are all right has full marks). The student tags the
unanswered exercise's check cell ``autograde-skip``, which the course must not honour (a check
that does not run would score full marks). A notebook with training runs (the cells the
kit's course tags ``autograde-skip``) is graded whole, in seconds, not the length of its
runs; in the others, to stay fast, the student also tags every lesson cell that no exercise
reads from, directly or through other cells, which the course honours.
A notebook that cannot be graded (nbgrader's metadata gone) is refused with a message naming
it, never scored zero in silence.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import time
from pathlib import Path

import pytest

from kit_build import NOTEBOOKS, ROOT, kit
from tools import grading
from tools.kit_base import course_notebooks, exercises, nbgrader, read_notebook, source

NAMES = [p.stem for p in course_notebooks(NOTEBOOKS)]
SKIP = "autograde-skip"
FULL_GRADING_SECONDS = 120  # one student's notebook, every cell the course runs


def course_copy(tmp_path: Path) -> Path:
    """The kit's nbgrader course, copied (grading changes its database)."""
    course = tmp_path / "grading"
    shutil.copytree(kit() / "grading", course)
    return course


def autograde(course: Path, name: str, student: str) -> dict:
    """``nbgrader autograde NAME --student STUDENT`` in this process; returns nbgrader's result
    (success, log) and each graded cell's (score, max score)."""
    from nbgrader.api import Gradebook
    from nbgrader.converters import Autograde
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.utils import capture_log

    with grading.quiet_nbgrader(course):
        config = grading.load_config(course)
        coursedir = CourseDirectory(config=config)
        coursedir.assignment_id, coursedir.student_id = name, student
        result = capture_log(Autograde(coursedir=coursedir, config=config))
        scores = {}
        if result["success"]:
            with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
                graded = gradebook.find_submission_notebook(name, name, student)
                scores = {g.name: (g.score, g.max_score) for g in graded.grades}
    return {**result, "scores": scores}


def submit(course: Path, name: str, student: str, nb: dict) -> None:
    folder = course / "submitted" / student / name
    folder.mkdir(parents=True)
    (folder / f"{name}.ipynb").write_text(json.dumps(nb), encoding="utf-8")


def tagged(cell: dict) -> None:
    tags = cell["metadata"].get("tags", [])
    cell["metadata"]["tags"] = tags if SKIP in tags else tags + [SKIP]


def names_in(code: str):
    """(the names a cell defines at its top level, the names it reads from earlier cells)."""
    import builtins
    import symtable

    try:
        top = symtable.symtable(code, "cell", "exec")
    except SyntaxError:  # a cell magic: neither
        return set(), set()
    defined = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    read, tables = set(), [top]
    while tables:
        table = tables.pop()
        tables += table.get_children()
        read |= {
            s.get_name()
            for s in table.get_symbols()
            if s.is_referenced() and (s.is_global() or table is top)
        }
    return defined, read - defined - set(dir(builtins))


def cells_the_exercises_need(nb: dict) -> set:
    """The code cells an exercise's answer or check reads from, directly or through other
    cells (by the names they define), the exercise cells and the first code cell."""
    code = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"]
    facts = {i: names_in(source(nb["cells"][i])) for i in code}
    needed = {code[0]} | {i for i in code if nbgrader(nb["cells"][i])}
    wanted = set().union(*(facts[i][1] for i in needed))
    for i in reversed(code):
        if i not in needed and facts[i][0] & wanted:
            needed.add(i)
            wanted |= facts[i][1]
    return needed


def has_long_runs(name: str) -> bool:
    """Whether the notebook tags cells for the grader to skip (its training runs)."""
    cells = read_notebook(NOTEBOOKS / f"{name}.ipynb")["cells"]
    return any(SKIP in c["metadata"].get("tags", []) for c in cells)


def all_answered_but_the_first(name: str, nb: dict) -> dict:
    """Types the worked solution into every answer cell of the student's ``nb`` but the
    first, which keeps its stub, and tags the stub's check autograde-skip; returns the scores
    autograde must give (graded cell -> (score, max score)): full points for each answer, none
    for the stub."""
    found = exercises(read_notebook(NOTEBOOKS / f"{name}.ipynb"), name)
    assert found, f"{name}: no exercise (nbgrader answer and check cells) to grade"
    open_, *answered = found
    for ex in answered:
        nb["cells"][ex.answer_cell]["source"] = ex.solution  # typed in by the student
    tagged(nb["cells"][open_.check_cell])  # must not spare the check of the stub
    want = {f"{name[:2]}-ex{ex.number}-check": (ex.points, ex.points) for ex in answered}
    want[f"{name[:2]}-ex{open_.number}-check"] = (0.0, open_.points)
    return want


@pytest.mark.parametrize("name", [n for n in NAMES if not has_long_runs(n)])
def test_a_bundle_notebook_is_graded_answer_by_answer(tmp_path, name):
    nb = read_notebook(kit() / "student" / "notebooks" / f"{name}.ipynb")
    needed = cells_the_exercises_need(read_notebook(NOTEBOOKS / f"{name}.ipynb"))
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code" and i not in needed:
            tagged(cell)  # what no exercise reads: not graded, skipped to keep the test fast
    want = all_answered_but_the_first(name, nb)
    course = course_copy(tmp_path)
    submit(course, name, "alice", nb)
    start = time.perf_counter()
    result = autograde(course, name, "alice")
    assert result["success"], result.get("error") or result["log"][-3000:]
    assert result["scores"] == want
    total = sum(score for score, _ in want.values())
    print(
        f"{name}: {total:g} of {sum(top for _, top in want.values()):g} points in "
        f"{time.perf_counter() - start:.1f} s"
    )


def test_a_notebook_that_cannot_be_graded_is_refused_with_a_message(tmp_path):
    name = NAMES[0]
    course = course_copy(tmp_path)
    stripped = copy.deepcopy(read_notebook(kit() / "student" / "notebooks" / f"{name}.ipynb"))
    for cell in stripped["cells"]:
        cell["metadata"].pop("nbgrader", None)  # e.g. cells pasted into a new notebook
    submit(course, name, "bob", stripped)
    result = autograde(course, name, "bob")
    assert not result["success"]
    assert (
        f"cannot grade submitted/bob/{name}/{name}.ipynb: it lacks the graded cells"
        in (result["log"])
    )
    assert f"{name[:2]}-ex1-answer" in result["log"] and f"{name[:2]}-ex1-check" in result["log"]


def test_grading_readme_names_only_what_the_kit_holds():
    folder = kit() / "grading"
    readme = (folder / "README.md").read_text(encoding="utf-8")
    code = " ".join(re.findall(r"```.*?```|`[^`\n]+`", readme, re.S))  # commands and names
    named = {
        token.rstrip("/")
        for token in re.findall(r"(?<![\w/.])((?:\.\./)?[\w.*-]+(?:/[\w.*-]+)*/?)", code)
        if ("/" in token or re.search(r"\.(txt|py|db|whl|md)$", token))
        and not re.search(
            r"NN_name|STUDENT|alice|^(downloaded|submitted|autograded|feedback|"
            r"release|source)/|https?:|^\.venv|^[\d.]+$",
            token,
        )
    }
    assert {"requirements.txt", "../student/wheels/transformer_lib-*.whl"} <= named
    missing = [p for p in sorted(named) if not list(folder.glob(p)) and not (kit() / p).exists()]
    assert not missing, f"grading/README.md names what the kit does not hold: {missing}"
    lines = (folder / "requirements.txt").read_text(encoding="utf-8").splitlines()
    assert "-r ../student/requirements.txt" in lines
    assert any(line.startswith("nbgrader==0.9.") for line in lines)
    for name in NAMES:
        for ex in exercises(read_notebook(NOTEBOOKS / f"{name}.ipynb"), name):
            assert f"| `{name}` | {ex.number} | {ex.title} |" in readme


def test_zip_collect_files_each_submission_where_autograde_looks(tmp_path):
    import subprocess
    import sys

    name = NAMES[0]
    course = course_copy(tmp_path)
    archive = course / "downloaded" / name / "archive"
    archive.mkdir(parents=True)
    released = (kit() / "student" / "notebooks" / f"{name}.ipynb").read_bytes()
    for file in (f"alice_{name}.ipynb", f"bob.smith_1234_5678_{name}.ipynb", "notes.ipynb"):
        (archive / file).write_bytes(released)
    with grading.quiet_nbgrader(course):
        done = subprocess.run(
            [sys.executable, "-m", "nbgrader", "zip_collect", name],
            cwd=course,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    for student in ("alice", "bob.smith"):
        assert (course / "submitted" / student / name / f"{name}.ipynb").read_bytes() == released
    assert "notes.ipynb" in done.stderr  # the file that does not fit is named, and left out
    assert sorted(p.name for p in (course / "submitted").iterdir()) == ["alice", "bob.smith"]


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in NAMES if has_long_runs(n)])
def test_grading_a_whole_notebook_takes_no_training_run(tmp_path, name):
    """The notebook graded whole as the course grades it, every answer right but the first,
    which keeps its stub (and the student tags its check autograde-skip): full marks for the
    answers, none for the stub, in well under the time of its training runs (the notebooks
    whose other cells all run in seconds are graded answer by answer above)."""
    course = course_copy(tmp_path)
    nb = read_notebook(kit() / "student" / "notebooks" / f"{name}.ipynb")
    want = all_answered_but_the_first(name, nb)
    submit(course, name, "carol", nb)
    start = time.perf_counter()
    result = autograde(course, name, "carol")
    seconds = time.perf_counter() - start
    assert result["success"], result.get("error") or result["log"][-3000:]
    assert result["scores"] == want
    assert seconds < FULL_GRADING_SECONDS, (
        f"{name}: grading one student took {seconds:.0f} s; tag the long cells {SKIP}"
    )


@pytest.mark.slow
def test_the_grading_readmes_set_up_runs_from_the_kit_alone(tmp_path):
    """The set-up block of grading/README.md, line by line, in a copy of the kit: pip finds
    everything in the kit (the packages it does not ship come from this environment, through
    a view of its site-packages, and no index is asked)."""
    import os
    import subprocess
    import sys

    from test_student_bundle import site_packages_without_transformer_lib

    copy = tmp_path / "kit"
    shutil.copytree(kit(), copy, ignore=shutil.ignore_patterns("instructor", "slides", "*.zip"))
    folder = copy / "grading"
    readme = (folder / "README.md").read_text(encoding="utf-8")
    block = readme.split("## 1. Set up")[1].split("```bash")[1].split("```")[0]
    lines = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert lines[0] == "python3 -m venv .venv" and lines[1] == "source .venv/bin/activate"
    raw = block.strip().splitlines()  # the CPU build of the pinned torch, before the rest
    cpu = next(i for i, line in enumerate(raw) if "whl/cpu" in line)
    assert cpu < next(i for i, line in enumerate(raw) if "requirements.txt" in line)
    pins = (ROOT / "constraints.txt").read_text().splitlines()
    pin = next(p.strip() for p in pins if p.startswith("torch=="))
    assert raw[cpu].endswith(pin), (raw[cpu], pin)
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(copy / "student" / "wheels"))
    # its first line, without the venv's own pip and setuptools: they come from the view
    done = subprocess.run([sys.executable, "-m", "venv", "--without-pip", ".venv"], cwd=folder)
    assert done.returncode == 0
    site = next((folder / ".venv").glob("lib/python3*/site-packages"))
    (site / "outside.pth").write_text(str(site_packages_without_transformer_lib(tmp_path)) + "\n")
    script = "\n".join(
        [
            "set -e",
            *lines[1:],
            "python -m nbgrader --version",
            "python -c 'import transformer_lib.exercises'",
        ]
    )
    done = subprocess.run(
        ["bash", "-c", script], cwd=folder, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (site / "transformer_lib").is_dir() and "0.9.6" in done.stdout
