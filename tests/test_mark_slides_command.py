"""The slide marks' command line, run the way README.md documents it:
``python -m tools.mark_slides`` from the repository root (tools/mark_slides.py is a module of
the ``tools`` package, not a script)."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "01_embedding.ipynb"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tools.mark_slides", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_module_form_marks_a_notebook_then_checks_it_and_changes_nothing(tmp_path):
    copy = tmp_path / NOTEBOOK.name
    shutil.copy2(NOTEBOOK, copy)
    assert run(str(copy)).returncode == 0  # marked by the rules, in place
    before = copy.read_bytes()
    done = run("--check", str(copy))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{NOTEBOOK.name}: ") and "slides (unchanged)" in done.stdout
    assert copy.read_bytes() == before


def test_module_form_refuses_a_path_that_is_not_a_notebook(tmp_path):
    done = run(str(tmp_path / "notes.txt"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"python -m tools.mark_slides: error: notebooks: {tmp_path / 'notes.txt'} "
        "is not an .ipynb file"
    )
