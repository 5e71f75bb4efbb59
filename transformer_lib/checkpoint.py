"""Checkpoints: written atomically, read with ``torch.load(weights_only=True)``, checked by
one SHA-256 over everything they hold.

A checkpoint is a plain dict of tensors and JSON-like values (str, int, float, bool, None,
list, dict): the only things the safe ``weights_only`` unpickler reads back. A training
checkpoint (:class:`~transformer_lib.training.Trainer`) holds everything a resumed run needs:
model, optimizer, step, batch position, random states, history, run configuration and
tokenizer. An exported one (:func:`export_for_inference`) holds what translates: the model's
configuration, its weights and the tokenizer, and ``"exported": True``; it cannot be resumed.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import random
import tempfile
from collections import OrderedDict
from pathlib import Path
from typing import Any, Dict, Iterator, Tuple

import numpy as np
import torch

from .config import TransformerConfig
from .model import Transformer
from .tokenizers import Tokenizer, tokenizer_from_dict

SAFE = (str, int, float, bool, type(None))  # what the safe loader reads back, with tensors


class CheckpointError(ValueError):
    """A file that is not a checkpoint of the right kind, or whose bytes were damaged."""


def check_loadable(value: Any, name: str = "state") -> None:
    """TypeError naming the key (``state['extra']['path']``) unless every value is one the
    safe loader reads back: a tensor, str, int, float, bool, None, or a list or dict of them."""
    if isinstance(value, torch.Tensor) or type(value) in SAFE:
        return
    if type(value) in (dict, OrderedDict, list, tuple):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for k, v in items:
            if isinstance(value, dict) and type(k) not in SAFE:
                raise TypeError(f"{name} has a key {k!r} that is not a str or int")
            check_loadable(v, f"{name}[{k!r}]")
        return
    raise TypeError(f"{name} is a {type(value).__qualname__} ({value!r:.60}), which "
                    "torch.load(weights_only=True) cannot read back: store a str, number, "
                    "bool, None, tensor, or a list or dict of them")


def checksum(state: Dict[str, Any]) -> str:
    """SHA-256 over every value of ``state`` but ``"checksum"``: each tensor's key, dtype,
    shape and bytes; each other value's key, type and repr."""
    h = hashlib.sha256()
    for key, value in _leaves({k: v for k, v in state.items() if k != "checksum"}):
        if isinstance(value, torch.Tensor):
            t = value.detach().cpu().contiguous()
            h.update(f"{key}|{t.dtype}|{tuple(t.shape)}|".encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
        else:
            h.update(f"{key}|{type(value).__name__}|{value!r}\n".encode())
    return h.hexdigest()


def _leaves(value: Any, key: str = "") -> Iterator[Tuple[str, Any]]:
    if isinstance(value, dict):
        for k in sorted(value, key=repr):
            yield from _leaves(value[k], f"{key}/{k!r}")
    elif isinstance(value, (list, tuple)):
        yield key, f"<{type(value).__name__} of {len(value)}>"
        for i, v in enumerate(value):
            yield from _leaves(v, f"{key}/{i}")
    else:
        yield key, value


def save_checkpoint(path: Any, state: Dict[str, Any]) -> None:
    """Write ``state`` and its checksum to ``path`` atomically: a temporary file in the
    same folder, flushed to disk, then renamed over ``path`` (a crash mid-write leaves the
    previous file as it was, and a ``.NAME.*.tmp`` file that the next save removes)."""
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise TypeError(f"path must be a file path, got {path!r}")
    if not isinstance(state, dict):
        raise TypeError(f"state must be a dict, got {type(state).__name__}")
    check_loadable(state)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for old in path.parent.glob(f".{path.name}.*.tmp"):       # left by a killed save
        old.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save({**state, "checksum": checksum(state)}, f)
            f.flush()
            os.fsync(f.fileno())
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)                  # mkstemp makes 0600; the usual mode
        os.replace(tmp, path)                         # atomic on POSIX and Windows
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_checkpoint(path: Any, map_location: Any = "cpu") -> Dict[str, Any]:
    """Read a checkpoint with the safe unpickler and verify its checksum; one-line
    :class:`CheckpointError` for a file that is not one or was damaged."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, KeyError,
            IndexError, UnicodeDecodeError, AttributeError, TypeError) as e:
        raise CheckpointError(f"{path} is not a checkpoint, or is damaged (torch.load: "
                              f"{type(e).__name__})") from None
    if not isinstance(state, dict) or "checksum" not in state:
        raise CheckpointError(f"{path} is not a checkpoint of this series (no checksum)")
    if state.pop("checksum") != checksum(state):
        raise CheckpointError(f"{path} is damaged: its contents no longer match the checksum "
                              "written with them; use an earlier copy or train again")
    return state


def rng_state() -> Dict[str, Any]:
    """Python, NumPy and PyTorch (CPU and CUDA) random states, in types the safe loader reads."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    return {"python": [version, list(internal), gauss],
            "numpy": [kind, torch.from_numpy(np.asarray(keys).astype(np.int64)), int(pos),
                      int(has_gauss), float(cached)],
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


