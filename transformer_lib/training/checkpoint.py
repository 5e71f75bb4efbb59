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

import dataclasses
import os
import pickle
import random
import tempfile
import warnings
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch

from ..config import TransformerConfig
from ..model import Transformer
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
        raise TypeError(f"state must be a dict of tensors and plain values, got "
                        f"{type(state).__name__}")
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
    _verify(state, path)
    return state


def _verify(state: Dict[str, Any], path: Path) -> None:
    """Pop and check the stored checksum; warn (one line) when there is none."""
    stored = state.pop("checksum", None)
    if stored is None:                             # written before checksums existed
        warnings.warn(UncheckedCheckpointWarning(
            f"{path} carries no checksum, so damaged bytes in it would go unnoticed; "
            "save_checkpoint(path, load_checkpoint(path)) re-saves it with one"), stacklevel=3)
        return
    if isinstance(stored, str) and stored.startswith("sha256-all:"):
        ok = stored == checksum(state)
    else:
        ok = isinstance(stored, str) and stored == tensor_checksum(state)
    if not ok:
        raise CheckpointError(f"{path} is damaged: its contents no longer match the checksum "
                              "written with them; resume from an earlier copy or train again")


def rng_state() -> Dict[str, Any]:
    """Python, numpy and torch (CPU and CUDA) random states in weights_only-safe types."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    keys = np.asarray(keys)
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
            raise CheckpointError(f"{path} is not a model checkpoint: no {key!r} entry")
    model = Transformer(_config(ckpt["config"], path))
    _check_weights(model, ckpt["model"], path)
    model.load_state_dict(ckpt["model"])          # float16/bfloat16 weights become float32
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
        raise CheckpointError(f"{path}: its config has keys that TransformerConfig does not "
                              f"know: {unknown} (known: {sorted(known)})")
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
    problems += [f"{k} is {tuple(weights[k].shape)} in the file, {tuple(v.shape)} for the "
                 "config" for k, v in expected.items()
                 if isinstance(weights.get(k), torch.Tensor) and weights[k].shape != v.shape]
    problems += [f"{k} is a {type(weights[k]).__name__}, not a tensor" for k in expected
                 if k in weights and not isinstance(weights[k], torch.Tensor)]
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise CheckpointError(f"{path}: its weights do not match its config: "
                              f"{'; '.join(problems[:3])}{more}")


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
