"""Build the instructor kit: the students' bundle, slide decks, lesson plans, the nbgrader course.

    bash dev.sh course                            # into build/course/
    python -m tools.build_course --out DIR        # elsewhere (from the repository root)

Offline and reproducible: everything comes from the repository and the installed packages
(reveal.js vendored in course/vendor/, MathJax 3 as the site ships it: tools/mathjax_files.py).
The output folder is replaced only when it is safe (tools/output_folder.py).

- ``grading/``: the notebooks as an nbgrader course (``tools/grading.py``); its
  ``nbgrader generate_assignment`` makes the one students' version of every notebook.
- ``student/``: the students' bundle (``tools/student_bundle.py``): ``notebooks/`` holds
  exactly nbgrader's students' version, with the images, the shipped checkpoints, the
  ``transformer_lib`` wheel, pinned requirements, ``start.py`` and ``START_HERE.md``, and the
  quizzes without answers; also zipped as ``transformer-series-student.zip``.
- ``slides/NN_name.slides.html``: one reveal.js deck per notebook, made from the students'
  version (``tools/course_slides.py``).
- ``instructor/``: the lesson plans, quizzes with answers, the answer key and
  ``notebooks/``, the full notebooks with their outputs, which the plans refer to.
- ``handouts/``: a PDF of every deck (a page per slide) and of every students' notebook (A4),
  printed offline by headless Chromium (``tools/handouts.py``); ``--no-handouts`` skips them.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import Dict, Optional, Sequence

from tools import course_slides, grading, handouts, output_folder, quizzes, student_bundle
from tools.answer_key import answer_key
from tools.kit_base import (
    copy_benchmark_files,
    COURSE,
    NOTEBOOKS,
    ROOT,
    BuildError,
    appendices,
    course_notebooks,
    exercises,
    read_notebook,
)

DEFAULT_OUT = ROOT / "build" / "course"
MARKER = ".course-kit"


def kit_readme(counts: Dict[str, int], n_exercises: int, handouts_made: bool = True) -> str:
    decks = "\n".join(f"| `slides/{name}.slides.html` | {n} |" for name, n in counts.items())
    pdfs = (
        "`handouts/`: each deck (a page per slide) and each students' notebook as a PDF."
        if handouts_made
        else "No `handouts/` in this kit: it was built without them (`--no-handouts`, or no "
        "Chromium);\n  `bash dev.sh course` with Chromium installed prints them."
    )
    return f"""# Teaching kit

Built by `bash dev.sh course` from the notebooks of the repository; rebuild it after they change.