def set_rng_state(state: Dict[str, Any]) -> None:
    """Restore what :func:`rng_state` saved."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"].cpu())
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def export_for_inference(path: Any, out: Any, dtype: torch.dtype = torch.float16) -> Dict[str, Any]:
    """Write what translates of the checkpoint at ``path`` to ``out``: the model's
    configuration, its weights (stored in ``dtype``; :func:`load_model` computes in float32)
    and tokenizer, with the step, history, run configuration and ``extra`` record. No
    optimizer or random states: a fraction of the size, and it cannot be resumed. ``out``
    must not be a training checkpoint (it would be lost). Returns what was written."""
    if dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"dtype must be torch.float32, float16 or bfloat16, got {dtype}")
    if Path(out).is_file() and "optimizer" in _peek(out):
        raise CheckpointError(f"{out} is a training checkpoint, which an exported model "
                              "cannot replace (it could no longer be resumed): write elsewhere")
    ckpt = load_checkpoint(path)
    if "model" not in ckpt or "config" not in ckpt:
        raise CheckpointError(f"{path} is not a model checkpoint")
    converted: Dict[int, torch.Tensor] = {}                   # tied weights stay one tensor
    weights = {k: converted.setdefault(v.data_ptr(), v.to(dtype)) if v.is_floating_point() else v
               for k, v in ckpt["model"].items()}
    state = {k: ckpt.get(k) for k in ("config", "tokenizer", "step", "history", "run")}
    state.update(model=weights, exported=True,
                 extra={**ckpt.get("extra", {}), "weights_dtype": str(dtype)})
    save_checkpoint(out, state)
    return state


def _peek(path: Any) -> Dict[str, Any]:
    """The checkpoint at ``path``, or {} for a file that is not one."""
    try:
        return load_checkpoint(path)
    except CheckpointError:
        return {}


def load_model(path: Any, device: Any = "cpu") -> Tuple[Transformer, Tokenizer]:
    """``(model, tokenizer)`` of a training or exported checkpoint, the model in eval mode."""
    ckpt = load_checkpoint(path)
    if not all(k in ckpt for k in ("config", "model", "tokenizer")):
        raise CheckpointError(f"{path} is not a model checkpoint (no config, model, tokenizer)")
    try:
        model = Transformer(TransformerConfig(**ckpt["config"]))
        model.load_state_dict(ckpt["model"])         # float16/bfloat16 weights become float32
        tokenizer = tokenizer_from_dict(ckpt["tokenizer"])
    except (TypeError, ValueError, RuntimeError) as e:
        raise CheckpointError(f"{path}: its model cannot be rebuilt: "
                              f"{str(e).splitlines()[0]}") from None
    return model.to(device).eval(), tokenizer



SHIPPED = {"dates": "dates.pt", "bible-en-fr": "bible-en-fr.pt"}


def shipped_checkpoint(name: str) -> Path:
    """The path of a checkpoint shipped with the series (``"dates"``, ``"bible-en-fr"``):
    looked for in the folder of the environment variable ``TRANSFORMER_CHECKPOINTS``, the
    series' ``checkpoints/`` next to the package, ``./checkpoints`` and ``../checkpoints``."""
    if name not in SHIPPED:
        raise ValueError(f"name must be one of {sorted(SHIPPED)}, got {name!r}")
    folders = [Path(os.environ["TRANSFORMER_CHECKPOINTS"])] if os.environ.get(
        "TRANSFORMER_CHECKPOINTS") else []
    folders += [Path(__file__).resolve().parents[1] / "checkpoints", Path.cwd() / "checkpoints",
                Path.cwd().parent / "checkpoints"]
    for folder in folders:
        if (folder / SHIPPED[name]).is_file():
            return folder / SHIPPED[name]
    raise FileNotFoundError(f"{SHIPPED[name]} not found: put the series' checkpoints/ folder "
                            "next to your notebooks, or set TRANSFORMER_CHECKPOINTS to its folder")
