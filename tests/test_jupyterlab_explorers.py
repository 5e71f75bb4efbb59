"""The positional-encoding explorer in a real JupyterLab, driven by headless Chromium.

A JupyterLab server from this environment listens on 127.0.0.1 (a free port, a random
token), with its configuration, runtime files, workspaces and settings in a temporary
folder, so it needs no network and writes nothing into the repository. The test opens a
copy of notebook 02's explorer cell, runs it, drags the d_model slider and checks that the
drawn figure changed. Screenshots: build/test-artifacts/explorer_before.png, _after.png.
Every wait has a time limit, and the server's whole process group is stopped at the end.
"""

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from browser import RequestLog, chromium_path, open_browser, screenshot_path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "02_positional_encoding.ipynb"
SETTINGS = {  # no news or update checks (no network); start the notebook's kernel, no dialog
    "apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    "notebook-extension/tracker": {"autoStartDefaultKernel": True},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def explorer_notebook(folder: Path) -> str:
    """A notebook holding notebook 02's explorer cells, outputs cleared; returns its name."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    cells = [c for c in nb.cells if c.get("id", "").startswith("pe-explorer")]
    assert len(cells) == 2, "notebook 02 must hold the cells pe-explorer-intro and pe-explorer"
    cells[1].outputs, cells[1].execution_count = [], None
    copy = nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": nb.metadata.kernelspec})
    nbformat.write(copy, folder / "explorer.ipynb")
    return "explorer.ipynb"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """(base URL, token, notebook name) of a JupyterLab server, stopped after the module."""
    chromium_path()  # skip (or fail under CI) before starting
    tmp = tmp_path_factory.mktemp("jupyterlab")
    root = tmp / "root"
    root.mkdir()
    for name, values in SETTINGS.items():
        path = tmp / "settings" / "@jupyterlab" / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    name = explorer_notebook(root)
    port, token = free_port(), secrets.token_hex(16)
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(tmp / "config"),
        JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
        IPYTHONDIR=str(tmp / "ipython"),
        JUPYTER_PLATFORM_DIRS="1",
    )
    log = open(tmp / "server.log", "wb")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            "--ServerApp.allow_root=True",
            f"--LabApp.workspaces_dir={tmp / 'workspaces'}",
            f"--LabApp.user_settings_dir={tmp / 'settings'}",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5).read()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        "JupyterLab did not start: " + (tmp / "server.log").read_text()[-2000:]
                    )
                time.sleep(0.5)
        yield base, token, name
    finally:
        stop(server)
        log.close()


def stop(server: subprocess.Popen) -> None:
    """Stop the server and its kernels (its process group): TERM, then KILL after 15 s."""
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(server.pid, sig)
        except ProcessLookupError:
            return
        try:
            server.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_explorer_cell(page, url):
    """Open the notebook, wait for an idle kernel, run the cell; the explorer's <img>.

    A run requested while the page is still connecting to the kernel can be dropped (the
    prompt stays ``[ ]``); it is then requested again, at most three times."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.goto(url)
    page.wait_for_selector('.jp-Notebook-ExecutionIndicator[data-status="idle"]')
    cell = page.locator(".jp-CodeCell").first
    for attempt in range(3):
        cell.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        try:
            return page.wait_for_selector(".jp-OutputArea-output img.widget-image", timeout=20_000)
        except PlaywrightTimeout:
            if cell.locator(".jp-InputPrompt").inner_text().strip() not in ("[ ]:", "[ ]"):
                break  # it runs: wait for it below
    return page.wait_for_selector(".jp-OutputArea-output img.widget-image")


def test_slider_redraws_the_figure(lab):
    base, token, name = lab
    with open_browser() as context:
        page = context.new_page()
        page.set_viewport_size({"width": 1280, "height": 1150})
        page.set_default_timeout(90_000)
        requests = RequestLog(page, allowed=(base, "data:", "blob:", "about:"))
        try:
            image = run_explorer_cell(page, f"{base}/lab/tree/{name}?token={token}")
        except Exception:
            page.screenshot(path=screenshot_path("explorer_failure.png"))
            raise
        page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=image)
        slider = page.locator(".widget-slider").first
        readout = slider.locator(".widget-readout")
        before_value, before_src = readout.inner_text(), image.get_attribute("src")
        before_pixels = image.screenshot()
        page.screenshot(path=screenshot_path("explorer_before.png"))

        handle = slider.locator(".noUi-handle").bounding_box()  # drag d_model right
        x, y = handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2
        page.mouse.move(x, y)
        page.mouse.down()
        page.mouse.move(x + 120, y, steps=8)
        page.mouse.up()
        page.wait_for_function(
            "([img, old]) => img.src !== old && img.complete", arg=[image, before_src]
        )
        page.wait_for_timeout(300)  # the new image painted
        page.screenshot(path=screenshot_path("explorer_after.png"))
        after_value, after_pixels = readout.inner_text(), image.screenshot()

    assert int(after_value) > int(before_value), (before_value, after_value)
    assert after_pixels != before_pixels, "the slider moved but the figure looks the same"
    assert requests.outside == [], f"requests beyond the local server: {requests.outside}"
    assert requests.failed == [], requests.failed
