"""The instructor kit the kit tests look at, built once (``python -m tools.build_course``, no
handouts) and shared by every test module and worker: it is kept in
``build/test-kit/HASH/``, where HASH digests everything the build reads (the notebooks, the
course material, the tools, the package, the images and checkpoints, the pins), so a later run
with the same sources reuses it and a changed source builds a new one. A lock file makes a
second worker wait for the first one's build instead of building it again.

    from kit_build import kit
    folder = kit()          # Path of the built kit (build/test-kit/HASH/kit)

``KIT_NOTEBOOKS=FOLDER`` builds it from another folder of notebooks (``NOTEBOOKS`` here), e.g.
a copy under edit.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "build" / "test-kit"
NOTEBOOKS = Path(os.environ.get("KIT_NOTEBOOKS") or ROOT / "notebooks").resolve()
INPUTS = ("course", "tools", "transformer_lib", "images", "checkpoints")
FILES = ("constraints.txt", "pyproject.toml", "dev.sh", "README.md")


def sources_hash() -> str:
    digest = hashlib.sha256()
    paths = [ROOT / name for name in FILES]
    for folder in [ROOT / name for name in INPUTS] + [NOTEBOOKS]:
        paths += sorted(
            p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts
        )
    for path in paths:
        digest.update(str(path).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def kit() -> Path:
    """The kit built from the sources as they are now (built here if no run built it yet)."""
    from tools import build_course

    CACHE.mkdir(parents=True, exist_ok=True)
    key = sources_hash()
    folder = CACHE / key
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "done").is_file():
            for old in CACHE.iterdir():  # earlier sources' kits
                if old.is_dir():
                    shutil.rmtree(old, ignore_errors=True)
            lines: list = []
            build_course.build(folder / "kit", log=lines.append, notebooks=NOTEBOOKS)
            (folder / "log.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
            (folder / "done").write_text(key, encoding="utf-8")
    return folder / "kit"


def build_log() -> str:
    """What the kit's build printed (its parts, sizes and time)."""
    return (kit().parent / "log.txt").read_text(encoding="utf-8")
