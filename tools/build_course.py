"""Build the instructor kit: student notebooks, slide decks, lesson plans and an answer key.

    bash dev.sh course                            # into build/course/
    python -m tools.build_course --out DIR        # elsewhere (from the repository root)

Offline and reproducible: everything comes from the repository and the installed packages
(reveal.js vendored in course/vendor/, MathJax 3 as the site ships it: tools/mathjax_files.py).
The output folder is replaced only when it is safe (tools/output_folder.py).

- ``student/notebooks/``: every notebook with its worked solutions removed
  (``tools/course_student.py``), the outputs of the exercise cells cleared, everything else
  kept. ``student/images`` and ``student/checkpoints`` mirror the repository, so the
  notebooks run in place. With ``tools/student_bundle.py`` the folder is a self-contained
  bundle (the transformer_lib wheel, pinned runtime requirements, ``start.py``,
  ``START_HERE.md``), also written as ``transformer-series-student.zip``.
- ``slides/NN_name.slides.html``: one reveal.js deck per notebook (``tools/course_slides.py``),
  from the cells' slide metadata (``tools/mark_slides.py`` adds it; notebooks without any are
  marked on the fly).
- ``instructor/``: the lesson plans of ``course/plans/`` and ``answer_key.md``
  (``tools/answer_key.py``), made from the solution cells and the explanations in
  ``course/answer_notes.md``.
- ``handouts/``: a PDF of every deck (a page per slide) and of every student notebook (A4),
  printed offline by headless Chromium (``tools/handouts.py``); ``--no-handouts`` skips them.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import Dict, Optional, Sequence

from tools import grading, handouts, output_folder, quizzes, student_bundle

# the parts of the kit, importable from here as before the split into modules
from tools.answer_key import (  # noqa: F401
    Exercise,
    answer_key,
    exercises,
    read_notes,
    solution_code,
)
from tools.course_slides import (  # noqa: F401
    build_slides,
    slide_cells,
    slides_exporter,
    strip_css_comments,
)
from tools.course_student import (  # noqa: F401
    build_student,
    defined_names,
    exercises_start,
    student_notebook,
    write_json,
)
from tools.kit_base import (  # noqa: F401
    COURSE,
    NOTEBOOKS,
    ROOT,
    BuildError,
    course_notebooks,
    is_solution,
    read_notebook,
    source,
)

DEFAULT_OUT = ROOT / "build" / "course"
MARKER = ".course-kit"


def kit_readme(counts: Dict[str, int], n_exercises: int) -> str:
    decks = "\n".join(f"| `slides/{name}.slides.html` | {n} |" for name, n in counts.items())
    return f"""# Teaching kit

Built by `bash dev.sh course` from the notebooks of the repository; rebuild it after they change.

- `student/notebooks/`: the notebooks without their worked solutions; exercise outputs cleared.
  They run in place (`student/images` and `student/checkpoints` mirror the repository).
  `student/` is the students' bundle, also zipped as `{student_bundle.BUNDLE_NAME}.zip`: hand
  out the zip; students follow its `START_HERE.md` (or run `python start.py`: a venv with the
  pinned runtime and the `transformer_lib` wheel, the check `python -m transformer_lib.doctor`,
  then JupyterLab on the student notebooks). In the repository: `bash dev.sh lab --student`.
  `student/quizzes/`: a concept quiz per notebook, questions only.
- `slides/`: one reveal.js deck per notebook; open a file in a browser, no network needed.
  Arrow keys move, **S** opens the speaker notes, **Esc** the overview, **F** full screen.
- `instructor/`: a 90-minute lesson plan per notebook, `course_2_sessions.md`,
  `course_1_day.md`, and `answer_key.md` ({n_exercises} exercises, each solution with why it is right);
  `syllabus.md`, `misconceptions.md` (what learners wrongly believe, and where the series shows
  otherwise), `lectures_50min.md` (a 50-minute lecture per notebook) and `quizzes/` (with answers).
- `grading/`: the notebooks as an nbgrader course (graded tests with points, hidden tests); its
  `README.md` says how to release, autograde and export the scores.

| deck | slides |
|---|---|
{decks}
"""


def build_instructor(nbs: Dict[str, dict], instructor: Path, log=print) -> int:
    """``instructor/``: the lesson plans, the course pages, the quizzes with answers and the
    answer key; return the number of exercises."""
    instructor.mkdir()
    plans = sorted((COURSE / "plans").glob("*.md"))
    for plan in plans:
        shutil.copy2(plan, instructor / plan.name)
    try:  # quizzes with answers, the syllabus, misconceptions and 50-minute lectures
        quizzes.write_instructor(instructor)
    except quizzes.QuizError as err:
        raise BuildError(str(err)) from None
    all_exercises = [ex for name, nb in nbs.items() for ex in exercises(nb, name)]
    key = answer_key(all_exercises, read_notes(COURSE / "answer_notes.md"))
    (instructor / "answer_key.md").write_text(key, encoding="utf-8")
    log(
        f"instructor/: {len(plans)} lesson plans, syllabus, misconceptions, 50-minute "
        f"lectures, quizzes, answer key with {len(all_exercises)} exercises"
    )
    return len(all_exercises)


def build_handouts(out: Path, names: Sequence[str], log=print) -> None:
    """``handouts/``: the decks and the student copies as PDF; without Chromium, one line."""
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


def build(out: Path = DEFAULT_OUT, log=print, make_handouts: bool = False) -> Dict[str, int]:
    """Build the kit into ``out`` (replaced, when ``tools/output_folder.py`` finds that safe);
    return each deck's number of slides. ``make_handouts``: print the PDF handouts too (the
    command line does, unless ``--no-handouts``: a few minutes on a 2-core CPU)."""
    start = time.perf_counter()
    paths = course_notebooks()
    if not paths:
        raise BuildError(f"no notebooks NN_name.ipynb in {NOTEBOOKS}")
    nbs = {p.stem: read_notebook(p) for p in paths}
    output_folder.replace(
        out, MARKER, "built by python -m tools.build_course; replaced by the next build"
    )
    build_student(nbs, out, log)
    counts = build_slides(nbs, out / "slides")
    log("slides/: " + ", ".join(f"{n} {c}" for n, c in counts.items()) + " slides")
    n_exercises = build_instructor(nbs, out / "instructor", log)
    grading.build(nbs, out / "grading", log)  # the nbgrader course (tools/grading.py)
    if make_handouts:
        build_handouts(out, list(nbs), log)
    (out / "README.md").write_text(kit_readme(counts, n_exercises), encoding="utf-8")
    log(f"built {out} in {time.perf_counter() - start:.1f} s")
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
        "--no-handouts",
        action="store_true",
        help="skip the PDF handouts (handouts/: printed by Chromium, minutes)",
    )
    args = parser.parse_args(argv)
    try:
        output_folder.check(args.out, MARKER)  # before anything is read or built
        build(args.out, make_handouts=not args.no_handouts)
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
