"""Build the instructor kit: student notebooks, slide decks, lesson plans and an answer key.

    bash dev.sh course                      # into build/course/
    python tools/build_course.py --out DIR  # elsewhere

Offline and reproducible: everything comes from the repository and the installed packages
(reveal.js vendored in course/vendor/, MathJax from the jupyter-server-mathjax package).

- ``student/notebooks/``: every notebook with its worked solutions removed (cells tagged
  ``solution``; inside a cell, lines between ``# BEGIN SOLUTION`` and ``# END SOLUTION``
  become ``raise NotImplementedError``), the outputs of the exercise cells cleared,
  everything else kept. ``student/images`` and ``student/checkpoints`` mirror the repository,
  so the notebooks run in place.
  With ``tools/student_bundle.py`` the folder is a self-contained bundle (the transformer_lib
  wheel, pinned runtime requirements, ``start.py``, ``START_HERE.md``), also written as
  ``transformer-series-student.zip``.
- ``slides/NN_name.slides.html``: one reveal.js deck per notebook, from the cells' slide
  metadata (``tools/mark_slides.py`` adds it; notebooks without any are marked on the fly).
- ``instructor/``: the lesson plans of ``course/plans/`` and ``answer_key.md``, made from the
  solution cells and the explanations in ``course/answer_notes.md``.
"""
from __future__ import annotations

import argparse
import ast
import copy
import json
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mark_slides  # noqa: E402
import quizzes  # noqa: E402
import slide_deck  # noqa: E402
import student_bundle  # noqa: E402
from transformer_lib.cli.args import folder_problem  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
COURSE = ROOT / "course"
DEFAULT_OUT = ROOT / "build" / "course"
REVEAL = COURSE / "vendor" / "reveal.js"
TEMPLATES = COURSE / "templates"
MARKER = ".course-kit"
SOLUTION_TAG = "solution"
STUB = "raise NotImplementedError"
MATHJAX_CONFIG = "TeX-AMS-MML_HTMLorMML-full,Safe"
BEGIN = re.compile(r"^(\s*)#+\s*BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*#+\s*END SOLUTION\s*$")
EXERCISE = re.compile(r"(?:^#{2,4}\s*Exercise\s+(\d+)|\*\*Exercise\s+(\d+))", re.M)
# the exercises' introduction tells readers of the full notebook where the solutions are
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
STUDENT_HINT = "The worked solutions are not in this copy: ask your instructor when you are stuck."


class BuildError(RuntimeError):
    """The kit cannot be built from these notebooks; the message says which cell and why."""


def source(cell: dict) -> str:
    return mark_slides.source(cell)


def is_solution(cell: dict) -> bool:
    return SOLUTION_TAG in cell.get("metadata", {}).get("tags", [])


def read_notebook(path: Path) -> dict:
    """A notebook, with slide metadata added by the rules if it has none."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    return nb if mark_slides.is_marked(nb) else mark_slides.mark(nb, path.stem)


def exercises_start(nb: dict) -> int:
    """Index of the first markdown cell with an ``## Exercises`` heading (len(cells) if none)."""
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown" and any(
                h.strip().lower().startswith("exercises")
                for h in mark_slides.headings(source(cell), 2)):
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
    head, tail = (text[:first.start()], text[first.start():]) if first else (text, "")
    paragraphs = []
    for para in head.split("\n\n"):
        sentences = SENTENCE_END.split(para)
        kept = [s for s in sentences if "solution" not in s.lower()]
        if len(kept) < len(sentences):
            para = " ".join(kept + [STUDENT_HINT]).strip()
        paragraphs.append(para)
    return "\n\n".join(paragraphs) + tail


def student_notebook(nb: dict, name: str) -> dict:
    """The student copy: solutions removed, exercise outputs cleared, the rest unchanged."""
    nb = copy.deepcopy(nb)
    start = exercises_start(nb)
    cells, stubs = [], set()
    for i, cell in enumerate(nb["cells"]):
        text = source(cell)
        if cell["cell_type"] == "code" and STUB in text and not is_solution(cell):
            stubs.update(defined_names(text))
        if is_solution(cell):
            missing = [n for n in defined_names(text) if n not in stubs]
            if missing:
                raise BuildError(f"{name}, cell {i}: the solution defines {missing}, but no "
                                 f"earlier stub cell (with `{STUB}`) does; a student copy "
                                 "without this cell would lack them")
            continue
        if cell["cell_type"] == "code":
            try:
                stripped, found = strip_regions(text)
            except BuildError as err:
                raise BuildError(f"{name}, cell {i}: {err}") from None
            if found:
                cell["source"] = stripped
            if found or i >= start:
                cell["outputs"], cell["execution_count"] = [], None
                cell["metadata"].pop("execution", None)
        elif cell["cell_type"] == "markdown" and i >= start:
            cell["source"] = without_solution_hints(text)
        cells.append(cell)
    nb["cells"] = cells
    return nb


