"""Checkpoints written atomically and loadable with ``torch.load(weights_only=True)``.

A checkpoint is a plain dict of tensors and JSON-like values (str, int, float, bool, None,
list, dict), the only things the safe ``weights_only`` unpickler accepts. Random states are
stored the same way: numpy's as a tensor plus ints, Python's as a list of ints.

Every save adds ``"checksum"``: the SHA-256 of every value (tensors by name, dtype, shape and
bytes; the rest, such as the config and the tokenizers, by name, type and ``repr``), verified
on load, so damaged bytes are refused in one line instead of decoded into garbage. Files
whose checksum covers only the tensors (``"sha256:..."``, written before values were
included) are verified the same way. A file with no checksum at all still loads, with one
:class:`UncheckedCheckpointWarning` line saying so; ``save_checkpoint(path,
load_checkpoint(path))`` adds one. A save refuses, naming the key, any value the safe loader
could not read back (a ``pathlib.Path``, a numpy scalar, an object): such a file could never
be resumed. A save killed mid-write leaves only a temporary ``.NAME.*.tmp`` file beside the
checkpoint; the next save or resume removes it.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import warnings
from pathlib import Path
from typing import Any, Dict

import torch

from .state_integrity import check_loadable, checksum, tensor_checksum


class CheckpointError(ValueError):
    """A file that is not a checkpoint, or one whose bytes were damaged after writing."""


class UncheckedCheckpointWarning(UserWarning):
    """A checkpoint without a checksum: damaged bytes in it cannot be detected."""


def save_checkpoint(path, state: Dict[str, Any]) -> None:
    """Write ``state`` and its checksum to ``path`` atomically: a temporary file in the
    same folder, then ``os.replace``. A crash mid-write leaves the previous checkpoint
    untouched (and a temporary file that the next save removes). ``state`` must be a dict of
    values the safe loader reads back (:func:`check_loadable`)."""
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise TypeError(f"path must be a non-empty str or os.PathLike, got {path!r}")
    if not isinstance(state, dict):
        raise TypeError(
            f"state must be a dict of tensors and plain values, got {type(state).__name__}"
        )
    check_loadable(state, "state")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_temporaries(path)
    state = {**state, "checksum": checksum(state)}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual mode
        os.replace(tmp, path)  # atomic on POSIX and Windows (same file system)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def remove_temporaries(path) -> list:
    """Delete the temporary files that interrupted saves of ``path`` left; return them."""
    path = Path(path)
    left = sorted(path.parent.glob(f".{path.name}.*.tmp")) if path.parent.is_dir() else []
    for tmp in left:
        tmp.unlink(missing_ok=True)
    return left


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def load_checkpoint(path, map_location="cpu") -> Dict[str, Any]:
    """Read a checkpoint with the safe unpickler (``weights_only=True``) and verify its
    checksum; :class:`CheckpointError` (one line) for anything else or damaged bytes."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        reason = (
            "it holds Python objects that the safe loader (weights_only=True) refuses"
            if "Weights only load failed" in str(e)
            else "its contents cannot be read"
        )
        raise CheckpointError(f"{path} is not a checkpoint, or is damaged: {reason}") from None
    except (
        RuntimeError,
        EOFError,
        OSError,
        ValueError,
        KeyError,
        IndexError,
        UnicodeDecodeError,
        AttributeError,
        TypeError,
    ) as e:
        raise CheckpointError(
            f"{path} is not a checkpoint, or is damaged: torch.load cannot "
            f"read it ({type(e).__name__})"
        ) from None
    if not isinstance(state, dict):
        raise CheckpointError(
            f"{path} is not a checkpoint: it holds a {type(state).__name__}, not a dict"
        )
    _verify(state, path)
    return state


def _verify(state: Dict[str, Any], path: Path) -> None:
    """Pop and check the stored checksum; warn (one line) when there is none."""
    stored = state.pop("checksum", None)
    if stored is None:  # written before checksums existed
        warnings.warn(
            UncheckedCheckpointWarning(
                f"{path} carries no checksum, so damaged bytes in it would go unnoticed; "
                "save_checkpoint(path, load_checkpoint(path)) re-saves it with one"
            ),
            stacklevel=3,
        )
        return
    if isinstance(stored, str) and stored.startswith("sha256-all:"):
        ok = stored == checksum(state)
    else:
        ok = isinstance(stored, str) and stored == tensor_checksum(state)
    if not ok:
        raise CheckpointError(
            f"{path} is damaged: its contents no longer match the checksum "
            "written with them; resume from an earlier copy or train again"
        )
