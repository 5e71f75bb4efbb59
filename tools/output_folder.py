"""The one safe way for a builder to (re)make its output folder (the site, the course kit).

A build replaces its folder, so the folder is checked before anything is deleted: it is
refused when it is ``/``, the repository or a folder holding it, a folder of the sources
(``notebooks/``, ``tools/``, ...) or inside one, a file, or a non-empty folder that no build
of the same kind wrote (the build leaves a marker file in the folder it makes). A folder that
cannot be made (its parent is a file, or not writable) is refused too, before the build
starts.

    check(out, ".series-site")            # ValueError naming --out, or nothing
    replace(out, ".series-site", "written by python -m tools.site.build")   # emptied, marked
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
# the repository's own folders: no build writes into them (build/ is where builds go)
SOURCES = (
    ".ci",
    ".git",
    ".venv",
    "benchmarks",
    "checkpoints",
    "course",
    "images",
    "notebooks",
    "tests",
    "tools",
    "transformer_lib",
)


class OutputFolderError(ValueError):
    """The folder cannot be a build's output; the message names the flag and says why."""


def _place_problem(out: Path, root: Path) -> Optional[str]:
    """Why ``out`` (resolved) may never be replaced: the file system's root, the repository
    or a folder above it, or a folder of the sources."""
    if out == Path(out.anchor):
        return "is the root of the file system"
    if out == root or out in root.parents:
        return f"holds the repository {root}; replacing it would delete the sources"
    if root in out.parents:
        top = out.relative_to(root).parts[0]
        if top in SOURCES:
            return f"is inside the sources ({top}/ of the repository)"
    return None


def _creation_problem(out: Path) -> Optional[str]:
    """Why a new folder ``out`` cannot be made, from its nearest existing parent."""
    parent = next(p for p in out.absolute().parents if p.exists())
    if not parent.is_dir():
        return f"{parent} is a file, not a folder"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{parent} is not writable"
    return None


def check(out: Path, marker: str, flag: str = "--out", root: Path = ROOT) -> None:
    """Raise ``OutputFolderError`` if the build may not replace ``out``; change nothing."""
    problem = _place_problem(out.resolve(), root.resolve())
    if problem:
        raise OutputFolderError(
            f"{flag}: {out} {problem}; give a folder of its own, such as build/NAME"
        )
    if not out.exists():
        reason = _creation_problem(out)
        if reason:
            raise OutputFolderError(f"{flag}: cannot create {out}: {reason}")
    elif not out.is_dir():
        raise OutputFolderError(f"{flag}: {out} is a file, not a folder; give a folder")
    elif any(out.iterdir()) and not (out / marker).is_file():
        raise OutputFolderError(
            f"{flag}: {out} is a non-empty folder that no earlier build "
            f"wrote (no {marker} file); give an empty or new folder"
        )


def replace(out: Path, marker: str, note: str, flag: str = "--out", root: Path = ROOT) -> Path:
    """``out`` emptied (checked by ``check`` first) and made anew, holding only the marker
    file (whose text is ``note``); returns ``out``."""
    check(out, marker, flag, root)
    try:
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
    except OSError as e:
        raise OutputFolderError(f"{flag}: cannot create {out} ({e.strerror})") from None
    (out / marker).write_text(note.rstrip("\n") + "\n", encoding="utf-8")
    return out
