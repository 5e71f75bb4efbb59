"""The students' copy of the kit: every notebook with its worked solutions removed, and the
folder ``student/`` that becomes the students' bundle.

In a notebook's copy, cells tagged ``solution`` are dropped; inside a code cell, the lines
between ``# BEGIN SOLUTION`` and ``# END SOLUTION`` become ``raise NotImplementedError``;
the outputs of the exercise cells are cleared; everything else is kept as it is.
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path
from typing import List, Set, Tuple

from tools import mark_slides, quizzes, student_bundle, student_copy
from tools.kit_base import ROOT, BuildError, is_solution, source

STUB = "raise NotImplementedError"
BEGIN = re.compile(r"^(\s*)#+\s*BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*#+\s*END SOLUTION\s*$")
EXERCISE = re.compile(r"(?:^#{2,4}\s*Exercise\s+(\d+)|\*\*Exercise\s+(\d+))", re.M)
# the exercises' introduction tells readers of the full notebook where the solutions are
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
STUDENT_HINT = "The worked solutions are not in this copy: ask your instructor when you are stuck."


def exercises_start(nb: dict) -> int:
    """Index of the first markdown cell with an ``## Exercises`` heading (len(cells) if none)."""
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown" and any(
            h.strip().lower().startswith("exercises") for h in mark_slides.headings(source(cell), 2)
        ):
            return i
    return len(nb["cells"])


def defined_names(code: str) -> List[str]:
    """Top-level functions and classes a cell defines."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]


def strip_regions(code: str) -> Tuple[str, bool]:
    """Replace each ``# BEGIN SOLUTION`` ... ``# END SOLUTION`` region by the stub."""
    out, inside, found = [], False, False
    for line in code.split("\n"):
        begin = BEGIN.match(line)
        if begin and not inside:
            inside, found = True, True
            out.append(f"{begin.group(1)}{STUB}")
        elif inside and END.match(line):
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise BuildError("a '# BEGIN SOLUTION' has no matching '# END SOLUTION'")
    return "\n".join(out), found


def without_solution_hints(text: str) -> str:
    """The exercises' introduction without its sentences about the (removed) solutions.

    Only the paragraphs before the first exercise statement are touched."""
    first = EXERCISE.search(text)
    head, tail = (text[: first.start()], text[first.start() :]) if first else (text, "")
    paragraphs = []
    for para in head.split("\n\n"):
        sentences = SENTENCE_END.split(para)
        kept = [s for s in sentences if "solution" not in s.lower()]
        if len(kept) < len(sentences):
            para = " ".join(kept + [STUDENT_HINT]).strip()
        paragraphs.append(para)
    return "\n\n".join(paragraphs) + tail


def _check_solution(cell: dict, stubs: Set[str], where: str) -> None:
    """A solution cell may only define what an earlier stub cell defines."""
    missing = [n for n in defined_names(source(cell)) if n not in stubs]
    if missing:
        raise BuildError(
            f"{where}: the solution defines {missing}, but no earlier stub "
            f"cell (with `{STUB}`) does; a student copy without this cell "
            "would lack them"
        )


def _student_code_cell(cell: dict, in_exercises: bool, where: str) -> None:
    """Solution regions stubbed; outputs cleared in the exercises and where a region was."""
    try:
        stripped, found = strip_regions(source(cell))
    except BuildError as err:
        raise BuildError(f"{where}: {err}") from None
    if found:
        cell["source"] = stripped
    if found or in_exercises:
        cell["outputs"], cell["execution_count"] = [], None
        cell["metadata"].pop("execution", None)


def student_notebook(nb: dict, name: str) -> dict:
    """The student copy: solutions removed, exercise outputs cleared, the rest unchanged."""
    nb = student_copy.hide_shown(nb, name, BuildError)  # cells tagged student-hide blanked
    start = exercises_start(nb)
    cells: List[dict] = []
    stubs: Set[str] = set()
    for i, cell in enumerate(nb["cells"]):
        text, where = source(cell), f"{name}, cell {i}"
        if cell["cell_type"] == "code" and STUB in text and not is_solution(cell):
            stubs.update(defined_names(text))
        if is_solution(cell):
            _check_solution(cell, stubs, where)
            continue
        if cell["cell_type"] == "code":
            _student_code_cell(cell, i >= start, where)
        elif cell["cell_type"] == "markdown" and i >= start:
            cell["source"] = without_solution_hints(text)
        cells.append(cell)
    nb["cells"] = cells
    return nb


def write_json(path: Path, nb: dict) -> None:
    path.write_text(mark_slides.dumps(nb), encoding="utf-8")


def build_student(nbs: dict, out: Path, log=print) -> Path:
    """``out/student/``, the students' bundle, and its zip beside it; return the zip's path."""
    student = out / "student"
    (student / "notebooks").mkdir(parents=True)
    for name, nb in nbs.items():
        write_json(student / "notebooks" / f"{name}.ipynb", student_notebook(nb, name))
    shutil.copytree(ROOT / "images", student / "images")
    (student / "checkpoints").mkdir()
    for ckpt in (ROOT / "checkpoints").glob("*.pt"):
        shutil.copy2(ckpt, student / "checkpoints" / ckpt.name)
    try:
        added = student_bundle.complete(student)
        quizzes.write_student(student / "quizzes")  # questions only, before the zip
    except (student_bundle.BundleError, quizzes.QuizError) as err:
        raise BuildError(str(err)) from None
    archive = student_bundle.write_zip(student, out / f"{student_bundle.BUNDLE_NAME}.zip")
    log(
        f"student/: {len(nbs)} notebooks without solutions, with {', '.join(added)}; "
        f"{archive.name} ({archive.stat().st_size / 1e6:.1f} MB)"
    )
    return archive
