"""The instructor kit of ``bash dev.sh course`` (tools/build_course.py) and the slide marking
(tools/mark_slides.py): the kit builds into its parts; the instructor folder holds the full
notebooks the plans refer to; the answer key gives every exercise its worked solution and why
it is right; a notebook nbgrader could not read stops the build with one line naming the
cell; the output folder is replaced only when that is safe; marking is idempotent and touches
nothing but the slide metadata.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from kit_build import NOTEBOOKS, build_log, kit
from tools import answer_key, build_course, mark_slides
from tools.kit_base import Exercise, course_notebooks, exercises, read_notebook
from tools.output_folder import OutputFolderError

ROOT = Path(__file__).resolve().parent.parent
NAMES = [p.stem for p in course_notebooks(NOTEBOOKS)]


# --- the build ------------------------------------------------------------------------------


def test_kit_has_its_parts():
    out = kit()
    assert sorted(p.stem for p in (out / "grading" / "source").iterdir()) == NAMES
    assert sorted(p.name for p in (out / "slides").glob("*.slides.html")) == [
        f"{n}.slides.html" for n in NAMES
    ]
    plans = {p.name for p in (out / "instructor").glob("*.md")}
    assert {f"{n}.md" for n in NAMES} | {
        "course_2_sessions.md",
        "course_1_day.md",
        "answer_key.md",
    } <= plans
    for name in NAMES:
        student = (out / "student" / "quizzes" / f"{name}.md").read_text(encoding="utf-8")
        teacher = (out / "instructor" / "quizzes" / f"{name}.md").read_text(encoding="utf-8")
        assert "**Answer:**" in teacher and "**Answer:**" not in student, name
    with zipfile.ZipFile(out / "transformer-series-student.zip") as z:
        assert any(n.endswith("notebooks/03_attention.ipynb") for n in z.namelist())
    assert not (out / "grading" / "release").exists()  # the bundle's notebooks are those
    readme = (out / "README.md").read_text(encoding="utf-8")  # built without handouts here
    assert not (out / "handouts").exists() and "No `handouts/` in this kit" in readme
    assert "- `handouts/`: each deck" in build_course.kit_readme({}, 0, handouts_made=True)
    print(build_log().strip().splitlines()[-1])  # "built ... in N s (M MB)"


def test_the_instructor_folder_holds_the_full_notebooks_the_plans_run():
    folder = kit() / "instructor"
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        assert (folder / "notebooks" / path.name).read_bytes() == path.read_bytes(), path.name
    for name in NAMES:  # worked solutions and outputs, as the plans say
        nb = read_notebook(folder / "notebooks" / f"{name}.ipynb")
        assert any(c.get("outputs") for c in nb["cells"]), name
    assert (folder / "images" / "transformer_architecture.svg").is_file()
    assert (folder / "checkpoints" / "dates.pt").is_file()  # ../checkpoints of the notebooks


def test_every_file_a_plan_names_is_in_the_kit():
    """The plans are read in ``instructor/``: what they name there, in the kit or in the
    students' bundle exists (the issue's "run notebooks/03_attention.ipynb" named a file the
    kit did not hold)."""
    out = kit()
    places = (out / "instructor", out, out / "student")
    for plan in sorted((out / "instructor").glob("*.md")):
        text = plan.read_text(encoding="utf-8")
        named = re.findall(r"`([\w./-]+\.(?:ipynb|html|md|zip|py))`", text)
        missing = [n for n in named if "NN" not in n and not any((p / n).exists() for p in places)]
        assert not missing, f"{plan.name} names what the kit lacks: {missing}"


def test_the_answer_key_gives_every_exercise_its_solution_and_reason():
    key = (kit() / "instructor" / "answer_key.md").read_text(encoding="utf-8")
    for name in NAMES:
        for ex in exercises(read_notebook(NOTEBOOKS / f"{name}.ipynb"), name):
            heading = f"### {name[:2]} · Exercise {ex.number} — {ex.title} ({ex.points:g} points)"
            assert heading in key
            entry = key.split(heading)[1].split("\n### ")[0]
            assert ex.solution.strip() in entry and "**Why it is right.** " in entry
            assert "BEGIN SOLUTION" not in entry


def test_answer_notes_must_explain_every_exercise_by_its_title(tmp_path):
    found = [
        Exercise("03_x", 1, "a mask", "", 0, 1, 2, 1.0, "def f(): ..."),
        Exercise("03_x", 2, "a module", "", 3, 4, 5, 2.0, "class M: ..."),
    ]
    notes = tmp_path / "notes.md"
    notes.write_text(
        "# Notes\n\n## 03 Exercise 1 — a mask\nWhy.\n\n## 03 Exercise 3 — gone\nOld.\n",
        encoding="utf-8",
    )
    problems = answer_key.notes_problems(found, answer_key.read_notes(notes))
    assert problems == [
        "no note for 03 Exercise 2 — a module",
        "a note for 03 Exercise 3, which does not exist",
    ]
    notes.write_text("## 03 Exercise 1 — another title\nWhy.\n", encoding="utf-8")
    assert (
        "is titled 'another title'"
        in answer_key.notes_problems(found[:1], answer_key.read_notes(notes))[0]
    )


def broken(tmp_path: Path, change) -> Path:
    """A copy of the notebooks with one of them changed by ``change(nb)``."""
    folder = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS, folder)
    path = folder / f"{NAMES[0]}.ipynb"
    nb = read_notebook(path)
    change(nb)
    path.write_text(json.dumps(nb), encoding="utf-8")
    return folder


def marker_in_prose(nb: dict) -> None:
    cell = next(c for c in nb["cells"] if c["cell_type"] == "markdown")
    cell["source"] = "Write it between `### BEGIN SOLUTION` and the end."


def check_without_answer(nb: dict) -> None:
    answer = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("solution"))
    nb["cells"].remove(answer)


@pytest.mark.parametrize(
    "change, message",
    [
        (marker_in_prose, "holds 'BEGIN SOLUTION' but is no answer or check cell"),
        (check_without_answer, "exercise 1: needs an answer cell and, after it, a check cell"),
    ],
)
def test_a_notebook_nbgrader_cannot_read_stops_the_build_in_one_line(
    tmp_path, capsys, change, message
):
    folder = broken(tmp_path, change)
    assert (
        build_course.main(
            ["--out", str(tmp_path / "kit"), "--no-handouts", "--notebooks", str(folder)]
        )
        == 1
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {NAMES[0]}") and message in err[0]


def test_build_refuses_to_replace_a_folder_it_did_not_make(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(OutputFolderError, match="no earlier build wrote \\(no .course-kit file\\)"):
        build_course.build(tmp_path, log=lambda *args: None)
    assert (tmp_path / "precious.txt").read_text() == "keep me"


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda tmp: tmp / "file", "--out: {out} is a file, not a folder; give a folder"),
        (
            lambda tmp: tmp / "file" / "sub",
            "--out: cannot create {out}: {tmp}/file is a file, not a folder",
        ),
        (lambda tmp: ROOT, "--out: {out} holds the repository {out}; replacing it would delete"),
        (lambda tmp: ROOT / "notebooks", "--out: {out} is inside the sources (notebooks/ of the"),
    ],
)
def test_an_unsafe_kit_folder_is_one_usage_line(tmp_path, capsys, make, message):
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(SystemExit) as e:
        build_course.main(["--out", str(make(tmp_path))])
    err = capsys.readouterr().err.strip().splitlines()
    message = message.format(out=make(tmp_path), tmp=tmp_path)
    assert e.value.code == 2 and message in err[-1] and ": error: --out: " in err[-1]


# --- the slide marking ----------------------------------------------------------------------


def without_slideshow(nb: dict) -> dict:
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:
        cell.get("metadata", {}).pop("slideshow", None)
    return nb


@pytest.mark.parametrize("name", NAMES)
def test_mark_slides_is_idempotent_and_changes_only_slide_metadata(name):
    nb = read_notebook(NOTEBOOKS / f"{name}.ipynb")
    overrides = mark_slides.load_overrides()
    once = mark_slides.mark(nb, name, overrides)
    twice = mark_slides.mark(once, name, overrides)
    assert mark_slides.dumps(once) == mark_slides.dumps(twice)
    assert without_slideshow(once) == without_slideshow(nb)
    types = [c["metadata"]["slideshow"]["slide_type"] for c in once["cells"]]
    assert set(types) <= set(mark_slides.SLIDE_TYPES) and types[0] == "slide"
    for cell, kind in zip(once["cells"], types):
        if cell["cell_type"] == "code" and cell["metadata"].get("nbgrader"):
            assert kind == "skip", f"{name}: an exercise cell is on a slide"
    assert mark_slides.unmatched_overrides(nb, overrides.get(name, ())) == [], (
        f"course/slide_overrides.json: overrides of {name} that match no cell"
    )


def test_bad_override_is_refused(tmp_path):
    bad = tmp_path / "overrides.json"
    bad.write_text(json.dumps({"01_embedding": [{"starts_with": "## 1", "slide_type": "big"}]}))
    with pytest.raises(ValueError, match="slide_type one of"):
        mark_slides.load_overrides(bad)


def test_jupyterlab_rise_is_installed_for_dev_sh_lab():
    import sys
    from importlib.metadata import version

    assert version("jupyterlab_rise")
    extension = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "jupyterlab-rise"
    assert (extension / "package.json").is_file(), "JupyterLab would not offer RISE"