# --- the answer key ---------------------------------------------------------------------

@dataclass
class Exercise:
    notebook: str
    number: int
    statement: str
    solution: Optional[str]       # None: an open exercise, answered in the notes only


def solution_code(text: str) -> str:
    """The solution cell without its '# Solution' header and its calls to the checker."""
    lines = [line for line in text.strip("\n").split("\n")
             if line.strip() != "# Solution" and "check_" not in line]
    return "\n".join(lines).strip("\n")


def exercises(nb: dict, name: str) -> List[Exercise]:
    """Every exercise of a notebook, with its statement and worked solution(s)."""
    found: Dict[int, Exercise] = {}
    current = None
    for cell in nb["cells"][exercises_start(nb):]:
        text = source(cell)
        if cell["cell_type"] == "markdown":
            for match in EXERCISE.finditer(text):
                current = int(match.group(1) or match.group(2))
                statement = re.sub(r"^#+\s*", "", text[match.start():].strip())
                found[current] = Exercise(name, current, statement, None)
        elif is_solution(cell):
            if current is None:
                raise BuildError(f"{name}: a solution cell comes before any exercise statement")
            code = solution_code(text)
            ex = found[current]
            ex.solution = code if ex.solution is None else ex.solution + "\n\n" + code
    return [found[k] for k in sorted(found)]


def read_notes(path: Path) -> Dict[Tuple[str, int], str]:
    """``course/answer_notes.md``: a ``## NN Exercise K`` heading, then why the answer is right."""
    notes: Dict[Tuple[str, int], str] = {}
    key = None
    for line in path.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^## (\d\d) Exercise (\d+)\s*$", line)
        if match:
            key = (match.group(1), int(match.group(2)))
            notes[key] = ""
        elif line.startswith("## "):
            raise BuildError(f"{path}: heading {line!r} should read '## NN Exercise K'")
        elif key is not None:
            notes[key] += line + "\n"
    return {k: v.strip() for k, v in notes.items()}


def answer_key(all_exercises: Sequence[Exercise], notes: Dict[Tuple[str, int], str]) -> str:
    keys = {(ex.notebook[:2], ex.number) for ex in all_exercises}
    missing = sorted(keys - set(notes))
    stale = sorted(set(notes) - keys)
    if missing or stale:
        raise BuildError("course/answer_notes.md must explain every exercise and nothing else: "
                         f"missing {missing}, no such exercise {stale}")
    out = ["# Answer key", "",
           "Each exercise of the series: the task, the worked solution from the notebook, "
           "and why it is right. Generated by `bash dev.sh course` from the notebooks' "
           "solution cells and `course/answer_notes.md`.", ""]
    notebook = None
    for ex in all_exercises:
        if ex.notebook != notebook:
            notebook = ex.notebook
            out += [f"## {notebook}", ""]
        out += [f"### {notebook[:2]} · Exercise {ex.number}", "",
                "> " + ex.statement.replace("\n", "\n> "), ""]
        note = notes[(notebook[:2], ex.number)]
        if ex.solution is not None:
            out += ["```python", ex.solution, "```", "", "**Why it is right.** " + note, ""]
        else:
            out += ["*An open exercise: no single solution.*", "",
                    "**What to look for.** " + note, ""]
    return "\n".join(out)


# --- the slides -------------------------------------------------------------------------

def mathjax_dir() -> Path:
    try:
        import jupyter_server_mathjax
    except ImportError:
        raise BuildError("the slides need MathJax from the jupyter-server-mathjax package: "
                         "pip install -c constraints.txt -e '.[dev]'") from None
    return Path(jupyter_server_mathjax.__file__).parent / "static"


