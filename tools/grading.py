"""The notebooks as an nbgrader course: solution regions, graded tests with points, hidden tests.

``bash dev.sh course`` calls :func:`build`, which writes ``grading/`` beside the kit:

- ``source/NN_name/NN_name.ipynb``: one assignment per notebook, in nbgrader's "source" form.
  Each exercise's stub cell holds the worked solution between ``### BEGIN SOLUTION`` and
  ``### END SOLUTION`` (an autograded answer cell: ``generate_assignment`` puts the stub back);
  its check cell becomes an autograded test cell worth points, which asserts the project's
  checker (a "not yet" fails the test with the checker's message) and then runs the hidden tests
  of :data:`HIDDEN` between ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS``. The worked
  solution cells are left out.
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
import importlib
import json
import pkgutil
import re
import shutil
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
COURSE_ID = "transformer-series"
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
# what nbgrader's generate_assignment puts in place of a solution region (its default stub)
RELEASE_STUB = ["# YOUR CODE HERE", "raise NotImplementedError()"]
STUB = "raise NotImplementedError"
SOLUTION_TAG = "solution"
EXERCISES = re.compile(r"^##\s+Exercises\b", re.M | re.I)
STATEMENT = re.compile(r"(?:^#{2,4}\s*Exercise\s+(\d+)|\*\*Exercise\s+(\d+))", re.M)
SCHEMA_VERSION = 3
GRADED_NOTE = ("Your answers are graded: each check cell is a test, worth 2 points for a class "
               "and 1 for a function, and the grader runs further tests of its own.")
# the notebooks show the repository's images/ from ../images; an assignment holds its own copy
IMAGE = re.compile(r"\.\./images/([\w.-]+)")

#: Hidden tests, by checker: further cases the grader runs after the checker passed. ``$answer``
#: is the learner's function or class (the checker's first argument), ``$module`` the checker's
#: module. Each case says what it tried, so a failing test tells the instructor why.
HIDDEN: Dict[str, str] = {
    "check_text_to_ids": '''\
from $module import VOCAB as _vocab, reference_encode as _reference
for _sentence, _length in (("The Cat sat", 6), ("a mat", 4), ("dog on the zebra", 9)):
    _got = torch.as_tensor($answer(_sentence, _vocab, _length))
    _want = _reference(_sentence, _vocab, _length)
    assert torch.equal(_got, _want), (
        f"$answer({_sentence!r}, vocab, {_length}) gave {_got.tolist()}, expected "
        f"{_want.tolist()} (words are lower-cased before the look-up)")''',
    "check_one_hot_lookup": '''\
_weight = torch.randn(7, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
_ids = torch.tensor([[6, 0, 3], [3, 3, 1]])                              # (B, L)
_got = $answer(_ids, _weight)
assert isinstance(_got, torch.Tensor) and _got.shape == (2, 3, 3), (
    f"for ids (2, 3) and a (7, 3) float64 weight the result should be (2, 3, 3), got "
    f"{getattr(_got, 'shape', type(_got).__name__)}")
assert torch.allclose(_got.double(), _weight[_ids]), "float64 weights: the rows are not picked"''',
    "check_scaled_embedding": '''\
import math as _math
_module = $answer(12, 25, 3)                                             # pad_id = 3
_ids = torch.tensor([[3, 1, 11, 3]])                                     # (B, L)
_out = _module(_ids)
_table = next(m for m in _module.modules() if isinstance(m, torch.nn.Embedding)).weight
assert _out.shape == (1, 4, 25), f"output shape {tuple(_out.shape)}, expected (1, 4, 25)"
assert torch.allclose(_out, _table[_ids] * _math.sqrt(25)), "d_model = 25: not scaled by 5"
assert _out[0, 0].abs().max() == 0 and _out[0, 3].abs().max() == 0, (
    "with pad_id = 3 the <pad> vectors should be zero")''',
}


class GradingError(RuntimeError):
    """The graded version cannot be built; the message names the notebook and exercise."""


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


def checker_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


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


# --- the answer cell: the stub, with the solution between the markers --------------------

class _Unmatched(Exception):
    """The solution does not have the stub's shape; the answer cell falls back to a comment."""


DEFINES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def first_line(node: ast.stmt) -> int:
    """A statement's first line (0-based), its decorators included."""
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1


