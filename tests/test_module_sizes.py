"""The house sizes: a module of the package or of the builders in tools/ holds one concept in
at most 250 lines, a function (docstring included) at most 40. The exercise checkers are not
counted: they hold one checker per exercise of a notebook."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "transformer_lib"
TOOLS = ROOT / "tools"
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 250, 40
# each folder, and a count its modules exceed (a wrong path finds none)
FOLDERS = {"transformer_lib": (PACKAGE, 50), "tools": (TOOLS, 20)}


def modules(folder: Path = PACKAGE):
    return [p for p in sorted(folder.rglob("*.py")) if "exercises" not in p.parts]


def long_functions(source: str, limit: int):
    """(name, first line, lines) of every function or method longer than ``limit`` lines."""
    return [
        (node.name, node.lineno, node.end_lineno - node.lineno + 1)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > limit
    ]


def test_the_counter_finds_a_long_function_and_skips_a_short_one():
    body = "\n".join(f"        x{i} = {i}" for i in range(41))
    source = f"def short():\n    return 1\n\n\nclass A:\n    def long(self):\n{body}\n"
    assert long_functions(source, 40) == [("long", 6, 42)]


def test_the_tools_count_includes_the_site_builder():
    found = {p.relative_to(ROOT).as_posix() for p in modules(TOOLS)}
    assert {"tools/mark_slides.py", "tools/slide_rules.py", "tools/site/build.py"} <= found


@pytest.mark.parametrize("folder", sorted(FOLDERS))
def test_modules_stay_small(folder):
    path, more_than = FOLDERS[folder]
    sizes = {p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines()) for p in modules(path)}
    assert len(sizes) > more_than
    assert {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES} == {}


@pytest.mark.parametrize("folder", sorted(FOLDERS))
def test_functions_stay_short(folder):
    path, _ = FOLDERS[folder]
    found = {
        p.relative_to(ROOT).as_posix(): long_functions(p.read_text(), MAX_FUNCTION_LINES)
        for p in modules(path)
    }
    assert {name: f for name, f in found.items() if f} == {}
