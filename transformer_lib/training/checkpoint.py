"""Checkpoints written atomically and loadable with ``torch.load(weights_only=True)``.

A checkpoint is a plain dict of tensors and JSON-like values (str, int, float, bool, None,
list, dict), the only things the safe ``weights_only`` unpickler accepts. Random states are
stored the same way: numpy's as a tensor plus ints, Python's as a list of ints.

Every save adds ``"checksum"``: the SHA-256 of all tensors (names, dtypes, shapes, bytes),
verified on load, so damaged bytes are refused instead of decoded into garbage. Older
checkpoints without one still load. A save killed mid-write leaves only a temporary
``.NAME.*.tmp`` file beside the checkpoint; the next save or resume removes it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
import random
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple

import numpy as np
import torch

from ..config import TransformerConfig
from ..model import Transformer


class CheckpointError(ValueError):
    """A file that is not a checkpoint, or one whose bytes were damaged after writing."""


def save_checkpoint(path, state: Dict[str, Any]) -> None:
    """Write ``state`` and its checksum to ``path`` atomically: a temporary file in the
    same folder, then ``os.replace``. A crash mid-write leaves the previous checkpoint
    untouched (and a temporary file that the next save removes)."""
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
        os.chmod(tmp, 0o666 & ~_umask())      # mkstemp makes 0600; give the usual mode
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


def checksum(state: Dict[str, Any]) -> str:
    """SHA-256 over every tensor of ``state`` (except a stored checksum): its key path,
    dtype, shape and bytes, in a fixed order."""
    h = hashlib.sha256()
    for key, t in _tensors({k: v for k, v in state.items() if k != "checksum"}):
        t = t.detach().cpu().contiguous()
        h.update(f"{key}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return "sha256:" + h.hexdigest()


def _tensors(value, key: str = "") -> Iterator[Tuple[str, torch.Tensor]]:
    if isinstance(value, torch.Tensor):
        yield key, value
    elif isinstance(value, dict):
        for k in sorted(value, key=str):
            yield from _tensors(value[k], f"{key}/{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _tensors(v, f"{key}/{i}")


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
        reason = ("it holds Python objects that the safe loader (weights_only=True) refuses"
                  if "Weights only load failed" in str(e) else "its contents cannot be read")
        raise CheckpointError(f"{path} is not a checkpoint, or is damaged: {reason}") from None
    except (RuntimeError, EOFError, OSError, ValueError, KeyError, IndexError,
            UnicodeDecodeError, AttributeError, TypeError) as e:
        raise CheckpointError(f"{path} is not a checkpoint, or is damaged: torch.load cannot "
                              f"read it ({type(e).__name__})") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path} is not a checkpoint: it holds a "
                              f"{type(state).__name__}, not a dict")
    stored = state.pop("checksum", None)           # checkpoints before checksums: none
    if stored is not None and stored != checksum(state):
        raise CheckpointError(f"{path} is damaged: its tensors no longer match the checksum "
                              "written with them; resume from an earlier copy or train again")
    return state


def rng_state() -> Dict[str, Any]:
    """Python, numpy and torch (CPU and CUDA) random states in weights_only-safe types."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "python": [version, list(internal), gauss],
        "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def set_rng_state(state: Dict[str, Any]) -> None:
    """Restore the states saved by :func:`rng_state`."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    n = state["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"],
                         n["has_gauss"], n["cached_gaussian"]))
    torch.set_rng_state(state["torch"].cpu())
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def config_to_dict(config: TransformerConfig) -> Dict[str, Any]:
    return dataclasses.asdict(config)


INFERENCE_KEYS = ("config", "model", "src_tokenizer", "tgt_tokenizer")


def export_for_inference(path, out, dtype: torch.dtype = torch.float16,
                         extra: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Write the part of a training checkpoint that translates: config, weights (stored in
    ``dtype``; :func:`load_model` computes in float32) and tokenizers, plus the step, the
    training history and the run's ``extra`` record (its command, data and scores) updated
    with ``extra``. No optimizer state, random states or weight sums: a file a fraction of
    the size that cannot be resumed. Returns what was written."""
    if dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"dtype must be torch.float32, float16 or bfloat16, got {dtype}")
    ckpt = load_checkpoint(path)
    missing = [k for k in INFERENCE_KEYS if k not in ckpt]
    if missing:
        raise CheckpointError(f"{path} is not a model checkpoint: no {', '.join(missing)}")
    state = {k: ckpt[k] for k in INFERENCE_KEYS}
    converted: Dict[int, torch.Tensor] = {}        # tied weights stay one tensor
    state["model"] = {}
    for k, v in ckpt["model"].items():
        if v.is_floating_point():
            v = converted.setdefault(v.data_ptr(), v.to(dtype))
        state["model"][k] = v
    state.update(step=ckpt.get("step"), history=ckpt.get("history", {}),
                 settings=ckpt.get("settings", {}),
                 extra={**ckpt.get("extra", {}), **(extra or {}), "weights_dtype": str(dtype)})
    save_checkpoint(out, state)
    return state


def load_model(path, device="cpu") -> Tuple[Transformer, Any, Any]:
    """Rebuild ``(model, src_tokenizer, tgt_tokenizer)`` from a checkpoint, model in eval mode."""
    from ..data.tokenizers import tokenizer_from_dict

    ckpt = load_checkpoint(path)
    for key in ("config", "model", "src_tokenizer", "tgt_tokenizer"):
        if key not in ckpt:
            raise ValueError(f"{path} is not a model checkpoint: no {key!r} entry")
    model = Transformer(TransformerConfig(**ckpt["config"]))
    model.load_state_dict(ckpt["model"])          # float16/bfloat16 weights become float32
    model.to(device).eval()
    return model, tokenizer_from_dict(ckpt["src_tokenizer"]), tokenizer_from_dict(ckpt["tgt_tokenizer"])


SHIPPED = {"dates": "dates.pt", "bible-en-fr": "bible-en-fr.pt"}
CHECKPOINTS_ENV = "TRANSFORMER_CHECKPOINTS"


def shipped_checkpoint(name: str) -> Path:
    """The path of a checkpoint shipped with the series (``"dates"``, ``"bible-en-fr"``).

    Looked for in the folder named by the environment variable ``TRANSFORMER_CHECKPOINTS``,
    then in the ``checkpoints/`` folder of the series next to the package (an editable
    install, ``pip install -e .``), then in ``./checkpoints`` and ``../checkpoints`` (a
    notebook's folder). Raises ``FileNotFoundError`` saying where to put the file."""
    if name not in SHIPPED:
        raise ValueError(f"name must be one of {sorted(SHIPPED)}, got {name!r}")
    folders = [Path(os.environ[CHECKPOINTS_ENV])] if os.environ.get(CHECKPOINTS_ENV) else []
    folders += [Path(__file__).resolve().parents[2] / "checkpoints",
                Path.cwd() / "checkpoints", Path.cwd().parent / "checkpoints"]
    for folder in folders:
        if (folder / SHIPPED[name]).is_file():
            return folder / SHIPPED[name]
    raise FileNotFoundError(f"{SHIPPED[name]} not found: put the series' checkpoints/ folder "
                            f"next to your notebooks, or set {CHECKPOINTS_ENV} to the folder "
                            "that holds it")
