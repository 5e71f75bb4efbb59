"""Headless Chromium for the tests that look at a page as a person sees it.

The browser is Debian's ``chromium`` package (``.ci/run`` installs it when it is missing),
driven by Playwright with ``executable_path``: no browser is ever downloaded. In CI
(``CI=true``) a missing browser is a failure; elsewhere the tests skip with one line saying
how to install it.

    from browser import open_browser, ARTIFACTS

    with open_browser() as context:
        page = context.new_page()
        ...

Screenshots go to ``ARTIFACTS`` (``build/test-artifacts/``, ignored by git).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator, List

import pytest

from tools.chromium import FLAGS, locate

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "build" / "test-artifacts"
INSTALL_HINT = (
    "needs Debian's chromium and the playwright package: "
    "sudo apt-get install chromium, then bash dev.sh test (or bash .ci/run, which "
    "installs both)"
)


def chromium_path() -> str:
    """The Chromium executable, or a skip (a failure under ``CI=true``) naming the fix."""
    path, missing = locate()
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"browser tests must run in CI, but {missing}: {INSTALL_HINT}")
        pytest.skip(f"{missing}; {INSTALL_HINT}")
    return path


@contextlib.contextmanager
def open_browser() -> Iterator["object"]:
    """A headless Chromium (a Playwright ``BrowserContext``) with a fresh, empty profile."""
    executable = chromium_path()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as profile, sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=executable,
            headless=True,
            args=FLAGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()


class RequestLog:
    """Every request a page makes, and those that failed or left the file system/loopback."""

    def __init__(self, page, allowed=("file://", "data:", "blob:", "about:")):
        self.allowed = allowed
        self.requests: List[str] = []
        self.failed: List[str] = []
        page.on("request", lambda r: self.requests.append(r.url))
        page.on("requestfailed", lambda r: self.failed.append(f"{r.url} ({r.failure})"))

    @property
    def outside(self) -> List[str]:
        return [u for u in self.requests if not u.startswith(self.allowed)]


def screenshot_path(name: str) -> Path:
    """Where a test writes its screenshot ``name`` (the folder is made)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / name
