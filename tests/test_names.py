"""Names in transformer_lib: no module reaches into another's private names; sibling modules
do not share a root (``decoder``/``decoding`` did); each command line is an entry point
``transformer_lib/<name>.py`` that runs ``cli/<name>_command.py``; ``progress`` means one
thing, the setting that picks how training shows how far it is; and the arguments every
caller passes (``model``, ``tok``, ``src_tok``, ``tgt_tok``, ``args`` ...) are typed."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "transformer_lib"
MODULES = sorted(PACKAGE.rglob("*.py"))
ENTRY_POINTS = ("train", "translate", "corpus", "export")  # python -m transformer_lib.<name>
COMMANDS = ENTRY_POINTS + ("doctor",)  # the doctor is its own module
TYPED = ("model", "tok", "src_tok", "tgt_tok", "tokenizer", "args", "trainer", "settings")


def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def where(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def private_uses(tree: ast.Module) -> list:
    """(line, what) for each underscore name a module takes from another module of the
    package: ``from .x import _y``, or ``something._y`` on anything but ``self``/``cls``
    (``os._exit`` is the standard library's public call; ``_repr_mimebundle_`` and the
    other names ending in ``_`` are protocols, dunders included)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (
            node.level or (node.module or "").startswith("transformer_lib")
        ):
            found += [
                (node.lineno, f"import {a.name}") for a in node.names if a.name.startswith("_")
            ]
        elif (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.endswith("_")
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls", "os"))
        ):
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_private_uses_finds_an_imported_and_an_attribute_private_name():
    tree = ast.parse(
        "from ..search import _check_inputs\nfrom .x import y\n"
        "v = model._cache + self._own + os._exit + w._repr_mimebundle_"
    )
    assert private_uses(tree) == [(1, "import _check_inputs"), (3, "model._cache")]


@pytest.mark.parametrize("path", MODULES, ids=where)
def test_no_module_uses_another_modules_private_names(path):
    assert private_uses(parsed(path)) == [], where(path)


def roots(stem: str) -> set:
    """A module name and what is left of it without a common English ending."""
    return {stem} | {
        stem[: -len(end)]
        for end in ("ings", "ing", "ers", "er", "s", "e")
        if stem.endswith(end) and len(stem) > len(end) + 2
    }


def collisions(names: list) -> list:
    return sorted((a, b) for a in names for b in names if a < b and roots(a) & roots(b))


def test_collisions_finds_the_pairs_that_used_to_collide():
    assert collisions(["decoder", "decoding", "model", "search"]) == [("decoder", "decoding")]
    assert collisions(["tokenizer", "tokenizers", "trainer", "masks"]) == [
        ("tokenizer", "tokenizers")
    ]


@pytest.mark.parametrize("folder", sorted({p.parent for p in MODULES}), ids=where)
def test_sibling_modules_do_not_share_a_root(folder):
    """In one folder, no two modules or packages are the same word with another ending
    (``decoder``/``decoding``); the command names of the top level are exempt (the package
    ``training`` beside the command ``train``)."""
    names = [p.stem for p in folder.glob("*.py") if p.stem != "__init__"]
    names += [p.name for p in folder.iterdir() if (p / "__init__.py").is_file()]
    if folder == PACKAGE:
        names = [n for n in names if n not in COMMANDS]
    assert collisions(names) == [], where(folder)


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_each_entry_point_runs_its_command_module(name):
    """``python -m transformer_lib.<name>`` is a few lines that run ``cli/<name>_command``;
    no module of ``cli/`` is named like an entry point."""
    tree = parsed(PACKAGE / f"{name}.py")
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert f"cli.{name}_command" in imported, imported
    assert (PACKAGE / "cli" / f"{name}_command.py").is_file()
    assert not (PACKAGE / "cli" / f"{name}.py").exists()
    assert len((PACKAGE / f"{name}.py").read_text().splitlines()) <= 20


def progress_names(tree: ast.Module) -> list:
    """(line, kind) of every use of the identifier ``progress``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "progress":
            found.append((node.lineno, "variable"))
        elif isinstance(node, ast.arg) and node.arg == "progress":
            found.append((node.lineno, "parameter"))
        elif isinstance(node, ast.keyword) and node.arg == "progress":
            found.append((node.lineno, "keyword"))
        elif isinstance(node, ast.Attribute) and node.attr == "progress":
            found.append((node.lineno, "attribute"))
        elif (
            isinstance(node, ast.alias) and (node.asname or node.name).split(".")[-1] == "progress"
        ):
            found.append((node.lineno, f"import {node.name}"))
    return sorted(found)


def test_progress_names_finds_a_holder_named_progress():
    tree = ast.parse(
        "progress = {}\ndef run(progress=None): pass\nrun(progress=1)\n"
        "s.progress\nfrom .x import progress"
    )
    assert [kind for _, kind in progress_names(tree)] == [
        "variable",
        "parameter",
        "keyword",
        "attribute",
        "import progress",
    ]


@pytest.mark.parametrize("path", MODULES, ids=where)
def test_progress_is_only_the_training_setting(path):
    """``progress`` is ``TrainSettings.progress`` (True, False or "notebook") wherever it
    appears: the field, ``settings.progress``, ``progress=...``, and the parameter or
    variable holding that value in the module that turns it into a display."""
    allowed = {"keyword", "attribute"}
    if where(path) in ("training/progress_display.py", "training/settings.py"):
        allowed |= {"parameter", "variable"}
    assert [
        (line, kind) for line, kind in progress_names(parsed(path)) if kind not in allowed
    ] == [], where(path)


def untyped(tree: ast.Module) -> list:
    """'Class.function(parameter)' for each public function or method with a parameter in
    ``TYPED`` that has no annotation."""
    found = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef) and not child.name.startswith("_"):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                not child.name.startswith("_") or child.name == "__init__"
            ):
                a = child.args
                found.extend(
                    f"{prefix}{child.name}({p.arg})"
                    for p in a.posonlyargs + a.args + a.kwonlyargs
                    if p.arg in TYPED and p.annotation is None
                )

    visit(tree, "")
    return found


def test_untyped_finds_a_bare_model_parameter():
    tree = ast.parse(
        "def f(model, tok: T, x): pass\nclass C:\n def __init__(self, src_tok): pass\n"
        " def _own(self, args): pass"
    )
    assert untyped(tree) == ["f(model)", "C.__init__(src_tok)"]


@pytest.mark.parametrize("path", [p for p in MODULES if "exercises" not in p.parts], ids=where)
def test_the_arguments_every_caller_passes_are_typed(path):
    """The exercise checkers are exempt: they take whatever a learner wrote."""
    assert untyped(parsed(path)) == [], where(path)