def solution_definitions(code: str) -> str:
    """The solution's definitions (functions, classes, imports): its '# Solution' header, its
    calls of the checker and any demonstration after the definitions left out."""
    lines = code.split("\n")
    keep = [line.strip() != "# Solution" for line in lines]
    for node in ast.parse(code).body:
        if not isinstance(node, DEFINES):
            keep[first_line(node):node.end_lineno] = [False] * (node.end_lineno - first_line(node))
    text = "\n".join(line for line, kept in zip(lines, keep) if kept)
    return re.sub(r"\n{4,}", "\n\n\n", text).strip("\n")


def functions(tree: ast.Module) -> Dict[str, ast.stmt]:
    """Top-level functions and classes, and the classes' methods as ``Class.method``."""
    out: Dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, FUNCTIONS + (ast.ClassDef,)):
            out[node.name] = node
        if isinstance(node, ast.ClassDef):
            out.update({f"{node.name}.{item.name}": item for item in node.body
                        if isinstance(item, FUNCTIONS)})
    return out


def raises_stub(node: ast.stmt) -> bool:
    last = node.body[-1] if isinstance(node, FUNCTIONS) else None
    return (isinstance(last, ast.Raise) and last.exc is not None
            and "NotImplementedError" in ast.unparse(last.exc))


def common_prefix(stub: List[ast.stmt], solution: List[ast.stmt]) -> int:
    """How many leading statements the stub's body (its raise aside) and the solution share."""
    n = 0
    while (n < len(stub) - 1 and n < len(solution)
           and ast.dump(stub[n]) == ast.dump(solution[n])):
        n += 1
    return n


def region_start(lines: List[str], fn: ast.stmt, n: int) -> int:
    """The first line of a function's solution region: after the ``n`` statements it shares
    with the stub, with the comments just above the first statement that differs."""
    first = fn.body[n]
    if first.lineno == fn.lineno:
        raise _Unmatched("a one-line function")
    if n:
        start = fn.body[n - 1].end_lineno
        while not lines[start].strip():
            start += 1
        return start
    start = first.lineno - 1
    while start - 1 >= fn.lineno and lines[start - 1].strip().startswith("#"):
        start -= 1
    return start


def solution_regions(stub: str, solution: str) -> List[Tuple[int, int, str]]:
    """(first line, end line, indent) of each region, in order: one per stub function, from
    where the solution's body leaves the stub's to just before the next stub function."""
    stub_fns, sol_fns = functions(ast.parse(stub)), functions(ast.parse(solution))
    wanted = {name: fn for name, fn in stub_fns.items() if raises_stub(fn)}
    if not wanted or any(name not in sol_fns for name in wanted):
        raise _Unmatched("the solution lacks a function of the stub")
    lines = solution.split("\n")
    starts = []
    for name, fn in wanted.items():
        ours = sol_fns[name]
        n = common_prefix(fn.body, ours.body)
        if n >= len(ours.body):
            raise _Unmatched(f"{name}: nothing after the stub's first lines")
        indent = " " * ours.body[n].col_offset
        starts.append((region_start(lines, ours, n), first_line(ours), indent))
    starts.sort()
    regions = []
    for k, (start, _, indent) in enumerate(starts):
        end = starts[k + 1][1] if k + 1 < len(starts) else len(lines)
        while end > start and not lines[end - 1].strip():
            end -= 1
        regions.append((start, end, indent))
    for name, node in sol_fns.items():            # what the stub does not define: hidden
        if name not in stub_fns and not any(s <= first_line(node) and node.end_lineno <= e
                                            for s, e, _ in regions):
            raise _Unmatched(f"{name} is defined outside the solution regions")
    return regions


def replace_regions(lines: List[str], regions, inside: Callable[[int, int, str], List[str]]
                    ) -> str:
    out, done = [], 0
    for start, end, indent in regions:
        out += lines[done:start] + inside(start, end, indent)
        done = end
    return "\n".join(out + lines[done:])


