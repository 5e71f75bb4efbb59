"""Debian's ``chromium``, the one browser of the builders (the PDF handouts) and of the browser
tests: found as ``$CHROMIUM`` or on ``PATH`` and driven by Playwright with ``executable_path``,
so that no browser is ever downloaded."""

from __future__ import annotations

import importlib.util
import os
import shutil
from typing import Optional, Tuple

# Chromium as root in a container, with no background traffic to a closed network
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def locate() -> Tuple[str, Optional[str]]:
    """The Chromium executable ("" when there is none) and why it cannot be driven (None when
    it can: the executable is there and Playwright is importable)."""
    path = (
        os.environ.get("CHROMIUM")
        or shutil.which("chromium")
        or shutil.which("chromium-browser")
        or ""
    )
    if not path:
        return "", "no chromium executable on PATH"
    if importlib.util.find_spec("playwright") is None:
        return path, "the playwright package is not installed"
    return path, None