def slide_cells(nb: dict, name: Optional[str] = None) -> dict:
    """The deck's notebook: solutions never shown; a figure's long code hidden, its figure kept;
    cut, marked and given speaker notes by ``tools/slide_deck.py``."""
    name = name or slide_deck.deck_name(nb, [p.stem for p in course_notebooks()])
    nb = slide_deck.prepare(nb, name) if name else copy.deepcopy(nb)
    # An explorer's stored widget state would make nbconvert load the widget manager from a
    # CDN; a deck shows a line pointing to the notebook instead (it is live in JupyterLab).
    nb.get("metadata", {}).pop("widgets", None)
    for cell in nb["cells"]:
        meta = cell.setdefault("metadata", {})
        for out in cell.get("outputs", []):
            out.get("data", {}).pop("application/vnd.jupyter.widget-view+json", None)
        if is_solution(cell):
            meta["slideshow"] = {"slide_type": "skip"}
        if (cell["cell_type"] == "code" and mark_slides.has_figure(cell)
                and len(source(cell).splitlines()) > mark_slides.MAX_CODE_LINES // 2):
            meta["transient"] = {"remove_source": True}
    return nb


CSS_COMMENT = re.compile(r"/\*.*?\*/", re.S)
STYLE = re.compile(r"(<style[^>]*>)(.*?)(</style>)", re.S)


def strip_css_comments(html: str) -> str:
    """Drop the comments of the inlined style sheets (JupyterLab's cite web pages there),
    so that the deck holds no address outside the kit."""
    return STYLE.sub(lambda m: m.group(1) + CSS_COMMENT.sub("", m.group(2)) + m.group(3), html)


def slides_exporter():
    from nbconvert import SlidesExporter
    return SlidesExporter(
        extra_template_basedirs=[str(TEMPLATES)], template_name="course_reveal",
        reveal_url_prefix="reveal.js", reveal_theme="white", reveal_transition="none",
        reveal_scroll=False, reveal_number="c/t", reveal_width="1280", reveal_height="720",
        exclude_input_prompt=True, exclude_output_prompt=True,
        mathjax_url=f"mathjax/MathJax.js?config={MATHJAX_CONFIG}")


def build_slides(nbs: Dict[str, dict], out: Path) -> Dict[str, int]:
    import nbformat
    shutil.copytree(REVEAL, out / "reveal.js")
    shutil.copytree(mathjax_dir(), out / "mathjax")
    exporter = slides_exporter()
    counts = {}
    for name, nb in nbs.items():
        deck = slide_cells(nb, name)
        body, _ = exporter.from_notebook_node(
            nbformat.reads(json.dumps(deck), as_version=4),
            resources={"metadata": {"name": name}})
        (out / f"{name}.slides.html").write_text(strip_css_comments(body), encoding="utf-8")
        counts[name] = mark_slides.count_slides(deck)
    return counts


# --- the whole kit ----------------------------------------------------------------------

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

| deck | slides |
|---|---|
{decks}
"""


def write_json(path: Path, nb: dict) -> None:
    path.write_text(mark_slides.dumps(nb), encoding="utf-8")


def course_notebooks() -> list:
    """The notebooks a course teaches: the series, without its appendices (engineering
    material for the curious, with no exercises)."""
    return [p for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")) if "appendix" not in p.stem]


def build_student(nbs: Dict[str, dict], out: Path, log=print) -> Path:
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
    except student_bundle.BundleError as err:
        raise BuildError(str(err)) from None
    try:
        quizzes.write_student(student / "quizzes")    # questions only, before the zip
    except quizzes.QuizError as err:
        raise BuildError(str(err)) from None
    archive = student_bundle.write_zip(student, out / f"{student_bundle.BUNDLE_NAME}.zip")
    log(f"student/: {len(nbs)} notebooks without solutions, with {', '.join(added)}; "
        f"{archive.name} ({archive.stat().st_size / 1e6:.1f} MB)")
    return archive


def build(out: Path = DEFAULT_OUT, log=print) -> Dict[str, int]:
    """Build the kit into ``out`` (replaced); return each deck's number of slides."""
    start = time.perf_counter()
    paths = course_notebooks()
    if not paths:
        raise BuildError(f"no notebooks NN_name.ipynb in {NOTEBOOKS}")
    nbs = {p.stem: read_notebook(p) for p in paths}
    if out.exists():
        if any(out.iterdir()) and not (out / MARKER).exists():
            raise BuildError(f"{out} exists and is not a kit built by this tool (no {MARKER}); "
                             "choose a new or empty folder")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / MARKER).write_text("built by tools/build_course.py; replaced by the next build\n")

    build_student(nbs, out, log)

    counts = build_slides(nbs, out / "slides")
    log("slides/: " + ", ".join(f"{n} {c}" for n, c in counts.items()) + " slides")

    instructor = out / "instructor"
    instructor.mkdir()
    plans = sorted((COURSE / "plans").glob("*.md"))
    for plan in plans:
        shutil.copy2(plan, instructor / plan.name)
    try:       # quizzes with answers, the syllabus, misconceptions and 50-minute lectures
        quizzes.write_instructor(instructor)
    except quizzes.QuizError as err:
        raise BuildError(str(err)) from None
    all_exercises = [ex for name, nb in nbs.items() for ex in exercises(nb, name)]
    key = answer_key(all_exercises, read_notes(COURSE / "answer_notes.md"))
    (instructor / "answer_key.md").write_text(key, encoding="utf-8")
    log(f"instructor/: {len(plans)} lesson plans, syllabus, misconceptions, 50-minute "
        f"lectures, quizzes, answer key with {len(all_exercises)} exercises")
    (out / "README.md").write_text(kit_readme(counts, len(all_exercises)), encoding="utf-8")
    log(f"built {out} in {time.perf_counter() - start:.1f} s")
    return counts


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="the kit's folder (default: build/course), replaced")
    args = parser.parse_args(argv)
    problem = folder_problem("--out", args.out)
    if problem:
        parser.error(problem)
    try:
        build(args.out)
    except BuildError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except OSError as err:                    # the disk filled up, a file vanished, ...
        print(f"error: writing the kit into {args.out} failed: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
