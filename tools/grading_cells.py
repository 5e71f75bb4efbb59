"""How an exercise's cells become nbgrader's: the answer cell and the autograded test cell.

- :func:`answer_source`: the worked solution in the stub's shape, each part that the stub leaves
  to the learner between ``### BEGIN SOLUTION`` and ``### END SOLUTION``, so that nbgrader's
  ``generate_assignment`` gives the stub back (its signatures, its ``super().__init__()``).
- :func:`test_source`: the check cell as a test: the checker's feedback asserted (a "not yet"
  fails the test with the checker's message), then the hidden tests of ``grading_hidden``.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import string
from typing import Callable, Dict, List, Tuple

from tools.grading_hidden import HIDDEN
from tools.kit_base import BuildError

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
# what nbgrader's generate_assignment puts in place of a solution region (its default stub)
RELEASE_STUB = ["# YOUR CODE HERE", "raise NotImplementedError()"]


class GradingError(BuildError):
    """The graded version cannot be built; the message names the notebook and exercise (a
    ``BuildError``: the kit's command line prints it as one line)."""


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
            keep[first_line(node) : node.end_lineno] = [False] * (
                node.end_lineno - first_line(node)
            )
    text = "\n".join(line for line, kept in zip(lines, keep) if kept)
    return re.sub(r"\n{4,}", "\n\n\n", text).strip("\n")


def functions(tree: ast.Module) -> Dict[str, ast.stmt]:
    """Top-level functions and classes, and the classes' methods as ``Class.method``."""
    out: Dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, FUNCTIONS + (ast.ClassDef,)):
            out[node.name] = node
        if isinstance(node, ast.ClassDef):
            out.update(
                {
                    f"{node.name}.{item.name}": item
                    for item in node.body
                    if isinstance(item, FUNCTIONS)
                }
            )
    return out


def raises_stub(node: ast.stmt) -> bool:
    last = node.body[-1] if isinstance(node, FUNCTIONS) else None
    return (
        isinstance(last, ast.Raise)
        and last.exc is not None
        and "NotImplementedError" in ast.unparse(last.exc)
    )


def common_prefix(stub: List[ast.stmt], solution: List[ast.stmt]) -> int:
    """How many leading statements the stub's body (its raise aside) and the solution share."""
    n = 0
    while n < len(stub) - 1 and n < len(solution) and ast.dump(stub[n]) == ast.dump(solution[n]):
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
    for name, node in sol_fns.items():  # what the stub does not define: hidden
        if name not in stub_fns and not any(
            s <= first_line(node) and node.end_lineno <= e for s, e, _ in regions
        ):
            raise _Unmatched(f"{name} is defined outside the solution regions")
    return regions


def replace_regions(lines: List[str], regions, inside: Callable[[int, int, str], List[str]]) -> str:
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
        released = replace_regions(
            lines, regions, lambda s, e, i: [i + line for line in RELEASE_STUB]
        )
        ast.parse(marked)
        names = {
            n.name for n in ast.parse(released).body if isinstance(n, FUNCTIONS + (ast.ClassDef,))
        }
        stub_names = {
            n.name for n in ast.parse(stub).body if isinstance(n, FUNCTIONS + (ast.ClassDef,))
        }
        if not stub_names <= names:
            raise _Unmatched("the released cell would lack a definition of the stub")
        return marked, True
    except (_Unmatched, SyntaxError):
        comment = ["# Write the following (replace the `raise`):"] + [
            f"#     {line}".rstrip() for line in stub.split("\n")
        ]
        return "\n".join(comment + [BEGIN, solution, END]), False


# --- the test cell: the checker as an assertion, then the hidden tests ----------------------


def checker_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


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
        calls = [
            c
            for c in ast.walk(stmt)
            if isinstance(c, ast.Call) and checker_name(c).startswith("check_")
        ]
        if not calls:
            continue
        call, indent = calls[0], " " * stmt.col_offset
        lines[first_line(stmt) : stmt.end_lineno] = [
            f"{indent}feedback = {ast.get_source_segment(check, call)}",
            f"{indent}assert feedback.passed, str(feedback)",
            f"{indent}print(feedback)",
        ]
        name = checker_name(call)
        names.insert(0, name)
        if name in HIDDEN and call.args:
            hidden.insert(
                0,
                string.Template(HIDDEN[name]).substitute(
                    answer=ast.get_source_segment(check, call.args[0]), module=checker_module(name)
                ),
            )
    text = "\n".join(lines).strip("\n")
    if hidden:
        text += "\n\n" + "\n".join([BEGIN_HIDDEN, *hidden, END_HIDDEN])
    return text, names