- `student/`: the students' bundle, also zipped as `{student_bundle.BUNDLE_NAME}.zip`: hand out
  the zip. Its `notebooks/` are nbgrader's students' version (the exercises' answers replaced by
  `raise NotImplementedError()`, the hidden tests removed, the lesson's outputs kept). Students
  follow `START_HERE.md` (or run `python3 start.py`, Windows `py start.py`: a venv with the
  pinned runtime and the `transformer_lib` wheel, the check `python -m transformer_lib.doctor`,
  then JupyterLab on the notebooks). `student/quizzes/`: a concept quiz per notebook, questions
  only.
- `slides/`: one reveal.js deck per notebook, made from the students' version; open a file in
  a browser, no network needed. Arrow keys move, **S** opens the speaker notes, **Esc** the
  overview, **F** full screen.
- `instructor/`: a 90-minute lesson plan per notebook, `course_2_sessions.md`,
  `course_1_day.md`, `answer_key.md` ({n_exercises} exercises, each solution with why it is
  right), `syllabus.md`, `misconceptions.md`, `lectures_50min.md`, `quizzes/` (with answers)
  and `notebooks/`: the full notebooks, worked solutions and outputs included, that the plans
  refer to (they run in place, beside `images/`, `checkpoints/` and `benchmarks/`). Run them
  in the students' environment: after `python3 start.py` in `student/`, start
  `student/.venv/bin/jupyter lab instructor/notebooks` from this folder (Windows:
  `student\\.venv\\Scripts\\jupyter lab instructor\\notebooks`).
- `grading/`: the nbgrader course the students' version comes from; its `README.md` says how
  to set it up from this kit, collect the submissions, autograde them and export the scores.
- {pdfs}

| deck | slides |
|---|---|
{decks}
"""


def build_instructor(
    nbs: Dict[str, dict], files: Sequence[Path], instructor: Path, log=print
) -> int:
    """``instructor/``: plans, course pages, quizzes with answers, the answer key and the
    full notebooks; returns the number of exercises."""
    instructor.mkdir()
    plans = sorted((COURSE / "plans").glob("*.md"))
    for plan in plans:
        shutil.copy2(plan, instructor / plan.name)
    try:
        quizzes.write_instructor(instructor)
    except quizzes.QuizError as err:
        raise BuildError(str(err)) from None
    found = [ex for name, nb in nbs.items() for ex in exercises(nb, name)]
    key = answer_key(found, COURSE / "answer_notes.md")
    (instructor / "answer_key.md").write_text(key, encoding="utf-8")
    (instructor / "notebooks").mkdir()
    for path in files:
        shutil.copy2(path, instructor / "notebooks" / path.name)
    shutil.copytree(ROOT / "images", instructor / "images")
    shutil.copytree(ROOT / "checkpoints", instructor / "checkpoints")
    copy_benchmark_files(instructor)
    log(
        f"instructor/: {len(plans)} lesson plans, quizzes, answer key with {len(found)} "
        "exercises, the full notebooks"
    )
    return len(found)


def build_handouts(out: Path, names: Sequence[str], log=print) -> None:
    """``handouts/``: the decks and the students' notebooks as PDF; without Chromium, one line."""
    try:
        handouts.write_handouts(
            out / "handouts",
            decks=[out / "slides" / f"{n}.slides.html" for n in names],
            notebooks=[out / "student" / "notebooks" / f"{n}.ipynb" for n in names],
            log=log,
        )
    except handouts.NoBrowser as err:
        log(f"handouts/: not made: {err}")
    except handouts.HandoutError as err:
        raise BuildError(str(err)) from None


def build(
    out: Path = DEFAULT_OUT, log=print, make_handouts: bool = False, notebooks: Path = NOTEBOOKS
) -> Dict[str, int]:
    """Build the kit into ``out`` (replaced, when ``tools/output_folder.py`` finds that safe)
    from the notebooks in ``notebooks``; return each deck's number of slides.
    ``make_handouts``: print the PDF handouts too."""
    start = time.perf_counter()
    paths = course_notebooks(notebooks)
    if not paths:
        raise BuildError(f"no notebooks NN_name.ipynb in {notebooks}")
    nbs = {p.stem: read_notebook(p) for p in paths}
    output_folder.replace(
        out, MARKER, "built by python -m tools.build_course; replaced by the next build"
    )
    released = grading.build(nbs, out / "grading", log)
    student = out / "student"
    try:
        student_bundle.build(student, released, appendices(notebooks))
        quizzes.write_student(student / "quizzes")
    except (student_bundle.BundleError, quizzes.QuizError) as err:
        raise BuildError(str(err)) from None
    shutil.rmtree(out / "grading" / "release")  # the bundle's notebooks/ are those files
    archive = student_bundle.write_zip(student, out / f"{student_bundle.BUNDLE_NAME}.zip")
    log(
        f"student/: nbgrader's students' version of {len(nbs)} notebooks; {archive.name} "
        f"({archive.stat().st_size / 1e6:.1f} MB)"
    )
    students = {n: read_notebook(student / "notebooks" / f"{n}.ipynb") for n in nbs}
    counts = course_slides.build_slides(students, out / "slides")
    log("slides/: " + ", ".join(f"{n} {c}" for n, c in counts.items()) + " slides")
    n_exercises = build_instructor(nbs, paths + appendices(notebooks), out / "instructor", log)
    if make_handouts:
        build_handouts(out, list(nbs), log)
    made = (out / "handouts").is_dir()
    (out / "README.md").write_text(kit_readme(counts, n_exercises, made), encoding="utf-8")
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    log(f"built {out} in {time.perf_counter() - start:.1f} s ({size / 1e6:.0f} MB)")
    return counts


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.build_course", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="the kit's folder (default: build/course), replaced",
    )
    parser.add_argument(
        "--notebooks",
        type=Path,
        default=NOTEBOOKS,
        help="the folder of the notebooks NN_name.ipynb (default: notebooks/)",
    )
    parser.add_argument(
        "--no-handouts",
        action="store_true",
        help="skip the PDF handouts (handouts/: printed by Chromium, minutes)",
    )
    args = parser.parse_args(argv)
    try:
        output_folder.check(args.out, MARKER)  # before anything is read or built
        build(args.out, make_handouts=not args.no_handouts, notebooks=args.notebooks)
    except output_folder.OutputFolderError as err:
        parser.error(str(err))
    except BuildError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except OSError as err:  # the disk filled up, a file vanished, ...
        print(f"error: writing the kit into {args.out} failed: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