def answer_source(stub: str, solution: str) -> Tuple[str, bool]:
    """The answer cell of nbgrader's source version: the solution, with each part that the
    stub leaves to the learner between ``### BEGIN SOLUTION`` and ``### END SOLUTION``, so that
    ``generate_assignment`` gives back the stub's signatures. Second: whether that worked; if
    not, the stub is shown as a comment above one region holding the whole solution."""
    lines = solution.split("\n")
    try:
        regions = solution_regions(stub, solution)
        marked = replace_regions(lines, regions, lambda s, e, i: [i + BEGIN, *lines[s:e], i + END])
        released = replace_regions(lines, regions,
                                   lambda s, e, i: [i + line for line in RELEASE_STUB])
        ast.parse(marked)
        names = {n.name for n in ast.parse(released).body if isinstance(n, FUNCTIONS + (ast.ClassDef,))}
        stub_names = {n.name for n in ast.parse(stub).body if isinstance(n, FUNCTIONS + (ast.ClassDef,))}
        if not stub_names <= names:
            raise _Unmatched("the released cell would lack a definition of the stub")
        return marked, True
    except (_Unmatched, SyntaxError):
        comment = ["# Write the following (replace the `raise`):"] + [
            f"#     {line}".rstrip() for line in stub.split("\n")]
        return "\n".join(comment + [BEGIN, solution, END]), False


# --- the test cell: the checker as an assertion, then the hidden tests ----------------------

def checker_module(name: str) -> str:
    """The module that defines the checker ``name`` (for the hidden tests' imports)."""
    import transformer_lib.exercises as package
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        if callable(getattr(module, name, None)):
            return getattr(module, name).__module__
    raise GradingError(f"no checker {name} in transformer_lib.exercises")


def test_source(check: str) -> Tuple[str, List[str]]:
    """The test cell: each statement that calls a checker becomes an assertion that fails with
    the checker's feedback (its "not yet" and why), then prints the feedback; the hidden tests
    of those checkers follow. Second: the checkers' names."""
    lines, names, hidden = check.split("\n"), [], []
    for stmt in reversed(ast.parse(check).body):
        calls = [c for c in ast.walk(stmt) if isinstance(c, ast.Call)
                 and checker_name(c).startswith("check_")]
        if not calls:
            continue
        call, indent = calls[0], " " * stmt.col_offset
        lines[first_line(stmt):stmt.end_lineno] = [
            f"{indent}feedback = {ast.get_source_segment(check, call)}",
            f"{indent}assert feedback.passed, str(feedback)",
            f"{indent}print(feedback)"]
        name = checker_name(call)
        names.insert(0, name)
        if name in HIDDEN and call.args:
            hidden.insert(0, string.Template(HIDDEN[name]).substitute(
                answer=ast.get_source_segment(check, call.args[0]), module=checker_module(name)))
    text = "\n".join(lines).strip("\n")
    if hidden:
        text += "\n\n" + "\n".join([BEGIN_HIDDEN, *hidden, END_HIDDEN])
    return text, names


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
    nb = json.loads(json.dumps(nb))
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


def readme(rows: Dict[str, List[Graded]]) -> str:
    table = []
    for name, graded in rows.items():
        for g in graded:
            table.append(f"| `{name}` | {g.number} | `{'`, `'.join(g.names)}` | {g.points} | "
                         f"{'yes' if g.hidden else 'no'} |")
    first = next(iter(rows), "01_embedding")
    return f"""# Grading with nbgrader

An nbgrader course made from the notebooks by `bash dev.sh course` (`tools/grading.py`):
one assignment per notebook, in `source/`. nbgrader is in the project's `grading` extra
(`pip install -c constraints.txt -e ".[grading]"`; `bash dev.sh` installs it).

In each notebook, an exercise's stub cell holds the worked solution between
`### BEGIN SOLUTION` and `### END SOLUTION` (an autograded answer cell), and its check cell is
an autograded test cell: it asserts the exercise's checker, so a "not yet" fails the test with
the checker's message, and then runs hidden tests (`### BEGIN HIDDEN TESTS`) that students do
not see. The worked solution cells are left out. Points: 2 for a class to assemble, 1 for a
function.

From this folder (its `nbgrader_config.py` sets the course and a 900 s cell time-out):

```bash
nbgrader generate_assignment {first}       # release/{first}/: the students' version
# collect each student's notebook as submitted/STUDENT/{first}/{first}.ipynb, then
nbgrader autograde {first}                 # runs it, with the hidden tests put back
nbgrader export                            # grades.csv: every student's score
nbgrader generate_feedback {first}         # feedback/: each student's graded notebook, as HTML
```

Autograding runs the whole notebook (the training notebook trains for about three minutes),
on the machine that runs nbgrader: it needs `transformer_lib` installed there.
`nbgrader formgrader` (in JupyterLab) shows the same as web pages.

| assignment | exercise | defines | points | hidden tests |
|---|---|---|---|---|
{chr(10).join(table)}
"""


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
