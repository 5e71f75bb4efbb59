"""Checkpoints: what a training run saves and what a trained model is rebuilt from.

The file itself (atomic writes, the safe loader, the checksum) is
:mod:`.checkpoint_io`, whose names are importable from here too; this module adds the
random states a resumed run restores, the model and tokenizers a checkpoint holds
(:func:`load_model`, :func:`export_for_inference`) and the checkpoints shipped with the
series (:func:`shipped_checkpoint`).
"""

from __future__ import annotations

import dataclasses
import os
import random
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch

from ..config import TransformerConfig
from ..model import Transformer
from .checkpoint_io import (
    CheckpointError,
    UncheckedCheckpointWarning,
    load_checkpoint,
    remove_temporaries,
    save_checkpoint,
)
from .state_integrity import checksum

__all__ = [
    "CheckpointError",
    "UncheckedCheckpointWarning",
    "save_checkpoint",
    "load_checkpoint",
    "remove_temporaries",
    "checksum",
    "rng_state",
    "set_rng_state",
    "config_to_dict",
    "INFERENCE_KEYS",
    "export_for_inference",
    "load_model",
    "SHIPPED",
    "CHECKPOINTS_ENV",
    "shipped_checkpoint",
]


def rng_state() -> Dict[str, Any]:
    """Python, numpy and torch (CPU and CUDA) random states in weights_only-safe types."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    keys = np.asarray(keys)
    return {
        "python": [version, list(internal), gauss],
        "numpy": {
            "kind": kind,
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def set_rng_state(state: Dict[str, Any]) -> None:
    """Restore the states saved by :func:`rng_state`."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    n = state["numpy"]
    np.random.set_state(
        (
            n["kind"],
            n["keys"].numpy().astype(np.uint32),
            n["pos"],
            n["has_gauss"],
            n["cached_gaussian"],
        )
    )
    torch.set_rng_state(state["torch"].cpu())
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def config_to_dict(config: TransformerConfig) -> Dict[str, Any]:
    return dataclasses.asdict(config)


INFERENCE_KEYS = ("config", "model", "src_tokenizer", "tgt_tokenizer")


def export_for_inference(
    path, out, dtype: torch.dtype = torch.float16, extra: Optional[Dict[str, Any]] = None
) -> Dict[str, Any]:
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
    converted: Dict[int, torch.Tensor] = {}  # tied weights stay one tensor
    state["model"] = {}
    for k, v in ckpt["model"].items():
        if v.is_floating_point():
            v = converted.setdefault(v.data_ptr(), v.to(dtype))
        state["model"][k] = v
    state.update(
        step=ckpt.get("step"),
        history=ckpt.get("history", {}),
        settings=ckpt.get("settings", {}),
        extra={**ckpt.get("extra", {}), **(extra or {}), "weights_dtype": str(dtype)},
    )
    save_checkpoint(out, state)
    return state


def load_model(path, device="cpu") -> Tuple[Transformer, Any, Any]:
    """Rebuild ``(model, src_tokenizer, tgt_tokenizer)`` from a checkpoint, model in eval mode."""
    from ..data.tokenizers import tokenizer_from_dict

    ckpt = load_checkpoint(path)
    for key in ("config", "model", "src_tokenizer", "tgt_tokenizer"):
        if key not in ckpt:
            raise CheckpointError(f"{path} is not a model checkpoint: no {key!r} entry")
    model = Transformer(_config(ckpt["config"], path))
    _check_weights(model, ckpt["model"], path)
    model.load_state_dict(ckpt["model"])  # float16/bfloat16 weights become float32
    model.to(device).eval()
    try:
        tokenizers = [tokenizer_from_dict(ckpt[k]) for k in ("src_tokenizer", "tgt_tokenizer")]
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{path}: its tokenizer cannot be rebuilt: {e}") from None
    return model, tokenizers[0], tokenizers[1]


def _config(config: Any, path) -> TransformerConfig:
    """The checkpoint's TransformerConfig; CheckpointError for unknown keys or bad values."""
    known = {f.name for f in dataclasses.fields(TransformerConfig)}
    if not isinstance(config, dict):
        raise CheckpointError(f"{path}: its config is a {type(config).__name__}, not a dict")
    unknown = sorted(set(config) - known, key=str)
    if unknown:
        raise CheckpointError(
            f"{path}: its config has keys that TransformerConfig does not "
            f"know: {unknown} (known: {sorted(known)})"
        )
    try:
        return TransformerConfig(**config)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{path}: its config is not valid: {e}") from None


def _check_weights(model: Transformer, weights: Any, path) -> None:
    """CheckpointError (one line) unless ``weights`` has exactly the model's names and shapes."""
    if not isinstance(weights, dict):
        raise CheckpointError(f"{path}: its weights are a {type(weights).__name__}, not a dict")
    expected = model.state_dict()
    problems = [f"missing {k}" for k in expected if k not in weights]
    problems += [f"unexpected {k}" for k in weights if k not in expected]
    problems += [
        f"{k} is {tuple(weights[k].shape)} in the file, {tuple(v.shape)} for the config"
        for k, v in expected.items()
        if isinstance(weights.get(k), torch.Tensor) and weights[k].shape != v.shape
    ]
    problems += [
        f"{k} is a {type(weights[k]).__name__}, not a tensor"
        for k in expected
        if k in weights and not isinstance(weights[k], torch.Tensor)
    ]
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise CheckpointError(
            f"{path}: its weights do not match its config: {'; '.join(problems[:3])}{more}"
        )


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
    folders += [
        Path(__file__).resolve().parents[2] / "checkpoints",
        Path.cwd() / "checkpoints",
        Path.cwd().parent / "checkpoints",
    ]
    for folder in folders:
        if (folder / SHIPPED[name]).is_file():
            return folder / SHIPPED[name]
    raise FileNotFoundError(
        f"{SHIPPED[name]} not found: put the series' checkpoints/ folder "
        f"next to your notebooks, or set {CHECKPOINTS_ENV} to the folder "
        "that holds it"
    )
