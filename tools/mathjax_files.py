"""The one MathJax of the series' builders: MathJax 3 from the pip package
django-static-mathjax (pinned in constraints.txt; no Django needed, only its files).

Both the offline site (``tools/site``) and the slide decks (``tools/course_slides.py``) ship
the same single file, ``tex-svg-full.js``: TeX input with every extension built in (nothing
is loaded later) and SVG output (no web fonts to load), so a page typesets its formulas from
the file system with no network. Its licence travels with it.

    version = mathjax_files.copy_into(out / "static" / "mathjax")   # the .js and LICENSE
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

FILE = "tex-svg-full.js"
INSTALL_HINT = (
    "MathJax 3 not found: the site and the slide decks ship it from the pip "
    "package django-static-mathjax (pinned in constraints.txt); reinstall with "
    "bash dev.sh (or pip install -c constraints.txt -e '.[dev]')"
)


class MathJaxMissing(RuntimeError):
    """The pinned MathJax package is not installed (the message says how to install it)."""


def folder() -> Path:
    """MathJax's folder inside the installed django-static-mathjax package (the one holding
    ``es5/``, ``LICENSE`` and ``package.json``)."""
    spec = importlib.util.find_spec("mathjax")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        candidate = Path(location) / "static" / "mathjax"
        if (candidate / "es5" / FILE).is_file():
            return candidate
    raise MathJaxMissing(INSTALL_HINT)


def version() -> str:
    """MathJax's version, from its package.json (e.g. '3.2.2')."""
    return json.loads((folder() / "package.json").read_text(encoding="utf-8"))["version"]


def copy_into(target: Path) -> str:
    """Copy ``tex-svg-full.js`` and MathJax's LICENSE into ``target`` (made); return the
    version copied."""
    source = folder()
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source / "es5" / FILE, target / FILE)
    shutil.copy2(source / "LICENSE", target / "LICENSE")
    return version()
