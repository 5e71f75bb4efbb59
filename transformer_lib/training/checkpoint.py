"""Checkpoints written atomically and loadable with ``torch.load(weights_only=True)``.

A checkpoint is a plain dict of tensors and JSON-like values (str, int, float, bool, None,
list, dict), the only things the safe ``weights_only`` unpickler accepts. Random states are
stored the same way: numpy's as a tensor plus ints, Python's as a list of ints.
"""
from __future__ import annotations

import dataclasses
import os
import random
import tempfile
from pathlib import Path
from typing import Any, Dict, Tuple

import numpy as np
import torch

from ..config import TransformerConfig
from ..model import Transformer


def save_checkpoint(path, state: Dict[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically: a temporary file in the same folder, then
    ``os.replace``. A crash mid-write leaves the previous checkpoint untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def load_checkpoint(path, map_location="cpu") -> Dict[str, Any]:
    """Read a checkpoint with the safe unpickler (``weights_only=True``)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    return torch.load(path, map_location=map_location, weights_only=True)


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


def load_model(path, device="cpu") -> Tuple[Transformer, Any, Any]:
    """Rebuild ``(model, src_tokenizer, tgt_tokenizer)`` from a checkpoint, model in eval mode."""
    from ..data.tokenizers import tokenizer_from_dict

    ckpt = load_checkpoint(path)
    for key in ("config", "model", "src_tokenizer", "tgt_tokenizer"):
        if key not in ckpt:
            raise ValueError(f"{path} is not a model checkpoint: no {key!r} entry")
    model = Transformer(TransformerConfig(**ckpt["config"]))
    model.load_state_dict(ckpt["model"])
    model.to(device).eval()
    return model, tokenizer_from_dict(ckpt["src_tokenizer"]), tokenizer_from_dict(ckpt["tgt_tokenizer"])
